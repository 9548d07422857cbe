"""A first copy of the existing data into a peer (``walship copy``).

A new peer receives only the edits written after its queues exist. ``copy`` fills it with what
came before: for every table and family the peer selects (REPLICATION_SCOPE 1, its table-cfs
or namespaces: the shipper's own rule), the source is read with a raw scan, one split per
source region (as HBase's CopyTable ``--all.cells``; from its region servers,
:mod:`walship.copy.source`, or over its Thrift2 server where its ZooKeeper names no hbase:meta
server, :mod:`walship.copy.raw`): every put version with a timestamp before ``until``
(exclusive; default: everything) and every delete marker, whatever its timestamp, go into the
peer as its sink writes (:mod:`walship.copy.writers`: a peer of sink ``hbase``'s region
servers, or its Thrift2 servers), each with its own type and timestamp. So the peer hides what the source
hides, the later puts with timestamps older than a marker too (shipped or copied, the source
keeps them masked). Markers are copied whatever their timestamp: one written before the peer
existed, with a timestamp at or after ``until``, would reach the peer no other way; one written
since is shipped as well, which changes nothing. Cells with their original timestamps make a
copy repeatable (a second one changes nothing) and let it overlap with shipping: an edit both
copied and shipped lands once. A copy reads no WAL: it needs no WAL root.

It plans exactly as ``walship verify`` does (:func:`walship.verify.plan`), so ``walship
verify`` afterwards compares what was copied. ``spark_jobs/copy_rows.py`` runs the same splits as
Spark tasks, one per split.
"""

from __future__ import annotations

import datetime
import logging
import math
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from walship.copy.raw import raw_scan
from walship.copy.source import RegionServerSource
from walship.copy.writers import PeerWriter, peer_writer
from walship.errors import ConfigError
from walship.meter import NO_METER, Meter
from walship.verify import Split, VerifyJob, plan
from walship.verify.model import LATEST
from walship.verify.scan import DEFAULT_CACHING
from walship.wal.model import Cell, CellType

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

#: Rows written into the peer in one batch (over Thrift2 a ``deleteMultiple`` of their markers,
#: then a ``putMultiple``; into region servers a ``Multi`` call), and the bytes at which a
#: batch is cut sooner.
BATCH_ROWS = 2000
BATCH_BYTES = 4 << 20

#: How a copy reads the source and writes the peer (``--json``'s ``read_from``, ``written_to``).
REGION_SERVERS = "region_servers"
THRIFT2 = "thrift2"

#: A row and its cells (puts and delete markers), as the raw scan reads them.
Row = tuple[bytes, Sequence[Cell]]
_PUT = int(CellType.Put)


