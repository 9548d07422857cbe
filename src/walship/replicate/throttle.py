"""Per-peer bandwidth, as HBase's ``ReplicationThrottler`` enforces it, and a sink that obeys it.

A peer's ``bandwidth`` (field 7 of HBase's ReplicationPeer, bytes per second, 0 = unlimited)
is a budget of ``bandwidth / 10`` bytes per cycle of 100 ms, per peer and per shipping
process (HBase: per peer and per region server):

* a batch that would bring the cycle's pushed bytes to the budget or over it waits for the
  next cycle (unless it is the cycle's first: a cycle always takes one batch);
* a cycle whose pushed bytes went over the budget (one batch bigger than the budget) is
  spread over as many cycles as its size needs: the next batch waits until
  ``ceil(pushed / budget)`` cycles have passed since that cycle began;
* after a wait, the next cycle begins when the wait ends.

The size of a batch is the serialized size of its cells (as KeyValues, tags included): what
the peer is sent, near enough. :class:`Shipper` keeps one :class:`Throttler` per peer (its
:class:`PeerThrottlers`), shared by every queue of the peer it ships (their batches may be
applied from several threads at once), and wraps the peer's sink in a :class:`ThrottledSink`;
a changed bandwidth (``walship peer set ID --bandwidth N``) applies from the next batch, as
HBase's ``checkBandwidthChangeAndResetThrottler`` does. A replay, and a replay of dead letters,
keeps to the peer's bandwidth with a throttler of its own (:func:`within_bandwidth`). The time
spent waiting is reported as ``throttled_s`` in :class:`~walship.sinks.base.ApplyStats`, the
ship, tail, replay and dead-letter replay summaries, the progress records and the status.

Example::

    throttler = Throttler(1_000_000)  # 1 MB/s: 100,000 bytes per 100 ms cycle
    sink = ThrottledSink(create_sink(peer, context), throttler)
    stats = sink.apply(entries, wal)  # stats.throttled_s: seconds it waited for the budget
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable, Sequence

from walship.errors import ConfigError
from walship.peer import PeerConfig
from walship.sinks.base import ApplyStats, FilteredEntry, Sink
from walship.wal.model import Cell

__all__ = [
    "CYCLE_S",
    "MAX_BANDWIDTH",
    "PeerThrottlers",
    "ThrottledSink",
    "Throttler",
    "batch_size",
    "cell_size",
    "within_bandwidth",
]

log = logging.getLogger(__name__)

#: One cycle of the throttler, in seconds (HBase: 100 ms); its budget is a tenth of the bandwidth.
CYCLE_S = 0.1
#: The largest bandwidth a peer holds (HBase's ReplicationPeer field is an int64).
MAX_BANDWIDTH = 2**63 - 1

# KeyValue: int32 key length, int32 value length, int16 row length, row, int8 family length,
# family, qualifier, int64 timestamp, int8 type, value, then (with tags) int16 tags length and
# per tag: int16 length, int8 type, value
_KV_FIXED = 4 + 4 + 2 + 1 + 8 + 1


def cell_size(cell: Cell) -> int:
    """The cell's serialized size as a KeyValue (tags included)."""
    size = _KV_FIXED + len(cell.row) + len(cell.family) + len(cell.qualifier) + len(cell.value)
    if cell.tags:
        size += 2 + sum(3 + len(tag.value) for tag in cell.tags)
    return size


def batch_size(entries: Sequence[FilteredEntry]) -> int:
    """The serialized size of the cells a batch ships (what the throttler counts)."""
    return sum(cell_size(cell) for e in entries for cell in e.cells)


