"""The events a SEP subscription delivers: one :class:`SepEvent` per row and WAL entry.

A WAL entry (one WALEdit) may hold cells of several rows; its cells are grouped by row, in
the order the rows first appear, and each row's cells keep their WAL order. An event carries
where it came from (WAL name, byte offset, sequence id, write time) so that a listener can
deduplicate: delivery is at least once.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass

from walship.wal.model import Cell, CellType, WalEntry

__all__ = ["SepCell", "SepEvent", "events_of"]

_TYPE_NAMES = {int(t): t.name for t in CellType}


@dataclass(frozen=True)
class SepCell:
    """One cell of an event.

    :param type: HBase's type name: ``Put``, ``Delete``, ``DeleteColumn``, ``DeleteFamily``
        or ``DeleteFamilyVersion``.
    """

    family: bytes
    qualifier: bytes
    timestamp: int
    type: str
    value: bytes


@dataclass(frozen=True)
class SepEvent:
    """The cells of one row in one WAL entry.

    :param table: ``b"t"`` in the default namespace, ``b"ns:t"`` otherwise.
    :param cells: the row's cells of the entry, in WAL order.
    :param payload: the value of the subscription's payload column (its first Put cell in
        this event), or ``None``.
    :param write_time: the entry's WAL write time, epoch milliseconds.
    :param wal: the WAL file name; ``offset`` the entry's first byte in it.
    :param seqid: the entry's sequence id.
    :param cluster_ids: the clusters the edit has passed through (its origin first), as
        replication ships them.
    """

    table: bytes
    row: bytes
    cells: tuple[SepCell, ...]
    payload: bytes | None
    write_time: int
    wal: str
    offset: int
    seqid: int
    cluster_ids: tuple[uuid.UUID, ...]


def _payload(cells: Iterable[Cell], column: tuple[bytes, bytes] | None) -> bytes | None:
    if column is None:
        return None
    family, qualifier = column
    for cell in cells:
        if cell.family == family and cell.qualifier == qualifier and cell.type == CellType.Put:
            return cell.value
    return None


def events_of(
    entry: WalEntry,
    cells: Iterable[Cell],
    cluster_ids: tuple[uuid.UUID, ...],
    wal: str,
    payload_column: tuple[bytes, bytes] | None = None,
) -> list[SepEvent]:
    """The events of one entry: ``cells`` (what is left of it after filtering) grouped by row.

    :param payload_column: ``(family, qualifier)`` of the payload column, if any.
    """
    rows: dict[bytes, list[Cell]] = {}
    for cell in cells:
        rows.setdefault(cell.row, []).append(cell)
    key = entry.key
    return [
        SepEvent(
            table=key.table,
            row=row,
            cells=tuple(
                SepCell(c.family, c.qualifier, c.timestamp, _TYPE_NAMES.get(int(c.type), str(c.type)), c.value)
                for c in row_cells
            ),
            payload=_payload(row_cells, payload_column),
            write_time=key.write_time,
            wal=wal,
            offset=entry.offset,
            seqid=key.sequence_id,
            cluster_ids=cluster_ids,
        )
        for row, row_cells in rows.items()
    ]
