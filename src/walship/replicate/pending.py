"""Which queues of a peer have work: unshipped bytes, a finished WAL to remove, or a
recovered queue to drain. Used by the Airflow sensor's trigger and by monitoring."""

from __future__ import annotations

from dataclasses import dataclass

from walship.replicate.shipper import Shipper
from walship.replicate.walstore import WalStore
from walship.zk import ZnodeLayout, zk_client

__all__ = ["PendingQueue", "pending_queues"]


@dataclass(frozen=True)
class PendingQueue:
    server: str
    queue_id: str
    backlog_bytes: int
    wals: int

    @property
    def key(self) -> str:
        return f"{self.server}/{self.queue_id}"


def pending_queues(
    zk: str, znode_parent: str, wal_root: str, peer_id: str, queue_filter: str | None = None
) -> list[PendingQueue]:
    """The peer's queues with work, oldest first; none while the peer is disabled.

    Queues of dead servers count (they will be claimed and drained).

    :raises PeerNotFoundError: no such peer.
    """
    with zk_client(zk) as client:
        shipper = Shipper(client, ZnodeLayout(znode_parent), WalStore(wal_root))
        peer = shipper.peers.get(peer_id)
        if not peer.enabled:
            return []
        out = []
        for q in shipper.peer_queues(peer_id, queue_filter):
            backlog = shipper.backlog(q)
            if backlog > 0:
                out.append(PendingQueue(q.server, str(q.queue_id), backlog, len(q.wals)))
        return out
