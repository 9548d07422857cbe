"""HBase's Admin, for replication peers and tables: the master's ``MasterService`` calls over
HBase's RPC.

On a running HBase 2.x the master owns replication peers: ``add_peer``, ``remove_peer``,
``enable_peer``, ``disable_peer`` and ``update_peer_config`` run as master procedures that
refresh every region server, and a peer znode written behind it is ignored by the running
region servers and overwritten by its next procedure. :class:`MasterAdmin` makes the calls
HBase's own Admin makes, and waits for the procedure each returns as HBase's Admin does
(``getProcedureResult`` until FINISHED; a failed procedure's error is raised).

For tables it reads a table's descriptor and state, makes a table READONLY (its regions then
refuse every write, reads go on) or writable again, and disables or enables it, as HBase's
Admin does (``getDescriptor``, ``isTableEnabled``, ``modifyTable``, ``disableTable``,
``enableTable``). A table is named ``ns:t``, or ``t`` in the default namespace.

The active master is read from ``<parent>/master`` before the first call and again whenever
it does not answer, or answers that it is not the active one (a backup master that became
active is found this way); calls that change nothing are retried on a new connection, a
change is retried only when it never reached the master.

Example::

    admin = MasterAdmin(zk_client, ZnodeLayout("/hbase"))
    admin.add_peer("1", PeerConfig("1", "zk-b:2181:/hbase").to_proto(), enabled=False)
    print([p.peer_id for p in admin.list_peers()])
    was = admin.set_read_only("ns:t", True)   # every write to ns:t refused from here
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TypeVar

from google.protobuf.message import Message
from kazoo.client import KazooClient

from walship.errors import (
    MasterNotFoundError,
    MasterUnavailableError,
    ProcedureFailedError,
    RemoteHBaseError,
    TableNotFoundError,
)
from walship.protos import HBase_pb2, Master_pb2, Replication_pb2
from walship.rpc.auth import Authentication, default_auth
from walship.rpc.connection import DEFAULT_TIMEOUT, RpcConnection
from walship.zk.layout import ZnodeLayout
from walship.zk.master import MasterAddress, read_master

__all__ = ["MASTER_SERVICE", "PROCEDURES", "READ_ONLY", "MasterAdmin", "PeerDescription", "table_name"]

log = logging.getLogger(__name__)

M = TypeVar("M", bound=Message)

MASTER_SERVICE = "MasterService"

#: The procedure each changing call starts on the master (named in errors).
PROCEDURES = {
    "AddReplicationPeer": "AddPeerProcedure",
    "RemoveReplicationPeer": "RemovePeerProcedure",
    "EnableReplicationPeer": "EnablePeerProcedure",
    "DisableReplicationPeer": "DisablePeerProcedure",
    "UpdateReplicationPeerConfig": "UpdatePeerConfigProcedure",
    "ModifyTable": "ModifyTableProcedure",
    "DisableTable": "DisableTableProcedure",
    "EnableTable": "EnableTableProcedure",
}

#: The table value that makes a table read-only (HBase's ``TableDescriptorBuilder.READONLY``).
READ_ONLY = b"READONLY"
_TABLE_NOT_FOUND = "org.apache.hadoop.hbase.TableNotFoundException"

#: HBase's answers of a master that is not (yet) the active one: retried on the master
#: ZooKeeper names next.
NOT_ACTIVE = frozenset(
    {
        "org.apache.hadoop.hbase.ipc.ServerNotRunningYetException",
        "org.apache.hadoop.hbase.PleaseHoldException",
        "org.apache.hadoop.hbase.MasterNotRunningException",
        "org.apache.hadoop.hbase.ipc.StoppedRpcClientException",
    }
)


#: Seconds a master that does not answer is looked for again (a command's default).
DEFAULT_FIND_TIMEOUT = 15.0

#: Seconds a connection stays good for a change after its last call (HBase's server closes
#: connections idle for ``hbase.ipc.client.connection.maxidletime``, 10 s).
IDLE_REUSE = 5.0


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


@dataclass(frozen=True)
class PeerDescription:
    """A peer as ``ListReplicationPeers`` describes it: HBase's state and its configuration."""

    peer_id: str
    enabled: bool
    config: Replication_pb2.ReplicationPeer


