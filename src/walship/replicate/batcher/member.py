"""The batcher: the queues one WAL read feeds, each with its peer's filter chain and sink, its
own batch and its own position (HBase's ``WALEntryBatch``, cut per queue).

Peers and subscriptions of one server have queues over the same WALs (``1``, ``2`` and
``subs`` of a live server, or ``1-<dead>``, ``2-<dead>`` claimed from the same dead server).
:func:`group_key` says which queues share their WALs; the shipper reads each WAL of a group
once, from the lowest position of its queues, and offers every entry to every queue whose
position it has reached (see :class:`walship.replicate.grouppass.GroupPass`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, ClassVar

from walship.peer import PeerConfig
from walship.replicate.batcher.filters import COMPILED, EntryFilter
from walship.replicate.progressbook import PendingProgress
from walship.replicate.summary import QueueSummary
from walship.serial.checker import Blocked, SerialChecker
from walship.sinks.base import ApplyStats, FilteredEntry, Sink
from walship.wal.model import METAFAMILY, WalEntry
from walship.wal.names import parse_wal_name, wal_group
from walship.zk import QueueId, QueueInfo
from walship.zk.queues import KnownQueue, WalPosition

__all__ = ["Batch", "Feed", "InFlight", "KnownPositions", "Member", "Ramp", "group_key", "wal_order", "wanting"]

#: the compiled run of Member.take (Member.take_run_py where it is not built)
_take_run = COMPILED.take_run if COMPILED is not None else None

log = logging.getLogger(__name__)

#: (server, queue id) -> the queue as its lock holder left it (see ReplicationQueues.read_queue).
KnownPositions = dict[tuple[str, str], KnownQueue]
#: A queue's batch in the background: its future (what the sink did and when it returned;
#: ``None``: not applied, a batch before it failed), the batch, the quota bytes it holds, and
#: what runs once it is committed.
InFlight = tuple[Future[tuple[ApplyStats, int] | None], "Batch", int, Callable[[], None] | None]


def group_key(server: str, queue_id: str) -> tuple[str, tuple[str, ...]]:
    """Queues with the same key hold the same WALs: one server's queues, or the queues claimed
    from the same chain of dead servers."""
    return server, QueueId.parse(queue_id).dead_servers


def wal_order(name: str) -> tuple[int, str]:
    """A queue's WAL order: by the WAL's timestamp, then name."""
    return parse_wal_name(name).timestamp, name


@dataclass(frozen=True)
class Feed:
    """One queue to feed, with the filter chain and sink of its peer."""

    peer: PeerConfig
    server: str
    queue_id: str
    entry_filter: EntryFilter
    sink: Sink


@dataclass(frozen=True)
class Batch:
    """A batch cut from one WAL for one queue: its entries left after filtering, and where
    the queue's position goes once they are applied.

    :param read: entries read (kept or filtered out); ``size`` their bytes in the WAL;
        ``kept_bytes`` the kept entries' bytes in the share of their cells kept (an estimate of
        the WAL bytes of what the peer takes, with no cell counted).
    """

    wal: WalPosition
    entries: list[FilteredEntry]
    read: int
    size: int
    position: int
    last_write_time: int | None
    last_pushed: dict[str, int] = field(default_factory=dict)  # serial: region -> last sequence id read
    kept_bytes: int = 0


@dataclass(frozen=True)
class Ramp:
    """A pass's batch limits: full at ``entries`` entries, or about ``wire_bytes`` for the sink
    to send, or four times that in WAL bytes (a queue whose filter drops most still moves on).

    Pipelined (batches applied in the background while the next is read), a pass's first
    batches are smaller, so that the sink starts work while the rest of the first batch would
    still be read: 1/2**STEPS of the limits, doubling (1/16, 1/8, 1/4, 1/2), but no smaller than
    MIN_ENTRIES entries or MIN_BYTES bytes (nor than the limits themselves).
    """

    entries: int
    wire_bytes: int
    pipelined: bool = False

    STEPS: ClassVar[int] = 4
    MIN_ENTRIES: ClassVar[int] = 1000
    MIN_BYTES: ClassVar[int] = 1 << 20

    def limits(self, started: int) -> tuple[int, int, int]:
        """The limits of a queue's batch after ``started`` batches this pass (as ``LIMITS``)."""
        entries, wire = self.entries, self.wire_bytes
        shift = self.STEPS - started if self.pipelined else 0
        if shift > 0:
            entries = max(min(entries, self.MIN_ENTRIES), entries >> shift)
            wire = max(min(wire, self.MIN_BYTES), wire >> shift)
        return entries, wire, 4 * wire


