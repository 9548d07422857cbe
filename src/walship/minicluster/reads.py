"""The minicluster's read path: the checks a read makes, and scans over the store.

Reads take no cluster lock. A scan checks the table and its families when it is made
(:func:`readable_versions`), then reads the rows in chunks as its iterator is consumed
(:func:`scan_rows`). ``hbase:meta`` reads as any table, its rows in meta's own order
(:mod:`walship.minicluster.meta`).
"""

from __future__ import annotations

from collections.abc import Iterator

from walship.errors import NoSuchFamilyError
from walship.minicluster.filters import Filter
from walship.minicluster.meta import META_TABLE, check_meta_families, meta_rows_in_range
from walship.minicluster.store import Store, VisibleCell
from walship.minicluster.tables import enabled_families

__all__ = ["readable_versions", "scan_rows"]


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
) -> Iterator[tuple[bytes, list[VisibleCell]]]:
    """Rows in key order (or reversed) with their visible cells, after the filter, read
    ``chunk`` row keys at a time. The read is not checked here: see :func:`readable_versions`."""
    after: bytes | None = None
    while True:
        if table == META_TABLE:
            rows = meta_rows_in_range(store, start, stop, reverse=reverse, after=after, limit=chunk)
        else:
            rows = store.rows_in_range(table, start, stop, reverse=reverse, after=after, limit=chunk)
        for row in rows:
            cells = store.read_row(table, row, columns, max_versions, versions=versions, max_ts=max_ts, min_ts=min_ts)
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
