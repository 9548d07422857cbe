"""The Parquet change log: a subscription's events as one Parquet dataset, one row per cell.

Layout, as Spark writes a dataset partitioned by ``table`` and ``date``::

    <url>/table=<table>/date=<YYYY-MM-DD>/part-<key>-<first>-<last>.parquet     one batch
    <url>/table=<table>/date=<YYYY-MM-DD>/compact-<digest>.parquet              compacted files

``table`` is ``t`` in the default namespace and ``ns:t`` otherwise, escaped in the path as
Spark's ``ExternalCatalogUtils.escapePathName`` does (``ns%3At``), so that Spark and
``pyarrow.dataset(..., partitioning="hive")`` both read it back as ``ns:t``; ``date`` is the UTC
date of the entry's WAL write time. Each file holds the columns of :data:`SCHEMA`.

A batch is written as one file per partition it touches, all of the same name: ``key`` is a
digest of the WAL's writing server, the queue (the subscription's name, so a batch shipped
again from a recovered queue after a failover has the same name) and the WAL name;
``first`` and ``last`` are the batch's first entry offset and its last entry's end offset
(20 digits). A batch shipped twice after a crash rewrites the same files. Each file is
written under a hidden temporary name (``.part-...``; pyarrow and Spark skip names starting
with ``.`` or ``_``), then moved into place.

A batch read again after a crash may reach further (the WAL grew meanwhile: the same first
offset, a larger last one); writing it removes, in each of its partitions, the files of the
same key and first offset with another last offset, so the log never holds a cell twice.
One case is left: batch limits changed between the crash and the rerun, so the batches
start at other offsets and overlap the old ones; ``walship changelog compact`` removes such
overlaps (:mod:`walship.sep.compaction`).
"""

from __future__ import annotations

import contextlib
import datetime
import hashlib
import logging
import os
import re
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import fsspec
import pyarrow as pa
import pyarrow.parquet as pq

from walship.errors import ChangeLogError
from walship.files import fsync_file, move_into_place, url_to_fs
from walship.sep.events import SepEvent
from walship.wal.names import parse_wal_name

__all__ = [
    "SCHEMA",
    "BatchName",
    "ChangeLogWriter",
    "batch_key",
    "changelog_url",
    "check_url",
    "escape_path_name",
    "open_changelog",
    "partition_path",
    "prepare_local_dir",
    "read_parquet",
    "unescape_path_name",
    "utc_date",
    "write_parquet",
]

log = logging.getLogger(__name__)

#: The columns of every file of the log (the partition columns ``table`` and ``date`` are in
#: the path, not in the files).
SCHEMA = pa.schema(
    [
        ("row", pa.binary()),
        ("family", pa.binary()),
        ("qualifier", pa.binary()),
        ("timestamp", pa.int64()),
        ("type", pa.string()),
        ("value", pa.binary()),
        ("wal", pa.string()),
        ("offset", pa.int64()),
        ("seqid", pa.int64()),
        ("write_time", pa.timestamp("ms", tz="UTC")),
        ("cluster_ids", pa.list_(pa.string())),
    ]
)

# Spark's ExternalCatalogUtils.charToEscape (not its Windows-only additions): 0x01-0x1F, 0x7F
# and "#%'*/:=?\{[]^
_ESCAPE = frozenset([*range(0x01, 0x20), 0x7F, *(ord(c) for c in "\"#%'*/:=?\\{[]^")])
_BATCH_RE = re.compile(r"^part-([0-9a-f]{16})-(\d{20})-(\d{20})\.parquet$")
_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)


def escape_path_name(text: str) -> str:
    """``text`` as Spark escapes a partition value in a path: ``ns:t`` -> ``ns%3At``."""
    return "".join(f"%{ord(c):02X}" if ord(c) in _ESCAPE else c for c in text)


def unescape_path_name(text: str) -> str:
    """The partition value of an escaped path name (Spark's ``unescapePathName``)."""
    return re.sub(r"%([0-9A-Fa-f]{2})", lambda m: chr(int(m.group(1), 16)), text)


def utc_date(epoch_ms: int) -> str:
    """The UTC date of an epoch-millisecond time, ``YYYY-MM-DD``."""
    return (_EPOCH + datetime.timedelta(milliseconds=epoch_ms)).date().isoformat()


