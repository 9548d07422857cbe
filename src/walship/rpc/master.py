"""HBase's Admin, for replication peers and tables: the master's ``MasterService`` calls over
HBase's RPC.

On a running HBase 2.x the master owns replication peers: ``add_peer``, ``remove_peer``,
``enable_peer``, ``disable_peer`` and ``update_peer_config`` run as master procedures that
refresh every region server, and a peer znode written behind it is ignored by the running
region servers and overwritten by its next procedure. :class:`MasterAdmin` makes the calls
HBase's own Admin makes, and waits for the procedure each returns as HBase's Admin does
(``getProcedureResult`` until FINISHED; a failed procedure's error is raised).

Its calls and procedures serve :class:`walship.rpc.tables.MasterTables` too, HBase's Admin for
tables (READONLY, disable, enable).

The active master is read from ``<parent>/master`` before the first call and again whenever
it does not answer, or answers that it is not the active one (a backup master that became
active is found this way); calls that change nothing are retried on a new connection, a
change is retried only when it never reached the master.

Example::

    admin = MasterAdmin(zk_client, ZnodeLayout("/hbase"))
    admin.add_peer("1", PeerConfig("1", "zk-b:2181:/hbase").to_proto(), enabled=False)
    print([p.peer_id for p in admin.list_peers()])
"""

from __future__ import annotations

import logging
import random
import time
from dataclasses import dataclass
from typing import TypeVar

from google.protobuf.message import Message
from kazoo.client import KazooClient

from walship.errors import MasterNotFoundError, MasterUnavailableError, ProcedureFailedError, RemoteHBaseError
from walship.protos import Master_pb2, Replication_pb2
from walship.rpc.auth import Authentication, default_auth
from walship.rpc.connection import DEFAULT_TIMEOUT, RpcConnection
from walship.zk.layout import ZnodeLayout
from walship.zk.master import MasterAddress, read_master

__all__ = ["MASTER_SERVICE", "PROCEDURES", "MasterAdmin", "PeerDescription", "new_nonce"]

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
        self.nonce_group = new_nonce()

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

    def call(self, method: str, request: Message, response_type: type[M], *, changes: bool, what: str) -> M:
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

    def procedure(self, method: str, what: str, request: Message, response_type: type[M]) -> None:
        """A changing call, then waiting for the procedure it returned.

        :param what: what it changes, as errors name it first (``"peer 1: "``).
        """
        reply = self.call(method, request, response_type, changes=True, what=what)
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
            result = self.call(
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
        self.procedure("AddReplicationPeer", f"peer {peer_id}: ", request, Replication_pb2.AddReplicationPeerResponse)
        log.info(
            "added peer %s through the master (HBase peer-state %s)", peer_id, "ENABLED" if enabled else "DISABLED"
        )

    def remove_peer(self, peer_id: str) -> None:
        """``Admin.removeReplicationPeer``: the master removes it and its queues."""
        request = Replication_pb2.RemoveReplicationPeerRequest(peer_id=peer_id)
        self.procedure(
            "RemoveReplicationPeer", f"peer {peer_id}: ", request, Replication_pb2.RemoveReplicationPeerResponse
        )
        log.info("removed peer %s through the master", peer_id)

    def enable_peer(self, peer_id: str) -> None:
        """``Admin.enableReplicationPeer``: HBase's own sources ship the peer."""
        request = Replication_pb2.EnableReplicationPeerRequest(peer_id=peer_id)
        self.procedure(
            "EnableReplicationPeer", f"peer {peer_id}: ", request, Replication_pb2.EnableReplicationPeerResponse
        )
        log.info("enabled peer %s through the master", peer_id)

    def disable_peer(self, peer_id: str) -> None:
        """``Admin.disableReplicationPeer``: HBase's sources stop reading for the peer (every
        region server refreshed before this returns) but keep queueing its WALs."""
        request = Replication_pb2.DisableReplicationPeerRequest(peer_id=peer_id)
        self.procedure(
            "DisableReplicationPeer", f"peer {peer_id}: ", request, Replication_pb2.DisableReplicationPeerResponse
        )
        log.info("disabled peer %s through the master", peer_id)

    def update_peer_config(self, peer_id: str, config: Replication_pb2.ReplicationPeer) -> None:
        """``Admin.updateReplicationPeerConfig``: the whole configuration, replaced."""
        request = Replication_pb2.UpdateReplicationPeerConfigRequest(peer_id=peer_id, peer_config=config)
        self.procedure(
            "UpdateReplicationPeerConfig",
            f"peer {peer_id}: ",
            request,
            Replication_pb2.UpdateReplicationPeerConfigResponse,
        )
        log.info("updated peer %s through the master", peer_id)

    def get_peer_config(self, peer_id: str) -> Replication_pb2.ReplicationPeer:
        """``Admin.getReplicationPeerConfig``."""
        request = Replication_pb2.GetReplicationPeerConfigRequest(peer_id=peer_id)
        reply = self.call(
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
        reply = self.call(
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
        reply = self.call(
            "ListReplicationPeers", request, Replication_pb2.ListReplicationPeersResponse, changes=False, what=""
        )
        return [
            PeerDescription(d.id, d.state.state == Replication_pb2.ReplicationState.ENABLED, d.config)
            for d in reply.peer_desc
        ]

    def close(self) -> None:
        self._drop()

    def __enter__(self) -> MasterAdmin:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def new_nonce() -> int:
    """A random nonce (or nonce group) other than HBase's ``NO_NONCE``, 0."""
    return random.getrandbits(63) or 1