class MasterAdmin:
    """The master's replication peer and table calls for the cluster at ``layout`` in
    ``client``'s ensemble.

    :param auth: how connections authenticate (default :func:`~walship.rpc.auth.default_auth`:
        KERBEROS as the logged-in principal, else SIMPLE as the current user).
    :param timeout: seconds a call's answer may take.
    :param find_timeout: how long a master that does not answer (or answers that it is not the
        active one) is looked for again in ZooKeeper before giving up: a backup master takes
        over once the old one's session expires.
    :param procedure_timeout: seconds to wait for a procedure to finish (HBase's
        ``hbase.client.sync.wait.timeout.msec``, 10 minutes, by default).
    """

    def __init__(
        self,
        client: KazooClient,
        layout: ZnodeLayout,
        *,
        auth: Authentication | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        find_timeout: float = DEFAULT_FIND_TIMEOUT,
        procedure_timeout: float = 600.0,
    ) -> None:
        self.client = client
        self.layout = layout
        self.auth: Authentication = auth if auth is not None else default_auth()
        self.timeout = timeout
        self.find_timeout = find_timeout
        self.procedure_timeout = procedure_timeout
        self._conn: RpcConnection | None = None
        self._master: MasterAddress | None = None
        self._used = 0.0
        #: HBase's client nonce group (``PerClientRandomNonceGenerator``): a change carrying a
        #: nonce of it is run once by the master, however often it arrives
        self._nonce_group = _nonce()

    # -- the master and its connection ---------------------------------------------------------

    def master(self) -> MasterAddress:
        """The active master ZooKeeper names now.

        :raises MasterNotFoundError: none is registered.
        """
        found = read_master(self.client, self.layout)
        if found is None:
            raise MasterNotFoundError(
                f"no HBase master is registered at {self.layout.master}: is the cluster at "
                f"{self.layout.parent} running?"
            )
        return found

    def _connection(self, changes: bool) -> RpcConnection:
        if self._conn is not None and not self._conn.closed:
            if not changes or time.monotonic() - self._used < IDLE_REUSE:
                return self._conn
            self._drop()  # a change is never sent on a connection the server may have closed as idle
        master = self.master()
        if self._master is not None and master != self._master:
            log.info("the active master moved: %s -> %s", self._master.server_name, master.server_name)
        self._master = master
        self._conn = RpcConnection(master.host, master.port, MASTER_SERVICE, self.auth, timeout=self.timeout)
        return self._conn

    def _drop(self) -> None:
        if self._conn is not None:
            self._conn.close()
        self._conn = None

    def _call(self, method: str, request: Message, response_type: type[M], *, changes: bool, what: str) -> M:
        """One call on the active master, looked for again while it does not answer.

        :param changes: the call changes something: after a connection that broke mid-call it
            is not sent again (it may have run), the error is raised.
        :param what: what the call is about, as errors name it first (``"peer 1: "``,
            ``"table ns:t: "``; ``""``: nothing).
        """
        deadline = time.monotonic() + self.find_timeout
        pause = 0.05
        while True:
            sent = False
            try:
                conn = self._connection(changes)
                sent = True
                try:
                    return conn.call(method, request, response_type)
                finally:
                    self._used = time.monotonic()
            except MasterUnavailableError as exc:
                self._drop()
                if (changes and sent) or time.monotonic() + pause > deadline:
                    where = self._master.address if self._master is not None else "?"
                    raise MasterUnavailableError(
                        f"{what}the master at {where} (from {self.layout.master}) does not answer: {exc}"
                    ) from None
                log.debug("%s: %s; looking for the active master again in %.2f s", method, exc, pause)
            except MasterNotFoundError:
                # between a master's znode going and a backup's coming: wait for one, if one was seen
                if self._master is None or time.monotonic() + pause > deadline:
                    raise
            except RemoteHBaseError as exc:
                if exc.exception_class not in NOT_ACTIVE or time.monotonic() + pause > deadline:
                    raise RemoteHBaseError(
                        f"{what}{exc}",
                        exception_class=exc.exception_class,
                        remote_message=exc.remote_message,
                        do_not_retry=exc.do_not_retry,
                    ) from None
                self._drop()
                log.debug("%s: %s is not the active master (%s); looking again", method, self._master, exc)
            time.sleep(pause)
            pause = min(pause * 2, 1.0)

    def _procedure(self, method: str, what: str, request: Message, response_type: type[M]) -> None:
        """A changing call, then waiting for the procedure it returned.

        :param what: what it changes, as errors name it first (``"peer 1: "``).
        """
        reply = self._call(method, request, response_type, changes=True, what=what)
        proc_id = getattr(reply, "proc_id", 0)
        if not reply.HasField("proc_id"):
            return  # an old master answers once it is done
        self.wait_procedure(proc_id, f"{what}{PROCEDURES.get(method, method)} (procedure {proc_id})")

    def wait_procedure(self, proc_id: int, what: str) -> None:
        """Wait until procedure ``proc_id`` finished, polling as HBase's Admin does.

        :raises ProcedureFailedError: it failed (its error named), the master does not know it,
            or it did not finish in ``procedure_timeout`` seconds.
        """
        deadline = time.monotonic() + self.procedure_timeout
        pause = 0.02
        request = Master_pb2.GetProcedureResultRequest(proc_id=proc_id)
        State = Master_pb2.GetProcedureResultResponse.State
        while True:
            result = self._call(
                "getProcedureResult", request, Master_pb2.GetProcedureResultResponse, changes=False, what=""
            )
            if result.state == State.FINISHED:
                if result.HasField("exception"):
                    error = result.exception.generic_exception
                    name = (error.class_name or "an error").rsplit(".", 1)[-1]
                    raise ProcedureFailedError(f"{what} failed: {name}: {error.message or '(no message)'}")
                log.debug("%s finished", what)
                return
            if result.state == State.NOT_FOUND:
                raise ProcedureFailedError(f"{what}: the master does not know the procedure")
            if time.monotonic() + pause > deadline:
                raise ProcedureFailedError(f"{what} has not finished after {self.procedure_timeout:g} s")
            time.sleep(pause)
            pause = min(pause * 1.5, 1.0)

    # -- HBase Admin's replication peer calls --------------------------------------------------

    def add_peer(self, peer_id: str, config: Replication_pb2.ReplicationPeer, *, enabled: bool) -> None:
        """``Admin.addReplicationPeer``: the peer with its HBase peer-state."""
        state = Replication_pb2.ReplicationState(
            state=Replication_pb2.ReplicationState.ENABLED if enabled else Replication_pb2.ReplicationState.DISABLED
        )
        request = Replication_pb2.AddReplicationPeerRequest(peer_id=peer_id, peer_config=config, peer_state=state)
        self._procedure("AddReplicationPeer", f"peer {peer_id}: ", request, Replication_pb2.AddReplicationPeerResponse)
        log.info(
            "added peer %s through the master (HBase peer-state %s)", peer_id, "ENABLED" if enabled else "DISABLED"
        )

    def remove_peer(self, peer_id: str) -> None:
        """``Admin.removeReplicationPeer``: the master removes it and its queues."""
        request = Replication_pb2.RemoveReplicationPeerRequest(peer_id=peer_id)
        self._procedure(
            "RemoveReplicationPeer", f"peer {peer_id}: ", request, Replication_pb2.RemoveReplicationPeerResponse
        )
        log.info("removed peer %s through the master", peer_id)

    def enable_peer(self, peer_id: str) -> None:
        """``Admin.enableReplicationPeer``: HBase's own sources ship the peer."""
        request = Replication_pb2.EnableReplicationPeerRequest(peer_id=peer_id)
        self._procedure(
            "EnableReplicationPeer", f"peer {peer_id}: ", request, Replication_pb2.EnableReplicationPeerResponse
        )
        log.info("enabled peer %s through the master", peer_id)

    def disable_peer(self, peer_id: str) -> None:
        """``Admin.disableReplicationPeer``: HBase's sources stop reading for the peer (every
        region server refreshed before this returns) but keep queueing its WALs."""
        request = Replication_pb2.DisableReplicationPeerRequest(peer_id=peer_id)
        self._procedure(
            "DisableReplicationPeer", f"peer {peer_id}: ", request, Replication_pb2.DisableReplicationPeerResponse
        )
        log.info("disabled peer %s through the master", peer_id)

    def update_peer_config(self, peer_id: str, config: Replication_pb2.ReplicationPeer) -> None:
        """``Admin.updateReplicationPeerConfig``: the whole configuration, replaced."""
        request = Replication_pb2.UpdateReplicationPeerConfigRequest(peer_id=peer_id, peer_config=config)
        self._procedure(
            "UpdateReplicationPeerConfig",
            f"peer {peer_id}: ",
            request,
            Replication_pb2.UpdateReplicationPeerConfigResponse,
        )
        log.info("updated peer %s through the master", peer_id)

    def get_peer_config(self, peer_id: str) -> Replication_pb2.ReplicationPeer:
        """``Admin.getReplicationPeerConfig``."""
        request = Replication_pb2.GetReplicationPeerConfigRequest(peer_id=peer_id)
        reply = self._call(
            "GetReplicationPeerConfig",
            request,
            Replication_pb2.GetReplicationPeerConfigResponse,
            changes=False,
            what=f"peer {peer_id}: ",
        )
        return reply.peer_config

    def is_peer_enabled(self, peer_id: str) -> bool:
        """HBase's peer-state of the peer (``Admin.isReplicationPeerEnabled``)."""
        request = Replication_pb2.GetReplicationPeerStateRequest(peer_id=peer_id)
        reply = self._call(
            "IsReplicationPeerEnabled",
            request,
            Replication_pb2.GetReplicationPeerStateResponse,
            changes=False,
            what=f"peer {peer_id}: ",
        )
        return reply.is_enabled

    def list_peers(self, regex: str | None = None) -> list[PeerDescription]:
        """``Admin.listReplicationPeers``: every peer (or those whose id matches ``regex``)."""
        request = Replication_pb2.ListReplicationPeersRequest()
        if regex is not None:
            request.regex = regex
        reply = self._call(
            "ListReplicationPeers", request, Replication_pb2.ListReplicationPeersResponse, changes=False, what=""
        )
        return [
            PeerDescription(d.id, d.state.state == Replication_pb2.ReplicationState.ENABLED, d.config)
            for d in reply.peer_desc
        ]

    # -- HBase Admin's table calls ---------------------------------------------------------------

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
            return self._call(method, request, response_type, changes=False, what=f"table {table}: ")

    def _table_procedure(self, method: str, table: str, request: Message, response_type: type[M]) -> None:
        """A table call that changes it, and its procedure."""
        with self._known(table):
            self._procedure(method, f"table {table}: ", request, response_type)

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
            where = self._master.address if self._master is not None else self.layout.parent
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
            nonce_group=self._nonce_group,
            nonce=_nonce(),
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
        request = Master_pb2.DisableTableRequest(
            table_name=table_name(table), nonce_group=self._nonce_group, nonce=_nonce()
        )
        self._table_procedure("DisableTable", table, request, Master_pb2.DisableTableResponse)
        log.info("disabled table %s", table)

    def enable_table(self, table: str) -> None:
        """``Admin.enableTable``: returns once the table is ENABLED.

        :raises TableNotFoundError: the master knows no such table.
        :raises RemoteHBaseError: HBase's ``TableNotDisabledException``: it is not disabled.
        """
        request = Master_pb2.EnableTableRequest(
            table_name=table_name(table), nonce_group=self._nonce_group, nonce=_nonce()
        )
        self._table_procedure("EnableTable", table, request, Master_pb2.EnableTableResponse)
        log.info("enabled table %s", table)

    def close(self) -> None:
        self._drop()

    def __enter__(self) -> MasterAdmin:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _nonce() -> int:
    """A random nonce (or nonce group) other than HBase's ``NO_NONCE``, 0."""
    return random.getrandbits(63) or 1
