"""HBase's ``MasterService`` calls the minicluster's master answers, as HBase 2.6's
``MasterRpcServices`` and ``HMaster`` answer them: the replication peer calls,
``getProcedureResult``, and the table calls of
:mod:`walship_testing.minicluster.tableprocedures`.

A changing call (Add, Remove, Enable, Disable, UpdateConfig) submits a peer procedure
(:mod:`walship_testing.minicluster.procedures`) and answers its id; HBase's checks run inside the
procedure. What the caller sees of a refusal depends on its version, as on HBase: a client of
HBase 2.0 or later (``ConnectionHeader.version_info``) gets the id at once and the refusal from
``getProcedureResult``; one older, or naming no version (walship's own client), waits behind
the procedure's latch and gets the refusal as the call's exception. The reads (GetConfig,
IsEnabled, List) answer from ZooKeeper at once: ``ReplicationPeerNotFoundException`` for an
unknown peer, and for ``IsReplicationPeerEnabled`` the ``IOException`` HBase wraps its
``ReplicationException`` in.

Unlike HBase's master, which loads the peers once at start and keeps them in memory, the
minicluster's reads them from ZooKeeper on every call, so peers written directly (``walship
peer ... --offline``, older tests) are seen too.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from typing import Any

from google.protobuf import message_factory
from google.protobuf.descriptor import MethodDescriptor
from google.protobuf.message import Message

from walship.errors import ConfigError, MasterCallError, ZkError
from walship.peer import parse_cluster_key
from walship.protos import HBase_pb2, Master_pb2, Replication_pb2
from walship.zk.cluster import read_cluster_id
from walship.zk.layout import ZnodeLayout
from walship.zk.peers import ReplicationPeers
from walship_testing.minicluster.peerchecks import IOE, REPLICATION_EXCEPTION, OwnCluster, peer_not_found, stored_peer
from walship_testing.minicluster.procedures import (
    AddPeer,
    PeerProcedure,
    ProcedureExecutor,
    RemovePeer,
    SetPeerState,
    UpdatePeerConfig,
    procedure_result,
)
from walship_testing.minicluster.tableprocedures import TableCalls
from walship_testing.minicluster.view import MasterView

__all__ = ["SERVICE", "MasterService", "has_minimum_version", "own_cluster"]

log = logging.getLogger(__name__)

#: The service a connection names in its header, and its methods.
SERVICE = Master_pb2.DESCRIPTOR.services_by_name["MasterService"]
_ENABLED = Replication_pb2.ReplicationState.ENABLED


def has_minimum_version(info: HBase_pb2.VersionInfo | None, major: int, minor: int) -> bool:
    """HBase's ``VersionInfoUtil.hasMinimumVersion``: the client runs ``major.minor`` or later
    (no version: no)."""
    if info is None:
        return False
    if info.HasField("version_major") and info.HasField("version_minor"):
        if info.version_major != major:
            return info.version_major > major
        return info.version_minor >= minor
    parts = re.split(r"[.-]", info.version)
    try:
        client_major = int(parts[0]) if parts and parts[0] else 0
        if client_major != major:
            return client_major > major
        return (int(parts[1]) if len(parts) > 1 else 0) >= minor
    except ValueError:
        return False


def own_cluster(host: MasterView) -> OwnCluster:
    """Whether a cluster key names this cluster: its ensemble is this cluster's and the cluster
    id under its znode parent is this one's (HBase's ``checkSameClusterKey``, which reads the
    id over the key's own ensemble; a key naming another ensemble is not looked at here)."""

    def check(key: str) -> bool:
        try:
            hosts, port, parent = parse_cluster_key(key)
        except ConfigError:
            return False
        ensemble, _, chroot = host.zk_hosts.partition("/")
        chroot = f"/{chroot}".rstrip("/") if chroot else ""

        def local(address: str) -> str:
            return address.replace("localhost:", "127.0.0.1:")

        if {local(f"{h}:{port}") for h in hosts} != {local(a) for a in ensemble.split(",")}:
            return False
        if chroot:
            if not parent.startswith(chroot + "/"):
                return False
            parent = parent[len(chroot) :]
        if host.zk is None:
            return False
        try:
            return read_cluster_id(host.zk, ZnodeLayout(parent)) == host.cluster_id
        except (ZkError, ConfigError):
            return False  # no cluster id there: HBase reads null, which is not this cluster's

    return check