@dataclass
class SplitCopied:
    """What one split copied: rows, put cells, delete markers, bytes."""

    split: Split
    rows: int = 0
    cells: int = 0
    bytes: int = 0
    seconds: float = 0.0
    markers: int = 0

    def to_json(self) -> dict[str, Any]:
        return {
            "split": self.split.to_json(),
            "rows": self.rows,
            "cells": self.cells,
            "markers": self.markers,
            "bytes": self.bytes,
            "seconds": self.seconds,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> SplitCopied:
        return cls(
            Split.from_json(data["split"]),
            int(data["rows"]),
            int(data["cells"]),
            int(data["bytes"]),
            data["seconds"],
            int(data.get("markers", 0)),
        )


@dataclass
class CopyResult:
    """A whole copy: ``walship copy --json`` prints :meth:`to_json`."""

    peer_id: str
    until_ms: int
    splits: list[SplitCopied] = field(default_factory=list)
    seconds: float = 0.0
    #: how the rows were read and written: ``region_servers`` (HBase's RPC) or ``thrift2``
    read_from: str = THRIFT2
    written_to: str = THRIFT2

    @property
    def rows(self) -> int:
        return sum(s.rows for s in self.splits)

    @property
    def cells(self) -> int:
        return sum(s.cells for s in self.splits)

    @property
    def markers(self) -> int:
        return sum(s.markers for s in self.splits)

    def to_json(self) -> dict[str, Any]:
        tables = sorted({s.split.table for s in self.splits})
        return {
            "peer_id": self.peer_id,
            "tables": tables,
            "until_ms": None if self.until_ms == LATEST else self.until_ms,
            "splits": len(self.splits),
            "rows": self.rows,
            "cells": self.cells,
            "markers": self.markers,
            "bytes": sum(s.bytes for s in self.splits),
            "seconds": round(self.seconds, 3),
            "rows_per_s": round(self.rows / self.seconds, 1) if self.seconds > 0 else None,
            "read_from": self.read_from,
            "written_to": self.written_to,
        }

    def summary(self) -> str:
        doc = self.to_json()
        tables = ", ".join(doc["tables"]) or "no table"
        return (
            f"copied {doc['rows']:,} row(s), {doc['cells']:,} cell(s) and {doc['markers']:,} delete marker(s) "
            f"of {tables} into peer {self.peer_id} "
            f"({doc['splits']} split(s), {doc['seconds']} s)"
        )


def copy_job(
    *,
    zk: str,
    znode_parent: str,
    source_thrift2: str,
    peer_id: str,
    tables: Iterable[str] = (),
    until_ms: int = LATEST,
    zk_auth: str | None = None,
    wal_root: str = "",
) -> VerifyJob:
    """The job of a copy: a verify job's plan (the peer's tables and replicated families,
    one split per source region), every put version with a timestamp below ``until_ms``,
    every delete marker. ``wal_root`` is not read (a copy reads no WAL)."""
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


def _size(row: bytes, cells: Sequence[Cell]) -> int:
    return sum(len(row) + len(c.family) + len(c.qualifier) + len(c.value) + 8 for c in cells)


def copy_split(
    job: VerifyJob,
    split: Split,
    *,
    batch_rows: int = BATCH_ROWS,
    batch_bytes: int = BATCH_BYTES,
    progress: Callable[[int, int], None] | None = None,
) -> SplitCopied:
    """Copy one split: read it from the source with a raw scan, write every row into the peer
    in batches (one batch being written while the next is read): its delete markers, then its
    puts with timestamps below the job's ``end_ms``.

    :param progress: called with (rows, bytes) after each batch is written.
    :raises VerifyError: a side refused (an unknown family), or a cell of an unknown type.
    :raises VerifyUnavailableError: a side's servers do not answer (nothing is left half
        written that a second copy would not write again).
    """
    began = time.monotonic()
    out = SplitCopied(split)
    families = [f for f, _versions in split.families]
    until = job.end_ms
    with (
        _source_scan(job) as scan,
        peer_writer(job, split.describe()) as peer,
        ThreadPoolExecutor(1, thread_name_prefix="walship-copy-put") as putter,
    ):
        in_flight: Future[None] | None = None

        def put(batch: list[Row], size: int) -> None:
            nonlocal in_flight
            if in_flight is not None:
                in_flight.result()  # one batch in flight at most; its error stops the copy here
            in_flight = putter.submit(_write, peer, split.table, batch, size, out, progress) if batch else None

        for start, stop in split.ranges:
            batch: list[Row] = []
            size = 0
            for row, cells in scan(split.table, start, stop, families, job.start_ms):
                if until != LATEST:
                    cells = [c for c in cells if c.type != _PUT or c.timestamp < until]
                    if not cells:
                        continue
                batch.append((row, cells))
                size += _size(row, cells)
                if len(batch) >= batch_rows or size >= batch_bytes:
                    put(batch, size)
                    batch, size = [], 0
            put(batch, size)
        put([], 0)
    out.seconds = round(time.monotonic() - began, 3)
    log.info(
        "%s: copied %d row(s), %d cell(s), %d delete marker(s) into peer %s",
        split.describe(),
        out.rows,
        out.cells,
        out.markers,
        job.peer_id,
    )
    return out


@contextmanager
def _source_scan(job: VerifyJob) -> Iterator[Callable[[str, bytes, bytes, list[bytes], int], Iterator[Row]]]:
    """The raw scan of the job's source: from its region servers when the plan found them,
    else over its Thrift2 servers."""
    if job.source_region_servers:
        with RegionServerSource(job) as rs:
            yield lambda table, start, stop, families, min_ts: rs.raw_scan(
                table, start, stop, families, min_ts, caching=DEFAULT_CACHING
            )
    else:
        with job.source_side() as side:
            yield lambda table, start, stop, families, min_ts: raw_scan(side, table, start, stop, families, min_ts)


def _write(
    peer: PeerWriter,
    table: str,
    batch: list[Row],
    size: int,
    out: SplitCopied,
    progress: Callable[[int, int], None] | None,
) -> None:
    if not batch:
        return
    puts = peer.write(table, batch, size)
    out.rows += len(batch)
    out.cells += puts
    out.markers += sum(len(cells) for _, cells in batch) - puts
    out.bytes += size
    if progress is not None:
        progress(len(batch), size)


def combine(job: VerifyJob, copied: Iterable[SplitCopied], seconds: float) -> CopyResult:
    return CopyResult(
        job.peer_id,
        job.end_ms,
        list(copied),
        seconds,
        REGION_SERVERS if job.source_region_servers else THRIFT2,
        REGION_SERVERS if job.peer_cluster_key else THRIFT2,
    )


def copy(job: VerifyJob, *, meter: Meter = NO_METER) -> CopyResult:
    """Plan and copy every split in this process (``meter`` counts the rows copied).

    :raises PeerNotFoundError: no such peer.
    :raises VerifyError: an unknown table, a table the peer lacks, a peer without Thrift2
        servers that is not of sink ``hbase``.
    """
    began = time.monotonic()
    job, splits = plan(job, for_copy=True)
    meter.start(None, "rows")
    copied = [copy_split(job, s, progress=lambda rows, _bytes: meter.advance(rows)) for s in splits]
    return combine(job, copied, time.monotonic() - began)
