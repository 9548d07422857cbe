"""Cells in an RPC cell block, in ``KeyValueCodec`` (HBase's client codec for cells without
tags): each is its length (four bytes, big-endian), then the KeyValue: the key's length and the
value's, the row's length and the row, the family's length and the family, the qualifier, the
timestamp and the type; then the value. A WAL holds a cell without tags the same way.

Example::

    block = b"".join(map(keyvalue, cells))
    assert cells_of(block, "a scan of t") == cells
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

from walship.rpc.wire import RpcProtocolError
from walship.wal import entries
from walship.wal.model import Cell
from walship.wal.writer import encode_cell

__all__ = ["cells_of", "keyvalue", "results_of"]

_KV_HEAD = struct.Struct(">iiih")  # the cell's length, the key's, the value's, the row's
_TS_TYPE = struct.Struct(">qB")


def keyvalue(cell: Cell) -> bytes:
    """The cell in ``KeyValueCodec``, its tags left out: the WAL writer's encoding of the cell
    without its tags (:func:`walship.wal.writer.encode_cell`, which refuses a cell HBase cannot
    hold)."""
    return encode_cell(cell._replace(tags=()) if cell.tags else cell)


def cells_of(block: bytes, what: str) -> list[Cell]:
    """The cells of a ``KeyValueCodec`` block.

    :raises RpcProtocolError: bytes that are not whole cells (names ``what`` and the offset).
    """
    out = []
    pos, n = 0, len(block)
    while pos < n:
        if n - pos < 14:
            raise RpcProtocolError(f"{what}: a cell cut short at byte {pos} of the cell block")
        total, klen, vlen, rowlen = _KV_HEAD.unpack_from(block, pos)
        end = pos + 4 + total
        if total != 8 + klen + vlen or klen < 12 + rowlen or rowlen < 0 or vlen < 0 or end > n:
            raise RpcProtocolError(f"{what}: a cell that does not parse at byte {pos} of the cell block")
        k = pos + 14
        row = block[k : k + rowlen]
        k += rowlen
        flen = block[k]
        family = block[k + 1 : k + 1 + flen]
        kend = pos + 12 + klen
        qualifier = block[k + 1 + flen : kend - 9]
        if k + 1 + flen > kend - 9:
            raise RpcProtocolError(f"{what}: a cell whose family runs past its key at byte {pos} of the cell block")
        ts, ctype = _TS_TYPE.unpack_from(block, kend - 9)
        out.append(Cell(row, family, qualifier, ts, ctype, block[kend:end]))
        pos = end
    return out


def results_of(block: bytes, counts: Sequence[int], what: str) -> list[Sequence[Cell]]:
    """The cells of a block cut into results of ``counts`` cells each (a scan's
    ``cells_per_result``), by the compiled decoder when it is built.

    :raises RpcProtocolError: bytes that are not whole cells, or not as many as the counts say.
    """
    if entries.c_cellblock is not None:
        results = entries.c_cellblock(block, counts)
        if results is not None:
            return list(results)
    cells = cells_of(block, what)  # names what is wrong, or the counts do not match
    if sum(counts) != len(cells):
        raise RpcProtocolError(f"{what}: {len(cells)} cells for results of {sum(counts)}")
    out: list[Sequence[Cell]] = []
    at = 0
    for count in counts:
        out.append(cells[at : at + count])
        at += count
    return out
