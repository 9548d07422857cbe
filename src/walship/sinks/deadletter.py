"""Dead letters: edits a sink could not express, kept durably so that they can be replayed.

A sink that meets an edit it cannot apply (Thrift1 has no single-version Delete nor
DeleteFamilyVersion) under ``walship.incompatible=deadletter`` writes it here, and only then
returns, so the queue's position moves past an edit only once it is either applied or a
dead letter on durable storage.

Where: the peer's ``walship.deadletter.dir`` (any fsspec URL); by default
``$WALSHIP_DEADLETTER_DIR`` when the environment sets it (a volume of its own, where the WAL
root is mounted read-only), else ``<WAL root>/walship-deadletter`` — on the source's own file
system, beside ``WALs/`` and ``oldWALs/``; never a process's working directory. Layout::

    <dir>/peer-<id>/pending/<wal>/<first offset>-<last offset>.jsonl   to replay
    <dir>/peer-<id>/replayed/<wal>/<first offset>-<last offset>.jsonl  replayed, kept for audit

One file per batch and WAL, named by the WAL offsets it covers and written whole (a temporary
file, synced, then renamed): a batch shipped again after a crash rewrites the same file, so
the store never holds an edit twice from one batch; :meth:`DeadLetterStore.records` also drops
repeats across files (the same WAL, offset and cell).

Each line is one cell, exact enough to rebuild the WAL entry: bytes in base64, the WAL name and
byte offset, the table, region, sequence id, write time, cluster ids and the reason.
"""

from __future__ import annotations

import base64
import json
import logging
import os
import uuid
from dataclasses import dataclass
from typing import Any

from walship.errors import DeadLetterError
from walship.files import fsync_file, move_into_place, url_to_fs
from walship.peer import PeerConfig
from walship.sinks.base import DEADLETTER_DIR_KEY, FilteredEntry
from walship.wal.dump import to_string_binary
from walship.wal.model import Cell, CellType, Tag, WalEntry, WalKey

__all__ = ["DEADLETTER_DIR_ENV", "DeadLetter", "DeadLetterStore", "default_deadletter_url"]

log = logging.getLogger(__name__)


#: The environment variable naming the default dead-letter directory (any fsspec URL).
DEADLETTER_DIR_ENV = "WALSHIP_DEADLETTER_DIR"


def default_deadletter_url(wal_root: str) -> str:
    """``$WALSHIP_DEADLETTER_DIR`` when set, else ``<wal_root>/walship-deadletter``."""
    configured = os.environ.get(DEADLETTER_DIR_ENV, "").strip()
    return configured or f"{wal_root.rstrip('/')}/walship-deadletter"


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _unb64(text: Any, what: str, where: str) -> bytes:
    try:
        return base64.b64decode(str(text), validate=True)
    except ValueError:
        raise DeadLetterError(f"{where}: field {what!r} is not base64") from None


@dataclass(frozen=True)
class DeadLetter:
    """One dead-lettered cell and the WAL entry it came from."""

    peer_id: str
    wal: str
    offset: int
    end_offset: int
    cell_index: int
    table: bytes
    region: bytes
    sequence_id: int
    write_time: int
    cluster_ids: tuple[uuid.UUID, ...]
    cell: Cell
    reason: str
    file: str = ""

    @classmethod
    def of(cls, peer_id: str, wal: str, fe: FilteredEntry, cell_index: int, reason: str) -> DeadLetter:
        key = fe.entry.key
        return cls(
            peer_id,
            wal,
            fe.entry.offset,
            fe.entry.end_offset,
            cell_index,
            key.table,
            key.encoded_region_name,
            key.sequence_id,
            key.write_time,
            fe.cluster_ids,
            fe.cells[cell_index],
            reason,
        )

    @property
    def key(self) -> tuple[str, int, int]:
        return (self.wal, self.offset, self.cell_index)

    def to_record(self) -> dict[str, Any]:
        c = self.cell
        return {
            "peer_id": self.peer_id,
            "wal": self.wal,
            "offset": self.offset,
            "end_offset": self.end_offset,
            "cell_index": self.cell_index,
            "table": _b64(self.table),
            "region": _b64(self.region),
            "sequence_id": self.sequence_id,
            "write_time": self.write_time,
            "cluster_ids": [str(u) for u in self.cluster_ids],
            "type": CellType(c.type).name,
            "row": _b64(c.row),
            "family": _b64(c.family),
            "qualifier": _b64(c.qualifier),
            "timestamp": c.timestamp,
            "value": _b64(c.value),
            "tags": [[t.type, _b64(t.value)] for t in c.tags],
            "reason": self.reason,
        }

    @classmethod
    def from_record(cls, record: dict[str, Any], where: str) -> DeadLetter:
        try:
            cell = Cell(
                _unb64(record["row"], "row", where),
                _unb64(record["family"], "family", where),
                _unb64(record["qualifier"], "qualifier", where),
                int(record["timestamp"]),
                int(CellType[str(record["type"])]),
                _unb64(record["value"], "value", where),
                tuple(Tag(int(t), _unb64(v, "tags", where)) for t, v in record.get("tags", [])),
            )
            return cls(
                str(record["peer_id"]),
                str(record["wal"]),
                int(record["offset"]),
                int(record["end_offset"]),
                int(record["cell_index"]),
                _unb64(record["table"], "table", where),
                _unb64(record["region"], "region", where),
                int(record["sequence_id"]),
                int(record["write_time"]),
                tuple(uuid.UUID(u) for u in record["cluster_ids"]),
                cell,
                str(record["reason"]),
                where.rsplit(":", 1)[0],
            )
        except (KeyError, ValueError, TypeError) as exc:
            raise DeadLetterError(f"{where}: not a dead letter record ({type(exc).__name__}: {exc})") from None

    def to_json(self) -> dict[str, Any]:
        """What ``walship deadletter list --json`` prints for it."""
        c = self.cell
        return {
            "peer_id": self.peer_id,
            "wal": self.wal,
            "offset": self.offset,
            "table": to_string_binary(self.table),
            "row": to_string_binary(c.row),
            "family": to_string_binary(c.family),
            "qualifier": to_string_binary(c.qualifier),
            "timestamp": c.timestamp,
            "type": CellType(c.type).name,
            "reason": self.reason,
            "file": self.file,
        }


