"""One pass over a group of queues that hold the same WALs (see :mod:`walship.replicate.feeds`):
each WAL read once, from the lowest position of the queues over it, every entry offered to each
queue's filter and batch, each batch applied by its queue's sink and only then its position
committed. A full batch may be applied in the background while the next is read (one batch in
flight per queue; positions still committed in order). An error stops its queue only.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from walship.errors import QueueNotFoundError, WalError, WalshipError
from walship.replicate.feeds import Batch, Feed, Member, wal_order
from walship.replicate.planning import Planner
from walship.replicate.progressbook import PendingProgress, ProgressBook
from walship.replicate.readers import OpenReaders
from walship.replicate.summary import QueueSummary
from walship.replicate.walfiles import ReadStats
from walship.replicate.walstore import WalLocation, WalStore
from walship.sinks.base import ApplyStats, Sink
from walship.wal.model import WalEntry
from walship.wal.reader import WalReader
from walship.zk.queueid import WalPosition

__all__ = ["GroupPass"]

log = logging.getLogger(__name__)

#: Pipelined, a pass's first batches are smaller: 1/2**RAMP of the limits, doubling, but no
#: smaller than RAMP_ENTRIES entries or RAMP_BYTES bytes (nor than the limits themselves).
RAMP = 4
RAMP_ENTRIES = 1000
RAMP_BYTES = 1 << 20

#: Seconds a region server's liveness, once read, answers for the WALs read after (a tailer
#: passes many times a second; a server that died meanwhile has its WAL finished a pass later).
LIVE_MAX_AGE = 1.0


def _apply(sink: Sink, batch: Batch) -> tuple[ApplyStats, int]:
    """Apply the batch: what the sink did, and when it returned (epoch ms). That is when
    HBase's sink takes the age of a batch's last edit, not when the position is committed
    (a batch applied in the background may be committed well after)."""
    stats = sink.apply(batch.entries, batch.wal.name) if batch.entries else ApplyStats()
    return stats, int(time.time() * 1000)


class GroupPass:
    """Ships a group of queues once over their WALs.

    :param applier: the executor that applies full batches in the background, or ``None`` to
        apply each batch before the next is read.
    :param halted: once it says so, each queue stops after the batch under way (as at
        ``max_batches``): another group of the same pass failed, or the pass was interrupted.
    """

    def __init__(
        self,
        walstore: WalStore,
        planner: Planner,
        book: ProgressBook,
        read_stats: ReadStats,
        *,
        readers: OpenReaders | None = None,
        batch_entries: int,
        batch_bytes: int,
        applier: Callable[[], ThreadPoolExecutor] | None,
        halted: Callable[[], bool] | None = None,
    ) -> None:
        self.walstore = walstore
        self.planner = planner
        self.queues = planner.queues
        self.book = book
        self.read_stats = read_stats
        self.readers = readers if readers is not None else OpenReaders()
        self.batch_entries = batch_entries
        self.batch_bytes = batch_bytes
        self.pipeline = applier is not None
        self._executor = applier
        self.halted = halted

    def _applier(self) -> ThreadPoolExecutor:
        assert self._executor is not None
        return self._executor()

    def stop(self, m: Member, exc: WalshipError) -> None:
        """Stop a member for this pass (the others go on)."""
        m.stopped = True
        self.stopped(m.feed, m.qs, m.progress, exc)

    def stopped(self, feed: Feed, qs: QueueSummary, progress: PendingProgress, exc: WalshipError) -> None:
        """A queue moved (claimed or removed meanwhile) or failed: say so in its summary."""
        name = f"queue {feed.server}/{feed.queue_id}"
        if isinstance(exc, QueueNotFoundError):
            qs.status = "moved"
            qs.message = str(exc)
            log.info("%s moved while shipping: %s", name, exc)
        else:
            self.book.failed(feed.peer.peer_id, qs, exc, progress)

    def run(self, members: list[Member], max_batches: int | None) -> None:
        """The pass: each WAL of the group once, in queue order, fed to the queues holding it.
        A queue's WAL groups (multiwal) go on past each other: one held at a WAL that may still
        grow holds back only its own later WALs."""
        names = sorted({wp.name for m in members for wp in m.queue.wals}, key=wal_order)
        for m in members:
            m.limit(*self._limits(m))
        for name in names:
            part = [m for m in members if m.wants(name)]
            for m in part:
                if self._enough(m, max_batches):
                    m.stopped = True
            part = [m for m in part if not m.stopped]
            if not part:
                continue
            try:
                self._read_wal(name, part, max_batches)
            except FileNotFoundError as exc:
                self._moved_while_read(name, part, exc)
            except WalshipError as exc:  # ZooKeeper's among them: walship.zk raises them for kazoo's
                for m in part:
                    if not m.stopped:
                        self.stop(m, exc)
        for m in members:
            if m.waited is not None and m.qs.status not in ("error", "moved"):
                m.qs.status = "waiting-serial"  # whatever its other WAL groups shipped
                m.qs.message = m.waited.describe()
        for m in members:
            if m.qs.status in ("error", "moved", "waiting-serial") or not m.queue.recovered:
                continue
            if len(m.qs.wals_removed) == len(m.queue.wals):
                # drained, or empty when claimed: HBase deletes such a recovered queue, so do we
                try:
                    self.queues.remove_queue(m.feed.server, m.feed.queue_id)
                except WalshipError as exc:
                    self.stop(m, exc)
                    continue
                m.qs.queue_removed = True
                log.info("recovered queue %s/%s drained and removed", m.feed.server, m.feed.queue_id)

    def _enough(self, m: Member, max_batches: int | None) -> bool:
        """The queue has shipped what this pass may: ``max_batches``, or the pass halted."""
        return (max_batches is not None and m.started >= max_batches) or (self.halted is not None and self.halted())

    def _read_wal(self, name: str, part: list[Member], max_batches: int | None) -> None:
        """Read one WAL once, from the lowest position of ``part``, feeding each member.

        A full batch goes to its sink in the background while the reading goes on (one batch
        in flight per queue); its position is committed before the queue's next batch is
        handed over, and every batch is settled before the WAL's end is looked at.
        """
        loc = self.walstore.locate(name)
        # what finishes a WAL is looked at before it is read: what the read sees is then all there
        # is (an archived WAL, or a recovered queue's, is finished whatever its server does)
        servers = set() if loc.archived else {m.queue.server for m in part if not m.queue.recovered}
        running = {server: self.planner.server_live(server, max_age=LIVE_MAX_AGE) for server in servers}
        read_at = time.time()
        with self.walstore.open(loc, self.read_stats) as f:
            reader = self.readers.reader(f, loc.path)
            for m in part:
                m.begin(name)
            start = min(m.position for m in part) or None
            try:
                for entries in reader.batches(start):
                    live = False
                    for m in part:
                        if m.serial is None:
                            self._offer_run(m, entries, max_batches)
                        else:
                            for entry in entries:
                                self._offer(m, entry, max_batches)
                        live = live or not (m.stopped or m.paused)
                    if not live:
                        return
            except (WalError, FileNotFoundError):
                # ship what was read before the bad entry (or before the WAL moved), so each
                # position points at what comes next
                for m in part:
                    if not m.stopped and m.read:
                        self._hand_over(m, background=False)
                raise
            finally:
                for m in part:
                    self._settle(m)
            for m in part:
                if m.stopped or m.paused:
                    continue  # a paused one's WAL is read again from its position next pass
                try:
                    self._end_wal(m, loc, reader, running.get(m.queue.server, False), read_at)
                except WalshipError as exc:
                    self.stop(m, exc)

    def _moved_while_read(self, name: str, part: list[Member], exc: FileNotFoundError) -> None:
        """The WAL was archived (moved to ``oldWALs/``) between its lookup and a read: over
        WebHDFS a file is opened by its first read. What was read is shipped (see
        :meth:`_read_wal`); each queue's WAL group waits, at its position, for the next pass,
        which finds the WAL where it went."""
        log.info("WAL %s moved while being read (%s); read again from its position next pass", name, exc)
        for m in part:
            if not m.stopped:
                m.paused = True
                m.hold(name)

    def _offer_run(self, m: Member, entries: list[WalEntry], max_batches: int | None) -> None:
        """Offer a list of entries to a member (not a serial peer's), batch after batch."""
        i, n = 0, len(entries)
        while i < n and not (m.stopped or m.paused):
            try:
                i = m.take_run(entries, i)
            except WalshipError as exc:  # a bulk load marker that does not parse: its queue only
                self._failed_take(m, exc)
                return
            if m.full():
                self._batch_full(m, max_batches)

    def _offer(self, m: Member, entry: WalEntry, max_batches: int | None) -> None:
        """Offer one entry to a member: a serial peer's, whose entries are checked one by one."""
        try:
            took = m.take(entry)
        except WalshipError as exc:  # a serial peer's barriers or ids unread: its queue only
            self._failed_take(m, exc)
            return
        if took:
            if m.full():
                self._batch_full(m, max_batches)
        elif m.blocked is not None and not m.stopped and not m.paused:
            self._wait_serial(m)

    def _failed_take(self, m: Member, exc: WalshipError) -> None:
        """An entry could not be taken: ship what was read before it, then stop the queue."""
        if m.read:
            self._hand_over(m, background=False)
        if not m.stopped:
            self.stop(m, exc)

    def _batch_full(self, m: Member, max_batches: int | None) -> None:
        self._hand_over(m, background=self.pipeline)
        if self._enough(m, max_batches):
            m.stopped = True

    def _wait_serial(self, m: Member) -> None:
        """A serial peer may not be sent the member's next entry yet: ship what it read before
        it, and leave its WAL group at that entry until a later pass (never past it); the
        queue's other WAL groups (multiwal) go on, as HBase's reader of each group waits alone."""
        assert m.blocked is not None and m.wal is not None
        if m.read:
            self._hand_over(m, background=False)
        self._settle(m)
        if m.stopped:
            return  # the batch failed: its error stands
        m.paused = True
        m.hold(m.wal.name)
        m.waited = m.blocked
        m.progress.waiting_serial = m.blocked.to_json()
        log.info("queue %s/%s, peer %s: %s", m.feed.server, m.feed.queue_id, m.feed.peer.peer_id, m.blocked.describe())

    def _limits(self, m: Member) -> tuple[int, int]:
        """The member's batch limits (entries, wire bytes): pipelined, a pass starts with small
        batches, doubling up to the limits (1/16, 1/8, 1/4, 1/2), so that the sink starts work
        while the rest of the first batch would still be read."""
        shift = RAMP - m.started if self.pipeline else 0
        if shift <= 0:
            return self.batch_entries, self.batch_bytes
        return (
            max(min(self.batch_entries, RAMP_ENTRIES), self.batch_entries >> shift),
            max(min(self.batch_bytes, RAMP_BYTES), self.batch_bytes >> shift),
        )

    def _end_wal(self, m: Member, loc: WalLocation, reader: WalReader, live: bool, read_at: float) -> None:
        """A member read a WAL to its end: commit the rest, and drop the WAL once finished."""
        assert m.wal is not None
        # past the header of a WAL with no entries yet, so its unshipped bytes read 0
        m.position = max(m.position, reader.stop_offset)
        why = self.planner.wal_finished(
            m.queue, m.index[m.wal.name], loc, reader.has_trailer, m.grace, now=read_at, live=live
        )
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
            m.hold(m.wal.name)  # its group's current WAL, or a rolled one not closed yet: more may come
            return
        log.debug("queue %s/%s: %s finished (%s)", m.feed.server, m.feed.queue_id, m.wal.name, why)
        self.queues.remove_wals(m.feed.server, m.feed.queue_id, [m.wal.name])
        m.qs.wals_removed.append(m.wal.name)
        self.readers.forget(loc.path)

    def _hand_over(self, m: Member, *, background: bool) -> None:
        """Give the member's batch to its sink, after settling the one before it. In the
        background the reading goes on meanwhile; otherwise it is applied and committed now."""
        batch = m.cut()
        self._settle(m)
        if m.stopped:
            return  # the batch before failed: this one is dropped, read again next time
        if batch.read:
            m.started += 1
            m.limit(*self._limits(m))
        if background and batch.entries:
            m.inflight = (self._applier().submit(_apply, m.feed.sink, batch), batch)
            return
        try:
            self._commit(m, batch, *_apply(m.feed.sink, batch))
        except WalshipError as exc:
            self.stop(m, exc)

    def _settle(self, m: Member) -> None:
        """Wait for the member's batch in flight, if any, and commit its position."""
        if m.inflight is None:
            return
        future, batch = m.inflight
        m.inflight = None
        try:
            self._commit(m, batch, *future.result())
        except WalshipError as exc:
            self.stop(m, exc)

    def _commit(self, m: Member, batch: Batch, stats: ApplyStats, applied_at: int) -> None:
        """The batch is applied (the sink returned at ``applied_at``, epoch ms): only now may
        the queue's position move past it."""
        feed, qs, progress, wal = m.feed, m.qs, m.progress, batch.wal
        version = self.queues.set_position(
            feed.server,
            feed.queue_id,
            wal.name,
            batch.position,
            last_pushed=batch.last_pushed or None,
            known=m.known.get(wal.name),
        )
        m.known[wal.name] = WalPosition(wal.name, batch.position, version)
        if batch.read:  # a move past a header alone is no batch
            qs.batches += 1
            progress.add("batches", 1)
        qs.status = "shipped"
        shipped = len(batch.entries) - stats.passed_over
        # the kept cells' share of the WAL bytes, less the share of the entries passed over
        shipped_bytes = batch.kept_bytes * shipped // len(batch.entries) if batch.entries else 0
        qs.entries_read += batch.read
        qs.bytes_read += batch.size
        qs.entries_shipped += shipped
        qs.cells_shipped += stats.cells
        qs.incompatible_skipped += stats.incompatible_skipped
        qs.deadlettered += stats.deadlettered
        qs.tags_dropped += stats.tags_dropped
        qs.sink_retries += stats.retries
        qs.throttled_s += stats.throttled_s
        qs.positions[wal.name] = batch.position
        if batch.entries:
            qs.age_of_last_shipped_op_ms = max(0, int(time.time() * 1000) - batch.entries[-1].entry.key.write_time)
            if shipped:  # the peer took some of it (not all passed over): HBase's sink saw a batch
                progress.applied = (applied_at, batch.entries[-1].entry.key.write_time)
        progress.add("entries_shipped", shipped)
        progress.add("cells_shipped", stats.cells)
        progress.add("bytes_shipped", shipped_bytes)
        progress.last_wal, progress.last_position = wal.name, batch.position
        if batch.last_write_time is not None:
            progress.last_write_time = batch.last_write_time
        if stats.last_backoff is not None:
            progress.backoff = stats.last_backoff
        self.book.write(feed.peer.peer_id, progress, qs, final=False)
        log.info(
            "queue %s/%s: batch of %d entries (%d WAL bytes) applied, %d of them shipped (%d bytes); %s position %d",
            feed.server,
            feed.queue_id,
            batch.read,
            batch.size,
            shipped,
            shipped_bytes,
            wal.name,
            batch.position,
        )
