"""Compaction of the Parquet change log: a day's small batch files merged into one per table.

For each ``table=*/date=D`` partition of the log (:mod:`walship.sep.parquetlog`),
:func:`compact` merges its files into one, ``compact-<digest>.parquet``, named by the set of
its inputs, written under a hidden temporary name and moved into place; then it deletes the
inputs. The merged file is made of *segments*, one per batch file ever merged into it, in
order of WAL, offset and cell; its Parquet key-value metadata lists its inputs
(``walship.changelog.inputs``: the files it replaced) and its segments
(``walship.changelog.segments``: ``[batch file name, first row, rows]``), so a later run can
merge it again segment by segment.

Idempotent and safe to rerun at any point:

* a run first deletes every file a merged file lists as an input or segment (what a crash
  between writing a merged file and deleting its inputs left behind, or a batch shipped
  again under the same name, which holds the same rows), and the temporary files of an
  interrupted compaction;
* a partition left with one file is not touched, so a second run changes nothing;
* overlapping segments of one WAL and queue (same key: a batch read again further after a
  crash, or with other batch limits) keep each WAL entry once, from the segment with the
  larger range.

Run it for a day the shipper has finished with (a closed day); one compaction per partition
at a time. A partition-day is merged in memory.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import logging
import re
from dataclasses import asdict, dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from walship.errors import ChangeLogError
from walship.files import move_into_place
from walship.sep.parquetlog import (
    BatchName,
    open_changelog,
    read_parquet,
    unescape_path_name,
    write_parquet,
)

__all__ = ["INPUTS_KEY", "SEGMENTS_KEY", "PartitionCompaction", "compact", "parse_date"]

log = logging.getLogger(__name__)

INPUTS_KEY = b"walship.changelog.inputs"
SEGMENTS_KEY = b"walship.changelog.segments"
_COMPACT_RE = re.compile(r"^compact-[0-9a-f]{16}\.parquet$")
_DATE_RE = re.compile(r"^\d{4}-\d{2}-\d{2}$")


def parse_date(text: str) -> str:
    """``YYYY-MM-DD``, checked.

    :raises ChangeLogError: not such a date.
    """
    try:
        if not _DATE_RE.match(text):
            raise ValueError(text)
        datetime.date.fromisoformat(text)
    except ValueError:
        raise ChangeLogError(f"invalid --date {text!r}: expected a date YYYY-MM-DD") from None
    return text


@dataclass
class PartitionCompaction:
    """What compacting one partition did.

    :param action: ``merged`` (a new file replaced several), ``cleaned`` (only leftovers of an
        interrupted run were deleted), ``unchanged``.
    """

    table: str
    date: str
    path: str
    action: str = "unchanged"
    inputs: list[str] = field(default_factory=list)
    output: str | None = None
    rows: int = 0
    duplicates_dropped: int = 0
    leftovers_removed: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class _Segment:
    """The rows of one batch file, wherever they are now."""

    batch: BatchName
    rows: pa.Table
    merged: bool  # read from a merged file

    @property
    def order(self) -> tuple[str, int, int, bool, str]:
        wal = str(self.rows.column("wal")[0].as_py()) if self.rows.num_rows else ""
        return (wal, self.batch.first, -self.batch.last, not self.merged, self.batch.key)


def _metadata_list(meta: dict[bytes, bytes], key: bytes, path: str) -> list[Any]:
    try:
        value = json.loads(meta[key])
    except (KeyError, ValueError):
        raise ChangeLogError(f"{path}: a merged file without valid {key.decode()} metadata") from None
    if not isinstance(value, list):
        raise ChangeLogError(f"{path}: {key.decode()} metadata is not a list")
    return value


def _layout(table: pa.Table, path: str) -> list[tuple[BatchName, int, int]]:
    """A merged file's segments: ``(batch, first row, rows)``, checked against its rows."""
    out = []
    total = 0
    for item in _metadata_list(table.schema.metadata or {}, SEGMENTS_KEY, path):
        try:
            name, start, count = item
            batch = BatchName.parse(str(name))
            start, count = int(start), int(count)
        except (TypeError, ValueError):
            batch = None
        if batch is None or start != total or count < 0:
            raise ChangeLogError(f"{path}: {SEGMENTS_KEY.decode()}: not [batch file, first row, rows]: {item!r}")
        out.append((batch, start, count))
        total += count
    if total != table.num_rows:
        raise ChangeLogError(f"{path}: its segments hold {total} rows, the file {table.num_rows}")
    return out


def _segments_of(path: str, table: pa.Table) -> list[_Segment]:
    rows = table.replace_schema_metadata(None)
    return [_Segment(batch, rows.slice(start, count), True) for batch, start, count in _layout(table, path)]


def _partitions(fs: Any, root: str, date: str) -> list[tuple[str, str]]:
    try:
        tables = fs.ls(root, detail=True)
    except FileNotFoundError:
        raise ChangeLogError(f"change log {root}: no such directory") from None
    out = []
    for info in tables:
        base = str(info["name"]).rstrip("/").rsplit("/", 1)[-1]
        if info.get("type") != "directory" or not base.startswith("table="):
            continue
        path = f"{root}/{base}/date={date}"
        if fs.isdir(path):
            out.append((unescape_path_name(base.removeprefix("table=")), path))
    return sorted(out)


