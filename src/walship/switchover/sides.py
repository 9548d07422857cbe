"""The two clusters of a switchover: the source (its ZooKeeper, WALs and master) and the peer's
cluster, reached through the ZooKeeper its cluster key names and the master registered there.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from dataclasses import dataclass

from kazoo.client import KazooClient

from walship.errors import ConfigError, MasterError, PeerNotFoundError, SwitchoverError, ZkError
from walship.peer import PeerConfig, parse_cluster_key
from walship.replicate.source import SourceSite
from walship.replicate.walstore import WalStore
from walship.rpc.master import MasterAdmin
from walship.rpc.peers import MasterPeers
from walship.rpc.tables import MasterTables
from walship.zk import ReplicationPeers, ZnodeLayout, zk_client

__all__ = ["Side", "Sides", "cluster_key", "master_answers", "open_sides", "same_cluster"]

log = logging.getLogger(__name__)


def cluster_key(zk: str, znode_parent: str) -> str:
    """HBase's cluster key of a ZooKeeper quorum ``host:port[,host:port...][/chroot]`` and a
    znode parent: ``host[,host...]:port:/parent`` (a chroot goes in front of the parent).

    :raises ConfigError: the hosts listen on different ports (a cluster key has one port).
    """
    hosts, _, chroot = zk.partition("/")
    names, ports = [], set()
    for part in hosts.split(","):
        host, sep, port = part.strip().rpartition(":")
        if not sep:
            host, port = port, "2181"
        names.append(host)
        ports.add(port)
    if len(ports) != 1:
        raise ConfigError(f"ZooKeeper {zk!r}: its hosts listen on different ports, which a cluster key cannot say")
    parent = f"/{chroot.strip('/')}{znode_parent}" if chroot.strip("/") else znode_parent
    return f"{','.join(names)}:{ports.pop()}:{parent}"


def same_cluster(key: str, other: str) -> bool:
    """Whether two cluster keys name one cluster: the same hosts (``localhost`` is
    ``127.0.0.1``), port and znode parent, whatever their order."""

    def norm(k: str) -> tuple[frozenset[str], int, str]:
        hosts, port, parent = parse_cluster_key(k)
        return frozenset("127.0.0.1" if h == "localhost" else h for h in hosts), port, parent.rstrip("/") or "/"

    try:
        return norm(key) == norm(other)
    except ConfigError:
        return False


@dataclass
class Side:
    """One cluster: its ZooKeeper state and its master's calls (its tables' among them)."""

    label: str
    client: KazooClient
    layout: ZnodeLayout
    admin: MasterAdmin
    tables: MasterTables
    cluster_key: str

    @property
    def peers(self) -> MasterPeers:
        """Its peers as its master has them."""
        return MasterPeers(self.client, self.layout, self.admin)

    def find_peer(self, peer_id: str) -> PeerConfig | None:
        """Its peer as its master has it, or ``None``.

        :raises SwitchoverError: its master does not answer.
        """
        try:
            return self.peers.get(peer_id)
        except PeerNotFoundError:
            return None
        except MasterError as exc:
            raise SwitchoverError(f"{self.label}: {exc}") from None

    @property
    def store(self) -> ReplicationPeers:
        """walship's own znodes of its peers (the managed peers' switches)."""
        return ReplicationPeers(self.client, self.layout)


@dataclass
class Sides:
    """Both clusters of a switchover to ``peer``."""

    site: SourceSite
    source: Side
    target: Side
    peer: PeerConfig

    @property
    def walstore(self) -> WalStore:
        return self.site.walstore()


def _side(stack: contextlib.ExitStack, label: str, client: KazooClient, layout: ZnodeLayout, key: str) -> Side:
    """One cluster's side, its master's connection closed with ``stack``."""
    admin = stack.enter_context(MasterAdmin(client, layout))
    return Side(label, client, layout, admin, MasterTables(admin), key)


@contextlib.contextmanager
def open_sides(site: SourceSite, peer_id: str) -> Iterator[Sides]:
    """Connect to the source and to the peer's cluster (its cluster key's ZooKeeper, with the
    source's ZooKeeper credentials).

    :raises SwitchoverError: either ZooKeeper does not answer, or the peer is unknown.
    """
    with contextlib.ExitStack() as stack:
        try:
            client, layout = stack.enter_context(site.state())
            peer = ReplicationPeers(client, layout).get(peer_id)
        except ZkError as exc:
            raise SwitchoverError(f"preflight: the source cluster at {site.zk}{site.znode_parent}: {exc}") from None
        source = _side(
            stack, f"the source cluster ({site.zk})", client, layout, cluster_key(site.zk, site.znode_parent)
        )
        hosts, port, parent = parse_cluster_key(peer.cluster_key)
        quorum = ",".join(f"{h}:{port}" for h in hosts)
        try:
            peer_client = stack.enter_context(zk_client(quorum, auth=site.auth, timeout=site.timeout))
        except ZkError as exc:
            raise SwitchoverError(
                f"preflight: peer {peer_id}'s cluster ({peer.cluster_key}): its ZooKeeper does not answer: {exc}"
            ) from None
        target = _side(
            stack, f"peer {peer_id}'s cluster ({peer.cluster_key})", peer_client, ZnodeLayout(parent), peer.cluster_key
        )
        yield Sides(site, source, target, peer)


def master_answers(side: Side) -> str | None:
    """``None`` when the side's master answers a call; else why not."""
    try:
        side.admin.list_peers()
    except MasterError as exc:
        return f"{side.label}: its master does not answer: {exc}"
    return None