def partition_path(table: str, date: str) -> str:
    """The partition's directory under the log's root: ``table=<escaped>/date=<date>``."""
    return f"table={escape_path_name(table)}/date={date}"


def batch_key(server: str, queue: str, wal: str) -> str:
    """The part of a batch file's name naming its WAL, server and queue: 16 hex digits."""
    return hashlib.sha256(f"{server}\n{queue}\n{wal}".encode()).hexdigest()[:16]


@dataclass(frozen=True, order=True)
class BatchName:
    """The name of one batch's file: ``part-<key>-<first>-<last>.parquet``."""

    key: str
    first: int
    last: int

    @property
    def name(self) -> str:
        return f"part-{self.key}-{self.first:020d}-{self.last:020d}.parquet"

    @property
    def prefix(self) -> str:
        """What every file of this key and first offset starts with."""
        return f"part-{self.key}-{self.first:020d}-"

    @classmethod
    def parse(cls, name: str) -> BatchName | None:
        m = _BATCH_RE.match(name)
        return cls(m.group(1), int(m.group(2)), int(m.group(3))) if m else None


def changelog_url(text: str) -> str:
    """The URL of a change log as a subscription keeps it: a plain path becomes an absolute
    ``file://`` URL (so Spark does not read it from its default file system).

    :raises ChangeLogError: empty, or fsspec knows no file system for it.
    """
    url = text.strip()
    if not url:
        raise ChangeLogError("empty change log URL: give any fsspec URL (hdfs://, s3://, file://) or a path")
    if "://" not in url and "::" not in url:
        url = "file://" + os.path.abspath(os.path.expanduser(url))
    check_url(url)
    stripped = url.rstrip("/")
    return url if stripped.endswith(":") else stripped


def prepare_local_dir(url: str) -> None:
    """For a change log on the local file system: its folder exists, or is created now, and is
    a folder this process can write (``/dev/null/x``, a file, ``/proc/x`` are refused).

    :raises ChangeLogError: it cannot be a folder of files written here.
    """
    protocol, path = fsspec.core.split_protocol(url)
    if protocol not in (None, "file", "local"):
        return  # another file system: checked when the first file is written
    shown = url if len(url) <= 120 else f"{url[:120]}... ({len(url):,} characters)"
    try:
        os.makedirs(path, exist_ok=True)
    except (OSError, ValueError) as exc:  # ValueError: a NUL byte in the path
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise ChangeLogError(f"{shown!r}: cannot be the change log's folder: {reason}") from None
    if not os.path.isdir(path) or not os.access(path, os.W_OK | os.X_OK):
        raise ChangeLogError(f"{shown}: not a folder this process can write")


def check_url(url: str) -> None:
    """Check that fsspec has a file system for each protocol of ``url`` (``a::b://`` chains
    too), without connecting to it.

    :raises ChangeLogError: an unknown protocol, or its package is not installed.
    """
    for part in url.split("::"):
        protocol = fsspec.core.split_protocol(part)[0] or "file"
        try:
            fsspec.get_filesystem_class(protocol)
        except (ValueError, ImportError) as exc:
            raise ChangeLogError(f"change log {url}: {exc}") from None


def open_changelog(url: str) -> tuple[Any, str]:
    """The file system and root path of the log at ``url``.

    :raises ChangeLogError: fsspec knows no file system for it (or its package is missing),
        or it cannot be reached.
    """
    try:
        fs, root = url_to_fs(url)
    except (ValueError, ImportError, OSError) as exc:
        raise ChangeLogError(f"change log {url}: {exc}") from None
    return fs, str(root).rstrip("/") or "/"


def write_parquet(fs: Any, directory: str, name: str, table: pa.Table) -> str:
    """Write ``table`` as ``directory/.name.<random>.tmp``, synced; return that temporary path
    (the caller moves it into place)."""
    tmp = f"{directory}/.{name}.{uuid.uuid4().hex[:8]}.tmp"
    with fs.open(tmp, "wb") as f:
        pq.write_table(table, f)
        fsync_file(f)
    return tmp


