"""HBase's second Thrift service, ``THBaseService`` ("Thrift2"), on a :class:`MiniCluster`.

The same cluster as the Thrift1 handler: the same store and WALs, so happybase sees what
Thrift2 writes and the other way round. Writes keep what Thrift2 can say and Thrift1 cannot:
per-cell timestamps and the four delete types, each landing in the WAL with its own type and
timestamp (see :mod:`walship_testing.minicluster.thrift2_convert` and :class:`RowEdit`). The
``_cs.id`` attribute of a mutation sets the cluster ids of its WAL entry. A ``TScan`` whose
``_raw_`` attribute is true (``b"\\xff"``, as ``Scan.setRaw(true)`` sets it) is raw, as on HBase:
every put version, masked or not, and the delete markers, each ``TColumnValue`` with its type.

Errors are raised as HBase's Thrift2 server raises them: ``TIOError`` with the message of
the failure (naming the table, family or row), ``TIllegalArgument`` for an unknown scanner id.
A write to a READONLY table gets HBase's own message (see
:mod:`walship_testing.minicluster.readonly`).
"""

from __future__ import annotations

import functools
import itertools
import logging
import re
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar

from thriftpy2.thrift import TApplicationException

from walship.errors import (
    BadRequestError,
    ConfigError,
    HandlerFailureError,
    MiniClusterError,
    NoSuchFamilyError,
    ReadOnlyTableError,
    TableDisabledError,
    TableNotFoundError,
)
from walship.thrift.hbase2 import hbase2
from walship_testing.minicluster import routing
from walship_testing.minicluster.cluster import MiniCluster, RowEdit
from walship_testing.minicluster.readonly import thrift2_message
from walship_testing.minicluster.regionserver import RegionServer
from walship_testing.minicluster.schema import check_table_name
from walship_testing.minicluster.store import Region, Store, VisibleCell
from walship_testing.minicluster.thrift2_convert import (
    ScanSpec,
    cluster_ids,
    delete_cells,
    family_from_thrift,
    get_spec,
    put_cells,
    result,
    scan_spec,
    table_bytes,
    table_descriptor_to_thrift,
    table_matches,
    text_map,
    thrift_table_name,
)

__all__ = ["THBaseHandler"]

log = logging.getLogger(__name__)

F = TypeVar("F", bound=Callable[..., Any])


def _tio_errors(func: F) -> F:
    """Answer walship's errors with ``TIOError``, as HBase's handler answers IOExceptions."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except HandlerFailureError as exc:
            raise TApplicationException(
                TApplicationException.INTERNAL_ERROR, f"Internal error processing {func.__name__}: {exc}"
            ) from None
        except ReadOnlyTableError as exc:
            raise hbase2.TIOError(message=thrift2_message(exc, func.__name__)) from None
        except (MiniClusterError, ConfigError) as exc:  # ConfigError: a filter string that does not parse
            raise hbase2.TIOError(message=f"{type(exc).__name__}: {exc}") from None

    return wrapper  # type: ignore[return-value]


class _Failing(Iterator[Any]):
    """A scanner whose every read raises ``error``."""

    def __init__(self, error: Exception) -> None:
        self.error = error

    def __next__(self) -> Any:
        raise self.error


def _compare(op: int, value: bytes, current: bytes) -> bool:
    """HBase's ``HRegion.matches``: the given value compared with the stored one."""
    ops = hbase2.TCompareOperator
    sign = (value > current) - (value < current)
    if op == ops.LESS:
        return sign < 0
    if op == ops.LESS_OR_EQUAL:
        return sign <= 0
    if op == ops.EQUAL:
        return sign == 0
    if op == ops.NOT_EQUAL:
        return sign != 0
    if op == ops.GREATER_OR_EQUAL:
        return sign >= 0
    if op == ops.GREATER:
        return sign > 0
    raise BadRequestError(f"unknown compare operator {ops._VALUES_TO_NAMES.get(op, op)} for a value check")


def check_matches(op: int, value: bytes | None, current: VisibleCell | None) -> bool:
    """HBase 2.x's ``checkAndMutate`` check (after HBASE-26742): with an empty value the
    column must be missing or empty (``NOT_EQUAL``: present and not empty);
    otherwise the column must exist and compare as ``op`` says."""
    if op not in hbase2.TCompareOperator._VALUES_TO_NAMES:
        raise BadRequestError(f"unknown compare operator {op!r}")
    wanted: bool = op != hbase2.TCompareOperator.NOT_EQUAL
    if not value:
        return wanted if current is None else (current.value == b"") == wanted
    return current is not None and _compare(op, value, current.value)


