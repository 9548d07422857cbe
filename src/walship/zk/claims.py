"""Failover of replication queues: a dead server's queues claimed by a live one as recovered
queues (``<peerId>-<dead>``), as HBase 2.x's ZKReplicationQueueStorage moves them.

A claim moves one queue with one ZooKeeper multi, so a queue is either wholly with the dead
server or wholly with its claimer, whatever happens to the claimer.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Mapping, Sequence

from kazoo.client import KazooClient
from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError, NotEmptyError

from walship.errors import PositionBackwardsError, QueueError, QueueNotFoundError
from walship.servername import ServerName
from walship.zk.client import translated, zk_errors
from walship.zk.layout import ZnodeLayout
from walship.zk.locks import Holder, queue_lock
from walship.zk.queueid import QueueId

__all__ = ["QueueClaims"]

log = logging.getLogger(__name__)

# A transient child created and deleted inside every claim's multi: it bumps the cversion of
# the rs znode, so a snapshot of all queues taken across a claim sees the change and retries.
CVERSION_BUMP = "walship-claim-in-progress"


@translated("replication queues")
class QueueClaims:
    """The failover part of :class:`walship.zk.queues.ReplicationQueues`, which it is a base of."""

    client: KazooClient
    layout: ZnodeLayout

    def queue_ids(self, server: str) -> list[str]:
        raise NotImplementedError  # ReplicationQueues reads them

    def remove_queue(self, server: str, queue_id: str) -> None:
        raise NotImplementedError  # ReplicationQueues removes it

    def replicators(self) -> list[str]:
        raise NotImplementedError  # ReplicationQueues lists them

    def set_position(
        self, server: str, queue_id: str, wal: str, position: int, *, last_pushed: Mapping[str, int] | None = None
    ) -> int:
        raise NotImplementedError  # ReplicationQueues writes it

    def follow_claim(
        self,
        server: str,
        queue_id: str,
        wal: str,
        position: int,
        *,
        last_pushed: Mapping[str, int] | None = None,
        holder: Holder | None = None,
    ) -> str | None:
        """Carry a position to where a claim took the queue: a batch of ``server``'s queue
        ``queue_id`` was applied while another claimer (HBase 2.5+'s master) moved the queue
        from under its shipper, so its position could not be written. Written to the recovered
        queue ``<queue_id>-<server>`` the claim made, the batch is not shipped again from there.

        Only under that queue's lock, taken when free, and only forward: a shipper of the
        recovered queue, or a position already further, wins.

        :returns: ``server/queue id`` of the recovered queue written, or ``None``: no such
            queue (removed, not a claim), its lock held, the WAL gone from it, or further on.
        """
        with zk_errors(f"carrying queue {queue_id} of {server}'s position to its claimer"):
            new_id = str(QueueId.parse(queue_id).claimed_from(server))
            for claimer in self.replicators():
                if claimer == server or self.client.exists(self.layout.queue(claimer, new_id)) is None:
                    continue
                with queue_lock(self.client, self.layout, claimer, new_id, holder=holder) as lock:
                    if not lock.held:
                        return None
                    try:
                        self.set_position(claimer, new_id, wal, position, last_pushed=last_pushed)
                    except (QueueNotFoundError, PositionBackwardsError):
                        return None
                log.info(
                    "queue %s/%s was claimed: %s position %d carried to %s", server, queue_id, wal, position, claimer
                )
                return f"{claimer}/{new_id}"
            return None

    def claim_queue(self, dead_server: str, queue_id: str, dest_server: str, *, attempts: int = 5) -> str | None:
        """Move one queue of a dead server to ``dest_server`` as a recovered queue.

        One multi creates ``<dest>/<queueId>-<dead>`` with every WAL znode and its position
        and deletes the old ones; each old WAL znode is deleted at the version it was read at,
        so a position written meanwhile makes the multi fail rather than be lost.

        :returns: the new queue id, or ``None`` when the queue is gone (another claimer took it).
        :raises ZkUnavailableError: the session or connection was lost; the queue is then
            whole where it was or where it went, never half moved.
        """
        with zk_errors(f"claiming queue {queue_id} of {dead_server} into {dest_server}"):
            return self._claim_queue(dead_server, queue_id, dest_server, attempts)

    def _claim_queue(self, dead_server: str, queue_id: str, dest_server: str, attempts: int) -> str | None:
        ServerName.parse(dead_server)
        if dest_server == dead_server:
            raise QueueError(f"cannot claim queue {queue_id} of {dead_server} into itself")
        new_id = str(QueueId.parse(queue_id).claimed_from(dead_server))
        src = self.layout.queue(dead_server, queue_id)
        dst = self.layout.queue(dest_server, new_id)
        for _ in range(attempts):
            try:
                names = self.client.get_children(src)
                wals = []
                for name in names:
                    data, stat = self.client.get(f"{src}/{name}")
                    wals.append((name, data, stat.version))
            except NoNodeError:
                if self.client.exists(src) is None:
                    return None
                continue  # a WAL went away while we read: read again
            self.client.ensure_path(self.layout.replicator(dest_server))
            tx = self.client.transaction()
            tx.create(dst, b"")
            for name, data, version in wals:
                tx.create(f"{dst}/{name}", data)
                tx.delete(f"{src}/{name}", version=version)
            tx.delete(src)
            tx.create(f"{self.layout.queues}/{CVERSION_BUMP}", b"")
            tx.delete(f"{self.layout.queues}/{CVERSION_BUMP}")
            results = tx.commit()
            failures = [r for r in results if isinstance(r, Exception)]
            if not failures:
                log.info(
                    "claimed queue %s of %s into %s as %s (%d WALs)",
                    queue_id,
                    dead_server,
                    dest_server,
                    new_id,
                    len(wals),
                )
                return new_id
            if self.client.exists(src) is None:
                return None  # someone else took it
            if not any(isinstance(f, (BadVersionError, NotEmptyError, NoNodeError, NodeExistsError)) for f in failures):
                raise QueueError(f"claiming {src} into {dst} failed: {failures}")
        raise QueueError(f"queue {src} kept changing while claiming it into {dest_server}")

    def remove_replicator(self, server: str) -> bool:
        """Remove a server's replicator znode once it holds no queue; ``False`` when a queue
        arrived meanwhile or another claimer removed it first."""
        try:
            self.client.delete(self.layout.replicator(server))
        except (NoNodeError, NotEmptyError) as exc:
            log.info("kept replicator znode of dead server %s: %s", server, type(exc).__name__)
            return False
        return True

    def claim_all(self, dead_server: str, dest_server: str | Sequence[str]) -> list[tuple[str, str]]:
        """Claim every queue of a dead server, into ``dest_server`` or into each of several in
        turn (as HBase's master spreads them). A queue of a peer that no longer exists is
        removed instead, as HBase does. Returns (old id, new id) for each queue claimed here."""
        dests = [dest_server] if isinstance(dest_server, str) else list(dest_server)
        with zk_errors(f"claiming the queues of {dead_server} into {', '.join(dests)}"):
            return self._claim_all(dead_server, dests)

    def _claim_all(self, dead_server: str, dests: list[str]) -> list[tuple[str, str]]:
        claimed: list[tuple[str, str]] = []
        try:
            peers = set(self.client.get_children(self.layout.peers))
        except NoNodeError:
            peers = set()
        for qid in self.queue_ids(dead_server):
            if QueueId.parse(qid).peer_id not in peers:
                log.info("removing queue %s of %s: peer no longer exists", qid, dead_server)
                self.remove_queue(dead_server, qid)
                continue
            new_id = self.claim_queue(dead_server, qid, dests[len(claimed) % len(dests)])
            if new_id is not None:
                claimed.append((qid, new_id))
        with contextlib.suppress(NoNodeError, NotEmptyError):
            self.client.delete(self.layout.replicator(dead_server))
        return claimed
