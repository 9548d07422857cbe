"""The applier of a shipping pass: a queue's batch applied by its peer's sink, and only then its
position committed and its progress written (HBase's shipper and endpoint). A full batch, or
the last of a finished WAL, may be applied in the background while the next is read: one batch
in flight per queue, and the next, once read, queued right behind it (applied as soon as it is,
unless it failed, so the peer does not wait for the commit); positions still committed in order,
and a finished WAL out of its queue only once its last batch is committed. A commit that fails
leaves the batch behind it applied too: both are shipped again (at least once, never skipped),
unless a claim carried the first's position, which the second's then follows.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor

from walship.errors import PositionCarriedError, QueueNotFoundError, SinkError, WalshipError
from walship.replicate.batcher import Batch, Feed, InFlight, Member
from walship.replicate.progressbook import PendingProgress, ProgressBook
from walship.replicate.quota import QUOTA_KEY, READING_OVERHEAD, BufferQuota, held_bytes
from walship.replicate.summary import QueueSummary
from walship.sinks.base import ApplyStats, Sink
from walship.zk.queueid import WalPosition
from walship.zk.queues import ReplicationQueues

__all__ = ["Applier"]

log = logging.getLogger(__name__)


def now_ms() -> int:
    """Now, in epoch ms: when a sink returned is when HBase's sink takes the age of a batch's
    last edit, not when the position is committed (a batch applied in the background may be
    committed well after)."""
    return int(time.time() * 1000)


def _apply(
    sink: Sink, batch: Batch, after: Future[tuple[ApplyStats, int] | None] | None = None
) -> tuple[ApplyStats, int] | None:
    """Apply the batch in the background: what the sink did, and when it returned; ``None``
    when the queue's batch before it (``after``, queued ahead of it) failed: then nothing
    after that batch may reach the peer."""
    if after is not None and (after.exception() is not None or after.result() is None):
        return None
    stats = sink.apply(batch.entries, batch.wal.name)
    return stats, now_ms()


class Applier:
    """Applies the batches of a group's queues and commits their positions.

    :param background: the executor that applies full batches in the background, or ``None``
        to apply each batch before the next is read.
    :param quota: the process's memory for batches (:mod:`walship.replicate.quota`): each
        queue's batch is counted from its first entry read until it is applied; a batch it has
        no room for is applied before the next is read (none: no limit).
    """

    def __init__(
        self,
        queues: ReplicationQueues,
        book: ProgressBook,
        background: Callable[[], ThreadPoolExecutor] | None,
        quota: BufferQuota | None = None,
    ) -> None:
        self.queues = queues
        self.book = book
        self._executor = background
        self.quota = quota

    @property
    def pipelined(self) -> bool:
        """Whether full batches are applied in the background."""
        return self._executor is not None

    def stop(self, m: Member, exc: WalshipError) -> None:
        """Stop a queue for this pass (the others go on)."""
        m.stopped = True
        self.stopped(m.feed, m.qs, m.progress, exc)

    def stopped(self, feed: Feed, qs: QueueSummary, progress: PendingProgress, exc: WalshipError) -> None:
        """A queue moved (claimed or removed meanwhile) or failed: its summary says so."""
        if isinstance(exc, QueueNotFoundError):
            qs.status = "moved"
            qs.message = str(exc)
            log.info("queue %s/%s moved while shipping: %s", feed.server, feed.queue_id, exc)
        else:
            self.book.failed(feed.peer.peer_id, qs, exc, progress)

    def hand_over(self, m: Member, *, background: bool, then: Callable[[], None] | None = None) -> None:
        """Give the queue's batch to its sink. In the background the reading goes on meanwhile,
        and a batch handed over while the one before is in flight is queued right behind it
        (the peer is not left waiting while that one is committed), then that one is settled;
        otherwise the one before is settled first and this one applied and committed now.
        ``then`` runs once the batch is committed (never when it failed)."""
        batch = m.cut()
        self.uncount(m)
        background = background and bool(batch.entries) and self._executor is not None
        before = m.inflight if background and not m.stopped else None
        if before is None:
            self.settle(m)
        if m.stopped:
            return  # the batch before failed: this one is dropped, read again next time
        held = held_bytes(batch) if self.quota is not None and batch.entries else 0
        if background and self._room_for(batch, held):
            assert self._executor is not None
            future = self._executor().submit(_apply, m.feed.sink, batch, before[0] if before else None)
            if before is not None:
                m.inflight = None
                try:
                    landed = self._settle(m, before)
                except BaseException:
                    self._after_stop(m, future, batch, held, carry=False)
                    raise
                if m.stopped:
                    self._after_stop(m, future, batch, held, carry=landed)
                    return
            if batch.read:
                m.next_batch()
            m.inflight = (future, batch, held, then)
            return
        if before is not None:
            self.settle(m)
            if m.stopped:
                return
        if batch.read:
            m.next_batch()
        if held and self.quota is not None:
            self.quota.add(held)  # held while it is applied, whatever the room
        try:
            stats = m.feed.sink.apply(batch.entries, batch.wal.name) if batch.entries else ApplyStats()
            self.commit(m, batch, stats, now_ms())
            if then is not None:
                then()
        except WalshipError as exc:
            self.stop(m, exc)
        finally:
            if held and self.quota is not None:
                self.quota.release(held)

    def _after_stop(
        self, m: Member, future: Future[tuple[ApplyStats, int] | None], batch: Batch, held: int, *, carry: bool
    ) -> None:
        """The batch before this one failed, or its commit did. If it failed, this one was not
        applied (it saw so). If its commit did, this one was applied behind it: both are
        shipped again (applied twice, as idempotent as once), unless the position of the one
        before was committed or carried by a claim (``carry``): then this one's goes after it.
        The queue's summary keeps the failure."""
        try:
            if future.result() is not None and carry:
                self._move_position(m, batch)
        except WalshipError as exc:
            log.info("queue %s/%s: the batch applied behind: %s", m.feed.server, m.feed.queue_id, exc)
        finally:
            if held and self.quota is not None:
                self.quota.release(held)

    def count_reading(self, m: Member) -> None:
        """Count the queue's batch being read in the process's quota, as it is now."""
        if self.quota is not None:
            now = m.wire + READING_OVERHEAD * len(m.batch)
            self.quota.add(now - m.counted)
            m.counted = now

    def uncount(self, m: Member) -> None:
        """The queue's batch being read is no longer counted as such (handed over or dropped)."""
        if self.quota is not None and m.counted:
            self.quota.release(m.counted)
            m.counted = 0

    def over_quota(self) -> bool:
        """The process holds more than its quota: batches being read are cut now."""
        return self.quota is not None and self.quota.full

    def _room_for(self, batch: Batch, held: int) -> bool:
        """Whether the process's quota takes the batch, which holds ``held`` bytes, in flight
        (counted until it is committed)."""
        if self.quota is None or self.quota.try_acquire(held):
            return True
        log.debug("%s: batch of %d entries applied now: %s is full", batch.wal.name, len(batch.entries), QUOTA_KEY)
        return False

    def settle(self, m: Member) -> None:
        """Wait for the queue's batch in flight, if any, and commit its position."""
        if m.inflight is not None:
            inflight, m.inflight = m.inflight, None
            self._settle(m, inflight)

    def _settle(self, m: Member, inflight: InFlight) -> bool:
        """Settle a batch in flight; whether its position landed (committed, or carried by a
        claim), whatever ran after."""
        future, batch, held, then = inflight
        landed = False
        try:
            done = future.result()
            if done is None:  # not applied: a batch before it failed, and nothing after may pass it
                if not m.stopped:
                    self.stop(m, SinkError(f"{batch.wal.name}: a batch not applied, the one before it failed"))
                return False
            try:
                self.commit(m, batch, *done)
            except PositionCarriedError:
                landed = True
                raise
            landed = True
            if then is not None:
                then()
        except WalshipError as exc:
            self.stop(m, exc)
        finally:
            if held and self.quota is not None:  # held until here: referenced until committed
                self.quota.release(held)
        return landed

    def finish_wal(self, m: Member, name: str) -> None:
        """The queue is done with WAL ``name`` (shipped and finished): out of its queue."""
        self.queues.remove_wals(m.feed.server, m.feed.queue_id, [name])
        m.qs.wals_removed.append(name)

    def _move_position(self, m: Member, batch: Batch) -> None:
        """Move the queue's position past the applied batch.

        :raises QueueNotFoundError: the queue was claimed meanwhile (the position carried to
            where it went, if it can be found).
        """
        feed, wal = m.feed, batch.wal
        last_pushed = batch.last_pushed or None
        try:
            version = self.queues.set_position(
                feed.server,
                feed.queue_id,
                wal.name,
                batch.position,
                last_pushed=last_pushed,
                known=m.known.get(wal.name),
            )
        except QueueNotFoundError as exc:
            # claimed from under us (HBase 2.5+'s master does not ask): the batch is applied, so its
            # position goes where the queue went, which then does not ship it again
            carried = self.queues.follow_claim(
                feed.server, feed.queue_id, wal.name, batch.position, last_pushed=last_pushed
            )
            if carried is not None:
                raise PositionCarriedError(f"{exc}; its applied batch's position carried to {carried}") from exc
            raise
        m.known[wal.name] = WalPosition(wal.name, batch.position, version)

    def commit(self, m: Member, batch: Batch, stats: ApplyStats, applied_at: int) -> None:
        """The batch is applied (the sink returned at ``applied_at``, epoch ms): only now may
        the queue's position move past it."""
        feed, qs, progress, wal = m.feed, m.qs, m.progress, batch.wal
        self._move_position(m, batch)
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
