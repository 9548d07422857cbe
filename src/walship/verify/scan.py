"""One side of the comparison over Thrift2: region boundaries, scans of a row range, one
row read again, and the mutations of ``--repair``.

A :class:`Side` is one THBaseService server of a cluster (the first of its servers that
answers). Every error becomes a :class:`~walship.errors.VerifyError` naming the side, the
server and what was asked; a server that does not answer, a
:class:`~walship.errors.VerifyUnavailableError`.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from walship.errors import VerifyError, VerifyUnavailableError
from walship.thrift.conn import (
    THRIFT2_REFUSALS,
    TRANSPORT_ERRORS,
    ThriftOptions,
    ThriftSession,
    describe_error,
    open_thrift2,
)
from walship.thrift.hbase2 import hbase2
from walship.verify.compare import limit_versions
from walship.verify.model import CellKey, RowCells

__all__ = ["DEFAULT_CACHING", "Side"]

log = logging.getLogger(__name__)

#: Rows fetched per getScannerRows call.
DEFAULT_CACHING = 1000


def _cells(result: Any) -> RowCells:
    return {
        (bytes(cv.family), bytes(cv.qualifier or b""), int(cv.timestamp)): bytes(cv.value or b"")
        for cv in result.columnValues or []
    }


class Side(ThriftSession):
    """A cluster's Thrift2 server: the first of ``servers`` that answers.

    :param label: who the servers are, for messages (``the source cluster``, ``peer 1``).
    :param hint: where they are configured, for messages.
    :raises VerifyUnavailableError: no server answered.
    """

    service = "Thrift2"
    opener = staticmethod(open_thrift2)
    refusals = THRIFT2_REFUSALS
    refused = VerifyError
    unavailable = VerifyUnavailableError

    def __init__(
        self,
        servers: Sequence[tuple[str, int]],
        *,
        label: str,
        hint: str,
        options: ThriftOptions | None = None,
        timeout_ms: int = 60_000,
        caching: int = DEFAULT_CACHING,
    ) -> None:
        super().__init__(servers, label=label, hint=hint, options=options, timeout_ms=timeout_ms)
        self.caching = caching

    # -- reading -------------------------------------------------------------------------------

    def region_ranges(self, table: str) -> list[tuple[bytes, bytes]]:
        """The ``(start, end)`` keys of the table's regions, in key order."""
        locations = self.call(f"list the regions of table {table}", lambda c: c.getAllRegionLocations(table.encode()))
        ranges = sorted(
            (bytes(loc.regionInfo.startKey or b""), bytes(loc.regionInfo.endKey or b"")) for loc in locations or []
        )
        return ranges or [(b"", b"")]

    def scan(
        self,
        table: str,
        start: bytes,
        stop: bytes,
        versions: Mapping[bytes, int],
        min_ts: int,
        max_ts: int,
    ) -> Iterator[tuple[bytes, RowCells]]:
        """Rows of ``[start, stop)`` with their cells of the ``versions`` families (each to
        its number of versions) whose timestamps are in ``[min_ts, max_ts)``, in key order.
        Rows without such cells are not returned."""
        tscan = hbase2.TScan(
            startRow=start or None,
            stopRow=stop or None,
            columns=[hbase2.TColumn(family=f) for f in sorted(versions)],
            caching=self.caching,
            maxVersions=max(versions.values()),
            timeRange=hbase2.TTimeRange(minStamp=min_ts, maxStamp=max_ts),
        )
        what = f"scan table {table}"
        sid = self.call(f"open a scanner on table {table}", lambda c: c.openScanner(table.encode(), tscan))
        try:
            while True:
                results = self.call(what, lambda c: c.getScannerRows(sid, self.caching))
                if not results:
                    return
                for result in results:
                    if result.row is None:
                        continue
                    cells = limit_versions(_cells(result), versions)
                    if cells:
                        yield bytes(result.row), cells
        finally:
            if self._conn is not None:
                try:
                    self._conn.client.closeScanner(sid)
                except self.refusals + TRANSPORT_ERRORS as exc:
                    log.debug("%s: closing scanner %s: %s", self.label, sid, describe_error(exc))

    def get(self, table: str, row: bytes, versions: Mapping[bytes, int], min_ts: int, max_ts: int) -> RowCells:
        """One row's cells, read as :meth:`scan` reads them."""
        tget = hbase2.TGet(
            row=row,
            columns=[hbase2.TColumn(family=f) for f in sorted(versions)],
            maxVersions=max(versions.values()),
            timeRange=hbase2.TTimeRange(minStamp=min_ts, maxStamp=max_ts),
        )
        result = self.call(f"read row {row!r} of table {table}", lambda c: c.get(table.encode(), tget))
        return limit_versions(_cells(result), versions)

    # -- repairing -------------------------------------------------------------------------------

    def put_cells(self, table: str, row: bytes, cells: Mapping[CellKey, bytes]) -> None:
        """Put ``cells`` into ``row``, each with its own timestamp."""
        if not cells:
            return
        values = [
            hbase2.TColumnValue(family=f, qualifier=q, value=v, timestamp=ts) for (f, q, ts), v in sorted(cells.items())
        ]
        tput = hbase2.TPut(row=row, columnValues=values)
        self.call(
            f"put {len(values)} cell(s) into row {row!r} of table {table}",
            lambda c: c.putMultiple(table.encode(), [tput]),
        )

    def put_rows(self, table: str, rows: Sequence[tuple[bytes, Mapping[CellKey, bytes]]]) -> None:
        """Put several rows in one call, each cell with its own timestamp (a copy's batch)."""
        puts = [
            hbase2.TPut(
                row=row,
                columnValues=[
                    hbase2.TColumnValue(family=f, qualifier=q, value=v, timestamp=ts) for (f, q, ts), v in cells.items()
                ],
            )
            for row, cells in rows
            if cells
        ]
        if puts:
            self.call(f"put {len(puts)} row(s) into table {table}", lambda c: c.putMultiple(table.encode(), puts))

    def delete_versions(self, table: str, row: bytes, cells: Sequence[CellKey]) -> None:
        """Delete exactly these versions (``DELETE_COLUMN`` at each cell's timestamp)."""
        if not cells:
            return
        deletes = [
            hbase2.TDelete(
                row=row,
                columns=[hbase2.TColumn(family=f, qualifier=q, timestamp=ts)],
                deleteType=hbase2.TDeleteType.DELETE_COLUMN,
            )
            for f, q, ts in sorted(cells)
        ]
        failed = self.call(
            f"delete {len(deletes)} version(s) of row {row!r} of table {table}",
            lambda c: c.deleteMultiple(table.encode(), deletes),
        )
        if failed:
            raise VerifyError(f"{self.label}: {len(failed)} delete(s) of row {row!r} of table {table} were not applied")
