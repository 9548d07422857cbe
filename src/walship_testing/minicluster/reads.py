"""The minicluster's read path: the checks a read makes, and scans over the store.

Reads take no cluster lock. A scan checks the table and its families when it is made
(:func:`readable_versions`), then reads the rows in chunks as its iterator is consumed
(:func:`scan_rows`). ``hbase:meta`` reads as any table, its rows in meta's own order
(:mod:`walship_testing.minicluster.meta`).

A raw scan (HBase's ``Scan.setRaw(true)``: the ``_raw_`` attribute of a ``TScan``) reads the
cells as they are kept (:func:`raw_cells`): every put version, masked or not, and the delete
markers with their types, as HBase's ``RawScanQueryMatcher`` returns them.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from walship.errors import NoSuchFamilyError
from walship.wal.model import CellType
from walship_testing.minicluster.filters import Filter
from walship_testing.minicluster.meta import META_TABLE, check_meta_families, meta_rows_in_range
from walship_testing.minicluster.store import Store, VisibleCell
from walship_testing.minicluster.tables import enabled_families

__all__ = ["raw_cells", "readable_versions", "scan_rows"]


def readable_versions(store: Store, table: bytes, columns: dict[bytes, set[bytes] | None] | None) -> dict[bytes, int]:
    """Check a read: the table enabled, the families known; return their max_versions.

    :raises TableNotFoundError: no such table.
    :raises TableDisabledError: the table is disabled.
    :raises NoSuchFamilyError: ``columns`` names a family the table does not have.
    """
    if table == META_TABLE:
        return check_meta_families(columns)
    families = enabled_families(store, table)
    for fam in columns or ():
        if fam not in families:
            raise NoSuchFamilyError(f"table {table!r} has no column family {fam!r}")
    return {f.name: f.max_versions for f in families.values()}


def scan_rows(
    store: Store,
    table: bytes,
    max_versions: dict[bytes, int],
    *,
    start: bytes,
    stop: bytes,
    columns: dict[bytes, set[bytes] | None] | None,
    versions: int,
    max_ts: int | None,
    min_ts: int | None,
    reverse: bool,
    row_filter: Filter | None,
    chunk: int,
    raw: bool = False,
) -> Iterator[tuple[bytes, list[VisibleCell]]]:
    """Rows in key order (or reversed) with their visible cells (``raw``: their cells as kept,
    :func:`raw_cells`), after the filter, read ``chunk`` row keys at a time. The read is not
    checked here: see :func:`readable_versions`."""
    after: bytes | None = None
    while True:
        if table == META_TABLE:
            rows = meta_rows_in_range(store, start, stop, reverse=reverse, after=after, limit=chunk)
        else:
            rows = store.rows_in_range(table, start, stop, reverse=reverse, after=after, limit=chunk, markers=raw)
        for row in rows:
            if raw:
                cells = raw_cells(*store.stored(table, row), columns, versions, (min_ts, max_ts))
            else:
                cells = store.read_row(
                    table, row, columns, max_versions, versions=versions, max_ts=max_ts, min_ts=min_ts
                )
            if not cells:
                continue
            if row_filter is not None:
                kept = row_filter.apply(row, cells)
                if not kept:
                    continue
                cells = kept
            yield row, cells
        if len(rows) < chunk:
            return
        after = rows[-1]


def raw_cells(
    cells: Sequence[tuple[bytes, bytes, int, bytes]],
    markers: Sequence[tuple[bytes, bytes, int, int]],
    columns: dict[bytes, set[bytes] | None] | None,
    versions: int,
    time_range: tuple[int | None, int | None],
) -> list[VisibleCell]:
    """A row's cells as a raw scan returns them (HBase's ``RawScanQueryMatcher``): puts and
    delete markers together in HBase's cell order (family, qualifier, newest first, a marker
    before a put of the same timestamp; a family's markers have the empty qualifier), none
    masked, those of the columns asked for with timestamps in ``[min_ts, max_ts)``. Per
    column, ``versions`` puts at most, markers not counted; the column ends at the first put
    past them (``SEEK_NEXT_COL``), older markers with it. The family's ``max_versions`` does
    not bound a raw scan."""
    min_ts, max_ts = time_range
    kept = [(bytes(f), bytes(q), ts, int(CellType.Put), bytes(v)) for f, q, ts, v in cells]
    kept += [(bytes(f), bytes(q), ts, t, b"") for f, q, ts, t in markers]
    kept.sort(key=lambda c: (c[0], c[1], -c[2], -c[3]))
    out: list[VisibleCell] = []
    current: tuple[bytes, bytes] | None = None
    puts = 0
    for f, q, ts, kind, value in kept:
        if columns is not None:
            if f not in columns:
                continue
            quals = columns[f]
            if quals is not None and q not in quals:
                continue
        if (max_ts is not None and ts >= max_ts) or (min_ts is not None and ts < min_ts):
            continue
        if (f, q) != current:
            current, puts = (f, q), 0
        elif puts > versions:
            continue
        if kind == CellType.Put:
            puts += 1
            if puts > versions:
                continue
        out.append(VisibleCell(f, q, ts, value, kind))
    return out
