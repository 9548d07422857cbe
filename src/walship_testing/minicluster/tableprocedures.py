"""The table calls of ``MasterService`` the minicluster's master answers, and the procedures
they start, as HBase 2.6's master answers and runs them: ``GetTableDescriptors``,
``GetTableState``, ``ModifyTable`` (``ModifyTableProcedure``), ``DisableTable``
(``DisableTableProcedure``) and ``EnableTable`` (``EnableTableProcedure``).

**Refusals.** Where HBase refuses, the minicluster refuses with HBase's exception and message:

* ``DisableTable`` checks before it submits anything (the procedure's ``preflightChecks``):
  ``TableNotFoundException`` (the table's name), ``TableNotEnabledException`` (the table's
  name) for a table that is not enabled; the caller gets it at once.
* ``EnableTable`` checks in the procedure (``prepareEnable``): ``TableNotFoundException``,
  ``TableNotDisabledException`` (``tableName=<name>, state=ENABLED``). A client of HBase 2.0
  or later gets the procedure's id and the refusal from ``getProcedureResult``; one older (or
  naming no version, as walship's) waits behind the latch and gets it as the call's exception.
  (HBase lets clients from 1.1 on go ahead; the minicluster tells clients apart at 2.0.)
* ``ModifyTable`` runs the master's sanity check first (a table without column families:
  ``DoNotRetryIOException``), then the procedure, whose latch opens only once it finished, so
  every caller gets its refusal (``TableNotFoundException``, ...) as the call's exception and
  its id once the change is in force.
* ``GetTableState`` of an unknown table: ``TableNotFoundException: No state found for <name>``;
  ``GetTableDescriptors`` leaves unknown tables out (HBase's Admin turns an empty answer into
  ``TableNotFoundException``).

A table is named as HBase's ``TableName.getNameAsString`` names it: ``t`` in the default
namespace, ``ns:t`` otherwise. The minicluster keeps no system tables (``hbase:meta`` is not
one of its tables) and no namespaces of their own: a namespace exists when one of its tables
does (``default`` and ``hbase`` always).

**Regions.** Nothing is closed or reopened: the minicluster's regions read a table's state and
descriptor on every call, so a change is in force once its procedure finished (HBase's
``ModifyTableProcedure`` reopens the regions, and answers the call after).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterator
from typing import Any

from google.protobuf.message import Message

from walship.errors import MasterCallError
from walship.protos import HBase_pb2, Master_pb2
from walship_testing.minicluster import tables
from walship_testing.minicluster.peerchecks import DNRIOE, IOE
from walship_testing.minicluster.procedures import Procedure, ProcedureExecutor, Step
from walship_testing.minicluster.store import Store
from walship_testing.minicluster.tableschema import modified_descriptor, table_bytes, table_schema
from walship_testing.minicluster.thrift2_convert import table_matches
from walship_testing.minicluster.view import MasterView

__all__ = ["DisableTable", "EnableTable", "ModifyTable", "TableCalls", "TableProcedure"]

log = logging.getLogger(__name__)

_HBASE = "org.apache.hadoop.hbase"
TABLE_NOT_FOUND = f"{_HBASE}.TableNotFoundException"
TABLE_NOT_ENABLED = f"{_HBASE}.TableNotEnabledException"
TABLE_NOT_DISABLED = f"{_HBASE}.TableNotDisabledException"
NAMESPACE_NOT_FOUND = f"{_HBASE}.NamespaceNotFoundException"
#: ``TableDescriptorChecker``'s message for a table without column families
NO_FAMILY = (
    "Table should have at least one column family. Set hbase.table.sanity.checks to false at conf or "
    "table descriptor if you want to bypass sanity checks"
)


def _name(table: bytes) -> str:
    return table.decode(errors="replace")


def table_not_found(table: bytes, message: str | None = None) -> MasterCallError:
    return MasterCallError(TABLE_NOT_FOUND, message or _name(table), do_not_retry=True)


def _store(host: MasterView) -> Store:
    if host.store is None:
        raise MasterCallError(
            f"{_HBASE}.ipc.ServerNotRunningYetException", "Server is not running yet", do_not_retry=False
        )
    return host.store


class TableProcedure(Procedure):
    """A procedure on one table."""

    def __init__(self, host: MasterView, table: bytes) -> None:
        super().__init__(host)
        self.table = table

    @property
    def store(self) -> Store:
        return _store(self.host)

    def enabled(self) -> bool:
        """Whether the table is enabled now.

        :raises MasterCallError: HBase's ``TableNotFoundException``: no such table.
        """
        enabled = self.store.table_enabled(self.table)
        if enabled is None:
            raise table_not_found(self.table)
        return enabled

    def __repr__(self) -> str:
        return f"{self.name}(pid={self.proc_id}, table={_name(self.table)})"


class DisableTable(TableProcedure):
    name = "DisableTableProcedure"
    release_after_checks = True

    def preflight(self) -> None:
        """``preflightChecks(env, true)``, before the procedure is submitted."""
        if not self.enabled():
            raise MasterCallError(TABLE_NOT_ENABLED, _name(self.table), do_not_retry=True)

    def _prepare(self) -> None:
        """``prepareDisable``: the table may have changed since the call was checked."""
        if not self.enabled():
            message = f"tableName={_name(self.table)}, state=DISABLED"
            raise MasterCallError(TABLE_NOT_ENABLED, message, do_not_retry=True)

    def steps(self) -> Iterator[Step]:
        yield self._prepare
        yield lambda: tables.set_enabled(self.store, self.table, False, strict=False)
        log.info("disabled table %s", _name(self.table))


class EnableTable(TableProcedure):
    name = "EnableTableProcedure"
    release_after_checks = True

    def _prepare(self) -> None:
        """``prepareEnable``."""
        if self.enabled():
            message = f"tableName={_name(self.table)}, state=ENABLED"
            raise MasterCallError(TABLE_NOT_DISABLED, message, do_not_retry=True)

    def steps(self) -> Iterator[Step]:
        yield self._prepare
        yield lambda: tables.set_enabled(self.store, self.table, True, strict=False)
        log.info("enabled table %s", _name(self.table))


class ModifyTable(TableProcedure):
    """The table's values replaced by the schema's (see
    :func:`~walship_testing.minicluster.tableschema.modified_descriptor`)."""

    name = "ModifyTableProcedure"

    def __init__(self, host: MasterView, table: bytes, schema: HBase_pb2.TableSchema) -> None:
        super().__init__(host, table)
        self.schema = schema
        self._descriptor: dict[str, object] = {}

    def preflight(self) -> None:
        """The master's ``TableDescriptorChecker.sanityCheck`` of the new descriptor."""
        if not self.schema.column_families:
            raise MasterCallError(DNRIOE, NO_FAMILY, do_not_retry=True)

    def _prepare(self) -> None:
        """``prepareModify``."""
        store = self.store
        self.enabled()  # it exists
        current = store.families(self.table).values()
        self._descriptor = modified_descriptor(self.table, current, store.table_descriptor(self.table), self.schema)

    def steps(self) -> Iterator[Step]:
        yield self._prepare
        yield lambda: self.store.set_table_descriptor(self.table, self._descriptor)
        log.info("modified table %s: %s", _name(self.table), self._descriptor)


