"""The two ends of a copy over Thrift2: a raw scan of the source and the writes into the peer.

A plain scan returns no delete markers, and hides what they mask. When later writes carry
timestamps older than a marker (client-set timestamps, reprocessing), the source keeps them
masked; copied without the marker, the peer would show them. So a copy reads as HBase's
CopyTable ``--all.cells`` does, with a raw scan: the ``_raw_`` attribute (HBase's
``Scan.RAW_ATTR``, ``Bytes.toBoolean``: one byte, ``0xFF`` true), which HBase 2.x's Thrift2
server copies from a ``TScan`` onto its ``Scan`` (``ThriftUtilities.scanFromThrift``); every
``TColumnValue`` then carries its cell's type (``resultFromHBase``), so the markers come back
as HBase's ``Cell.Type`` codes (:class:`~walship.wal.model.CellType`), every put version with
them, masked or not.

The peer gets the markers with their types and timestamps (``deleteMultiple``, each marker as
the Thrift2 sink says it: :func:`walship.sinks.hbase2.delete_column`), then the puts, each cell
with its own timestamp (``putMultiple``, encoded as the sink encodes it). HBase masks a cell
with a marker whatever came first (a marker masks the cells at or below its timestamp, as
the source's do), so the peer hides exactly what the source hides; the markers go first so
that, even halfway, the peer never shows a cell the source hides. Families with HBase's
``NEW_VERSION_BEHAVIOR`` (a marker masks only the puts written before it) are not told apart:
a raw scan does not say which came first.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from walship.errors import VerifyError, WalshipError
from walship.rpc.scan import ALL_VERSIONS, RAW_TRUE
from walship.rpc.scan import RAW_ATTRIBUTE as RPC_RAW_ATTRIBUTE
from walship.sinks.hbase2 import delete_column, joins
from walship.thrift.encoded import Cell as PutCell
from walship.thrift.encoded import encode_put_multiple
from walship.thrift.hbase2 import hbase2
from walship.verify.model import LATEST
from walship.verify.scan import DEFAULT_CACHING, Side
from walship.wal.model import CELL_TYPE_CODES, Cell, CellType

__all__ = ["ALL_VERSIONS", "RAW_ATTRIBUTE", "RAW_TRUE", "raw_scan", "write_rows"]

log = logging.getLogger(__name__)

#: HBase's ``Scan.RAW_ATTR`` as a ``TScan`` attribute key (:mod:`walship.rpc.scan` has the
#: rest: ``RAW_TRUE``, ``ALL_VERSIONS``).
RAW_ATTRIBUTE = RPC_RAW_ATTRIBUTE.encode()

_PUT = int(CellType.Put)


def _cells(table: str, result: Any) -> list[Cell]:
    """A raw result's cells (a server that sends no type sends puts).

    :raises VerifyError: a cell of a type no WAL holds.
    """
    row = bytes(result.row)
    out = []
    for cv in result.columnValues or []:
        kind = _PUT if cv.type is None else int(cv.type)
        if kind not in CELL_TYPE_CODES:
            raise VerifyError(
                f"the source cluster: row {row!r} of table {table} has a cell of unknown type {kind} "
                f"(family {bytes(cv.family)!r}, timestamp {cv.timestamp})"
            )
        out.append(
            Cell(row, bytes(cv.family), bytes(cv.qualifier or b""), int(cv.timestamp), kind, bytes(cv.value or b""))
        )
    return out


def raw_scan(
    source: Side,
    table: str,
    start: bytes,
    stop: bytes,
    families: Iterable[bytes],
    min_ts: int = 0,
    *,
    caching: int = DEFAULT_CACHING,
) -> Iterator[tuple[bytes, list[Cell]]]:
    """Rows of ``[start, stop)`` of ``table``, in key order, with their cells of ``families``
    as the source keeps them: every put version (masked or not) and every delete marker, with
    timestamps at or above ``min_ts``, in HBase's cell order.

    :raises VerifyError: the server refused (the message names the table).
    :raises VerifyUnavailableError: the server did not answer.
    """
    tscan = hbase2.TScan(
        startRow=start or None,
        stopRow=stop or None,
        columns=[hbase2.TColumn(family=f) for f in sorted(families)],
        caching=caching,
        maxVersions=ALL_VERSIONS,
        timeRange=hbase2.TTimeRange(minStamp=min_ts, maxStamp=LATEST),
        attributes={RAW_ATTRIBUTE: RAW_TRUE},
    )
    sid = source.call(f"open a raw scanner on table {table}", lambda c: c.openScanner(table.encode(), tscan))
    try:
        while True:
            results = source.call(f"raw scan table {table}", lambda c: c.getScannerRows(sid, caching))
            if not results:
                return
            for result in results:
                if result.row is not None and result.columnValues:
                    yield bytes(result.row), _cells(table, result)
    finally:
        try:
            source.call(f"close scanner {sid}", lambda c: c.closeScanner(sid))
        except WalshipError as exc:  # the scan's own error, if any, is the one to see
            log.debug("%s: closing scanner %s: %s", source.label, sid, exc)


def _deletes(rows: Sequence[tuple[bytes, Sequence[Cell]]]) -> list[Any]:
    """The rows' markers as ``TDelete`` s: a row's markers of one type together, but never two
    ``DELETE_FAMILY`` of one family in one (HBase's ``Delete.addFamily`` keeps only the last)."""
    out: list[Any] = []
    for row, cells in rows:
        by_type: dict[int, Any] = {}
        for cell in cells:
            if cell.type == _PUT:
                continue
            delete_type, column = delete_column(cell)
            tdelete = by_type.get(delete_type)
            if tdelete is None or not joins(tdelete, delete_type, column):
                tdelete = by_type[delete_type] = hbase2.TDelete(row=row, columns=[], deleteType=delete_type)
                out.append(tdelete)
            tdelete.columns.append(column)
    return out


def write_rows(peer: Side, table: str, rows: Sequence[tuple[bytes, Sequence[Cell]]]) -> int:
    """Write the rows' cells into the peer: the delete markers (``deleteMultiple``), then the
    puts (``putMultiple``), each with its own type and timestamp; the puts written.

    :raises VerifyError: the peer refused (an unknown family), or left deletes undone.
    :raises VerifyUnavailableError: the peer did not answer.
    """
    name = table.encode()
    deletes = _deletes(rows)
    if deletes:
        failed = peer.call(
            f"write {len(deletes)} delete(s) into table {table}", lambda c: c.deleteMultiple(name, deletes)
        )
        if failed:
            raise VerifyError(f"{peer.label}: {len(failed)} delete(s) into table {table} were not applied")
    puts: list[tuple[bytes, Sequence[PutCell]]] = [
        (row, put) for row, cells in rows if (put := [c for c in cells if c.type == _PUT])
    ]
    if puts:
        encoded = encode_put_multiple(peer.options.protocol, name, puts, {})
        peer.call(f"put {len(puts)} row(s) into table {table}", lambda c: c.send_encoded(encoded))
    return sum(len(put) for _, put in puts)
