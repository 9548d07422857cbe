"""The Thrift1 API (HBase's ``Hbase`` service) as happybase uses it, on a :class:`MiniCluster`,
from happybase's own ``Hbase.thrift``; :mod:`walship_testing.minicluster.thrift` serves it."""

from __future__ import annotations

import itertools
import logging
import threading
from collections.abc import Iterator, Sequence
from typing import Any

from thriftpy2.thrift import TApplicationException

from walship.errors import BadRequestError, FilterSyntaxError
from walship.thrift.hbase1 import Hbase_thrift
from walship_testing.minicluster.cluster import LATEST_TIMESTAMP, MiniCluster, RowMutation
from walship_testing.minicluster.filters import parse_filter
from walship_testing.minicluster.schema import HBASE_FOREVER, check_table_name, family_setting
from walship_testing.minicluster.store import Family
from walship_testing.minicluster.thrift1_convert import (
    illegal_argument,
    parse_columns,
    prefix_end,
    row_result,
    tcell,
    thrift_errors,
    thrift_timestamp,
)

__all__ = ["HbaseHandler"]

log = logging.getLogger(__name__)


class HbaseHandler:
    """The ``Hbase`` service's calls, on a :class:`MiniCluster`."""

    def __init__(self, cluster: MiniCluster) -> None:
        self.cluster = cluster
        self._scanners: dict[int, tuple[Iterator[Any], threading.Lock]] = {}
        self._ids = itertools.count(1)
        self._scanner_lock = threading.Lock()

    # -- tables ----------------------------------------------------------------------------------

    @thrift_errors
    def getTableNames(self) -> list[bytes]:
        assert self.cluster.store is not None
        return self.cluster.store.table_names()

    @thrift_errors
    def isTableEnabled(self, tableName: bytes) -> bool:
        self.cluster.table_families(tableName)
        assert self.cluster.store is not None
        return bool(self.cluster.store.table_enabled(tableName))

    @thrift_errors
    def enableTable(self, tableName: bytes) -> None:
        self.cluster.set_enabled(tableName, True)

    @thrift_errors
    def disableTable(self, tableName: bytes) -> None:
        self.cluster.set_enabled(tableName, False)

    @thrift_errors
    @illegal_argument
    def createTable(self, tableName: bytes, columnFamilies: list[Any]) -> None:
        try:
            check_table_name(tableName)
        except BadRequestError as exc:  # HBase: TableName.valueOf's IllegalArgumentException, uncaught
            raise TApplicationException(
                TApplicationException.INTERNAL_ERROR, f"Internal error processing createTable: {exc}"
            ) from None
        families = []
        for cd in columnFamilies or []:
            name = (cd.name or b"").rstrip(b":")
            descriptor = {
                "compression": cd.compression,
                "inMemory": cd.inMemory,
                "bloomFilterType": cd.bloomFilterType,
                "blockCacheEnabled": cd.blockCacheEnabled,
                "timeToLive": cd.timeToLive,
            }
            families.append(Family(name, cd.maxVersions if cd.maxVersions is not None else 3, 0, descriptor))
        self.cluster.create_table(tableName, families)

    @thrift_errors
    def deleteTable(self, tableName: bytes) -> None:
        self.cluster.delete_table(tableName)

    @thrift_errors
    def compact(self, tableNameOrRegionName: bytes) -> None:
        self.cluster.table_families(tableNameOrRegionName)

    @thrift_errors
    def majorCompact(self, tableNameOrRegionName: bytes) -> None:
        self.cluster.table_families(tableNameOrRegionName)
        with self.cluster.lock:
            assert self.cluster.store is not None
            self.cluster.store.compact(tableNameOrRegionName)

    @thrift_errors
    def getColumnDescriptors(self, tableName: bytes) -> dict[bytes, Any]:
        """``colDescFromHbase``: the family's settings, HBase's defaults where it has none (a
        time to live of -1 given to Thrift1 is FOREVER, as HBase stores it)."""
        out = {}
        for f in self.cluster.table_families(tableName).values():
            ttl = family_setting(f, "timeToLive")
            out[f.name + b":"] = Hbase_thrift.ColumnDescriptor(
                name=f.name + b":",
                maxVersions=f.max_versions,
                compression=str(family_setting(f, "compression")),
                inMemory=bool(family_setting(f, "inMemory")),
                bloomFilterType=str(family_setting(f, "bloomFilterType")),
                blockCacheEnabled=bool(family_setting(f, "blockCacheEnabled")),
                timeToLive=ttl if isinstance(ttl, int) and ttl > 0 else HBASE_FOREVER,
            )
        return out

    @thrift_errors
    def getTableRegions(self, tableName: bytes) -> list[Any]:
        self.cluster.table_families(tableName)
        assert self.cluster.store is not None
        out = []
        for r in self.cluster.store.regions(tableName):
            owner = self.cluster.owner.get(r.encoded)
            out.append(
                Hbase_thrift.TRegionInfo(
                    startKey=r.start_key,
                    endKey=r.end_key,
                    id=r.region_id,
                    name=b"%s,%s,%d.%s." % (r.table, r.start_key, r.region_id, r.encoded.encode()),
                    version=1,
                    serverName=owner.name.host.encode() if owner else b"",
                    port=owner.name.port if owner else 0,
                )
            )
        return out

    # -- reads -------------------------------------------------------------------------------------

    def _get_cells(self, table: bytes, row: bytes, column: bytes, versions: int, max_ts: int | None) -> list[Any]:
        if versions < 1:
            raise BadRequestError(f"numVersions must be >= 1, got {versions}")
        cells = self.cluster.read_row(table, row, parse_columns([column]), versions=versions, max_ts=max_ts)
        return [tcell(c) for c in cells]

    @thrift_errors
    def get(self, tableName: bytes, row: bytes, column: bytes, attributes: dict[bytes, bytes]) -> list[Any]:
        return self._get_cells(tableName, row, column, 1, None)

    @thrift_errors
    def getVer(self, tableName: bytes, row: bytes, column: bytes, numVersions: int, attributes: Any) -> list[Any]:
        return self._get_cells(tableName, row, column, numVersions, None)

    @thrift_errors
    def getVerTs(
        self, tableName: bytes, row: bytes, column: bytes, timestamp: int, numVersions: int, attributes: Any
    ) -> list[Any]:
        return self._get_cells(tableName, row, column, numVersions, timestamp)

    def _rows(
        self, table: bytes, rows: Sequence[bytes], columns: Sequence[bytes] | None, max_ts: int | None
    ) -> list[Any]:
        spec = parse_columns(columns)
        out = []
        for row in rows:
            cells = self.cluster.read_row(table, row, spec, max_ts=max_ts)
            if cells:
                out.append(row_result(row, cells, False))
        return out

    @thrift_errors
    def getRow(self, tableName: bytes, row: bytes, attributes: Any) -> list[Any]:
        return self._rows(tableName, [row], None, None)

    @thrift_errors
    def getRowWithColumns(self, tableName: bytes, row: bytes, columns: list[bytes], attributes: Any) -> list[Any]:
        return self._rows(tableName, [row], columns, None)

    @thrift_errors
    def getRowTs(self, tableName: bytes, row: bytes, timestamp: int, attributes: Any) -> list[Any]:
        return self._rows(tableName, [row], None, timestamp)

    @thrift_errors
    def getRowWithColumnsTs(
        self, tableName: bytes, row: bytes, columns: list[bytes], timestamp: int, attributes: Any
    ) -> list[Any]:
        return self._rows(tableName, [row], columns, timestamp)

    @thrift_errors
    def getRows(self, tableName: bytes, rows: list[bytes], attributes: Any) -> list[Any]:
        return self._rows(tableName, rows, None, None)

    @thrift_errors
    def getRowsWithColumns(
        self, tableName: bytes, rows: list[bytes], columns: list[bytes], attributes: Any
    ) -> list[Any]:
        return self._rows(tableName, rows, columns, None)

    @thrift_errors
    def getRowsTs(self, tableName: bytes, rows: list[bytes], timestamp: int, attributes: Any) -> list[Any]:
        return self._rows(tableName, rows, None, timestamp)

    @thrift_errors
    def getRowsWithColumnsTs(
        self, tableName: bytes, rows: list[bytes], columns: list[bytes], timestamp: int, attributes: Any
    ) -> list[Any]:
        return self._rows(tableName, rows, columns, timestamp)

    # -- writes ------------------------------------------------------------------------------------

    @staticmethod
    def _row_mutation(row: bytes, mutations: Sequence[Any]) -> RowMutation:
        rm = RowMutation(row)
        for m in mutations or []:
            fam, sep, qual = (m.column or b"").partition(b":")
            if not fam:
                raise BadRequestError(f"row {row!r}: invalid column {m.column!r}")
            if m.isDelete:
                rm.deletes.append((fam, qual if sep else None))
            elif not sep:
                # as HBase's Thrift1 server: the put is left out, with a warning
                log.warning(
                    "row %r: no column qualifier in %r, a put is left out (a delete takes a family)", row, m.column
                )
            else:
                rm.puts.append((fam, qual, m.value if m.value is not None else b""))
        return rm

    def _mutate(
        self,
        table: bytes,
        batches: Sequence[tuple[bytes, Sequence[Any]]],
        timestamp: int | None,
        attributes: dict[bytes, bytes] | None,
        puts_first: bool = False,
    ) -> None:
        rows = [self._row_mutation(row, muts) for row, muts in batches]  # malformed: IllegalArgument
        try:
            self.cluster.mutate(table, rows, timestamp=timestamp, attributes=attributes or {}, puts_first=puts_first)
        except BadRequestError as exc:
            # refused where HBase's region server refuses it (a bad _cs.id): HBase's Thrift
            # server answers the client's RetriesExhaustedWithDetailsException as an IOError
            raise Hbase_thrift.IOError(message=str(exc)) from None

    @thrift_errors
    @illegal_argument
    def mutateRow(self, tableName: bytes, row: bytes, mutations: list[Any], attributes: Any) -> None:
        self._mutate(tableName, [(row, mutations)], None, attributes)

    @thrift_errors
    @illegal_argument
    def mutateRowTs(self, tableName: bytes, row: bytes, mutations: list[Any], timestamp: int, attributes: Any) -> None:
        self._mutate(tableName, [(row, mutations)], thrift_timestamp(timestamp), attributes)

    @thrift_errors
    @illegal_argument
    def mutateRows(self, tableName: bytes, rowBatches: list[Any], attributes: Any) -> None:
        self._mutate(tableName, [(b.row, b.mutations) for b in rowBatches or []], None, attributes, puts_first=True)

    @thrift_errors
    @illegal_argument
    def mutateRowsTs(self, tableName: bytes, rowBatches: list[Any], timestamp: int, attributes: Any) -> None:
        self._mutate(
            tableName,
            [(b.row, b.mutations) for b in rowBatches or []],
            thrift_timestamp(timestamp),
            attributes,
            puts_first=True,
        )

    @thrift_errors
    def deleteAll(self, tableName: bytes, row: bytes, column: bytes, attributes: Any) -> None:
        self.deleteAllTs(tableName, row, column, LATEST_TIMESTAMP, attributes)

    @thrift_errors
    def deleteAllTs(self, tableName: bytes, row: bytes, column: bytes, timestamp: int, attributes: Any) -> None:
        fam, sep, qual = column.partition(b":")
        rm = RowMutation(row, deletes=[(fam, qual if sep else None)])
        self.cluster.mutate(tableName, [rm], timestamp=thrift_timestamp(timestamp), attributes=attributes or {})

    @thrift_errors
    def deleteAllRow(self, tableName: bytes, row: bytes, attributes: Any) -> None:
        self.deleteAllRowTs(tableName, row, LATEST_TIMESTAMP, attributes)

    @thrift_errors
    def deleteAllRowTs(self, tableName: bytes, row: bytes, timestamp: int, attributes: Any) -> None:
        families = self.cluster.table_families(tableName)
        rm = RowMutation(row, deletes=[(f, None) for f in families])
        self.cluster.mutate(tableName, [rm], timestamp=thrift_timestamp(timestamp), attributes=attributes or {})

    @thrift_errors
    @illegal_argument
    def atomicIncrement(self, tableName: bytes, row: bytes, column: bytes, value: int) -> int:
        fam, sep, qual = column.partition(b":")
        if not fam or not sep:
            raise BadRequestError(f"atomicIncrement needs family:qualifier, got {column!r}")
        try:
            return self.cluster.increment(tableName, row, fam, qual, value)
        except BadRequestError as exc:  # not a long: HBase's region server refuses it, an IOError
            raise Hbase_thrift.IOError(message=f"DoNotRetryIOException: {exc}") from None

    @thrift_errors
    def increment(self, increment: Any) -> None:
        self.atomicIncrement(increment.table, increment.row, increment.column, increment.ammount)

    @thrift_errors
    def incrementRows(self, increments: list[Any]) -> None:
        for inc in increments or []:
            self.increment(inc)

    # -- scanners ----------------------------------------------------------------------------------

    def _open(
        self,
        table: bytes,
        *,
        start: bytes = b"",
        stop: bytes = b"",
        columns: Sequence[bytes] | None = None,
        max_ts: int | None = None,
        filter_string: bytes | None = None,
        batch: int | None = None,
        sort_columns: bool = False,
        reverse: bool = False,
    ) -> int:
        try:
            row_filter = parse_filter(filter_string.decode("latin-1")) if filter_string else None
        except FilterSyntaxError as exc:
            # HBase's ParseFilter throws an unchecked exception its Thrift1 handler does not
            # catch: the client gets an internal error, whatever the call
            log.info("scanner refused: %s", exc)
            raise TApplicationException(
                TApplicationException.INTERNAL_ERROR, "Internal error processing scannerOpenWithScan"
            ) from None
        if batch is not None and batch < 0:
            raise BadRequestError(f"TScan.batchSize must be >= 0, got {batch}")
        rows = self.cluster.scan(
            table,
            start=start,
            stop=stop,
            columns=parse_columns(columns),
            max_ts=max_ts,
            reverse=reverse,
            row_filter=row_filter,
        )

        def results() -> Iterator[Any]:
            for row, cells in rows:
                if batch:
                    for i in range(0, len(cells), batch):
                        yield row_result(row, cells[i : i + batch], sort_columns)
                else:
                    yield row_result(row, cells, sort_columns)

        with self._scanner_lock:
            sid = next(self._ids)
            self._scanners[sid] = (results(), threading.Lock())
        return sid

    @thrift_errors
    def scannerOpenWithScan(self, tableName: bytes, scan: Any, attributes: Any) -> int:
        return self._open(
            tableName,
            start=scan.startRow or b"",
            stop=scan.stopRow or b"",
            columns=scan.columns,
            max_ts=scan.timestamp,
            filter_string=scan.filterString,
            batch=scan.batchSize,
            sort_columns=bool(scan.sortColumns),
            reverse=bool(scan.reversed),
        )

    @thrift_errors
    def scannerOpen(self, tableName: bytes, startRow: bytes, columns: list[bytes], attributes: Any) -> int:
        return self._open(tableName, start=startRow or b"", columns=columns)

    @thrift_errors
    def scannerOpenWithStop(
        self, tableName: bytes, startRow: bytes, stopRow: bytes, columns: list[bytes], attributes: Any
    ) -> int:
        return self._open(tableName, start=startRow or b"", stop=stopRow or b"", columns=columns)

    @thrift_errors
    def scannerOpenWithPrefix(
        self, tableName: bytes, startAndPrefix: bytes, columns: list[bytes], attributes: Any
    ) -> int:
        return self._open(tableName, start=startAndPrefix, stop=prefix_end(startAndPrefix), columns=columns)

    @thrift_errors
    def scannerOpenTs(
        self, tableName: bytes, startRow: bytes, columns: list[bytes], timestamp: int, attributes: Any
    ) -> int:
        return self._open(tableName, start=startRow or b"", columns=columns, max_ts=timestamp)

    @thrift_errors
    def scannerOpenWithStopTs(
        self, tableName: bytes, startRow: bytes, stopRow: bytes, columns: list[bytes], timestamp: int, attributes: Any
    ) -> int:
        return self._open(tableName, start=startRow or b"", stop=stopRow or b"", columns=columns, max_ts=timestamp)

    def _scanner(self, sid: int) -> tuple[Iterator[Any], threading.Lock]:
        with self._scanner_lock:
            found = self._scanners.get(sid)
        if found is None:
            raise Hbase_thrift.IllegalArgument(message=f"scanner ID {sid} is invalid")
        return found

    @thrift_errors
    def scannerGetList(self, id: int, nbRows: int) -> list[Any]:
        if nbRows < 0:
            raise Hbase_thrift.IllegalArgument(message=f"nbRows must be >= 0, got {nbRows}")
        it, lock = self._scanner(id)
        with lock:
            return list(itertools.islice(it, nbRows))

    @thrift_errors
    def scannerGet(self, id: int) -> list[Any]:
        return self.scannerGetList(id, 1)

    @thrift_errors
    def scannerClose(self, id: int) -> None:
        with self._scanner_lock:
            if self._scanners.pop(id, None) is None:
                raise Hbase_thrift.IllegalArgument(message=f"scanner ID {id} is invalid")

    # -- not offered -------------------------------------------------------------------------------

    def _unsupported(self, *args: Any, **kwargs: Any) -> Any:
        raise Hbase_thrift.IOError(message="not supported by the walship minicluster")

    getRowOrBefore = getRegionInfo = append = checkAndPut = _unsupported
