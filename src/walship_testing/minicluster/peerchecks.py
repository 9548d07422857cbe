"""The checks HBase 2.6's master makes before it changes a replication peer, with HBase's
exception classes and messages (``ReplicationPeerManager``: ``preAddPeer``,
``preRemovePeer``, ``preEnablePeer``, ``preDisablePeer``, ``preUpdatePeerConfig``,
``checkPeerConfig``; ``ZKConfig.transformClusterKey``).

Each refusal is a :class:`~walship.errors.MasterCallError` carrying the Java class HBase
answers with: ``DoNotRetryIOException`` for a bad peer (``Found invalid peer name``, ``already
exists``, ``has already been enabled``, ``Invalid cluster key``, ``Need clean namespaces or
table-cfs config firstly ...``, ``Table-cfs ... is conflict with namespaces ...``, ``Changing
the cluster key on an existing peer is not allowed ...``), ``ReplicationPeerNotFoundException``
(its message is the peer id) for a peer that does not exist. HBase runs them inside the
procedure (its PRE_PEER_MODIFICATION state): :mod:`walship_testing.minicluster.procedures` does too.

Where walship is stricter than HBase (a peer id of letters, digits, ``_`` and ``.``; a
cluster key walship can ship to), the peer is refused with a ``DoNotRetryIOException`` naming
walship's reason, as nothing walship could ship should be written.

Not checked, as the minicluster cannot: that a ``replicationEndpointImpl`` or a custom
WALEntryFilter class can be loaded, and the cluster id behind a cluster key on another
ZooKeeper ensemble (HBase connects to it; the minicluster reads it only when the key names
its own ensemble). HBase's hfile-refs queues do not exist here.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from walship.errors import InvalidPeerConfigError, MasterCallError, PeerNotFoundError
from walship.peer import PeerConfig, validate_peer_id
from walship.protos import Replication_pb2
from walship.zk.peers import ReplicationPeers
from walship.zk.queueid import QueueId
from walship.zk.queues import ReplicationQueues

__all__ = [
    "DNRIOE",
    "HBASE_ENDPOINT",
    "IOE",
    "PEER_NOT_FOUND",
    "REPLICATION_EXCEPTION",
    "StoredPeer",
    "check_peer_config",
    "do_not_retry",
    "merged_config",
    "peer_not_found",
    "pre_add",
    "pre_remove",
    "pre_set_state",
    "pre_update",
    "stored_peer",
    "walship_config",
]

log = logging.getLogger(__name__)

DNRIOE = "org.apache.hadoop.hbase.DoNotRetryIOException"
PEER_NOT_FOUND = "org.apache.hadoop.hbase.ReplicationPeerNotFoundException"
IOE = "java.io.IOException"
REPLICATION_EXCEPTION = "org.apache.hadoop.hbase.replication.ReplicationException"
NUMBER_FORMAT = "java.lang.NumberFormatException"
#: HBase's own endpoint (an ``HBaseReplicationEndpoint``): its peers' cluster keys are checked.
HBASE_ENDPOINT = "org.apache.hadoop.hbase.replication.regionserver.HBaseInterClusterReplicationEndpoint"
_KEY_FORMAT = "hbase.zookeeper.quorum:hbase.zookeeper.property.clientPort:zookeeper.znode.parent"
_PARENT_RE = re.compile(r"/.*[^/]")
_JAVA_INT_RE = re.compile(r"[+-]?\d+")

#: Whether a cluster key names this very cluster (HBase compares the cluster ids).
OwnCluster = Callable[[str], bool]


def do_not_retry(message: str, cause: MasterCallError | None = None) -> MasterCallError:
    """HBase's ``DoNotRetryIOException(message)``."""
    return MasterCallError(DNRIOE, message, do_not_retry=True, cause=cause)


def peer_not_found(peer_id: str) -> MasterCallError:
    """HBase's ``ReplicationPeerNotFoundException(peerId)``: its message is the peer id."""
    return MasterCallError(PEER_NOT_FOUND, peer_id, do_not_retry=True)


@dataclass(frozen=True)
class StoredPeer:
    """A peer as the master has it: its id, HBase's peer-state, its configuration's message."""

    peer_id: str
    enabled: bool
    pb: Replication_pb2.ReplicationPeer

    @property
    def serial(self) -> bool:
        return self.pb.serial