class Throttler:
    """HBase's ``ReplicationThrottler``: a budget of ``bandwidth / 10`` bytes per 100 ms cycle.

    Thread-safe: callers of :meth:`acquire` queue for the budget one at a time.

    :param bandwidth: bytes per second; 0 disables throttling.
    :param clock: monotonic seconds (injectable for tests).
    :param sleep: sleeps that many seconds (injectable for tests; it should advance ``clock``).
    :raises ConfigError: a negative bandwidth.
    """

    def __init__(
        self,
        bandwidth: int,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._clock = clock
        self._sleep = sleep
        self._lock = threading.Lock()
        self._bandwidth = 0
        self._pushed = 0  # bytes pushed in the current cycle (HBase: cyclePushSize)
        self._start = clock()  # when the current cycle began (HBase: cycleStartTick)
        self.set_bandwidth(bandwidth)

    @property
    def bandwidth(self) -> int:
        """Bytes per second (0: unlimited)."""
        return self._bandwidth

    @property
    def enabled(self) -> bool:
        return self._bandwidth > 0

    @property
    def budget(self) -> float:
        """Bytes per cycle (HBase's throttler is built with ``bandwidth / 10.0``)."""
        return self._bandwidth * CYCLE_S

    def set_bandwidth(self, bandwidth: int) -> None:
        """Change the limit; the current cycle goes on (HBase's ``setBandwidth``)."""
        if isinstance(bandwidth, bool) or not isinstance(bandwidth, int) or not 0 <= bandwidth <= MAX_BANDWIDTH:
            raise ConfigError(f"bandwidth must be an integer of bytes per second >= 0, got {bandwidth!r}")
        # no lock: a pusher may be waiting while holding it; the new limit counts from its next push
        self._bandwidth = bandwidth

    def next_sleep(self, size: int) -> float:
        """Seconds to wait before pushing ``size`` bytes (HBase's ``getNextSleepInterval``,
        in seconds); starts a new cycle when the current one has passed. Not locked: the
        caller holds the throttler (see :meth:`acquire`)."""
        if not self.enabled:
            return 0.0
        budget = self.budget
        now = self._clock()
        wait = 0.0
        if self._pushed > budget:
            # the cycle took more than its budget (one oversized push): spread it over the
            # cycles its size needs before anything else goes
            until = self._start + math.ceil(self._pushed / budget) * CYCLE_S
            if until > now:
                wait = until - now
            else:
                self._start = now  # no wait, so no reset after one: begin the cycle here
            self._pushed = 0
        else:
            next_cycle = self._start + CYCLE_S
            if now >= next_cycle:
                self._start = now
                self._pushed = 0
            elif self._pushed > 0 and self._pushed + size >= budget:
                # over the budget: wait for the next cycle (a cycle's first push never waits,
                # however big; the push after it pays)
                wait = next_cycle - now
                self._pushed = 0
        return wait

    def add_push_size(self, size: int) -> None:
        """Count ``size`` bytes pushed in the current cycle (HBase's ``addPushSize``)."""
        if self.enabled:
            self._pushed += size

    def reset_start(self) -> None:
        """Begin the next cycle now, after a wait (HBase's ``resetStartTick``)."""
        if self.enabled:
            self._start = self._clock()

    def acquire(self, size: int) -> float:
        """Wait until ``size`` bytes may be pushed, and count them; the seconds waited (for
        the budget, and for other pushers of the same throttler ahead of this one).

        The bytes are counted before they are pushed, not after as HBase does: with one
        pusher it is the same (nothing happens between the two), and pushers in other
        threads see the budget taken at once.
        """
        if not self.enabled:
            return 0.0
        waited = 0.0
        if not self._lock.acquire(blocking=False):
            t0 = self._clock()
            self._lock.acquire()
            waited += self._clock() - t0
        try:
            wait = self.next_sleep(size)
            if wait > 0:
                log.debug("throttling %d bytes: waiting %.3f s for the next cycle", size, wait)
                t0 = self._clock()
                self._sleep(wait)
                waited += self._clock() - t0
                self.reset_start()
            self.add_push_size(size)
        finally:
            self._lock.release()
        return waited


class ThrottledSink(Sink):
    """A peer's sink behind the peer's :class:`Throttler`: each batch waits for its budget,
    then goes to the sink; the wait is added to the batch's ``throttled_s``."""

    def __init__(self, inner: Sink, throttler: Throttler) -> None:
        self.inner = inner
        self.throttler = throttler

    def apply(self, entries: Sequence[FilteredEntry], wal: str) -> ApplyStats:
        waited = self.throttler.acquire(batch_size(entries)) if self.throttler.enabled else 0.0
        stats = self.inner.apply(entries, wal)
        stats.throttled_s += waited
        return stats

    def close(self) -> None:
        self.inner.close()


def within_bandwidth(sink: Sink, peer: PeerConfig) -> Sink:
    """``sink`` behind a throttler of its own at the peer's bandwidth (for a process that ships
    on its own, such as a replay), or ``sink`` itself when the peer is unlimited."""
    return ThrottledSink(sink, Throttler(peer.bandwidth)) if peer.bandwidth else sink


class PeerThrottlers:
    """A shipping process's throttlers: one per peer, shared by every queue of the peer it
    ships (from any thread)."""

    def __init__(self) -> None:
        self._throttlers: dict[str, Throttler] = {}
        self._lock = threading.Lock()

    def of(self, peer: PeerConfig) -> Throttler:
        """The peer's throttler, set to the bandwidth of ``peer`` (a changed one applies at once)."""
        with self._lock:
            throttler = self._throttlers.get(peer.peer_id)
            if throttler is None:
                throttler = self._throttlers[peer.peer_id] = Throttler(peer.bandwidth)
            elif throttler.bandwidth != peer.bandwidth:
                log.info(
                    "peer %s: bandwidth %d -> %d bytes/s (0: unlimited)",
                    peer.peer_id,
                    throttler.bandwidth,
                    peer.bandwidth,
                )
                throttler.set_bandwidth(peer.bandwidth)
        return throttler
