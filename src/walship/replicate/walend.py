"""Where a queue's read of a WAL ends, in a pass of :class:`walship.replicate.grouppass.GroupPass`:
the WAL read to its end (the rest committed; dropped from the queue once finished, held while it
may grow; a torn last write of a closed WAL counted), a serial peer's queue that may not go on
yet (held at the entry it waits for), a WAL archived while read (read again next pass from
where it went), and a recovered queue drained (removed, as HBase does).
"""

from __future__ import annotations

import logging

from walship.errors import WalshipError
from walship.replicate.applier import Applier
from walship.replicate.batcher import Member
from walship.replicate.planner import Planner
from walship.replicate.reader import GroupReader, WalRead

__all__ = ["WalEnd"]

log = logging.getLogger(__name__)


class WalEnd:
    """The steps of a pass where a queue's read of a WAL ends or stops short."""

    def __init__(self, reader: GroupReader, applier: Applier, planner: Planner) -> None:
        self.reader = reader
        self.applier = applier
        self.planner = planner

    def reached(self, m: Member, read: WalRead) -> None:
        """A queue read a WAL to its end: commit the rest, and drop the WAL once finished (a
        finished WAL's rest is applied in the background when the pass pipelines, the WAL
        dropped after its commit)."""
        assert m.wal is not None
        reader, loc = read.reader, read.loc
        # past the header of a WAL with no entries yet, so its unshipped bytes read 0
        m.position = max(m.position, reader.stop_offset)
        why = self.planner.wal_finished(
            m.queue,
            m.index[m.wal.name],
            loc,
            reader.has_trailer,
            m.grace,
            now=read.read_at,
            live=read.running.get(m.queue.server, False),
        )
        name, rest = m.wal.name, bool(m.read or m.position != m.wal.position)  # something to commit
        if why is None or not rest or not self.applier.pipelined:
            self.applier.settle(m)  # a full batch still in flight (a rest applied in the background goes behind it)
            if m.stopped:
                return  # it failed: the WAL stays, at the position before it
        if why is None:
            if rest:
                self.applier.hand_over(m, background=False)
            if not m.stopped:  # the batch failed: the WAL stays, at the position before it
                m.hold(name)  # its group's current WAL, or a rolled one not closed yet: more may come
            return

        def finish() -> None:
            if reader.incomplete_tail:  # counted once the WAL is done with, not each time it is read
                torn = reader.edits_end - reader.stop_offset
                m.qs.torn_tail_bytes += torn
                log.warning(
                    "%s: %d bytes after offset %d are a torn last write of a closed WAL (a crash "
                    "before the write was acknowledged); not shipped",
                    loc.path,
                    torn,
                    reader.stop_offset,
                )
            log.debug("queue %s/%s: %s finished (%s)", m.feed.server, m.feed.queue_id, name, why)
            self.applier.finish_wal(m, name)
            self.reader.finished(loc)

        if rest:
            # applied while the next WAL is read; the WAL leaves its queue once it is committed
            # (a batch that fails leaves it, at the position before the batch)
            self.applier.hand_over(m, background=self.applier.pipelined, then=finish)
        else:
            finish()

    def wait_serial(self, m: Member) -> None:
        """A serial peer may not be sent the queue's next entry yet: ship what it read before
        it, and leave its WAL group at that entry until a later pass (never past it); the
        queue's other WAL groups (multiwal) go on, as HBase's reader of each group waits alone."""
        assert m.blocked is not None and m.wal is not None
        if m.read:
            self.applier.hand_over(m, background=False)
        self.applier.settle(m)
        if m.stopped:
            return  # the batch failed: its error stands
        m.paused = True
        m.hold(m.wal.name)
        m.waited = m.blocked
        m.progress.waiting_serial = m.blocked.to_json()
        log.info("queue %s/%s, peer %s: %s", m.feed.server, m.feed.queue_id, m.feed.peer.peer_id, m.blocked.describe())

    def moved(self, name: str, part: list[Member], exc: FileNotFoundError) -> None:
        """The WAL was archived (moved to ``oldWALs/``) between its lookup and a read: over
        WebHDFS a file is opened by its first read. What was read is shipped (the pass hands
        it over); each queue's WAL group waits, at its position, for the next pass, which
        finds the WAL where it went."""
        log.info("WAL %s moved while being read (%s); read again from its position next pass", name, exc)
        for m in part:
            if not m.stopped:
                m.paused = True
                m.hold(name)

    def drop_if_drained(self, m: Member) -> None:
        """A recovered queue drained, or empty when claimed: HBase deletes it, so do we."""
        if len(m.qs.wals_removed) != len(m.queue.wals):
            return
        try:
            self.planner.queues.remove_queue(m.feed.server, m.feed.queue_id)
        except WalshipError as exc:
            self.applier.stop(m, exc)
            return
        m.qs.queue_removed = True
        log.info("recovered queue %s/%s drained and removed", m.feed.server, m.feed.queue_id)