def read_parquet(fs: Any, path: str) -> pa.Table:
    """A file of the log, its schema checked.

    :raises ChangeLogError: it cannot be read, is not Parquet, or has other columns.
    """
    try:
        with fs.open(path, "rb") as f:
            table = pq.read_table(f)
    except (pa.ArrowInvalid, OSError) as exc:
        raise ChangeLogError(f"{path}: not a Parquet file of the change log: {exc}") from None
    if not table.schema.remove_metadata().equals(SCHEMA):
        raise ChangeLogError(f"{path}: not a file of the change log: its columns are {table.schema.names}")
    return table


def _columns() -> dict[str, list[Any]]:
    return {name: [] for name in SCHEMA.names}


def partition_rows(events: Sequence[SepEvent]) -> dict[tuple[str, str], pa.Table]:
    """The rows of ``events``, one per cell in event order, per ``(table, date)`` partition."""
    parts: dict[tuple[str, str], dict[str, list[Any]]] = {}
    for event in events:
        where = (event.table.decode("utf-8", "backslashreplace"), utc_date(event.write_time))
        cols = parts.get(where)
        if cols is None:
            cols = parts[where] = _columns()
        ids = [str(c) for c in event.cluster_ids]
        for cell in event.cells:
            cols["row"].append(event.row)
            cols["family"].append(cell.family)
            cols["qualifier"].append(cell.qualifier)
            cols["timestamp"].append(cell.timestamp)
            cols["type"].append(cell.type)
            cols["value"].append(cell.value)
            cols["wal"].append(event.wal)
            cols["offset"].append(event.offset)
            cols["seqid"].append(event.seqid)
            cols["write_time"].append(event.write_time)
            cols["cluster_ids"].append(ids)
    return {where: pa.table(cols, schema=SCHEMA) for where, cols in parts.items()}


class ChangeLogWriter:
    """Writes one queue's batches into the log at ``url``.

    :param queue: the subscription's name (its peer id), part of every file's key.

    Example::

        writer = ChangeLogWriter("hdfs://nn/changelog/indexer", "indexer")
        writer.write_batch(wal, batch[0].entry.offset, batch[-1].entry.end_offset, events)
    """

    def __init__(self, url: str, queue: str) -> None:
        self.url = url
        self.queue = queue
        self.fs, self.root = open_changelog(url)

    def name_of(self, wal: str, first: int, last: int) -> BatchName:
        parsed = parse_wal_name(wal)
        server = str(parsed.server) if parsed.server is not None else parsed.group
        return BatchName(batch_key(server, self.queue, wal), first, last)

    def write_batch(self, wal: str, first: int, last: int, events: Sequence[SepEvent]) -> list[str]:
        """Write the batch ``first``-``last`` of ``wal`` (its ``events``, in WAL order); return
        the paths written, once every one is in place.

        :raises ChangeLogError: a file cannot be written or moved (names it).
        """
        name = self.name_of(wal, first, last)
        staged: list[tuple[str, str]] = []
        current = ""
        try:
            for (table, date), rows in sorted(partition_rows(events).items()):
                current = f"{self.root}/{partition_path(table, date)}"
                self.fs.makedirs(current, exist_ok=True)
                staged.append((current, write_parquet(self.fs, current, name.name, rows)))
            paths = []
            for directory, tmp in staged:
                current = f"{directory}/{name.name}"
                self._replace_older(directory, name, tmp)
                move_into_place(self.fs, tmp, current)
                paths.append(current)
        except OSError as exc:
            for _, tmp in staged:
                with contextlib.suppress(OSError):
                    self.fs.rm(tmp)
            raise ChangeLogError(f"cannot write {current or self.url}: {exc}") from exc
        log.debug("change log %s: %s of %s in %d partition(s)", self.url, name.name, wal, len(paths))
        return paths

    def _replace_older(self, directory: str, name: BatchName, tmp: str) -> None:
        """Remove the files of the same key and first offset with another last offset (an
        earlier, shorter read of this batch), and temporary files a crash left of them."""
        for path in self.fs.ls(directory, detail=False):
            base = str(path).rsplit("/", 1)[-1]
            other = BatchName.parse(base)
            stale_tmp = base.startswith("." + name.prefix) and f"{directory}/{base}" != tmp
            older = other is not None and (other.key, other.first) == (name.key, name.first) and other != name
            if older or stale_tmp:
                log.info("change log %s: %s replaces %s", self.url, name.name, base)
                self.fs.rm(f"{directory}/{base}")
