"""HBase's Admin for tables, through the master's ``MasterService`` calls of
:class:`~walship.rpc.master.MasterAdmin`: a table's descriptor and state, READONLY set (its
regions then refuse every write; reads go on) or removed, disable and enable, as HBase's Admin
makes them (``getDescriptor``, ``isTableEnabled``, ``modifyTable``, ``disableTable``,
``enableTable``), each change waited for as its procedure. A table is named ``ns:t``, or ``t``
in the default namespace.

Example::

    tables = MasterTables(MasterAdmin(zk_client, ZnodeLayout("/hbase")))
    was = tables.set_read_only("ns:t", True)   # every write to ns:t refused from here
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TypeVar

from google.protobuf.message import Message

from walship.errors import RemoteHBaseError, TableNotFoundError
from walship.protos import HBase_pb2, Master_pb2
from walship.rpc.master import MasterAdmin, new_nonce

__all__ = ["READ_ONLY", "MasterTables", "table_name"]

log = logging.getLogger(__name__)

M = TypeVar("M", bound=Message)

#: The table value that makes a table read-only (HBase's ``TableDescriptorBuilder.READONLY``).
READ_ONLY = b"READONLY"
_TABLE_NOT_FOUND = "org.apache.hadoop.hbase.TableNotFoundException"


def table_name(table: str) -> HBase_pb2.TableName:
    """``ns:t`` (or ``t``, in the default namespace) as HBase's ``TableName``.

    :raises ValueError: not ``[namespace:]qualifier``.
    """
    ns, sep, qualifier = table.rpartition(":")
    if not qualifier or (sep and not ns) or ":" in ns:
        raise ValueError(f"'table' must be [namespace:]qualifier, got {table!r}")
    return HBase_pb2.TableName(namespace=(ns if sep else "default").encode(), qualifier=qualifier.encode())


def _read_only(schema: HBase_pb2.TableSchema) -> bool:
    """The descriptor's READONLY, read as HBase's ``TableDescriptor.isReadOnly`` reads it
    (``Boolean.valueOf``: "true" in any case; no value: false)."""
    values = {a.first: a.second for a in schema.attributes}
    return values.get(READ_ONLY, b"").lower() == b"true"


class MasterTables:
    """The master's table calls for the cluster ``admin`` reaches."""

    def __init__(self, admin: MasterAdmin) -> None:
        self.admin = admin

    @contextmanager
    def _known(self, table: str) -> Iterator[None]:
        """HBase's TableNotFoundException, raised inside, as :class:`TableNotFoundError`."""
        try:
            yield
        except RemoteHBaseError as exc:
            if exc.exception_class != _TABLE_NOT_FOUND:
                raise
            raise TableNotFoundError(
                f"table {table}: no such table ({exc.short_class}: {exc.remote_message})"
            ) from None

    def _table_call(self, method: str, table: str, request: Message, response_type: type[M]) -> M:
        """A table call that changes nothing."""
        with self._known(table):
            return self.admin.call(method, request, response_type, changes=False, what=f"table {table}: ")

    def _table_procedure(self, method: str, table: str, request: Message, response_type: type[M]) -> None:
        """A table call that changes it, and its procedure."""
        with self._known(table):
            self.admin.procedure(method, f"table {table}: ", request, response_type)

    def table_descriptor(self, table: str) -> HBase_pb2.TableSchema:
        """``Admin.getDescriptor``: the table's descriptor as the master keeps it: its values
        (READONLY, ...) and its column families with theirs (VERSIONS, REPLICATION_SCOPE, ...),
        each as ``BytesBytesPair`` attributes.

        :raises TableNotFoundError: the master knows no such table.
        :raises ValueError: ``table`` is not ``[namespace:]qualifier``.
        """
        request = Master_pb2.GetTableDescriptorsRequest(table_names=[table_name(table)])
        reply = self._table_call("GetTableDescriptors", table, request, Master_pb2.GetTableDescriptorsResponse)
        if not reply.table_schema:  # HBase's master leaves out a table it does not know
            where = self.admin.layout.parent
            raise TableNotFoundError(f"table {table}: no such table (the master at {where} has no descriptor of it)")
        return reply.table_schema[0]

    def is_read_only(self, table: str) -> bool:
        """The table is READONLY (``TableDescriptor.isReadOnly``): its regions refuse writes.

        :raises TableNotFoundError: the master knows no such table.
        """
        return _read_only(self.table_descriptor(table))

    def set_read_only(self, table: str, read_only: bool) -> bool:
        """Make the table READONLY (its regions refuse every write; reads go on), or writable
        again: ``Admin.modifyTable`` with the table's descriptor as it is and its READONLY
        value set to "true" or removed, the regions reopened with it (the master answers once
        they are). Nothing is asked of the master when the table is so already.

        :returns: whether it was READONLY before.
        :raises TableNotFoundError: the master knows no such table.
        """
        schema = self.table_descriptor(table)
        before = _read_only(schema)
        if before == read_only:
            return before
        values = [a for a in schema.attributes if a.first != READ_ONLY]
        del schema.attributes[:]
        schema.attributes.extend(values)
        if read_only:
            schema.attributes.add(first=READ_ONLY, second=b"true")
        request = Master_pb2.ModifyTableRequest(
            table_name=table_name(table),
            table_schema=schema,
            nonce_group=self.admin.nonce_group,
            nonce=new_nonce(),
            reopen_regions=True,  # the regions take READONLY as they open
        )
        self._table_procedure("ModifyTable", table, request, Master_pb2.ModifyTableResponse)
        log.info("table %s is %s", table, "READONLY" if read_only else "writable again")
        return before

    def table_enabled(self, table: str) -> bool:
        """``Admin.isTableEnabled``: the table's state is ENABLED (ENABLING, DISABLING and
        DISABLED are not, as HBase's Admin answers).

        :raises TableNotFoundError: the master knows no such table.
        """
        request = Master_pb2.GetTableStateRequest(table_name=table_name(table))
        reply = self._table_call("GetTableState", table, request, Master_pb2.GetTableStateResponse)
        return bool(reply.table_state.state == HBase_pb2.TableState.ENABLED)

    def disable_table(self, table: str) -> None:
        """``Admin.disableTable``: returns once the table is DISABLED.

        :raises TableNotFoundError: the master knows no such table.
        :raises RemoteHBaseError: HBase's ``TableNotEnabledException``: it is not enabled.
        """
        self._set_state(table, "DisableTable", Master_pb2.DisableTableRequest, Master_pb2.DisableTableResponse)
        log.info("disabled table %s", table)

    def enable_table(self, table: str) -> None:
        """``Admin.enableTable``: returns once the table is ENABLED.

        :raises TableNotFoundError: the master knows no such table.
        :raises RemoteHBaseError: HBase's ``TableNotDisabledException``: it is not disabled.
        """
        self._set_state(table, "EnableTable", Master_pb2.EnableTableRequest, Master_pb2.EnableTableResponse)
        log.info("enabled table %s", table)

    def _set_state(self, table: str, method: str, request_type: type[Message], response_type: type[M]) -> None:
        """DisableTable or EnableTable, with a nonce as HBase's client sends them."""
        request = request_type(table_name=table_name(table), nonce_group=self.admin.nonce_group, nonce=new_nonce())
        self._table_procedure(method, table, request, response_type)