def compact(url: str, date: str) -> list[PartitionCompaction]:
    """Merge each ``table=*/date=<date>`` partition of the log at ``url`` into one file.

    :raises ChangeLogError: the URL does not resolve or is not a directory, ``date`` is not
        ``YYYY-MM-DD``, a file is not Parquet or not of the log (each names it).
    """
    parse_date(date)
    fs, root = open_changelog(url)
    if not fs.isdir(root):
        raise ChangeLogError(f"change log {url}: no such directory")
    results = []
    for table, path in _partitions(fs, root, date):
        try:
            results.append(_compact_partition(fs, path, PartitionCompaction(table, date, path)))
        except OSError as exc:
            raise ChangeLogError(f"cannot compact {path}: {exc}") from exc
    return results


def _compact_partition(fs: Any, path: str, result: PartitionCompaction) -> PartitionCompaction:
    names = sorted(str(p).rsplit("/", 1)[-1] for p in fs.ls(path, detail=False))
    for name in names:
        if name.startswith(".compact-"):  # an interrupted compaction's temporary file
            fs.rm(f"{path}/{name}")
            result.leftovers_removed.append(name)
    visible = [n for n in names if not n.startswith((".", "_"))]
    for name in visible:
        if BatchName.parse(name) is None and not _COMPACT_RE.match(name):
            raise ChangeLogError(f"{path}/{name}: not a file of the change log (part-*.parquet or compact-*.parquet)")
    merged_files = {n: read_parquet(fs, f"{path}/{n}") for n in visible if _COMPACT_RE.match(n)}
    # finish what an interrupted run began: whatever a merged file holds goes
    covered: set[str] = set()
    for name, table in merged_files.items():
        meta = table.schema.metadata or {}
        covered |= {str(n) for n in _metadata_list(meta, INPUTS_KEY, f"{path}/{name}")}
        covered |= {batch.name for batch, _, _ in _layout(table, f"{path}/{name}")}
    for name in visible:
        if name in covered:
            fs.rm(f"{path}/{name}")
            result.leftovers_removed.append(name)
    if result.leftovers_removed:
        result.action = "cleaned"
    inputs = [n for n in visible if n not in covered]
    if len(inputs) <= 1:  # one file already: nothing to merge
        for name in inputs:
            table = merged_files[name] if name in merged_files else read_parquet(fs, f"{path}/{name}")
            result.rows = table.num_rows
        return result
    segments: list[_Segment] = []
    for name in inputs:
        batch = BatchName.parse(name)
        if batch is None:
            segments.extend(_segments_of(f"{path}/{name}", merged_files[name]))
        else:
            segments.append(_Segment(batch, read_parquet(fs, f"{path}/{name}").replace_schema_metadata(None), False))
    merged, layout, dropped = _merge(segments)
    digest = hashlib.sha256("\n".join(sorted(inputs)).encode()).hexdigest()[:16]
    output = f"compact-{digest}.parquet"
    merged = merged.replace_schema_metadata(
        {INPUTS_KEY: json.dumps(sorted(inputs)).encode(), SEGMENTS_KEY: json.dumps(layout).encode()}
    )
    move_into_place(fs, write_parquet(fs, path, output, merged), f"{path}/{output}")
    for name in inputs:
        fs.rm(f"{path}/{name}")
    log.info(
        "compacted %s: %d files into %s (%d rows, %d duplicates dropped)",
        path,
        len(inputs),
        output,
        merged.num_rows,
        dropped,
    )
    result.action, result.inputs, result.output = "merged", sorted(inputs), output
    result.rows, result.duplicates_dropped = merged.num_rows, dropped
    return result


def _merge(segments: list[_Segment]) -> tuple[pa.Table, list[list[Any]], int]:
    """The segments in order of WAL and offset, each WAL entry of a key once; their layout
    (``[name, first row, rows]``) and the number of rows dropped."""
    taken: dict[str, set[int]] = {}
    parts: list[pa.Table] = []
    layout: list[list[Any]] = []
    names: set[str] = set()
    dropped = 0
    row = 0
    for seg in sorted(segments, key=lambda s: s.order):
        offsets = seg.rows.column("offset")
        seen = taken.setdefault(seg.batch.key, set())
        rows = seg.rows
        if seen:
            keep = pc.invert(pc.is_in(offsets, value_set=pa.array(sorted(seen), pa.int64())))
            rows = seg.rows.filter(keep)
            dropped += seg.rows.num_rows - rows.num_rows
        seen.update(offsets.to_pylist())
        if seg.batch.name in names:
            continue  # the same batch twice (a merged file and a copy shipped again): once
        names.add(seg.batch.name)
        layout.append([seg.batch.name, row, rows.num_rows])
        parts.append(rows)
        row += rows.num_rows
    return pa.concat_tables(parts), layout, dropped