class TableCalls:
    """The table calls, by ``MasterService`` method name (:meth:`handlers`).

    :param host: the cluster whose tables these are.
    :param executor: where the procedures run.
    """

    def __init__(self, host: MasterView, executor: ProcedureExecutor) -> None:
        self.host = host
        self.executor = executor

    def handlers(self) -> dict[str, Callable[[Any, bool], Message]]:
        return {
            "GetTableDescriptors": self.get_table_descriptors,
            "GetTableState": self.get_table_state,
            "ModifyTable": self.modify_table,
            "DisableTable": self.disable_table,
            "EnableTable": self.enable_table,
        }

    def _submit(
        self,
        procedure: TableProcedure,
        request: Any,
        *,
        wait: bool,
        preflight: Callable[[], None] | None = None,
    ) -> int:
        """HBase's ``MasterProcedureUtil.submitProcedure``: a call with the nonce of an earlier
        one gets that one's procedure; the checks made before submitting refuse the call (and
        are kept for its nonce); ``wait``: the caller waits behind the procedure's latch and
        gets its refusal as the call's exception."""
        if request.nonce:
            nonce = (request.nonce_group, request.nonce)
            earlier = self.executor.by_nonce(nonce)
            if earlier is not None:
                return earlier.proc_id
            procedure.nonce = nonce
        if preflight is not None:
            try:
                with self.host.lock:
                    preflight()
            except MasterCallError as exc:
                self.executor.record_failure(procedure, exc)
                raise
        self.executor.submit(procedure)
        if wait:
            procedure.latch.wait()
            if procedure.error is not None:
                raise procedure.error
        return procedure.proc_id

    # -- the calls ---------------------------------------------------------------------------------

    def get_table_descriptors(self, request: Master_pb2.GetTableDescriptorsRequest, modern: bool) -> Message:
        store = _store(self.host)
        answer = Master_pb2.GetTableDescriptorsResponse()
        with self.host.lock:
            if request.table_names:
                names = [table_bytes(n) for n in request.table_names]
                names = [n for n in names if store.table_enabled(n) is not None]
            else:
                names = store.table_names()
                if request.HasField("namespace") and request.namespace:
                    names = self._in_namespace(names, request.namespace)
            if request.HasField("regex"):
                try:
                    pattern = re.compile(request.regex)
                except re.error as exc:  # HBase: Pattern.compile's exception, as an IOException
                    cause = MasterCallError("java.util.regex.PatternSyntaxException", str(exc), do_not_retry=False)
                    raise MasterCallError(IOE, str(exc), do_not_retry=False, cause=cause) from None
                names = [n for n in names if table_matches(pattern, n)]
            for name in names:
                families = store.families(name).values()
                answer.table_schema.append(table_schema(name, families, store.table_descriptor(name)))
        return answer

    @staticmethod
    def _in_namespace(names: list[bytes], namespace: str) -> list[bytes]:
        """The tables of ``namespace``; ``NamespaceNotFoundException`` when it has none (see
        the module)."""
        ns = namespace.encode()
        found = [n for n in names if (n.rpartition(b":")[0] or b"default") == ns]
        if not found and namespace not in ("default", "hbase"):
            raise MasterCallError(NAMESPACE_NOT_FOUND, namespace, do_not_retry=True)
        return found

    def get_table_state(self, request: Master_pb2.GetTableStateRequest, modern: bool) -> Message:
        table = table_bytes(request.table_name)
        enabled = _store(self.host).table_enabled(table)
        if enabled is None:
            raise table_not_found(table, f"No state found for {_name(table)}")
        state = HBase_pb2.TableState.ENABLED if enabled else HBase_pb2.TableState.DISABLED
        return Master_pb2.GetTableStateResponse(table_state=HBase_pb2.TableState(state=state))

    def modify_table(self, request: Master_pb2.ModifyTableRequest, modern: bool) -> Message:
        # HBase modifies the table the schema names (the request's name locks and logs only)
        schema = request.table_schema
        if not schema.HasField("table_name") or not schema.table_name.qualifier:
            raise MasterCallError(IOE, "the table schema names no table", do_not_retry=False)
        table = table_bytes(schema.table_name)
        log.info("modify table %s", _name(table))
        procedure = ModifyTable(self.host, table, schema)
        proc_id = self._submit(procedure, request, wait=True, preflight=procedure.preflight)
        return Master_pb2.ModifyTableResponse(proc_id=proc_id)

    def disable_table(self, request: Master_pb2.DisableTableRequest, modern: bool) -> Message:
        table = table_bytes(request.table_name)
        log.info("disable %s", _name(table))
        procedure = DisableTable(self.host, table)
        proc_id = self._submit(procedure, request, wait=True, preflight=procedure.preflight)
        return Master_pb2.DisableTableResponse(proc_id=proc_id)

    def enable_table(self, request: Master_pb2.EnableTableRequest, modern: bool) -> Message:
        table = table_bytes(request.table_name)
        log.info("enable %s", _name(table))
        procedure = EnableTable(self.host, table)
        return Master_pb2.EnableTableResponse(proc_id=self._submit(procedure, request, wait=not modern))
