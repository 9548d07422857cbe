"""One pass over a group of queues that hold the same WALs (see
:mod:`walship.replicate.batcher`): the loop that joins the three parts of shipping, as HBase's
WAL reader, ``WALEntryBatch`` and shipper are joined.

- the reader (:mod:`walship.replicate.reader`) opens each WAL once and reads its entries in
  runs, from the lowest position of the queues over it;
- the batcher (:mod:`walship.replicate.batcher`) offers every entry to each queue's filter
  chain and batch;
- the applier (:mod:`walship.replicate.applier`) has each full batch applied by its queue's
  sink, in the background or now, and only then commits its position.

An error stops its queue only. What a queue does where its read of a WAL ends (the WAL dropped
once finished, held while it may grow, a serial peer's wait, a WAL moved while read, a drained
recovered queue) is :mod:`walship.replicate.walend`'s.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from walship.errors import WalError, WalshipError
from walship.replicate.applier import Applier
from walship.replicate.batcher import Member, Ramp, wal_order, wanting
from walship.replicate.planner import Planner
from walship.replicate.reader import GroupReader, WalRead
from walship.replicate.walend import WalEnd
from walship.wal.model import WalEntry

__all__ = ["GroupPass"]

log = logging.getLogger(__name__)


class GroupPass:
    """Ships a group of queues once over their WALs.

    :param halted: once it says so, each queue stops after the batch under way (as at
        ``max_batches``): another group of the same pass failed, or the pass was interrupted.
    """

    def __init__(
        self,
        reader: GroupReader,
        applier: Applier,
        planner: Planner,
        ramp: Ramp,
        *,
        halted: Callable[[], bool] | None = None,
    ) -> None:
        self.reader = reader
        self.applier = applier
        self.planner = planner
        self.ramp = ramp
        self.halted = halted
        self.ends = WalEnd(reader, applier, planner)

    def ship_pass(self, members: list[Member], max_batches: int | None) -> None:
        """The pass: each WAL of the group once, in queue order, fed to the queues holding it.
        A queue's WAL groups (multiwal) go on past each other: one held at a WAL that may still
        grow holds back only its own later WALs."""
        try:
            names = sorted({wp.name for m in members for wp in m.queue.wals}, key=wal_order)
            for m in members:
                m.start_pass(self.ramp)
            for name in names:
                for m in members:
                    if m.wants(name) and self._enough(m, max_batches):
                        m.stopped = True
                part = wanting(members, name)
                if not part:
                    continue
                try:
                    with self.reader.open_wal(name, part) as read:
                        self._read_wal(part, read, max_batches)
                except FileNotFoundError as exc:
                    self.ends.moved(name, part, exc)
                except WalshipError as exc:  # ZooKeeper's among them: walship.zk raises them for kazoo's
                    for m in part:
                        if not m.stopped:
                            self.applier.stop(m, exc)
            for m in members:
                self.applier.settle(m)  # a finished WAL's last batch, still in flight
            self._end_pass(members)
        finally:
            for m in members:
                self.applier.settle(m)
                self.applier.uncount(m)  # a batch dropped: read again next time

    def _end_pass(self, members: list[Member]) -> None:
        """A serial peer's queue that waited says so, whatever its other WAL groups shipped; a
        drained recovered queue is removed."""
        for m in members:
            if m.waited is not None and m.qs.status not in ("error", "moved"):
                m.qs.status = "waiting-serial"
                m.qs.message = m.waited.describe()
        for m in members:
            if m.qs.status not in ("error", "moved", "waiting-serial") and m.queue.recovered:
                self.ends.drop_if_drained(m)

    def _enough(self, m: Member, max_batches: int | None) -> bool:
        """The queue has shipped what this pass may: ``max_batches``, or the pass halted."""
        return (max_batches is not None and m.started >= max_batches) or (self.halted is not None and self.halted())

    def _read_wal(self, part: list[Member], read: WalRead, max_batches: int | None) -> None:
        """Read one WAL once, feeding each queue of ``part`` (the queues it was opened for):
        each run of entries the reader gives is taken into each queue's batch (the batcher:
        :meth:`Member.take_run`; a serial peer's queue takes them one by one, :meth:`_offer`),
        and each full batch is handed to the applier. A queue's last full batch may still be in
        flight at the WAL's end (:meth:`WalEnd.reached` queues the rest behind it, or settles it
        first), and the rest may be in flight when the next WAL is read: settled as that WAL's
        first batch is handed over, or at the pass's end. A read that fails settles them all."""
        read_through = False
        try:
            for entries in read.runs():
                for m in part:
                    if m.serial is None:
                        at, n = 0, len(entries)
                        while at < n and not (m.stopped or m.paused):
                            try:
                                at = m.take_run(entries, at)
                            except WalshipError as exc:  # a bulk load marker that does not parse: its queue only
                                if m.read:  # what was read before it is shipped
                                    self.applier.hand_over(m, background=False)
                                if not m.stopped:
                                    self.applier.stop(m, exc)
                                break
                            self.applier.count_reading(m)
                            if m.full() or (m.batch and self.applier.over_quota()):
                                self.applier.hand_over(m, background=self.applier.pipelined)
                                if self._enough(m, max_batches):
                                    m.stopped = True
                    else:
                        for entry in entries:
                            self._offer(m, entry, max_batches)
                if all(m.stopped or m.paused for m in part):
                    return
            read_through = True
        except (WalError, FileNotFoundError):
            # ship what was read before the bad entry (or before the WAL moved), so each
            # position points at what comes next
            for m in part:
                if not m.stopped and m.read:
                    self.applier.hand_over(m, background=False)
            raise
        finally:
            if not read_through:
                for m in part:
                    self.applier.settle(m)
        for m in part:
            if m.stopped or m.paused:
                self.applier.settle(m)
                continue  # a paused one's WAL is read again from its position next pass
            try:
                self.ends.reached(m, read)
            except WalshipError as exc:
                self.applier.stop(m, exc)

    def _offer(self, m: Member, entry: WalEntry, max_batches: int | None) -> None:
        """Offer one entry to a serial peer's queue, whose entries are checked one by one."""
        try:
            took = m.take(entry)
        except WalshipError as exc:  # a serial peer's barriers or ids unread: its queue only
            self._failed_take(m, exc)
            return
        if took:
            self.applier.count_reading(m)
            if m.full() or self.applier.over_quota():
                self._batch_full(m, max_batches)
        elif m.blocked is not None and not m.stopped and not m.paused:
            self.ends.wait_serial(m)

    def _failed_take(self, m: Member, exc: WalshipError) -> None:
        """An entry could not be taken: ship what was read before it, then stop the queue."""
        if m.read:
            self.applier.hand_over(m, background=False)
        if not m.stopped:
            self.applier.stop(m, exc)

    def _batch_full(self, m: Member, max_batches: int | None) -> None:
        self.applier.hand_over(m, background=self.applier.pipelined)
        if self._enough(m, max_batches):
            m.stopped = True