def group_entries(letters: list[DeadLetter]) -> list[tuple[str, list[FilteredEntry]]]:
    """Rebuild the filtered WAL entries of dead letters, per WAL, in WAL order."""
    by_entry: dict[tuple[str, int], list[DeadLetter]] = {}
    for d in sorted(letters, key=lambda d: d.key):
        by_entry.setdefault((d.wal, d.offset), []).append(d)
    out: dict[str, list[FilteredEntry]] = {}
    for (wal, offset), cells in by_entry.items():
        first = cells[0]
        key = WalKey(first.region, first.table, first.sequence_id, first.write_time, first.cluster_ids)
        entry = WalEntry(key, tuple(d.cell for d in cells), offset, first.end_offset)
        out.setdefault(wal, []).append(FilteredEntry(entry, entry.cells, first.cluster_ids))
    return sorted(out.items())


class DeadLetterStore:
    """The dead letters of one peer (see the module docstring).

    :param url: the dead-letter directory: a path or any fsspec URL.
    """

    def __init__(self, url: str, peer_id: str) -> None:
        self.url = url.rstrip("/")
        self.peer_id = peer_id
        try:
            fs, base = url_to_fs(self.url)
        except (ValueError, ImportError) as exc:
            raise DeadLetterError(f"dead-letter directory {url!r} of peer {peer_id}: {exc}") from exc
        self.fs: Any = fs
        self.base = f"{base.rstrip('/')}/peer-{peer_id}"

    @classmethod
    def for_peer(cls, peer: PeerConfig, wal_root: str) -> DeadLetterStore:
        return cls(peer.configuration.get(DEADLETTER_DIR_KEY) or default_deadletter_url(wal_root), peer.peer_id)

    def _path(self, state: str, wal: str, first: int, last: int) -> str:
        return f"{self.base}/{state}/{wal}/{first:020d}-{last:020d}.jsonl"

    def write(self, wal: str, letters: list[DeadLetter]) -> str:
        """Write one batch's dead letters of one WAL as one file, durably; returns its path."""
        if not letters:
            return ""
        path = self._path("pending", wal, letters[0].offset, letters[-1].offset)
        tmp = f"{path}.tmp-{uuid.uuid4().hex[:8]}"
        text = "".join(json.dumps(d.to_record()) + "\n" for d in letters)
        try:
            self.fs.makedirs(path.rsplit("/", 1)[0], exist_ok=True)
            with self.fs.open(tmp, "w", encoding="utf-8") as f:
                f.write(text)
                fsync_file(f)
            move_into_place(self.fs, tmp, path)
        except OSError as exc:
            raise DeadLetterError(f"cannot write dead letters of peer {self.peer_id} to {path}: {exc}") from exc
        log.warning("peer %s: %d dead letters of %s written to %s", self.peer_id, len(letters), wal, path)
        return path

    def files(self, state: str = "pending") -> list[str]:
        """The files of ``pending`` (or ``replayed``) dead letters, in WAL order."""
        try:
            found = self.fs.find(f"{self.base}/{state}")
        except FileNotFoundError:
            return []
        return sorted(p for p in found if p.endswith(".jsonl"))

    def read(self, path: str) -> list[DeadLetter]:
        """The dead letters of one file.

        :raises DeadLetterError: the file cannot be read or a line is not a record (names the
            file and line).
        """
        out = []
        try:
            with self.fs.open(path, "r", encoding="utf-8") as f:
                lines = f.read().splitlines()
        except (OSError, UnicodeDecodeError) as exc:
            raise DeadLetterError(f"cannot read dead letters {path}: {exc}") from exc
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            where = f"{path}:{number}"
            try:
                record = json.loads(line)
            except ValueError:
                raise DeadLetterError(f"{where}: not JSON") from None
            if not isinstance(record, dict):
                raise DeadLetterError(f"{where}: not a dead letter record")
            out.append(DeadLetter.from_record(record, where))
        return out

    def records(self, state: str = "pending") -> list[DeadLetter]:
        """Every dead letter, once each, in WAL order."""
        seen: dict[tuple[str, int, int], DeadLetter] = {}
        for path in self.files(state):
            for d in self.read(path):
                seen.setdefault(d.key, d)
        return [seen[k] for k in sorted(seen)]

    def mark_replayed(self, path: str) -> None:
        """Move a replayed file out of ``pending/``."""
        target = path.replace(f"{self.base}/pending/", f"{self.base}/replayed/", 1)
        try:
            self.fs.makedirs(target.rsplit("/", 1)[0], exist_ok=True)
            self.fs.mv(path, target)
        except OSError as exc:
            raise DeadLetterError(f"cannot move replayed dead letters {path} to {target}: {exc}") from exc
