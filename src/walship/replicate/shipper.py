"""Ship a peer's queues: plan -> read -> filter -> batch -> apply -> commit.

For each queue of the peer, holding the queue's lock: read its WALs in order from the saved
position, filter each entry for the peer, cut batches (bytes and entries, never across a WAL),
apply a batch to the sink, and only then commit the position (a versioned write) — so a crash
between the two re-ships that batch and never skips it. A WAL read to its end is removed from
the queue once it can grow no more (it has a trailer, is archived, a newer WAL follows it, or
the queue is a recovered one); a drained recovered queue is deleted, an empty one too.

Several peers shipped in one pass (:meth:`Shipper.ship_peers`, ``walship ship --peer 1,2,subs``)
share their reads: queues over the same WALs (:mod:`walship.replicate.feeds`) read each WAL
once, from the lowest of their positions, and every entry goes through each queue's own filter,
batch and sink; each position is committed on its own, and an error stops its queue only.

Progress (last shipped WAL write time, cells and bytes shipped, last error and back-off) is
recorded per queue in walship's own znodes, at most once a second and at the end of a pass.

Example::

    shipper = Shipper(client, ZnodeLayout("/hbase"), WalStore("/data/hbase"))
    summary = shipper.ship_peer("1")
    summaries = shipper.ship_peers(["1", "2", "subs"])  # one read of each WAL for the three
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor

from kazoo.client import KazooClient

from walship import defaults
from walship.errors import ConfigError, QueueNotFoundError, WalError, WalshipError
from walship.replicate.feeds import Batch, Feed, Member, group_key, wal_order
from walship.replicate.filters import EntryFilter
from walship.replicate.planning import Planner, close_grace
from walship.replicate.summary import SUMMED_FIELDS, PeerSummary, PendingProgress, QueueSummary
from walship.replicate.walstore import ReadStats, WalLocation, WalStore
from walship.sinks.base import ApplyStats, Sink, SinkContext, create_sink
from walship.wal.reader import WalReader
from walship.zk import PeerConfig, QueueId, QueueInfo, ReplicationPeers, ReplicationQueues, ZnodeLayout, queue_lock
from walship.zk.client import KAZOO_ERRORS, translate
from walship.zk.locks import Holder
from walship.zk.progress import ProgressStore

__all__ = ["SUMMED_FIELDS", "Feed", "PeerSummary", "QueueSummary", "Shipper"]

log = logging.getLogger(__name__)

#: What stops one queue of a pass (the others go on): walship's errors and ZooKeeper's.
_STOP_ERRORS: tuple[type[BaseException], ...] = (WalshipError, *KAZOO_ERRORS)
#: Seconds between two progress writes of one queue while it ships.
PROGRESS_INTERVAL = 1.0


class Shipper:
    """Ships queues of one source cluster.

    :param sink_factory: builds the sink for a peer (default: the peer's configured sink,
        see :func:`walship.sinks.base.create_sink`).
    :param holder: names this shipper in the queue locks (default: this process).
    :param lock_timeout: seconds to wait for a queue another shipper holds (0: skip it).
    :param pipeline: apply a full batch in the background while the next one is read (one
        batch in flight per queue; positions are still committed in order, each only after
        its batch was applied).
    :param batch_bytes: a batch is cut at about this many bytes for the sink to send (the
        kept cells' share of the WAL bytes read), or four times it in WAL bytes.
    """

    def __init__(
        self,
        client: KazooClient,
        layout: ZnodeLayout,
        walstore: WalStore,
        *,
        batch_bytes: int = defaults.BATCH_BYTES,
        batch_entries: int = defaults.BATCH_ENTRIES,
        holder: Holder | None = None,
        sink_factory: Callable[[PeerConfig], Sink] | None = None,
        lock_timeout: float = defaults.LOCK_WAIT,
        pipeline: bool = True,
    ) -> None:
        if batch_bytes <= 0 or batch_entries <= 0:
            raise ConfigError(f"batch limits must be > 0, got {batch_bytes} bytes / {batch_entries} entries")
        if lock_timeout < 0:
            raise ConfigError(f"lock wait must be >= 0 seconds, got {lock_timeout}")
        self.client = client
        self.layout = layout
        self.walstore = walstore
        self.batch_bytes = batch_bytes
        self.batch_entries = batch_entries
        self.holder = holder or Holder.here("ship")
        self.sink_factory: Callable[[PeerConfig], Sink] = sink_factory or self._default_sink
        self.lock_timeout = lock_timeout
        self.planner = Planner(client, layout, walstore, holder=self.holder)
        self.queues: ReplicationQueues = self.planner.queues
        self.peers: ReplicationPeers = self.planner.peers
        self.progress = ProgressStore(client, layout)
        self.pipeline = pipeline
        self._executor: ThreadPoolExecutor | None = None
        #: WAL files opened and bytes read by this shipper's passes
        self.read_stats = ReadStats()
        self._progress: dict[tuple[str, str, str], PendingProgress] = {}

    def _default_sink(self, peer: PeerConfig) -> Sink:
        return create_sink(peer, SinkContext(self.walstore.root))

    # -- shipping ----------------------------------------------------------------------------------

    def ship_peer(
        self, peer_id: str, queue_filter: str | None = None, max_batches: int | None = None, *, claim: bool = True
    ) -> PeerSummary:
        """One pass over every queue of the peer (optionally only the matching ones)."""
        return self.ship_peers([peer_id], queue_filter, max_batches, claim=claim)[0]

    def ship_peers(
        self,
        peer_ids: Sequence[str],
        queue_filter: str | None = None,
        max_batches: int | None = None,
        *,
        claim: bool = True,
    ) -> list[PeerSummary]:
        """One pass over every queue of the peers, reading each WAL once for all the queues
        that hold it (see :mod:`walship.replicate.feeds`); a summary per peer, in order.

        :raises PeerNotFoundError: a peer does not exist (nothing is shipped).
        """
        t0 = time.monotonic()
        summaries = {pid: PeerSummary(pid) for pid in dict.fromkeys(peer_ids)}
        enabled: list[PeerConfig] = []
        for pid, summary in summaries.items():
            peer = self.peers.get(pid)
            peer.check_ownership()
            if peer.enabled:
                enabled.append(peer)
            else:
                summary.status = "disabled"
                log.info("peer %s is disabled: nothing shipped", pid)
        if not enabled:
            return list(summaries.values())
        if claim:
            result = self.planner.failover()
            for summary in summaries.values():
                summary.claimed, summary.claim_failures = list(result.claimed), list(result.failures)
        todo = {
            peer.peer_id: [(q.server, str(q.queue_id)) for q in self.planner.peer_queues(peer.peer_id, queue_filter)]
            for peer in enabled
        }
        for qs in self.ship_queues_of(enabled, todo, max_batches):
            summaries[QueueId.parse(qs.queue_id).peer_id].queues.append(qs)
        for summary in summaries.values():
            summary.settle()
            summary.seconds = time.monotonic() - t0
        return list(summaries.values())

    def ship_queues(
        self, peer: PeerConfig, queues: Sequence[tuple[str, str]], max_batches: int | None = None
    ) -> list[QueueSummary]:
        """Ship the given (server, queue id) of ``peer`` one after another, with one filter
        chain and one sink for all of them."""
        return self.ship_queues_of([peer], {peer.peer_id: list(queues)}, max_batches)

    def ship_queues_of(
        self,
        peers: Sequence[PeerConfig],
        queues: dict[str, list[tuple[str, str]]],
        max_batches: int | None = None,
    ) -> list[QueueSummary]:
        """Ship the (server, queue id)s of each peer, with one filter chain and sink per peer;
        queues over the same WALs (:func:`~walship.replicate.feeds.group_key`) share one read."""
        built: dict[str, tuple[EntryFilter, Sink]] = {}
        try:
            groups: dict[tuple[str, tuple[str, ...]], list[Feed]] = {}
            for peer in peers:
                if not queues.get(peer.peer_id):
                    continue
                entry_filter = self.planner.entry_filter(peer)
                built[peer.peer_id] = (entry_filter, self.sink_factory(peer))
                for server, qid in queues[peer.peer_id]:
                    feed = Feed(peer, server, qid, entry_filter, built[peer.peer_id][1])
                    groups.setdefault(group_key(server, qid), []).append(feed)
            out: list[QueueSummary] = []
            for key in sorted(groups):
                out.extend(self.ship_group(groups[key], max_batches))
            return out
        finally:
            for _, sink in built.values():
                sink.close()

    def ship_queue(
        self,
        peer: PeerConfig,
        server: str,
        queue_id: str,
        entry_filter: EntryFilter,
        sink: Sink,
        max_batches: int | None = None,
    ) -> QueueSummary:
        """Ship one queue under its lock; errors are reported in the summary, never skipped."""
        return self.ship_group([Feed(peer, server, queue_id, entry_filter, sink)], max_batches)[0]

    def ship_group(self, feeds: Sequence[Feed], max_batches: int | None = None) -> list[QueueSummary]:
        """Ship queues over the same WALs, each under its lock (taken in one order, so two
        shippers never wait on each other); a busy queue is reported, not waited for past the
        lock wait. Summaries in the order of ``feeds``."""
        out: dict[int, QueueSummary] = {}
        held: list[int] = []
        with contextlib.ExitStack() as stack:
            for i in sorted(range(len(feeds)), key=lambda i: (feeds[i].server, feeds[i].queue_id)):
                feed = feeds[i]
                name = f"{feed.server}/{feed.queue_id}"
                try:
                    lock = stack.enter_context(
                        queue_lock(
                            self.client,
                            self.layout,
                            feed.server,
                            feed.queue_id,
                            holder=self.holder,
                            timeout=self.lock_timeout,
                        )
                    )
                except KAZOO_ERRORS as exc:
                    out[i] = self._failed(feed.peer, QueueSummary(feed.server, feed.queue_id), translate(exc, name))
                    continue
                if lock.held:
                    held.append(i)
                else:
                    out[i] = QueueSummary(
                        feed.server,
                        feed.queue_id,
                        status="busy",
                        holder=lock.holder.to_json() if lock.holder else None,
                        message=f"queue {name} is busy: being shipped by {lock.describe()}",
                    )
            if held:
                for i, qs in zip(held, self.ship_held_group([feeds[i] for i in held], max_batches), strict=True):
                    out[i] = qs
        return [out[i] for i in range(len(feeds))]

    def ship_held_queue(
        self,
        peer: PeerConfig,
        server: str,
        queue_id: str,
        entry_filter: EntryFilter,
        sink: Sink,
        max_batches: int | None = None,
        *,
        flush_progress: bool = True,
    ) -> QueueSummary:
        """Ship one queue whose lock the caller holds (see :meth:`ship_held_group`)."""
        feed = Feed(peer, server, queue_id, entry_filter, sink)
        return self.ship_held_group([feed], max_batches, flush_progress=flush_progress)[0]

    def ship_held_group(
        self, feeds: Sequence[Feed], max_batches: int | None = None, *, flush_progress: bool = True
    ) -> list[QueueSummary]:
        """Ship queues over the same WALs whose locks the caller holds (see
        :func:`~walship.zk.queue_lock`), reading each WAL once for all of them. Each queue
        keeps its own batches and position; an error stops that queue only, reported in its
        summary, never skipped.

        :param flush_progress: write the queues' progress records now; a tailer, which calls
            this many times a second, passes ``False`` and has them written once a second.
        """
        members: list[Member] = []
        summaries: list[QueueSummary] = []
        for feed in feeds:
            qs = QueueSummary(feed.server, feed.queue_id, holder=self.holder.to_json())
            summaries.append(qs)
            progress = self._progress.setdefault((feed.peer.peer_id, feed.server, feed.queue_id), PendingProgress())
            try:
                wals = self.queues.wals(feed.server, feed.queue_id)
                queue = QueueInfo(feed.server, QueueId.parse(feed.queue_id), tuple(wals))
                members.append(Member(feed, qs, progress, queue, close_grace(feed.peer)))
            except _STOP_ERRORS as exc:
                self._stopped(feed, qs, progress, exc)
        self._ship_members(members, max_batches)
        for m in members:
            if m.qs.status in ("error", "moved"):
                continue
            try:
                self._write_progress(
                    m.feed.peer, m.feed.server, m.feed.queue_id, m.progress, m.qs, final=flush_progress
                )
            except _STOP_ERRORS as exc:
                self._stop(m, exc)
        return summaries

    def _stop(self, m: Member, exc: BaseException) -> None:
        """Stop a member for this pass (the others go on)."""
        m.stopped = True
        self._stopped(m.feed, m.qs, m.progress, exc)

    def _stopped(self, feed: Feed, qs: QueueSummary, progress: PendingProgress, exc: BaseException) -> None:
        """A queue moved (claimed or removed meanwhile) or failed: say so in its summary."""
        name = f"queue {feed.server}/{feed.queue_id}"
        if isinstance(exc, QueueNotFoundError):
            qs.status = "moved"
            qs.message = str(exc)
            log.info("%s moved while shipping: %s", name, exc)
        else:
            err = exc if isinstance(exc, WalshipError) else translate(exc, name)
            self._failed(feed.peer, qs, err, progress)

    def _failed(
        self, peer: PeerConfig, qs: QueueSummary, exc: WalshipError, progress: PendingProgress | None = None
    ) -> QueueSummary:
        """Record a queue's failure in its summary and (when ZooKeeper answers) its record."""
        qs.status = "error"
        qs.error = f"queue {qs.server}/{qs.queue_id} of peer {peer.peer_id}: {exc}"
        qs.exception = exc
        log.error("%s", qs.error)
        self._progress.pop((peer.peer_id, qs.server, qs.queue_id), None)
        with contextlib.suppress(WalshipError, *KAZOO_ERRORS):
            self._record(peer.peer_id, qs.server, qs.queue_id, progress or PendingProgress(), error=qs.error)
        return qs

    def flush_progress(self) -> None:
        """Write every queue's progress not written yet (a tailer calls this as it stops)."""
        for (peer_id, server, queue_id), progress in list(self._progress.items()):
            if progress.counters or progress.last_wal is not None:
                with contextlib.suppress(WalshipError, *KAZOO_ERRORS):
                    self._record(peer_id, server, queue_id, progress)
        self._progress.clear()

    def _record(
        self, peer_id: str, server: str, queue_id: str, progress: PendingProgress, *, error: str | None = None
    ) -> None:
        """Write what ``progress`` holds into the queue's record, with ``error`` or clearing it."""
        self.progress.record(
            peer_id,
            server,
            queue_id,
            counters=progress.counters,
            last_wal=progress.last_wal,
            last_position=progress.last_position,
            last_write_time=progress.last_write_time,
            backoff=progress.backoff,
            error=error,
            clear_error=error is None,
        )
        progress.counters.clear()
        progress.last_wal = progress.last_position = progress.last_write_time = progress.backoff = None
        progress.written_at = time.monotonic()

    def _write_progress(
        self, peer: PeerConfig, server: str, queue_id: str, progress: PendingProgress, qs: QueueSummary, *, final: bool
    ) -> None:
        """Write the queue's progress record: at most every PROGRESS_INTERVAL, and at the end."""
        if qs.queue_removed:
            self._progress.pop((peer.peer_id, server, queue_id), None)
            self.progress.remove(peer.peer_id, server, queue_id)
            return
        if not progress.counters and progress.last_wal is None:
            return  # nothing new: the record stays as it is
        if not final and time.monotonic() - progress.written_at < PROGRESS_INTERVAL:
            return
        self._record(peer.peer_id, server, queue_id, progress)

    def _ship_members(self, members: list[Member], max_batches: int | None) -> None:
        """The pass: each WAL of the group once, in queue order, fed to the queues holding it."""
        names = sorted({wp.name for m in members for wp in m.queue.wals}, key=wal_order)
        for name in names:
            part = [m for m in members if m.wants(name)]
            for m in part:
                if max_batches is not None and m.qs.batches >= max_batches:
                    m.stopped = True
            part = [m for m in part if not m.stopped]
            if not part:
                continue
            try:
                self._read_wal(name, part, max_batches)
            except _STOP_ERRORS as exc:
                for m in part:
                    if not m.stopped:
                        self._stop(m, exc)
        for m in members:
            if m.qs.status in ("error", "moved") or not m.queue.recovered:
                continue
            if len(m.qs.wals_removed) == len(m.queue.wals):
                # drained, or empty when claimed: HBase deletes such a recovered queue, so do we
                try:
                    self.queues.remove_queue(m.feed.server, m.feed.queue_id)
                except _STOP_ERRORS as exc:
                    self._stop(m, exc)
                    continue
                m.qs.queue_removed = True
                log.info("recovered queue %s/%s drained and removed", m.feed.server, m.feed.queue_id)

    def _read_wal(self, name: str, part: list[Member], max_batches: int | None) -> None:
        """Read one WAL once, from the lowest position of ``part``, feeding each member.

        A full batch goes to its sink in the background while the reading goes on (one batch
        in flight per queue); its position is committed before the queue's next batch is
        handed over, and every batch is settled before the WAL's end is looked at.
        """
        loc = self.walstore.locate(name)
        with self.walstore.open(loc, self.read_stats) as f:
            reader = WalReader(f, loc.path)
            for m in part:
                m.begin(name)
            start = min(m.position for m in part) or None
            try:
                for entry in reader.entries(start):
                    live = False
                    for m in part:
                        if m.take(entry) and m.full(self.batch_entries, self.batch_bytes):
                            self._hand_over(m, background=self.pipeline)
                            if max_batches is not None and m.started >= max_batches:
                                m.stopped = True
                        live = live or not m.stopped
                    if not live:
                        return
            except WalError:
                # ship what was read before the bad entry, so each position points at it
                for m in part:
                    if not m.stopped and m.read:
                        self._hand_over(m, background=False)
                raise
            finally:
                for m in part:
                    self._settle(m)
            for m in part:
                if m.stopped:
                    continue
                try:
                    self._end_wal(m, loc, reader)
                except _STOP_ERRORS as exc:
                    self._stop(m, exc)

    def _end_wal(self, m: Member, loc: WalLocation, reader: WalReader) -> None:
        """A member read a WAL to its end: commit the rest, and drop the WAL once finished."""
        assert m.wal is not None
        # past the header of a WAL with no entries yet, so its unshipped bytes read 0
        m.position = max(m.position, reader.stop_offset)
        why = self.planner.wal_finished(m.queue, m.index[m.wal.name], loc, reader.has_trailer, m.grace)
        if reader.incomplete_tail and why is not None:
            torn = reader.edits_end - reader.stop_offset
            m.qs.torn_tail_bytes += torn
            log.warning(
                "%s: %d bytes after offset %d are a torn last write of a closed WAL (a crash "
                "before the write was acknowledged); not shipped",
                loc.path,
                torn,
                reader.stop_offset,
            )
        if m.read or m.position != m.wal.position:
            self._hand_over(m, background=False)
            if m.stopped:
                return  # the batch failed: the WAL stays, at the position before it
        if why is None:
            m.stopped = True  # the current WAL, or a rolled one not closed yet: more may be appended
            return
        log.debug("queue %s/%s: %s finished (%s)", m.feed.server, m.feed.queue_id, m.wal.name, why)
        self.queues.remove_wals(m.feed.server, m.feed.queue_id, [m.wal.name])
        m.qs.wals_removed.append(m.wal.name)

    def _hand_over(self, m: Member, *, background: bool) -> None:
        """Give the member's batch to its sink, after settling the one before it. In the
        background the reading goes on meanwhile; otherwise it is applied and committed now."""
        batch = m.cut()
        self._settle(m)
        if m.stopped:
            return  # the batch before failed: this one is dropped, read again next time
        m.started += 1 if batch.read else 0
        if background and batch.entries:
            m.inflight = (self._applier().submit(m.feed.sink.apply, batch.entries, batch.wal.name), batch)
            return
        try:
            stats = m.feed.sink.apply(batch.entries, batch.wal.name) if batch.entries else ApplyStats()
            self._commit(m, batch, stats)
        except _STOP_ERRORS as exc:
            self._stop(m, exc)

    def _settle(self, m: Member) -> None:
        """Wait for the member's batch in flight, if any, and commit its position."""
        if m.inflight is None:
            return
        future, batch = m.inflight
        m.inflight = None
        try:
            self._commit(m, batch, future.result())
        except _STOP_ERRORS as exc:
            self._stop(m, exc)

    def _applier(self) -> ThreadPoolExecutor:
        if self._executor is None:
            self._executor = ThreadPoolExecutor(max_workers=8, thread_name_prefix="walship-apply")
        return self._executor

    def _commit(self, m: Member, batch: Batch, stats: ApplyStats) -> None:
        """The batch is applied: only now may the queue's position move past it."""
        feed, qs, progress, wal = m.feed, m.qs, m.progress, batch.wal
        self.queues.set_position(feed.server, feed.queue_id, wal.name, batch.position)
        if batch.read:  # a move past a header alone is no batch
            qs.batches += 1
            progress.add("batches", 1)
        qs.status = "shipped"
        qs.entries_read += batch.read
        qs.bytes_read += batch.size
        qs.entries_shipped += len(batch.entries) - stats.passed_over
        qs.cells_shipped += stats.cells
        qs.incompatible_skipped += stats.incompatible_skipped
        qs.deadlettered += stats.deadlettered
        qs.tags_dropped += stats.tags_dropped
        qs.sink_retries += stats.retries
        qs.positions[wal.name] = batch.position
        if batch.entries:
            qs.age_of_last_shipped_op_ms = max(0, int(time.time() * 1000) - batch.entries[-1].entry.key.write_time)
        progress.add("entries_shipped", len(batch.entries) - stats.passed_over)
        progress.add("cells_shipped", stats.cells)
        progress.add("bytes_shipped", batch.size)
        progress.last_wal, progress.last_position = wal.name, batch.position
        if batch.last_write_time is not None:
            progress.last_write_time = batch.last_write_time
        if stats.last_backoff is not None:
            progress.backoff = stats.last_backoff
        self._write_progress(feed.peer, feed.server, feed.queue_id, progress, qs, final=False)
        log.info(
            "queue %s/%s: batch of %d entries (%d shipped, %d bytes) applied; %s position %d",
            feed.server,
            feed.queue_id,
            batch.read,
            len(batch.entries),
            batch.size,
            wal.name,
            batch.position,
        )
