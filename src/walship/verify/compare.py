"""Pure comparison: the cells of one row on both sides, and two key-ordered row streams merged.

Example::

    diff = compare_row("t", b"row1", {(b"r", b"q", 100): b"v"}, {})
    assert diff is not None and diff.kind == ONLY_IN_SOURCE
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator, Mapping

from walship.verify.model import (
    CONTENT_DIFFERENT,
    ONLY_IN_PEER,
    ONLY_IN_SOURCE,
    CellKey,
    RowCells,
    RowDiff,
)

__all__ = ["compare_row", "limit_versions", "merge_rows"]

log = logging.getLogger(__name__)


def compare_row(
    table: str, row: bytes, source: Mapping[CellKey, bytes], peer: Mapping[CellKey, bytes]
) -> RowDiff | None:
    """How ``row`` differs between the sides, or ``None`` when they hold the same cells
    (coordinates and values). A side without cells does not have the row."""
    if source == peer:
        return None
    if not peer:
        return RowDiff(table, row, ONLY_IN_SOURCE, only_source=dict(source))
    if not source:
        return RowDiff(table, row, ONLY_IN_PEER, only_peer=dict(peer))
    diff = RowDiff(table, row, CONTENT_DIFFERENT)
    for key, value in source.items():
        other = peer.get(key)
        if other is None:
            diff.only_source[key] = value
        elif other != value:
            diff.different[key] = (value, other)
    for key, value in peer.items():
        if key not in source:
            diff.only_peer[key] = value
    return diff


def limit_versions(cells: RowCells, versions: Mapping[bytes, int]) -> RowCells:
    """The newest ``versions[family]`` versions of each column (a scan asked for the most
    versions any family keeps; families that keep fewer are cut here)."""
    if not cells:
        return cells
    by_column: dict[tuple[bytes, bytes], list[int]] = {}
    for f, q, ts in cells:
        by_column.setdefault((f, q), []).append(ts)
    out: RowCells = {}
    for (f, q), stamps in by_column.items():
        keep = versions.get(f, 0)
        for ts in sorted(stamps, reverse=True)[:keep]:
            out[(f, q, ts)] = cells[(f, q, ts)]
    return out


def merge_rows(
    source: Iterable[tuple[bytes, RowCells]], peer: Iterable[tuple[bytes, RowCells]]
) -> Iterator[tuple[bytes, RowCells, RowCells]]:
    """Two streams of ``(row, cells)`` in row-key order, merged: ``(row, source cells, peer
    cells)``, an empty dict for the side that lacks the row."""
    src: Iterator[tuple[bytes, RowCells]] = iter(source)
    dst: Iterator[tuple[bytes, RowCells]] = iter(peer)
    a = next(src, None)
    b = next(dst, None)
    while a is not None or b is not None:
        if b is None or (a is not None and a[0] < b[0]):
            assert a is not None
            yield a[0], a[1], {}
            a = next(src, None)
        elif a is None or b[0] < a[0]:
            yield b[0], {}, b[1]
            b = next(dst, None)
        else:
            yield a[0], a[1], b[1]
            a = next(src, None)
            b = next(dst, None)