def stored_peer(peers: ReplicationPeers, peer_id: str) -> StoredPeer | None:
    """The peer in ZooKeeper, or ``None`` (also for an id that cannot name a peer znode)."""
    try:
        validate_peer_id(peer_id)
        return StoredPeer(peer_id, peers.hbase_enabled(peer_id), peers.message(peer_id))
    except (InvalidPeerConfigError, PeerNotFoundError):
        return None


def _parse_java_int(text: str) -> None:
    """``Integer.parseInt``, as the cluster key's port is read."""
    if not _JAVA_INT_RE.fullmatch(text) or not -(2**31) <= int(text) < 2**31:
        cause = MasterCallError(NUMBER_FORMAT, f'For input string: "{text}"', do_not_retry=False)
        # HBase lets the NumberFormatException out of its check: the procedure fails with it,
        # and the master answers an IOException wrapping it
        raise MasterCallError(IOE, cause.java_string, do_not_retry=False, cause=cause)


def check_cluster_key(key: str) -> None:
    """``ZKConfig.validateClusterKey`` wrapped as ``checkClusterKey`` wraps it."""
    parts = key.split(":")
    if len(parts) >= 3 and _PARENT_RE.fullmatch(parts[-1]):
        _parse_java_int(parts[-2])
        return
    cause = MasterCallError(
        IOE, f"Cluster key passed {key} is invalid, the format should be:{_KEY_FORMAT}", do_not_retry=False
    )
    raise do_not_retry(f"Invalid cluster key: {key}", cause)


def _table_name(tcf: Replication_pb2.TableCF) -> tuple[str, str]:
    """The namespace and ``TableName.toString()`` of a table-cfs entry."""
    ns = tcf.table_name.namespace.decode(errors="replace") or "default"
    qualifier = tcf.table_name.qualifier.decode(errors="replace")
    return ns, qualifier if ns == "default" else f"{ns}:{qualifier}"


def _conflict(namespaces: Iterable[bytes], table_cfs: Iterable[Replication_pb2.TableCF]) -> None:
    """``checkNamespacesAndTableCfsConfigConflict``."""
    names = {ns.decode(errors="replace") for ns in namespaces}
    for tcf in table_cfs:
        ns, table = _table_name(tcf)
        if ns in names:
            raise do_not_retry(f"Table-cfs {table} is conflict with namespaces {ns} in peer config")


def check_peer_config(pb: Replication_pb2.ReplicationPeer, own_cluster: OwnCluster) -> None:
    """``checkPeerConfig``: the cluster key (of a peer of HBase's own endpoint), not this
    cluster's own, and the replicate-all rules."""
    endpoint = pb.replicationEndpointImpl.strip()
    if not endpoint or endpoint == HBASE_ENDPOINT:
        check_cluster_key(pb.clusterkey)
        if own_cluster(pb.clusterkey):
            raise do_not_retry(
                f"Invalid cluster key: {pb.clusterkey}, should not replicate to itself for "
                "HBaseInterClusterReplicationEndpoint"
            )
    # ReplicationPeerConfigUtil.convert: a message without replicate_all replicates all tables
    replicate_all = pb.replicate_all if pb.HasField("replicate_all") else True
    if replicate_all:
        if pb.namespaces or pb.table_cfs:
            raise do_not_retry("Need clean namespaces or table-cfs config firstly when you want replicate all cluster")
        _conflict(pb.exclude_namespaces, pb.exclude_table_cfs)
    else:
        if pb.exclude_namespaces or pb.exclude_table_cfs:
            raise do_not_retry(
                "Need clean exclude-namespaces or exclude-table-cfs config firstly when replicate_all flag is false"
            )
        _conflict(pb.namespaces, pb.table_cfs)


def walship_config(peer_id: str, pb: Replication_pb2.ReplicationPeer) -> PeerConfig:
    """The peer as walship reads it back (what is written is what walship can ship), with
    HBase's default for a message without ``replicate_all``: every table.

    :raises MasterCallError: walship refuses it (``DoNotRetryIOException`` with walship's reason).
    """
    full = Replication_pb2.ReplicationPeer()
    full.CopyFrom(pb)
    if not full.HasField("replicate_all"):
        full.replicate_all = True
    try:
        return PeerConfig.from_proto(peer_id, full, enabled=False)
    except InvalidPeerConfigError as exc:
        raise do_not_retry(f"peer {peer_id}: {exc}") from None


