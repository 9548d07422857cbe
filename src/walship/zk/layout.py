"""Where HBase 2.x keeps its state in ZooKeeper, under ``zookeeper.znode.parent``.

::

    <parent>/hbaseid                                     PBUF + ClusterId
    <parent>/rs/<server>                                 live region servers (ephemeral)
    <parent>/replication/peers/<peer>                    PBUF + ReplicationPeer
    <parent>/replication/peers/<peer>/peer-state         PBUF + ReplicationState
    <parent>/replication/rs/<server>/<queue>/<wal>       PBUF + ReplicationHLogPosition
    <parent>/replication/walship/peers/<peer>/state      walship's switch of a managed peer (PBUF + ReplicationState)
    <parent>/replication/walship/locks/<server>/<queue>  walship's per-queue shipper locks (data: the holder)
    <parent>/replication/walship/progress/<peer>/<server>/<queue>
                                                         per-queue progress record (JSON)
    <parent>/replication/walship/errors/<peer>           a peer's shipping errors counted by kind (JSON)
    <parent>/replication/walship/jobs/<peer>/<job>       summaries of ship jobs (JSON, newest kept)
    <parent>/replication/walship/switchovers/<peer>      the last switchover to the peer: its steps (JSON)
    <parent>/replication/walship/cleaner                 the cleaner's last run: its TTL and time (JSON)
    <parent>/replication/walship/subscriptions/<name>/hbaseid
                                                         a SEP subscription's own cluster id (PBUF + ClusterId)
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from walship.errors import ConfigError

__all__ = ["DEFAULT_PARENT", "ZnodeLayout", "check_znode_name"]

DEFAULT_PARENT = "/hbase"
_PARENT_RE = re.compile(r"^(/[^/\x00-\x1f]+)+$")
_UNSAFE_IN_NAME = re.compile(r"[/\x00-\x1f\x7f]")


def check_znode_name(name: str, what: str) -> str:
    """A single znode name: non-empty, no ``/``, not ``.`` or ``..``, no control characters."""
    if not name or name in (".", "..") or _UNSAFE_IN_NAME.search(name):
        raise ConfigError(f"invalid {what}: {name!r}")
    return name


@dataclass(frozen=True)
class ZnodeLayout:
    """The znode paths of one HBase cluster.

    :param parent: ``zookeeper.znode.parent``, e.g. ``/hbase``.
    """

    parent: str = DEFAULT_PARENT

    def __post_init__(self) -> None:
        parts = self.parent.split("/")[1:]
        if (
            not _PARENT_RE.match(self.parent)
            or self.parent.endswith("/")
            or any(p in ("", ".", "..") for p in parts)
            or len(self.parent) > 1024
        ):
            shown = (
                self.parent if len(self.parent) <= 60 else f"{self.parent[:60]}... ({len(self.parent):,} characters)"
            )
            raise ConfigError(f"invalid znode parent {shown!r}: expected an absolute path like /hbase (no '.' or '..')")

    @property
    def cluster_id(self) -> str:
        return f"{self.parent}/hbaseid"

    @property
    def live_servers(self) -> str:
        return f"{self.parent}/rs"

    @property
    def master(self) -> str:
        """The active master's address (``zookeeper.znode.master``)."""
        return f"{self.parent}/master"

    @property
    def meta_region_server(self) -> str:
        """Where hbase:meta is (``zookeeper.znode.metaserver``, the default replica's)."""
        return f"{self.parent}/meta-region-server"

    @property
    def backup_masters(self) -> str:
        """Backup masters, one ephemeral znode each (``zookeeper.znode.backup.masters``)."""
        return f"{self.parent}/backup-masters"

    def live_server(self, server: str) -> str:
        return f"{self.live_servers}/{check_znode_name(server, 'server name')}"

    @property
    def replication(self) -> str:
        return f"{self.parent}/replication"

    @property
    def peers(self) -> str:
        return f"{self.replication}/peers"

    def peer(self, peer_id: str) -> str:
        return f"{self.peers}/{check_znode_name(peer_id, 'peer id')}"

    def peer_state(self, peer_id: str) -> str:
        return f"{self.peer(peer_id)}/peer-state"

    @property
    def queues(self) -> str:
        return f"{self.replication}/rs"

    def replicator(self, server: str) -> str:
        return f"{self.queues}/{check_znode_name(server, 'server name')}"

    def queue(self, server: str, queue_id: str) -> str:
        return f"{self.replicator(server)}/{check_znode_name(queue_id, 'queue id')}"

    def wal(self, server: str, queue_id: str, wal: str) -> str:
        return f"{self.queue(server, queue_id)}/{check_znode_name(wal, 'WAL name')}"

    @property
    def regions(self) -> str:
        """Serial peers' last pushed sequence ids (``zookeeper.znode.replication.regions``)."""
        return f"{self.replication}/regions"

    def last_pushed(self, encoded_region: str, peer_id: str) -> str:
        """``<regions>/<enc[0:2]>/<enc[2:4]>/<enc[4:]>-<peer>``, as HBase's
        ZKReplicationQueueStorage keeps a region's last pushed sequence id for a serial peer.

        :raises ConfigError: not a 32-character hex encoded region name.
        """
        if len(encoded_region) != 32 or any(c not in "0123456789abcdef" for c in encoded_region):
            raise ConfigError(f"invalid encoded region name {encoded_region!r}: expected 32 hex digits")
        e = encoded_region
        return f"{self.regions}/{e[0:2]}/{e[2:4]}/{e[4:]}-{check_znode_name(peer_id, 'peer id')}"

    @property
    def walship(self) -> str:
        """The root of walship's own znodes (never inside HBase's queue znodes)."""
        return f"{self.replication}/walship"

    def walship_peer(self, peer_id: str) -> str:
        return f"{self.walship}/peers/{check_znode_name(peer_id, 'peer id')}"

    def walship_peer_state(self, peer_id: str) -> str:
        """walship's own enabled switch of a managed peer (HBase's peer-state stays DISABLED)."""
        return f"{self.walship_peer(peer_id)}/state"

    @property
    def locks(self) -> str:
        return f"{self.walship}/locks"

    def queue_lock(self, server: str, queue_id: str) -> str:
        return f"{self.locks}/{check_znode_name(server, 'server name')}/{check_znode_name(queue_id, 'queue id')}"

    @property
    def progress(self) -> str:
        return f"{self.walship}/progress"

    def peer_progress(self, peer_id: str) -> str:
        return f"{self.progress}/{check_znode_name(peer_id, 'peer id')}"

    def queue_progress(self, peer_id: str, server: str, queue_id: str) -> str:
        return (
            f"{self.peer_progress(peer_id)}/{check_znode_name(server, 'server name')}/"
            f"{check_znode_name(queue_id, 'queue id')}"
        )

    @property
    def errors(self) -> str:
        return f"{self.walship}/errors"

    def peer_errors(self, peer_id: str) -> str:
        """A peer's shipping errors counted by kind (:meth:`~walship.zk.records.ProgressStore.count_error`)."""
        return f"{self.errors}/{check_znode_name(peer_id, 'peer id')}"

    @property
    def jobs(self) -> str:
        return f"{self.walship}/jobs"

    def peer_jobs(self, peer_id: str) -> str:
        return f"{self.jobs}/{check_znode_name(peer_id, 'peer id')}"

    @property
    def subscriptions(self) -> str:
        return f"{self.walship}/subscriptions"

    def subscription(self, name: str) -> str:
        """The znode parent of a SEP subscription: the cluster its peer's cluster key names
        (it holds only an ``hbaseid``)."""
        return f"{self.subscriptions}/{check_znode_name(name, 'subscription name')}"

    @property
    def cleaner(self) -> str:
        """The last run of walship's cleaner: its TTL and when it ran (JSON), so that a replay
        whose window reaches past the archive names what deleted it."""
        return f"{self.walship}/cleaner"

    @property
    def switchovers(self) -> str:
        return f"{self.walship}/switchovers"

    def switchover(self, peer_id: str) -> str:
        """The last switchover to the peer (``walship switchover``): its steps and what each changed."""
        return f"{self.switchovers}/{check_znode_name(peer_id, 'peer id')}"

    def job(self, peer_id: str, job_id: str) -> str:
        return f"{self.peer_jobs(peer_id)}/{check_znode_name(job_id, 'job id')}"
