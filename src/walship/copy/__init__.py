"""A first copy of the existing data into a peer (``walship copy``).

A new peer receives only the edits written after its queues exist. ``copy`` fills it with what
came before: for every table and family the peer selects (REPLICATION_SCOPE 1, its table-cfs
or namespaces: the shipper's own rule), the source is scanned over its Thrift2 server, one
split per source region, and every version is put into the peer over its Thrift2 servers
with its own timestamp, up to ``until`` (exclusive; default: everything). A scan returns no
delete markers: what they masked is simply not there to copy. Puts with the original
timestamps make a copy repeatable (a second one changes nothing) and let it overlap with
shipping: an edit both copied and shipped lands once.

It plans exactly as ``walship verify`` does (:func:`walship.verify.plan`), so ``walship
verify`` afterwards compares what was copied. ``spark_jobs/copy_rows.py`` runs the same splits as
Spark tasks, one per split.
"""

from __future__ import annotations

import datetime
import logging
import math
import time
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from walship.errors import ConfigError
from walship.progress import NO_METER, Meter
from walship.verify import Split, VerifyJob, plan
from walship.verify.model import LATEST

__all__ = [
    "BATCH_BYTES",
    "BATCH_ROWS",
    "CopyResult",
    "SplitCopied",
    "combine",
    "copy",
    "copy_job",
    "copy_split",
    "until_ms",
]

log = logging.getLogger(__name__)

#: Rows put into the peer in one ``putMultiple``, and the bytes at which a batch is cut sooner.
BATCH_ROWS = 500
BATCH_BYTES = 4 << 20