def _check_id(peer_id: str) -> None:
    if "-" in peer_id:
        raise do_not_retry(f"Found invalid peer name: {peer_id}")
    try:
        validate_peer_id(peer_id)
    except InvalidPeerConfigError as exc:
        raise do_not_retry(str(exc)) from None


def _check_queues_deleted(queues: ReplicationQueues, peer_id: str) -> None:
    """``checkQueuesDeleted``: no queue of an earlier peer of that id is left."""
    for server in queues.replicators():
        for queue_id in queues.queue_ids(server):
            if QueueId.parse(queue_id).peer_id == peer_id:
                raise do_not_retry(f"undeleted queue for peerId: {peer_id}, replicator: {server}, queueId: {queue_id}")


def pre_add(
    peers: ReplicationPeers,
    queues: ReplicationQueues,
    peer_id: str,
    pb: Replication_pb2.ReplicationPeer,
    own_cluster: OwnCluster,
) -> PeerConfig:
    """``preAddPeer``; returns the peer to write (HBase's peer-state set by the caller)."""
    _check_id(peer_id)
    check_peer_config(pb, own_cluster)
    if peers.exists(peer_id):
        raise do_not_retry(f"Replication peer {peer_id} already exists")
    _check_queues_deleted(queues, peer_id)
    return walship_config(peer_id, pb)


def pre_remove(peers: ReplicationPeers, peer_id: str) -> StoredPeer:
    """``preRemovePeer``: the peer exists."""
    found = stored_peer(peers, peer_id)
    if found is None:
        raise peer_not_found(peer_id)
    return found


def pre_set_state(peers: ReplicationPeers, peer_id: str, enabled: bool) -> StoredPeer:
    """``preEnablePeer`` / ``preDisablePeer``: the peer exists and is in the other state."""
    found = pre_remove(peers, peer_id)
    if found.enabled == enabled:
        state = "enabled" if enabled else "disabled"
        raise do_not_retry(f"Replication peer {peer_id} has already been {state}")
    return found


def _blank(text: str) -> bool:
    return not text.strip()


def _java(text: str | None) -> str:
    """A string as Java's concatenation writes it (``null`` for none)."""
    return "null" if text is None else text


def pre_update(
    peers: ReplicationPeers, peer_id: str, pb: Replication_pb2.ReplicationPeer, own_cluster: OwnCluster
) -> StoredPeer:
    """``preUpdatePeerConfig``: a valid configuration, of a peer that exists, with the same
    cluster key and endpoint class; returns the peer as it is."""
    check_peer_config(pb, own_cluster)
    old = pre_remove(peers, peer_id)
    old_key, new_key = old.pb.clusterkey, pb.clusterkey
    if not (_blank(old_key) and _blank(new_key)) and old_key != new_key:
        raise do_not_retry(
            f"Changing the cluster key on an existing peer is not allowed. Existing key '{old_key}' for peer "
            f"{peer_id} does not match new key '{new_key}'"
        )
    old_impl = old.pb.replicationEndpointImpl if old.pb.HasField("replicationEndpointImpl") else None
    new_impl = pb.replicationEndpointImpl if pb.HasField("replicationEndpointImpl") else None
    if not (_blank(old_impl or "") and _blank(new_impl or "")) and old_impl != new_impl:
        raise do_not_retry(
            "Changing the replication endpoint implementation class on an existing peer is not allowed. "
            f"Existing class '{_java(old_impl)}' for peer {peer_id} does not match new class '{_java(new_impl)}'"
        )
    return old


def merged_config(old: Replication_pb2.ReplicationPeer, new: Replication_pb2.ReplicationPeer) -> None:
    """``ReplicationPeerManager.updatePeerConfig``: the new configuration's map is the old one
    overlaid with the new one (a key is never removed by an update); ``new`` is changed."""
    merged = {p.name: p.value for p in old.configuration}
    merged.update({p.name: p.value for p in new.configuration})
    del new.configuration[:]
    for name, value in merged.items():
        new.configuration.add(name=name, value=value)
