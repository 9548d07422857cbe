"""Ship a peer's queues: plan -> read -> filter -> batch -> apply -> commit.

For each queue of the peer, holding the queue's lock: read its WALs in order from the saved
position, filter each entry for the peer, cut batches (bytes and entries, never across a WAL),
apply a batch to the sink, and only then commit the position (a versioned write) — so a crash
between the two re-ships that batch and never skips it. A WAL read to its end is removed from
the queue once it can grow no more (it has a trailer, is archived, a newer WAL follows it, or
the queue is a recovered one); a drained recovered queue is deleted, an empty one too.

Several peers shipped in one pass (:meth:`Shipper.ship_peers`, ``walship ship --peer 1,2,subs``)
share their reads: queues over the same WALs (:mod:`walship.replicate.batcher.member`) read each WAL
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
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor

from kazoo.client import KazooClient

from walship import defaults
from walship.errors import BarrierUnavailableError, ConfigError, WalshipError
from walship.peer import PeerConfig
from walship.replicate.applier import Applier
from walship.replicate.batcher import EntryFilter, Feed, KnownPositions, Member, Ramp
from walship.replicate.grouplocks import lock_group
from walship.replicate.grouppass import GroupPass
from walship.replicate.groupthreads import GroupKey, GroupThreads, Members, groups_of
from walship.replicate.interpreter import pass_settings
from walship.replicate.peerplan import close_grace
from walship.replicate.planner import Planner
from walship.replicate.progressbook import ProgressBook
from walship.replicate.quota import process_quota
from walship.replicate.reader import GroupReader, OpenReaders
from walship.replicate.summary import SUMMED_FIELDS, PeerSummary, QueueSummary, merge_passes
from walship.replicate.throttle import PeerThrottlers, ThrottledSink
from walship.replicate.walfiles import ReadStats
from walship.replicate.walstore import WalStore
from walship.serial.checker import SerialChecker, SerialCheckers
from walship.sinks.base import Sink, SinkContext
from walship.sinks.registry import create_sink
from walship.zk import QueueId, QueueInfo, ReplicationPeers, ReplicationQueues, ZnodeLayout
from walship.zk.lastpushed import LastPushedIds
from walship.zk.locks import Holder
from walship.zk.records import ProgressStore

__all__ = ["PARALLEL_GROUPS", "SUMMED_FIELDS", "Feed", "PeerSummary", "QueueSummary", "Shipper"]

log = logging.getLogger(__name__)

#: Groups of queues a pass ships at once by default (a thread each; each holds up to two
#: batches in memory, see ``batch_bytes``).
PARALLEL_GROUPS = defaults.PARALLEL_GROUPS
#: Passes ``walship ship`` makes at most over a serial peer's queues that wait for each other.
SETTLE_ROUNDS = 20


class Shipper:
    """Ships queues of one source cluster.

    :param sink_factory: builds the sink for a peer (default: the peer's configured sink,
        see :func:`walship.sinks.registry.create_sink`).
    :param holder: names this shipper in the queue locks (default: this process).
    :param lock_timeout: seconds to wait for a queue another shipper holds (0: skip it).
    :param pipeline: apply a full batch, or a finished WAL's last one, in the background
        while the next one is read (one batch in flight per queue; positions are still
        committed in order, each only after its batch was applied, and a finished WAL leaves
        its queue only after its last batch's commit).
    :param batch_bytes: a batch is cut at about this many bytes for the sink to send (the
        kept cells' share of the WAL bytes read), or four times it in WAL bytes.
    :param parallel: groups of queues a pass ships at once, each in a thread (1: one after
        another); see :meth:`ship_queues_of`.
    :param buffer_quota: bytes the process's batches applied in the background may hold at once
        (HBase's ``replication.total.buffer.quota``; :mod:`walship.replicate.quota`).
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
        planner: Planner | None = None,
        book: ProgressBook | None = None,
        source_thrift2: str | None = None,
        parallel: int = PARALLEL_GROUPS,
        buffer_quota: int = defaults.TOTAL_BUFFER_QUOTA,
    ) -> None:
        if batch_bytes <= 0 or batch_entries <= 0:
            raise ConfigError(f"batch limits must be > 0, got {batch_bytes} bytes / {batch_entries} entries")
        if lock_timeout < 0:
            raise ConfigError(f"lock wait must be >= 0 seconds, got {lock_timeout}")
        if not 1 <= parallel <= defaults.MAX_PARALLEL_GROUPS:
            raise ConfigError(
                f"groups of queues shipped at once must be 1 to {defaults.MAX_PARALLEL_GROUPS}, got {parallel}"
            )
        self.client = client
        self.layout = layout
        self.walstore = walstore
        self.batch_bytes = batch_bytes
        self.batch_entries = batch_entries
        self.holder = holder or Holder.here("ship")
        self._sink_factory = sink_factory
        self.sink_context = SinkContext(walstore.root)
        self.lock_timeout = lock_timeout
        self.planner = planner or Planner(client, layout, walstore, holder=self.holder)
        self.queues: ReplicationQueues = self.planner.queues
        self.peers: ReplicationPeers = self.planner.peers
        self.progress = ProgressStore(client, layout)
        self.pipeline = pipeline
        #: the process's memory for batches applied in the background (one for all shippers)
        self.quota = process_quota(buffer_quota)
        self._executor: ThreadPoolExecutor | None = None
        #: WAL files opened and bytes read by this shipper's passes
        self.read_stats = ReadStats()
        self.readers = OpenReaders()  # compressed WALs' dictionaries, kept from pass to pass
        self.book = book or ProgressBook(self.progress)
        self.source_thrift2 = source_thrift2
        self.checkers = SerialCheckers(source_thrift2, lambda: LastPushedIds(client, layout))
        #: the peers' throttlers: one per peer, shared by every queue of the peer it ships
        self.throttlers = PeerThrottlers()
        #: groups of queues (see :meth:`ship_queues_of`) a pass ships at once
        self.parallel = parallel
        #: set (by the caller): the pass under way stops each queue after its batch under way
        self.halt: threading.Event | None = None
        self.threads = GroupThreads()  # see ship_queues_of

    def open_sink(self, peer: PeerConfig) -> Sink:
        """The peer's sink (the one its configuration names, or the injected factory's),
        behind the peer's throttler: its bandwidth as this configuration says, from the
        next batch on (see :mod:`walship.replicate.throttle`)."""
        sink = self._sink_factory(peer) if self._sink_factory is not None else create_sink(peer, self.sink_context)
        return ThrottledSink(sink, self.throttlers.of(peer))

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
        that hold it (see :mod:`walship.replicate.batcher.member`); a summary per peer, in order.

        :raises PeerNotFoundError: a peer does not exist (nothing is shipped).
        """
        t0 = time.monotonic()
        plan = self.planner.plan(peer_ids, queue_filter, claim=claim)
        summaries = plan.summaries(peer_ids)
        if not plan.enabled:
            return list(summaries.values())
        done: dict[tuple[str, str], QueueSummary] = {}
        last: list[QueueSummary] = []
        # serial peers: a queue that waited for another's earlier edits goes again (planned
        # anew: a queue it waits for may have moved, claimed from a dead server) while passes
        # move on; with a batch limit, one pass is what was asked for
        for settling in range(1 + (SETTLE_ROUNDS if max_batches is None else 0)):
            if settling:
                if not any(qs.status == "waiting-serial" for qs in last):
                    break
                if not any(qs.entries_read or qs.status == "moved" for qs in last):
                    break
                plan = self.planner.plan(peer_ids, queue_filter, claim=claim)
            todo = {pid: [(q.server, str(q.queue_id)) for q in queues] for pid, queues in plan.queues.items()}
            last = self.ship_queues_of(plan.enabled, todo, max_batches)
            merge_passes(done, last)
        for qs in done.values():
            summaries[QueueId.parse(qs.queue_id).peer_id].queues.append(qs)
        for summary in summaries.values():
            summary.settle()
            summary.seconds = time.monotonic() - t0
        return list(summaries.values())

    def ship_queues_of(
        self,
        peers: Sequence[PeerConfig],
        queues: dict[str, list[tuple[str, str]]],
        max_batches: int | None = None,
    ) -> list[QueueSummary]:
        """Ship the (server, queue id)s of each peer; queues over the same WALs
        (:func:`~walship.replicate.batcher.member.group_key`) are a group, which shares one read.

        Groups go at once, as a region server ships each of its queues in a thread: up to
        :attr:`parallel` of them, each in a thread with a shipper of its own (its sinks, WAL
        readers and background applier; the peers' throttlers, the planner and the progress
        book are this shipper's), the rest in this thread, in order, with one sink per peer.
        A group holding a serial peer's queue goes in this thread: a serial peer's queues wait
        for each other's earlier edits pass after pass (see :data:`SETTLE_ROUNDS`). Summaries
        in the order of the groups."""
        groups = groups_of(peers, queues)
        keys = sorted(groups)
        if not keys:
            return []
        filters = {peer.peer_id: self.planner.entry_filter(peer) for peer in peers if queues.get(peer.peer_id)}
        apart = [k for k in keys if not any(peer.serial for peer, _, _ in groups[k])]
        if self.parallel < 2 or len(apart) < 2:
            apart = []
        here = [k for k in keys if k not in apart]

        def ship_here() -> dict[GroupKey, list[QueueSummary]]:
            return dict(zip(here, self.ship_groups([groups[k] for k in here], filters, max_batches), strict=True))

        if not apart:
            done = ship_here()
        else:
            done = self.threads.run(
                self.parallel,
                self.sibling,
                {k: groups[k] for k in apart},
                filters,
                max_batches,
                ship_here,
                self.read_stats,
            )
        return [qs for k in keys for qs in done[k]]

    def halted(self) -> bool:
        """The pass under way is to stop each queue after its batch under way: the caller set
        :attr:`halt`, or another group of the pass failed."""
        return any(e is not None and e.is_set() for e in (self.halt, self.threads.halt))

    def bytes_read(self) -> int:
        """WAL bytes this shipper's passes have read so far, the pass under way's groups in
        threads included (a progress meter's reading)."""
        return self.read_stats.bytes + self.threads.bytes_read()

    def ship_groups(
        self,
        groups: list[Members],
        filters: dict[str, EntryFilter],
        max_batches: int | None,
    ) -> list[list[QueueSummary]]:
        """Ship the groups one after another, with one sink per peer; each group's summaries.
        A group's queues are shipped each under its lock (:func:`lock_group`: a busy queue is
        reported, not waited for past the lock wait), in one pass over their WALs (see
        :meth:`ship_held_group`)."""
        sinks: dict[str, Sink] = {}
        try:
            out: list[list[QueueSummary]] = []
            for members in groups:
                feeds = self.feeds_of(members, filters, sinks)
                with contextlib.ExitStack() as stack:
                    held, summaries = lock_group(
                        stack, self.client, self.layout, feeds, holder=self.holder, timeout=self.lock_timeout,
                        book=self.book,
                    )  # fmt: skip
                    if held:
                        locked = [feeds[i] for i in held]
                        group = self.group_pass()
                        passed = self.summaries_of(locked)
                        stamps: dict[tuple[str, str], int] = {}
                        queues = self.members_of(locked, passed, group.applier, None, stamps)
                        with pass_settings():
                            group.ship_pass(queues, max_batches)
                        self.after_pass(group.applier, queues, flush_progress=True, known=None, stamps=stamps)
                        for i, qs in zip(held, passed, strict=True):
                            summaries[i] = qs
                out.append([summaries[i] for i in range(len(feeds))])
            return out
        finally:
            for sink in sinks.values():
                sink.close()

    def feeds_of(self, members: Members, filters: dict[str, EntryFilter], sinks: dict[str, Sink]) -> list[Feed]:
        """A group's queues to feed, each with its peer's filter chain and sink (opened into
        ``sinks`` on the peer's first queue)."""
        feeds = []
        for peer, server, qid in members:
            if peer.peer_id not in sinks:
                sinks[peer.peer_id] = self.open_sink(peer)
            feeds.append(Feed(peer, server, qid, filters[peer.peer_id], sinks[peer.peer_id]))
        return feeds

    def sibling(self, halt: threading.Event) -> Shipper:
        """A shipper for a group shipped in a thread of its own: this one's settings, planner,
        progress book and peers' throttlers (a peer's bandwidth is shared by all its queues),
        halting with the pass."""
        sibling = Shipper(
            self.client,
            self.layout,
            self.walstore,
            batch_bytes=self.batch_bytes,
            batch_entries=self.batch_entries,
            holder=self.holder,
            sink_factory=self._sink_factory,
            lock_timeout=self.lock_timeout,
            pipeline=self.pipeline,
            planner=self.planner,
            book=self.book,
            source_thrift2=self.source_thrift2,
            parallel=1,
            buffer_quota=self.quota.limit,
        )
        sibling.throttlers = self.throttlers
        sibling.halt = self.halt
        sibling.threads.halt = halt
        return sibling

    def ship_held_group(
        self,
        feeds: Sequence[Feed],
        max_batches: int | None = None,
        *,
        flush_progress: bool = True,
        known: KnownPositions | None = None,
    ) -> list[QueueSummary]:
        """Ship queues over the same WALs whose locks the caller holds (see
        :func:`~walship.zk.queue_lock`), reading each WAL once for all of them. Each queue
        keeps its own batches and position; an error stops that queue only, reported in its
        summary, never skipped.

        :param flush_progress: write the queues' progress records now; a tailer, which calls
            this many times a second, passes ``False`` and has them written once a second.
        :param known: (server, queue id) -> the queue's WAL znodes as this shipper left them; a
            caller that keeps the locks from one call to the next (a tailer) passes the same
            dict each time and saves reading every position again. A queue that failed or
            moved is left out (read again next time); drop a queue's record with its lock.
        """
        group = self.group_pass()
        summaries = self.summaries_of(feeds)
        stamps: dict[tuple[str, str], int] = {}  # each queue's children stamp as this pass read it
        members = self.members_of(feeds, summaries, group.applier, known, stamps)
        with pass_settings():
            group.ship_pass(members, max_batches)
        self.after_pass(group.applier, members, flush_progress=flush_progress, known=known, stamps=stamps)
        return summaries

    def group_pass(self) -> GroupPass:
        """A pass over a group's WALs: its reader, applier, planner and batch sizes."""
        return GroupPass(
            GroupReader(self.walstore, self.planner, self.read_stats, self.readers),
            Applier(self.queues, self.book, self._applier if self.pipeline else None, self.quota),
            self.planner,
            Ramp(self.batch_entries, self.batch_bytes, pipelined=self.pipeline),
            halted=self.halted,
        )

    def summaries_of(self, feeds: Sequence[Feed]) -> list[QueueSummary]:
        """A fresh summary for each queue of a pass, naming this shipper as its holder."""
        return [QueueSummary(feed.server, feed.queue_id, holder=self.holder.to_json()) for feed in feeds]

    def after_pass(
        self,
        applier: Applier,
        members: list[Member],
        *,
        flush_progress: bool,
        known: KnownPositions | None,
        stamps: dict[tuple[str, str], int],
    ) -> None:
        """Write each queue's progress (now, or once a second: ``flush_progress``), keep what a
        next pass need not read again in ``known``, and let go of ``hbase:meta``'s connection
        after a barrier could not be read."""
        if any(isinstance(m.qs.exception, BarrierUnavailableError) for m in members):
            self.close()  # the next pass reads hbase:meta over a new connection
        for m in members:
            if m.qs.status in ("error", "moved"):
                continue
            try:
                self.book.write(m.feed.peer.peer_id, m.progress, m.qs, final=flush_progress)
            except WalshipError as exc:
                applier.stop(m, exc)
                continue
            key = (m.feed.server, m.feed.queue_id)
            if known is not None and not m.qs.queue_removed and key in stamps:
                # a WAL removed this pass moved the stamp: the next pass reads the queue whole
                known[key] = (stamps[key], m.known)

    def members_of(
        self,
        feeds: Sequence[Feed],
        summaries: list[QueueSummary],
        applier: Applier,
        known: KnownPositions | None,
        stamps: dict[tuple[str, str], int],
    ) -> list[Member]:
        """The queues of a pass, each with its WALs as read now (their children's stamp into
        ``stamps``), its summary and pending progress; a queue that cannot be read is stopped
        (its summary says why) and left out."""
        members: list[Member] = []
        for feed, qs in zip(feeds, summaries, strict=True):
            progress = self.book.pending(feed.peer.peer_id, feed.server, feed.queue_id)
            try:
                key = (feed.server, feed.queue_id)
                wals, stamps[key] = self.queues.read_queue(*key, known.pop(key, None) if known is not None else None)
                queue = QueueInfo(feed.server, QueueId.parse(feed.queue_id), tuple(wals))
                serial = self.serial_checker(feed)
                members.append(Member(feed, qs, progress, queue, close_grace(feed.peer), serial))
            except WalshipError as exc:
                applier.stopped(feed, qs, progress, exc)
        return members

    def serial_checker(self, feed: Feed) -> SerialChecker | None:
        """The queue's checker when its peer is serial (see :class:`SerialCheckers`), else ``None``.

        :raises ConfigError: a serial peer, and no source Thrift2 server to read barriers from.
        """
        return self.checkers.of(feed.peer.peer_id, feed.server, feed.queue_id, serial=feed.peer.serial)

    def close(self) -> None:
        """Let go of the connection serial peers' checkers read ``hbase:meta`` through (a
        later pass opens another)."""
        self.checkers.close()

    def __enter__(self) -> Shipper:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
        if self._executor is not None:  # the threads that applied batches in the background
            executor, self._executor = self._executor, None
            executor.shutdown(wait=True)

    def flush_progress(self) -> None:
        """Write every queue's progress not written yet (a tailer calls this as it stops)."""
        self.book.flush()

    def _applier(self) -> ThreadPoolExecutor:
        if self._executor is None:
            self._executor = ThreadPoolExecutor(max_workers=8, thread_name_prefix="walship-apply")
        return self._executor