@dataclass
class SplitCopied:
    """What one split copied."""

    split: Split
    rows: int = 0
    cells: int = 0
    bytes: int = 0
    seconds: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return {
            "split": self.split.to_json(),
            "rows": self.rows,
            "cells": self.cells,
            "bytes": self.bytes,
            "seconds": self.seconds,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> SplitCopied:
        return cls(
            Split.from_json(data["split"]), int(data["rows"]), int(data["cells"]), int(data["bytes"]), data["seconds"]
        )


@dataclass
class CopyResult:
    """A whole copy: ``walship copy --json`` prints :meth:`to_json`."""

    peer_id: str
    until_ms: int
    splits: list[SplitCopied] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def rows(self) -> int:
        return sum(s.rows for s in self.splits)

    @property
    def cells(self) -> int:
        return sum(s.cells for s in self.splits)

    def to_json(self) -> dict[str, Any]:
        tables = sorted({s.split.table for s in self.splits})
        return {
            "peer_id": self.peer_id,
            "tables": tables,
            "until_ms": None if self.until_ms == LATEST else self.until_ms,
            "splits": len(self.splits),
            "rows": self.rows,
            "cells": self.cells,
            "bytes": sum(s.bytes for s in self.splits),
            "seconds": round(self.seconds, 3),
            "rows_per_s": round(self.rows / self.seconds, 1) if self.seconds > 0 else None,
        }

    def summary(self) -> str:
        doc = self.to_json()
        tables = ", ".join(doc["tables"]) or "no table"
        return (
            f"copied {doc['rows']:,} row(s), {doc['cells']:,} cell(s) of {tables} into peer {self.peer_id} "
            f"({doc['splits']} split(s), {doc['seconds']} s)"
        )


def copy_job(
    *,
    zk: str,
    znode_parent: str,
    wal_root: str,
    source_thrift2: str,
    peer_id: str,
    tables: Iterable[str] = (),
    until_ms: int = LATEST,
    zk_auth: str | None = None,
) -> VerifyJob:
    """The job of a copy: a verify job's plan (the peer's tables and replicated families,
    one split per source region), every version, timestamps below ``until_ms``."""
    return VerifyJob(
        zk=zk,
        znode_parent=znode_parent,
        wal_root=wal_root,
        source_thrift2=source_thrift2,
        peer_id=peer_id,
        zk_auth=zk_auth,
        tables=tuple(tables),
        end_ms=until_ms,
        recompare_sleep=0.0,
    )


def until_ms(text: str | None, what: str = "--until") -> int:
    """An ISO time (UTC when it names no zone) in milliseconds: a copy's upper bound on cell
    timestamps; empty or ``None``: no bound.

    :raises ConfigError: not an ISO time (the message names ``what``).
    """
    if text is None or not text.strip():
        return LATEST
    try:
        value = datetime.datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        shown = text if len(text) <= 60 else f"{text[:60]}..."
        raise ConfigError(f"{what}: not an ISO time: {shown!r} (expected e.g. 2026-05-01T12:00:00Z)") from None
    if value.tzinfo is None:
        value = value.replace(tzinfo=datetime.UTC)
    return math.floor(value.timestamp() * 1000)


def _size(row: bytes, cells: dict[tuple[bytes, bytes, int], bytes]) -> int:
    return sum(len(row) + len(f) + len(q) + len(v) + 8 for (f, q, _ts), v in cells.items())


def copy_split(
    job: VerifyJob,
    split: Split,
    *,
    batch_rows: int = BATCH_ROWS,
    batch_bytes: int = BATCH_BYTES,
    progress: Callable[[int, int], None] | None = None,
) -> SplitCopied:
    """Copy one split: scan it on the source, put every row into the peer in batches (one
    batch being put while the next is read).

    :param progress: called with (rows, bytes) after each batch is put.
    :raises VerifyUnavailableError: a side's servers do not answer (nothing is left half
        written that a second copy would not write again).
    """
    began = time.monotonic()
    out = SplitCopied(split)
    versions = dict(split.families)
    with (
        job.source_side() as source,
        job.peer_side() as peer,
        ThreadPoolExecutor(1, thread_name_prefix="walship-copy-put") as putter,
    ):
        in_flight: Future[None] | None = None

        def put(batch: list[tuple[bytes, dict[tuple[bytes, bytes, int], bytes]]], size: int) -> None:
            nonlocal in_flight
            if in_flight is not None:
                in_flight.result()  # one batch in flight at most; its error stops the copy here
            in_flight = putter.submit(_put, peer, split.table, batch, size, out, progress) if batch else None

        for start, stop in split.ranges:
            batch: list[tuple[bytes, dict[tuple[bytes, bytes, int], bytes]]] = []
            size = 0
            for row, cells in source.scan(split.table, start, stop, versions, job.start_ms, job.end_ms):
                batch.append((row, cells))
                size += _size(row, cells)
                if len(batch) >= batch_rows or size >= batch_bytes:
                    put(batch, size)
                    batch, size = [], 0
            put(batch, size)
        put([], 0)
    out.seconds = round(time.monotonic() - began, 3)
    log.info("%s: copied %d row(s), %d cell(s) into peer %s", split.describe(), out.rows, out.cells, job.peer_id)
    return out


def _put(
    peer: Any,
    table: str,
    batch: list[tuple[bytes, dict[tuple[bytes, bytes, int], bytes]]],
    size: int,
    out: SplitCopied,
    progress: Callable[[int, int], None] | None,
) -> None:
    if not batch:
        return
    peer.put_rows(table, batch)
    out.rows += len(batch)
    out.cells += sum(len(cells) for _, cells in batch)
    out.bytes += size
    if progress is not None:
        progress(len(batch), size)


def combine(job: VerifyJob, copied: Iterable[SplitCopied], seconds: float) -> CopyResult:
    return CopyResult(job.peer_id, job.end_ms, list(copied), seconds)


def copy(job: VerifyJob, *, meter: Meter = NO_METER) -> CopyResult:
    """Plan and copy every split in this process (``meter`` counts the rows copied).

    :raises PeerNotFoundError: no such peer.
    :raises VerifyError: an unknown table, a table the peer lacks, a peer without Thrift2 servers.
    """
    began = time.monotonic()
    job, splits = plan(job)
    meter.start(None, "rows")
    copied = [copy_split(job, s, progress=lambda rows, _bytes: meter.advance(rows)) for s in splits]
    return combine(job, copied, time.monotonic() - began)