class MasterService:
    """The calls, by ``MasterService`` method name.

    :param host: the cluster whose peers and tables these are.
    :param executor: where the procedures run.
    """

    def __init__(self, host: MasterView, executor: ProcedureExecutor) -> None:
        self.host = host
        self.executor = executor
        self.own = own_cluster(host)
        self._handlers: dict[str, Callable[[Any, bool], Message]] = {
            "getProcedureResult": self.get_procedure_result,
            "AddReplicationPeer": self.add_peer,
            "RemoveReplicationPeer": self.remove_peer,
            "EnableReplicationPeer": self.enable_peer,
            "DisableReplicationPeer": self.disable_peer,
            "GetReplicationPeerConfig": self.get_peer_config,
            "UpdateReplicationPeerConfig": self.update_peer_config,
            "ListReplicationPeers": self.list_peers,
            "IsReplicationPeerEnabled": self.is_peer_enabled,
            **TableCalls(host, executor).handlers(),
        }

    @staticmethod
    def method(name: str) -> MethodDescriptor | None:
        """The method of that name (HBase's ``findMethodByName``), or ``None``."""
        return SERVICE.methods_by_name.get(name)

    @staticmethod
    def request(method: MethodDescriptor) -> Message:
        """An empty request message of the method."""
        return message_factory.GetMessageClass(method.input_type)()

    def call(self, method: MethodDescriptor, request: Message, *, modern: bool) -> Message:
        """Answer one call.

        :param modern: the client runs HBase 2.0 or later (no latch on procedures).
        :raises MasterCallError: HBase's exception for it.
        """
        handler = self._handlers.get(method.name)
        if handler is None:
            raise MasterCallError(IOE, f"{method.name} is not served by the minicluster's master", do_not_retry=True)
        try:
            return handler(request, modern)
        except MasterCallError:
            raise
        except ZkError as exc:
            # HBase's ReplicationException from its storage, which the RPC layer wraps in an IOException
            cause = MasterCallError(REPLICATION_EXCEPTION, str(exc), do_not_retry=False)
            raise MasterCallError(IOE, str(exc), do_not_retry=False, cause=cause) from None

    @property
    def _peers(self) -> ReplicationPeers:
        if self.host.zk is None:
            raise MasterCallError(
                "org.apache.hadoop.hbase.ipc.ServerNotRunningYetException",
                "Server is not running yet",
                do_not_retry=False,
            )
        return ReplicationPeers(self.host.zk, self.host.layout)

    def _submit(self, procedure: PeerProcedure, modern: bool) -> int:
        """Submit; a client without procedure support waits behind its latch."""
        self.executor.submit(procedure)
        if not modern:
            procedure.latch.wait()
            if procedure.error is not None:
                raise procedure.error
        return procedure.proc_id

    # -- the calls ---------------------------------------------------------------------------------

    def get_procedure_result(self, request: Master_pb2.GetProcedureResultRequest, modern: bool) -> Message:
        return procedure_result(self.executor.get(request.proc_id))

    def add_peer(self, request: Replication_pb2.AddReplicationPeerRequest, modern: bool) -> Message:
        enabled = request.peer_state.state == _ENABLED
        log.info("creating replication peer, id=%s, state=%s", request.peer_id, "ENABLED" if enabled else "DISABLED")
        procedure = AddPeer(self.host, request.peer_id, request.peer_config, enabled, self.own)
        return Replication_pb2.AddReplicationPeerResponse(proc_id=self._submit(procedure, modern))

    def remove_peer(self, request: Replication_pb2.RemoveReplicationPeerRequest, modern: bool) -> Message:
        log.info("removing replication peer, id=%s", request.peer_id)
        procedure = RemovePeer(self.host, request.peer_id)
        return Replication_pb2.RemoveReplicationPeerResponse(proc_id=self._submit(procedure, modern))

    def enable_peer(self, request: Replication_pb2.EnableReplicationPeerRequest, modern: bool) -> Message:
        log.info("enable replication peer, id=%s", request.peer_id)
        procedure = SetPeerState(self.host, request.peer_id, True)
        return Replication_pb2.EnableReplicationPeerResponse(proc_id=self._submit(procedure, modern))

    def disable_peer(self, request: Replication_pb2.DisableReplicationPeerRequest, modern: bool) -> Message:
        log.info("disable replication peer, id=%s", request.peer_id)
        procedure = SetPeerState(self.host, request.peer_id, False)
        return Replication_pb2.DisableReplicationPeerResponse(proc_id=self._submit(procedure, modern))

    def update_peer_config(self, request: Replication_pb2.UpdateReplicationPeerConfigRequest, modern: bool) -> Message:
        log.info("update replication peer config, id=%s", request.peer_id)
        procedure = UpdatePeerConfig(self.host, request.peer_id, request.peer_config, self.own)
        return Replication_pb2.UpdateReplicationPeerConfigResponse(proc_id=self._submit(procedure, modern))

    def get_peer_config(self, request: Replication_pb2.GetReplicationPeerConfigRequest, modern: bool) -> Message:
        found = stored_peer(self._peers, request.peer_id)
        if found is None:
            raise peer_not_found(request.peer_id)
        return Replication_pb2.GetReplicationPeerConfigResponse(peer_id=request.peer_id, peer_config=found.pb)

    def is_peer_enabled(self, request: Replication_pb2.GetReplicationPeerStateRequest, modern: bool) -> Message:
        found = stored_peer(self._peers, request.peer_id)
        if found is None:
            message = f"Replication Peer of {request.peer_id} does not exist."
            cause = MasterCallError(REPLICATION_EXCEPTION, message, do_not_retry=False)
            raise MasterCallError(IOE, message, do_not_retry=False, cause=cause)
        return Replication_pb2.GetReplicationPeerStateResponse(is_enabled=found.enabled)

    def list_peers(self, request: Replication_pb2.ListReplicationPeersRequest, modern: bool) -> Message:
        pattern = None
        if request.HasField("regex"):
            try:
                pattern = re.compile(request.regex)
            except re.error as exc:
                cause = MasterCallError("java.util.regex.PatternSyntaxException", str(exc), do_not_retry=False)
                raise MasterCallError(IOE, str(exc), do_not_retry=False, cause=cause) from None
        peers = self._peers
        answer = Replication_pb2.ListReplicationPeersResponse()
        for peer_id in peers.ids():
            if pattern is not None and not pattern.fullmatch(peer_id):
                continue
            found = stored_peer(peers, peer_id)
            if found is None:
                continue  # removed while listed
            state = Replication_pb2.ReplicationState(
                state=_ENABLED if found.enabled else Replication_pb2.ReplicationState.DISABLED
            )
            answer.peer_desc.add(id=peer_id, state=state, config=found.pb)
        return answer