@dataclass
class Member:
    """A fed queue during one pass: its WALs, and the batch it is cutting in the current WAL."""

    feed: Feed
    qs: QueueSummary
    progress: PendingProgress
    queue: QueueInfo
    grace: float
    serial: SerialChecker | None = None  # a serial peer's queue: which entries may go now
    index: dict[str, int] = field(default_factory=dict)
    known: dict[str, WalPosition] = field(default_factory=dict)
    stopped: bool = False  # at the batch limit, or failed
    held: set[str] = field(default_factory=set)  # WAL groups at a WAL that may still grow
    wal: WalPosition | None = None
    batch: list[FilteredEntry] = field(default_factory=list)
    read: int = 0
    size: int = 0
    position: int = 0
    last_write_time: int | None = None
    wire: int = 0  # estimated bytes the sink sends for the batch
    started: int = 0  # batches handed to the sink this pass
    ramp: Ramp = field(default_factory=lambda: Ramp(0, 0))  # the pass's batch limits (see next_batch())
    limits: tuple[int, int, int] = (0, 0, 0)  # the batch's: entries, wire bytes, WAL bytes (as LIMITS)
    # the batch applied in the background: (stats, when applied), the batch, its bytes in the buffer
    # quota, and what follows its commit (its WAL finished: out of the queue)
    inflight: InFlight | None = None
    last_pushed: dict[str, int] = field(default_factory=dict)
    blocked: Blocked | None = None  # serial: the entry it must not send yet
    paused: bool = False  # serial: waiting in the current WAL (its WAL group waits; the others go on)
    waited: Blocked | None = None  # serial: the last wait of this pass
    counted: int = 0  # bytes the batch being read is counted for in the process's buffer quota

    def __post_init__(self) -> None:
        self.index = {wp.name: i for i, wp in enumerate(self.queue.wals)}
        # each WAL znode as last read or written: a commit writes at its version, no read first
        self.known = {wp.name: wp for wp in self.queue.wals}

    def wants(self, wal: str) -> bool:
        """Whether the pass reads ``wal`` for this queue: one of its WALs, in a WAL group not
        held at an earlier WAL that may still grow (other groups go on)."""
        return not self.stopped and wal in self.index and wal_group(wal) not in self.held

    def hold(self, wal: str) -> None:
        """``wal`` may still grow: the rest of its WAL group waits for the next pass."""
        self.held.add(wal_group(wal))

    def begin(self, wal: str) -> None:
        """Start the queue's pass over ``wal`` at its saved position."""
        self.wal = self.queue.wals[self.index[wal]]
        self.position = self.wal.position
        self.blocked, self.paused = None, False
        self.reset()

    def reset(self) -> None:
        self.batch, self.read, self.size, self.wire, self.last_write_time = [], 0, 0, 0, None
        self.last_pushed = {}

    def start_pass(self, ramp: Ramp) -> None:
        """The pass's batch limits: its first batch's now, the next ones' at :meth:`next_batch`."""
        self.ramp = ramp
        self.limits = ramp.limits(self.started)

    def next_batch(self) -> None:
        """A batch went to the sink: the next one may be larger (:class:`Ramp`)."""
        self.started += 1
        self.limits = self.ramp.limits(self.started)

    def full(self) -> bool:
        """The batch has reached its :attr:`limits`."""
        max_read, max_wire, max_size = self.limits
        return self.read >= max_read or self.wire >= max_wire or self.size >= max_size

    def cut(self) -> Batch:
        """The batch read so far; the member starts a new one at its position."""
        assert self.wal is not None
        batch = Batch(
            self.wal,
            self.batch,
            self.read,
            self.size,
            self.position,
            self.last_write_time,
            self.last_pushed,
            kept_bytes=self.wire,
        )
        self.reset()
        return batch

    def _bulk_load(self, entry: WalEntry) -> None:
        """A bulk load marker of what the peer takes: its HFiles bypassed the WAL, so they are
        counted and named (``walship verify`` finds and repairs the rows they hold)."""
        assert self.wal is not None
        load = self.feed.entry_filter.bulk_load(entry, self.wal.name)
        if load is None:
            return
        self.qs.bulk_loads += 1
        self.progress.add("bulk_loads", 1)
        log.warning(
            "queue %s/%s, peer %s: a bulk load reached the source without passing through the WAL, so it is "
            "not shipped: %s (WAL %s, offset %d); run 'walship verify --peer %s --table %s --repair' to "
            "copy its rows",
            self.feed.server,
            self.feed.queue_id,
            self.feed.peer.peer_id,
            load.describe(),
            self.wal.name,
            entry.offset,
            self.feed.peer.peer_id,
            load.table.decode(errors="replace"),
        )

    def take_run(self, entries: list[WalEntry], i: int) -> int:
        """:meth:`take` for each of ``entries[i:]`` until the batch is full (:meth:`full`):
        returns the index after the last entry looked at (``len(entries)``, or the batch is
        full). Not for a serial peer's queue, whose entries :meth:`take` checks one by one.
        The compiled code takes the run where it is built (a marker filtered out, maybe a bulk
        load's, goes through :meth:`take`), :meth:`take_run_py` otherwise.

        :raises WalshipError: as :meth:`take`; what was taken before stays in the batch.
        """
        assert self.serial is None
        if self.stopped or self.paused:
            return i
        compiled = self.feed.entry_filter.compiled
        if _take_run is None or compiled is None:
            return self.take_run_py(entries, i)
        n = len(entries)
        while i < n:
            # the compiled run counts into a list laid out as TALLY, and back whatever stops it
            tally: list[Any] = [self.position, self.read, self.size, self.wire, 0, self.last_write_time]
            try:
                i, marker = _take_run(entries, i, compiled, self.batch, tally, self.limits)
            finally:
                self.position, self.read, self.size, self.wire, filtered, self.last_write_time = tally
                self.qs.entries_filtered += filtered
            if not marker:
                break
            self.take(entries[i])
            i += 1
            if self.full():
                break
        return i

    def take_run_py(self, entries: list[WalEntry], i: int) -> int:
        """:meth:`take_run` in Python: :meth:`take` an entry at a time."""
        n = len(entries)
        while i < n:
            i += 1
            if self.take(entries[i - 1]) and self.full():
                break
        return i

    def take(self, entry: WalEntry) -> bool:
        """Offer an entry; ``False`` when it lies before the queue's position (shipped already),
        or when a serial peer may not be sent it yet (:attr:`blocked` then says why)."""
        if self.stopped or self.paused or entry.offset < self.position:
            return False
        if self.serial is not None and self.feed.entry_filter.ordered(entry):
            self.blocked = self.serial.check(entry)
            if self.blocked is not None:
                return False
            # sent or left empty by the scopes, it counts: the range it belongs to moves on
            self.last_pushed[entry.key.encoded_region_name.decode()] = entry.key.sequence_id
        self.read += 1
        size = entry.end_offset - entry.offset
        self.size += size
        kept = self.feed.entry_filter.apply(entry)
        if kept is None:
            self.qs.entries_filtered += 1
            if entry.cells and entry.cells[0].family == METAFAMILY:
                self._bulk_load(entry)
        else:
            self.batch.append(kept)
            # the kept cells' share of the entry's bytes: what the sink sends, near enough
            n = len(entry.cells)
            self.wire += size if len(kept.cells) == n else size * len(kept.cells) // n
        self.position = entry.end_offset
        self.last_write_time = entry.key.write_time
        return True


def wanting(members: list[Member], wal: str) -> list[Member]:
    """The queues of ``members`` the pass reads ``wal`` for (:meth:`Member.wants`), in order."""
    return [m for m in members if m.wants(wal)]
