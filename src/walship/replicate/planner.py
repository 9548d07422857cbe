"""Planning, in one place for the CLI, the Spark job and the Airflow sensor: claim dead
servers' queues (failover), list a peer's queues, measure their backlog, and look up the
cluster ids the filter needs. Nothing here ships.

Example::

    planner = Planner(client, ZnodeLayout("/hbase"), WalStore("/data/hbase"))
    result = planner.failover()
    for q in planner.pending("1"):
        print(q.key, q.backlog_bytes)
"""

from __future__ import annotations

import logging
import random
import time
import uuid
from collections.abc import Sequence

from kazoo.client import KazooClient

from walship.errors import PeerNotFoundError, ReplicationError, WalMissingError, WalshipError, ZkError
from walship.peer import PeerConfig, parse_cluster_key
from walship.replicate.batcher.filters import EntryFilter
from walship.replicate.peerplan import (
    DEFAULT_CLOSE_GRACE,
    FailoverResult,
    PeerPlan,
    PendingQueue,
    close_grace,
    matches_queue,
    next_in_group,
    split_peer_ids,
)
from walship.replicate.walstore import WalLocation, WalStore
from walship.wal.reader import WalReader
from walship.zk import (
    QueueInfo,
    ReplicationPeers,
    ReplicationQueues,
    ZnodeLayout,
    live_servers,
    queue_lock,
    read_cluster_id,
    zk_client,
)
from walship.zk.cluster import MASTER, REGION_SERVERS, WALSHIP, is_live, server_version, who_claims
from walship.zk.locks import Holder
from walship.zk.queueid import QueueId

__all__ = ["Planner", "pending_queues"]

log = logging.getLogger(__name__)