class THBaseHandler:
    """The ``THBaseService`` calls, on a :class:`MiniCluster`."""

    def __init__(self, cluster: MiniCluster) -> None:
        self.cluster = cluster
        self._scanners: dict[int, tuple[Iterator[Any], threading.Lock]] = {}
        self._ids = itertools.count(1)
        self._scanner_lock = threading.Lock()

    @property
    def _store(self) -> Store:
        if self.cluster.store is None:
            raise TableDisabledError("the cluster is not running")
        return self.cluster.store

    # -- reads -------------------------------------------------------------------------------------

    def _get(self, table: bytes, tget: Any) -> tuple[bytes, list[VisibleCell]]:
        if tget is None:
            raise BadRequestError("TGet is required")
        spec = get_spec(tget)
        cells = self.cluster.read_row(
            table, tget.row, spec.columns, versions=spec.versions, max_ts=spec.max_ts, min_ts=spec.min_ts
        )
        if cells and spec.row_filter is not None:
            cells = spec.row_filter.apply(tget.row, cells) or []
        return tget.row, cells

    @_tio_errors
    def exists(self, table: bytes, tget: Any) -> bool:
        return bool(self._get(table, tget)[1])

    @_tio_errors
    def get(self, table: bytes, tget: Any) -> Any:
        return result(*self._get(table, tget))

    @_tio_errors
    def getMultiple(self, table: bytes, tgets: list[Any]) -> list[Any]:
        return [result(*self._get(table, tget)) for tget in tgets or []]

    # -- writes ------------------------------------------------------------------------------------

    @staticmethod
    def _put_edit(tput: Any) -> RowEdit:
        if tput is None:
            raise BadRequestError("TPut is required")
        return RowEdit(tput.row, [put_cells(tput)], cluster_ids(tput.attributes))

    @_tio_errors
    def put(self, table: bytes, tput: Any) -> None:
        self.cluster.mutate_cells(table, [self._put_edit(tput)])

    @_tio_errors
    def putMultiple(self, table: bytes, tputs: list[Any]) -> None:
        self.cluster.mutate_cells(table, [self._put_edit(p) for p in tputs or []])

    def _deletes(self, table: bytes, tdeletes: Sequence[Any]) -> None:
        with self.cluster.lock:  # the families of a whole-row delete are the table's now
            families = self.cluster.table_families(table)
            edits = []
            for d in tdeletes:
                if d is None:
                    raise BadRequestError("TDelete is required")
                edits.append(RowEdit(d.row, [delete_cells(d, families)], cluster_ids(d.attributes)))
            self.cluster.mutate_cells(table, edits)

    @_tio_errors
    def deleteSingle(self, table: bytes, tdelete: Any) -> None:
        self._deletes(table, [tdelete])

    @_tio_errors
    def deleteMultiple(self, table: bytes, tdeletes: list[Any]) -> list[Any]:
        """All or nothing: nothing is left undone to return (HBase 2.x returns [] too)."""
        self._deletes(table, tdeletes or [])
        return []

    def _row_edit(self, table: bytes, trm: Any) -> RowEdit:
        """``rowMutationsFromThrift``: one atomic edit; the cluster ids of its first mutation
        (HBase's WAL key takes them from the batch's first mutation)."""
        if trm is None or not trm.row:
            raise BadRequestError("TRowMutations: the row key must not be empty")
        families = self.cluster.table_families(table)
        mutations = []
        ids = None
        for m in trm.mutations or []:
            if m is not None and m.put is not None and m.deleteSingle is None:
                op, cells = m.put, put_cells(m.put)
            elif m is not None and m.deleteSingle is not None and m.put is None:
                op, cells = m.deleteSingle, delete_cells(m.deleteSingle, families)
            else:
                raise BadRequestError(f"TRowMutations of row {trm.row!r}: a TMutation sets one of put, deleteSingle")
            if op.row != trm.row:
                raise BadRequestError(
                    f"TRowMutations of row {trm.row!r}: a mutation of row {op.row!r} does not match that row"
                )
            if ids is None:
                ids = cluster_ids(op.attributes)
            mutations.append(cells)
        return RowEdit(trm.row, mutations, ids or ())

    @_tio_errors
    def mutateRow(self, table: bytes, trowMutations: Any) -> None:
        with self.cluster.lock:
            self.cluster.mutate_cells(table, [self._row_edit(table, trowMutations)])

    @_tio_errors
    def checkAndMutate(
        self,
        table: bytes,
        row: bytes,
        family: bytes,
        qualifier: bytes,
        compareOperator: int,
        value: bytes | None,
        rowMutations: Any,
    ) -> bool:
        """Check the newest version of one column and, if it matches, apply the mutations
        atomically: both under the cluster's lock, which every write takes. With no value at
        all (not even an empty one), HBase 2.6's Thrift2 server fails with an internal error
        (its handler reads the missing buffer), and so does this one."""
        if value is None:
            raise HandlerFailureError(f"checkAndMutate of row {row!r}: no value to compare with")
        with self.cluster.lock:
            families = self.cluster.check_enabled(table)
            edit = self._row_edit(table, rowMutations)
            if edit.row != row:
                raise BadRequestError(f"checkAndMutate of row {row!r}: the mutations are of row {edit.row!r}")
            routing.check_writable(self.cluster, table, [row], len(edit.mutations))  # before the check, as HBase
            if family not in families:
                raise NoSuchFamilyError(f"table {table!r} has no column family {family!r} (row {row!r})")
            found = self.cluster.read_row(table, row, {family: {qualifier or b""}}, versions=1)
            if not check_matches(compareOperator, value, found[0] if found else None):
                return False
            self.cluster.mutate_cells(table, [edit])
            return True

    # -- scanners ----------------------------------------------------------------------------------

    def _results(self, table: bytes, tscan: Any) -> Iterator[Any]:
        if tscan is None:
            raise BadRequestError("TScan is required")
        spec: ScanSpec = scan_spec(tscan)
        read = spec.read
        rows: Iterator[tuple[bytes, list[VisibleCell]]] = self.cluster.scan(
            table,
            start=spec.start,
            stop=spec.stop,
            columns=read.columns,
            versions=read.versions,
            max_ts=read.max_ts,
            min_ts=read.min_ts,
            reverse=spec.reverse,
            row_filter=read.row_filter,
            raw=spec.raw,
        )
        if spec.limit is not None:
            rows = itertools.islice(rows, spec.limit)

        def results() -> Iterator[Any]:
            for row, cells in rows:
                if not spec.batch:
                    yield result(row, cells)
                    continue
                for i in range(0, len(cells), spec.batch):  # a row in parts, as Scan.setBatch
                    yield result(row, cells[i : i + spec.batch], partial=i + spec.batch < len(cells))

        return results()

    @_tio_errors
    def openScanner(self, table: bytes, tscan: Any) -> int:
        """A scanner's id; of a table that does not exist too, as HBase 2.6 opens one: its
        first read fails."""
        try:
            results: Iterator[Any] = self._results(table, tscan)
        except TableNotFoundError as exc:
            results = _Failing(exc)
        with self._scanner_lock:
            sid = next(self._ids)
            self._scanners[sid] = (results, threading.Lock())
        return sid

    def _scanner(self, sid: int) -> tuple[Iterator[Any], threading.Lock]:
        with self._scanner_lock:
            found = self._scanners.get(sid)
        if found is None:
            raise hbase2.TIllegalArgument(message=f"Invalid scanner Id {sid}")
        return found

    @_tio_errors
    def getScannerRows(self, scannerId: int, numRows: int) -> list[Any]:
        if numRows is None or numRows < 0:
            raise hbase2.TIllegalArgument(message=f"numRows must be >= 0, got {numRows}")
        it, lock = self._scanner(scannerId)
        with lock:
            return list(itertools.islice(it, numRows))

    @_tio_errors
    def closeScanner(self, scannerId: int) -> None:
        """Closed; an id closed before or never opened is let be, as HBase 2.6 lets it be
        (a scanner may have expired)."""
        with self._scanner_lock:
            if self._scanners.pop(scannerId, None) is None:
                log.warning("closeScanner: scanner id %s is not open", scannerId)

    @_tio_errors
    def getScannerResults(self, table: bytes, tscan: Any, numRows: int) -> list[Any]:
        return list(itertools.islice(self._results(table, tscan), max(numRows or 0, 0)))

    # -- regions -----------------------------------------------------------------------------------

    @staticmethod
    def _location(region: Region, rs: RegionServer | None) -> Any:
        if rs is None or not rs.alive:
            raise TableDisabledError(f"region {region.encoded} of table {region.table!r} is not online")
        return hbase2.THRegionLocation(
            serverName=hbase2.TServerName(hostName=rs.name.host, port=rs.name.port, startCode=rs.name.start_code),
            regionInfo=hbase2.THRegionInfo(
                regionId=region.region_id,
                tableName=region.table,
                startKey=region.start_key,
                endKey=region.end_key,
                offline=False,
                split=False,
                replicaId=0,
            ),
        )

    @_tio_errors
    def getRegionLocation(self, table: bytes, row: bytes, reload: bool) -> Any:
        for region, rs in self.cluster.region_locations(table):
            if region.start_key <= (row or b"") and (not region.end_key or (row or b"") < region.end_key):
                return self._location(region, rs)
        raise BadRequestError(f"table {table!r} has no region for row {row!r}")

    @_tio_errors
    def getAllRegionLocations(self, table: bytes) -> list[Any]:
        """Every region's location; none for a table that does not exist (HBase 2.6 reads
        hbase:meta and finds none)."""
        try:
            located = self.cluster.region_locations(table)
        except TableNotFoundError:
            return []
        return [self._location(region, rs) for region, rs in located]

    # -- admin -------------------------------------------------------------------------------------

    def _descriptor(self, name: bytes) -> Any:
        families = self.cluster.table_families(name)
        return table_descriptor_to_thrift(name, families.values(), self._store.table_descriptor(name))

    def _matching(self, regex: str | None) -> list[bytes]:
        try:
            pattern = re.compile(regex if regex is not None else ".*")
        except re.error as exc:  # HBase: Pattern.compile's PatternSyntaxException, not an IOException
            raise HandlerFailureError(f"invalid table name pattern {regex!r}: {exc}") from None
        return [name for name in self._store.table_names() if table_matches(pattern, name)]

    @_tio_errors
    def tableExists(self, tableName: Any) -> bool:
        return self._store.table_enabled(table_bytes(tableName)) is not None

    @_tio_errors
    def createTable(self, desc: Any, splitKeys: list[bytes] | None) -> None:
        if desc is None:
            raise BadRequestError("TTableDescriptor is required")
        name = table_bytes(desc.tableName)
        try:
            check_table_name(name)
        except BadRequestError as exc:  # HBase: TableName.valueOf's IllegalArgumentException
            raise HandlerFailureError(str(exc)) from None
        families = [family_from_thrift(c) for c in desc.columns or []]
        descriptor: dict[str, object] = {}
        if desc.attributes:
            descriptor["attributes"] = text_map(desc.attributes)
        if desc.durability is not None:
            if desc.durability not in hbase2.TDurability._VALUES_TO_NAMES:
                raise BadRequestError(f"table {name!r}: unknown durability {desc.durability!r}")
            descriptor["durability"] = desc.durability
        self.cluster.create_table(name, families, descriptor, [bytes(k) for k in splitKeys or []])

    @_tio_errors
    def getTableDescriptor(self, table: Any) -> Any:
        return self._descriptor(table_bytes(table))

    @_tio_errors
    def getTableDescriptors(self, tables: list[Any]) -> list[Any]:
        """The descriptors of the tables that exist (HBase leaves the others out)."""
        names = [table_bytes(t) for t in tables or []]
        return [self._descriptor(n) for n in names if self._store.table_enabled(n) is not None]

    @_tio_errors
    def getTableDescriptorsByPattern(self, regex: str | None, includeSysTables: bool) -> list[Any]:
        return [self._descriptor(n) for n in self._matching(regex)]

    @_tio_errors
    def getTableNamesByPattern(self, regex: str | None, includeSysTables: bool) -> list[Any]:
        return [thrift_table_name(n) for n in self._matching(regex)]

    @_tio_errors
    def deleteTable(self, tableName: Any) -> None:
        self.cluster.delete_table(table_bytes(tableName))

    @_tio_errors
    def enableTable(self, tableName: Any) -> None:
        self.cluster.set_enabled(table_bytes(tableName), True, strict=True)

    @_tio_errors
    def disableTable(self, tableName: Any) -> None:
        self.cluster.set_enabled(table_bytes(tableName), False, strict=True)

    @_tio_errors
    def isTableEnabled(self, tableName: Any) -> bool:
        name = table_bytes(tableName)
        self.cluster.table_families(name)
        return bool(self._store.table_enabled(name))

    @_tio_errors
    def addColumnFamily(self, tableName: Any, column: Any) -> None:
        self.cluster.add_family(table_bytes(tableName), family_from_thrift(column))

    @_tio_errors
    def modifyColumnFamily(self, tableName: Any, column: Any) -> None:
        """As HBase: the family's descriptor becomes the one given (unset fields: defaults)."""
        self.cluster.modify_family(table_bytes(tableName), family_from_thrift(column))

    def getThriftServerType(self) -> int:
        return int(hbase2.TThriftServerType.TWO)