class Planner:
    """Reads the replication state of one source cluster and plans shipping from it.

    :param holder: who takes queue locks while claiming (default: this process).
    """

    def __init__(
        self, client: KazooClient, layout: ZnodeLayout, walstore: WalStore, *, holder: Holder | None = None
    ) -> None:
        self.client = client
        self.layout = layout
        self.walstore = walstore
        self.holder = holder or Holder.here("planner")
        self.queues = ReplicationQueues(client, layout)
        self.peers = ReplicationPeers(client, layout)
        self._peer_ids: dict[str, uuid.UUID] = {}
        self._source_id: uuid.UUID | None = None
        self._live: dict[str, tuple[float, bool]] = {}  # server -> (when seen, live)
        self._versions: dict[str, tuple[int, int] | None] = {}  # server -> HBase version it announces
        self._told_claimer: str | None = None

    # -- cluster ids -------------------------------------------------------------------------

    def source_cluster_id(self) -> uuid.UUID:
        if self._source_id is None:
            self._source_id = read_cluster_id(self.client, self.layout)
        return self._source_id

    def peer_cluster_id(self, peer: PeerConfig) -> uuid.UUID:
        """The peer cluster's id, read from its own ZooKeeper (its cluster key)."""
        cached = self._peer_ids.get(peer.cluster_key)
        if cached is not None:
            return cached
        hosts, port, parent = parse_cluster_key(peer.cluster_key)
        try:
            with zk_client(",".join(f"{h}:{port}" for h in hosts)) as other:
                cid = read_cluster_id(other, ZnodeLayout(parent))
        except ZkError as exc:
            raise ReplicationError(
                f"peer {peer.peer_id}: cannot read its cluster id at {peer.cluster_key}: {exc}"
            ) from exc
        if cid == self.source_cluster_id():
            raise ReplicationError(f"peer {peer.peer_id} is this cluster itself ({cid}): refusing to replicate to it")
        self._peer_ids[peer.cluster_key] = cid
        return cid

    def entry_filter(self, peer: PeerConfig) -> EntryFilter:
        """The filter chain for ``peer`` (reads both clusters' ids)."""
        return EntryFilter(peer, self.source_cluster_id(), self.peer_cluster_id(peer))

    # -- failover ----------------------------------------------------------------------------

    def failover(self) -> FailoverResult:
        """Claim the queues of region servers that are no longer live into a live one, as
        recovered queues; without any live server the queues stay where they are (they are
        shipped just the same). A claim that fails is logged, counted and retried next time.

        Who claims depends on the cluster (:func:`walship.zk.cluster.who_claims`): on HBase
        2.5+ its master claims every queue and walship none (``left_to_master``: walship ships
        a dead server's queue where it is until the master moves it); on an older HBase its
        region servers race for the queues, and walship claims only those of the peers it
        manages (a queue of a peer HBase ships, moved by walship, would never reach HBase's
        replication source); on the embedded cluster walship claims every queue.
        """
        result = FailoverResult()
        live = live_servers(self.client, self.layout)
        if not live:
            return result
        claimer = self.who_claims(live)
        if claimer == MASTER:
            result.left_to_master = True
            return result
        managed = {peer.peer_id for peer in self.peers.list() if peer.managed} if claimer == REGION_SERVERS else None
        for server in self.queues.replicators():
            if server in live:
                continue
            for qid in self.queues.queue_ids(server):
                if managed is not None and QueueId.parse(qid).peer_id not in managed:
                    continue  # a peer HBase ships (or a removed one): its region servers claim it
                try:
                    with queue_lock(self.client, self.layout, server, qid, holder=self.holder) as lock:
                        if not lock.held:
                            continue  # being shipped right now; claim it next time
                        dest = random.choice(live)
                        new_id = self.queues.claim_queue(server, qid, dest)
                        if new_id:
                            result.claimed.append(
                                {"dead_server": server, "queue_id": qid, "server": dest, "new_queue_id": new_id}
                            )
                except WalshipError as exc:
                    message = f"claiming queue {qid} of dead server {server} failed: {exc}"
                    log.warning("%s (retried next pass)", message)
                    result.failures.append(message)
            if not self.queues.queue_ids(server):
                self.queues.remove_replicator(server)
        return result

    def who_claims(self, live: Sequence[str]) -> str:
        """Who claims dead servers' queues here (:func:`walship.zk.cluster.who_claims`), from
        the versions the ``live`` region servers announce (each read once: a server name, with
        its start code, never changes version). Said once in the log when it is not walship."""
        for server in live:
            if server not in self._versions:
                self._versions[server] = server_version(self.client, self.layout, server)
        claimer = who_claims(self._versions[server] for server in live)
        if claimer != WALSHIP and claimer != self._told_claimer:
            self._told_claimer = claimer
            versions = ", ".join(sorted({".".join(map(str, v)) for s in live if (v := self._versions[s]) is not None}))
            if claimer == MASTER:
                what = "its master claims dead servers' queues; walship claims none and ships them where they are until then"
            else:
                what = (
                    "its region servers claim dead servers' queues; walship claims only those of the peers it manages"
                )
            log.info("region servers announce HBase %s: %s", versions, what)
        return claimer

    # -- when a WAL is finished ------------------------------------------------------------------

    def wal_finished(
        self,
        queue: QueueInfo,
        index: int,
        loc: WalLocation,
        has_trailer: bool,
        grace: float,
        *,
        now: float | None = None,
        live: bool | None = None,
    ) -> str | None:
        """Why the queue's ``index``-th WAL can grow no more, or ``None`` while it may.

        What the WAL was read up to must be known complete: ``live`` and ``now`` are the
        server's liveness and the time taken *before* the read (a server that dies while its WAL
        is read may have written more past what the read saw; the next pass reads it to the end).
        Without them they are looked at now, for a caller that reads nothing after.

        HBase enqueues the new WAL before it writes the old one's last entries and trailer,
        and archives rolled WALs only after their regions flush, so being followed by another
        WAL is not enough. Finished: a trailer, or archived, or the queue is recovered, or its
        server is no longer live, or it has not grown for ``grace`` seconds while a later WAL
        of its own WAL group has entries. With multiwal a server writes several groups at once
        (one queue lists them all), so another group's newer WAL says nothing about this one.
        """
        if has_trailer:
            return "trailer"
        if loc.archived:
            return "archived"
        if queue.recovered:
            return "recovered queue"
        if not (is_live(self.client, self.layout, queue.server) if live is None else live):
            return "server no longer live"
        later = next_in_group(queue, index)
        if later is not None:
            idle = (time.time() if now is None else now) - loc.mtime
            if idle >= grace and self._has_entries(later):
                return f"unchanged for {idle:.0f} s while a later WAL of its group has entries"
        return None

    def server_live(self, server: str, *, max_age: float = 0.0) -> bool:
        """Whether the region server's ephemeral znode is there (it runs), as seen at most
        ``max_age`` seconds ago (a tailer asks many times a second). An answer seen earlier is
        still one seen before what the caller reads next, which is all :meth:`wal_finished`
        needs.
        """
        now = time.monotonic()
        seen = self._live.get(server)
        if seen is not None and now - seen[0] <= max_age:
            return seen[1]
        live = is_live(self.client, self.layout, server)
        self._live[server] = (now, live)
        return live

    def _has_entries(self, wal: str) -> bool:
        try:
            loc = self.walstore.locate(wal)
        except WalMissingError:
            return False
        with self.walstore.open(loc) as f:
            reader = WalReader(f, loc.path)
            reader.refresh()
            return reader.edits_end > reader.header_end

    # -- queues and backlog --------------------------------------------------------------------

    def peer_queues(self, peer_id: str, queue_filter: str | None = None) -> list[QueueInfo]:
        return self.queues_of([peer_id], queue_filter)[peer_id]

    def queues_of(self, peer_ids: Sequence[str], queue_filter: str | None = None) -> dict[str, list[QueueInfo]]:
        """The queues of each peer (optionally only those matching ``queue_filter``), from one
        listing of the queues."""
        out: dict[str, list[QueueInfo]] = {pid: [] for pid in peer_ids}
        only = next(iter(out)) if len(out) == 1 else None  # one peer: only its queues are read
        for q in self.queues.list_queues(only):
            if q.peer_id in out and (not queue_filter or matches_queue(q, queue_filter)):
                out[q.peer_id].append(q)
        return out

    def backlog(self, queue: QueueInfo, grace: float = DEFAULT_CLOSE_GRACE) -> int:
        """Bytes of the queue's WALs not yet shipped (1 for a drained queue that still has a
        finished WAL or a recovered queue to remove: there is work, if no bytes)."""
        total = 0
        for i, wp in enumerate(queue.wals):
            loc = self.walstore.locate(wp.name)
            with self.walstore.open(loc) as f:
                reader = WalReader(f, loc.path)
                reader.refresh()
                start = max(wp.position, reader.header_end)
                total += max(0, reader.edits_end - start)
            if self.wal_finished(queue, i, loc, reader.has_trailer, grace):
                total = max(total, 1)
        if queue.recovered and not queue.wals:
            total = max(total, 1)
        return total

    def shipped_peer_ids(self) -> list[str]:
        """The peers a run that names none ships: every enabled peer walship manages,
        subscriptions among them. A managed peer that HBase ships too is left out, with an
        error in the log (``walship status`` and the peer's own runs name it)."""
        out = []
        for peer in self.peers.list():
            if not (peer.managed and peer.enabled):
                continue
            if peer.hbase_state_enabled:
                log.error(
                    "peer %s left out: managed by walship but its HBase peer-state is ENABLED (double shipping)",
                    peer.peer_id,
                )
                continue
            out.append(peer.peer_id)
        return out

    def plan(
        self,
        peer_ids: Sequence[str],
        queue_filter: str | None = None,
        *,
        claim: bool = True,
        list_queues: bool = True,
        missing_ok: bool = False,
    ) -> PeerPlan:
        """The plan of a pass over ``peer_ids`` (the shipper's, a Spark job's and a tailer's
        alike): each peer read and checked (:meth:`PeerConfig.check_ownership`), split into
        enabled and disabled; when any is enabled, dead servers' queues claimed (``claim``) and
        the enabled peers' queues listed (``list_queues``, only those matching ``queue_filter``).

        :param missing_ok: leave out a peer removed meanwhile (a tailer of every peer) instead
            of raising.
        :raises PeerNotFoundError: a peer does not exist (unless ``missing_ok``).
        :raises DoubleShippingError: a managed peer HBase ships too.
        """
        plan = PeerPlan()
        for peer_id in dict.fromkeys(peer_ids):
            try:
                peer = self.peers.get(peer_id)
            except PeerNotFoundError:
                if missing_ok:
                    continue
                raise
            peer.check_ownership()
            if peer.enabled:
                plan.enabled.append(peer)
            else:
                plan.disabled.append(peer_id)
                log.info("peer %s is disabled: nothing shipped", peer_id)
        if plan.enabled:
            if claim:
                plan.failover = self.failover()
            if list_queues:
                plan.queues = self.queues_of([p.peer_id for p in plan.enabled], queue_filter)
        return plan

    def resolve_peers(self, peer_ids: str) -> list[str]:
        """``1,2,subs``: those peers; empty: :meth:`shipped_peer_ids`, read now."""
        return split_peer_ids(peer_ids) or self.shipped_peer_ids()

    def pending(
        self, peer_id: str, queue_filter: str | None = None, *, include_drained: bool = False
    ) -> list[PendingQueue]:
        """The peer's queues with work, oldest first; none while the peer is disabled.
        Queues of dead servers count (they will be claimed and drained). ``peer_id`` may name
        several peers (``1,2,subs``) or none (every peer a run ships, see :meth:`resolve_peers`).

        :param include_drained: list the queues without work too (backlog 0).
        :raises PeerNotFoundError: no such peer.
        :raises DoubleShippingError: a managed peer HBase ships too.
        """
        ids = self.resolve_peers(peer_id)
        if ids != [peer_id]:
            return [q for pid in ids for q in self.pending(pid, queue_filter, include_drained=include_drained)]
        peer = self.peers.get(peer_id)
        peer.check_ownership()
        if not peer.enabled:
            return []
        out = []
        grace = close_grace(peer)
        for q in self.peer_queues(peer_id, queue_filter):
            backlog = self.backlog(q, grace)
            if backlog > 0 or include_drained:
                out.append(PendingQueue(q.server, str(q.queue_id), backlog, len(q.wals)))
        return out


def pending_queues(
    zk: str,
    znode_parent: str,
    wal_root: str,
    peer_id: str,
    queue_filter: str | None = None,
    *,
    include_drained: bool = False,
    auth: str | None = None,
) -> list[PendingQueue]:
    """:meth:`Planner.pending` with a client of its own (for the Airflow sensor and trigger;
    without ``auth``, ``WALSHIP_ZK_AUTH`` is used when set)."""
    with zk_client(zk, auth=auth, parent=znode_parent) as client:
        planner = Planner(client, ZnodeLayout(znode_parent), WalStore(wal_root))
        return planner.pending(peer_id, queue_filter, include_drained=include_drained)
