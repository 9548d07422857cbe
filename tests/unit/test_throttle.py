"""The throttler of a peer's bandwidth, as HBase's ReplicationThrottler: a budget of
bandwidth/10 bytes per 100 ms cycle, a batch over it waiting for the next cycle, an oversized
one spread over the cycles its size needs; on a clock of the test's own."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Sequence

import pytest

from walship.errors import ConfigError
from walship.replicate.progressbook import PendingProgress
from walship.replicate.summary import PeerSummary, QueueSummary
from walship.replicate.throttle import CYCLE_S, ThrottledSink, Throttler, batch_size, cell_size
from walship.sinks.base import ApplyStats, FilteredEntry
from walship.wal.model import Cell, CellType, Tag, WalEntry, WalKey
from walship.wal.writer import encode_cell


class Clock:
    """Seconds that move only when the throttler sleeps (or the test says so)."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.slept: list[float] = []
        self._lock = threading.Lock()

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        with self._lock:
            self.slept.append(seconds)
            self.now += seconds

    def advance(self, seconds: float) -> None:
        self.now += seconds


def throttler(bandwidth: int) -> tuple[Throttler, Clock]:
    clock = Clock()
    return Throttler(bandwidth, clock=clock, sleep=clock.sleep), clock


def test_a_cycle_takes_pushes_until_they_would_reach_its_budget() -> None:
    t, clock = throttler(1000)  # 100 bytes per 100 ms cycle
    assert t.enabled and t.budget == pytest.approx(100)
    assert t.acquire(40) == 0 and t.acquire(40) == 0  # 80 < 100
    clock.advance(0.03)
    # 80 + 40 would pass the budget: wait for the next cycle, 70 ms on
    assert t.acquire(40) == pytest.approx(0.07)
    assert clock.now == pytest.approx(1000.1)
    # the next cycle began when the wait ended, with those 40 bytes in it
    assert t.acquire(50) == 0
    assert t.acquire(10) == pytest.approx(CYCLE_S)  # 90 + 10 reaches the budget (HBase: >=)


def test_a_cycle_that_passes_begins_the_next_one_without_a_wait() -> None:
    t, clock = throttler(1000)
    assert t.acquire(90) == 0
    clock.advance(0.1)
    assert t.acquire(90) == 0 and clock.slept == []
    clock.advance(0.25)
    assert t.acquire(99) == 0 and clock.slept == []


def test_an_oversized_batch_goes_at_once_and_the_next_waits_the_cycles_its_size_needs() -> None:
    t, clock = throttler(1000)
    assert t.acquire(1000) == 0  # a cycle's first push never waits, however big
    clock.advance(0.03)  # the push took 30 ms
    # 1000 bytes are ten cycles' budget: the next push waits until 1 s after that cycle began
    assert t.acquire(5) == pytest.approx(0.97)
    assert clock.now == pytest.approx(1001.0)
    # 250 bytes: ceil(2.5) = 3 cycles
    clock.advance(0.1)
    assert t.acquire(250) == 0
    assert t.acquire(1) == pytest.approx(0.3)


def test_an_oversized_batch_paid_off_by_time_already_passed_waits_no_more() -> None:
    t, clock = throttler(1000)
    assert t.acquire(300) == 0
    clock.advance(0.5)  # more than the 3 cycles its 300 bytes need
    assert t.acquire(50) == 0 and clock.slept == []
    assert t.acquire(49) == 0  # a new cycle began at that push
    assert t.acquire(1) == pytest.approx(CYCLE_S)


def test_hbase_throttler_scenario() -> None:
    """HBase's TestReplicationThrottler, on a clock that stands still between sleeps: budgets
    of 100 and 10 bytes a cycle (bandwidths 1000 and 100 bytes/s)."""
    t1, c1 = throttler(1000)
    t2, c2 = throttler(100)
    # 1. a first push of 1000 bytes does not wait in either
    assert t1.next_sleep(1000) == 0 and t2.next_sleep(1000) == 0
    t1.add_push_size(1000)
    t2.add_push_size(1000)
    # 2. the next push amortizes it: 10 cycles (1 s) and 100 cycles (10 s)
    assert t1.next_sleep(5) == pytest.approx(1.0) and t2.next_sleep(5) == pytest.approx(10.0)
    t1.reset_start()
    t2.reset_start()
    t1.add_push_size(5)
    t2.add_push_size(5)
    # 3. 5 + 45 fits 100 but not 10: t2 waits for its next cycle
    assert t1.next_sleep(45) == 0 and t2.next_sleep(45) == pytest.approx(0.1)
    t2.reset_start()
    t1.add_push_size(45)
    t2.add_push_size(45)
    # 4. t1: 50 + 60 passes 100, the next cycle; t2: 45 passed 10, ceil(4.5) = 5 cycles
    assert t1.next_sleep(60) == pytest.approx(0.1) and t2.next_sleep(60) == pytest.approx(0.5)
    assert c1.slept == c2.slept == []  # next_sleep only says; acquire sleeps


def test_the_rate_over_many_batches_stays_at_or_under_the_limit() -> None:
    for bandwidth, size in ((200_000, 1_500), (1_000_000, 30_000), (100_000, 250_000)):
        t, clock = throttler(bandwidth)
        start, total = clock.now, 0
        for _ in range(400):
            t.acquire(size)
            total += size
            clock.advance(0.0005)  # the push itself
        elapsed = clock.now - start
        # every cycle but the last took at most its budget; the last oversized push is unpaid
        assert elapsed >= (total - max(size, t.budget)) / bandwidth
        assert total / elapsed <= bandwidth * 1.01 or size > t.budget
        # and the limit is used, not wasted: within 10 % when batches are small
        if size <= t.budget / 10:
            assert total / elapsed >= bandwidth * 0.9


def test_zero_is_unlimited_and_a_changed_bandwidth_counts_from_the_next_push() -> None:
    t, clock = throttler(0)
    assert not t.enabled
    for _ in range(100):
        assert t.acquire(10**9) == 0
    assert clock.slept == []
    t.set_bandwidth(1000)
    assert t.acquire(90) == 0 and t.acquire(20) == pytest.approx(CYCLE_S)
    t.set_bandwidth(0)
    assert t.acquire(10**9) == 0 and t.acquire(10**9) == 0
    for bad in (-1, 1.5, True, "100"):
        with pytest.raises(ConfigError, match="bandwidth must be an integer of bytes per second >= 0"):
            t.set_bandwidth(bad)  # type: ignore[arg-type]
    with pytest.raises(ConfigError):
        Throttler(-5)


def test_pushers_in_several_threads_share_the_budget() -> None:
    t, clock = throttler(10_000)  # 1,000 bytes a cycle
    barrier = threading.Barrier(4)
    waited: list[float] = []

    def push() -> None:
        barrier.wait()
        mine = 0.0
        for _ in range(25):
            mine += t.acquire(100)
        waited.append(mine)

    threads = [threading.Thread(target=push) for _ in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout=30)
    total = 4 * 25 * 100
    # the budget is counted as taken, whichever thread took it: no cycle holds more than it
    assert clock.now - 1000.0 >= (total / t.budget - 1) * CYCLE_S
    assert sum(waited) >= clock.now - 1000.0 - 1e-9  # every wait is someone's (lock waits too)


def cell(row: bytes, value: bytes, tags: tuple[Tag, ...] = ()) -> Cell:
    return Cell(row, b"r", b"q", 1_700_000_000_000, int(CellType.Put), value, tags)


def entry(*cells: Cell) -> FilteredEntry:
    key = WalKey(b"0123abcd", b"t", 1, 1_700_000_000_000)
    return FilteredEntry(WalEntry(key, cells, 0, 100), cells, (uuid.uuid4(),))


def test_a_batch_is_sized_by_its_cells_serialized_as_keyvalues() -> None:
    plain = cell(b"row1", b"x" * 1000)
    tagged = cell(b"row2", b"y" * 10, (Tag(1, b"abc"), Tag(8, b"")))
    for c in (plain, tagged):
        assert cell_size(c) == len(encode_cell(c)) - 4  # WALCellCodec writes an int32 length first
    assert cell_size(plain) == 8 + 12 + 4 + 1 + 1 + 1000
    assert batch_size([entry(plain, tagged), entry(plain)]) == 2 * cell_size(plain) + cell_size(tagged)


class Recording:
    def __init__(self) -> None:
        self.batches: list[int] = []
        self.closed = False

    def apply(self, entries: Sequence[FilteredEntry], wal: str) -> ApplyStats:
        self.batches.append(len(entries))
        return ApplyStats(cells=sum(len(e.cells) for e in entries), calls=1, retries=2)

    def close(self) -> None:
        self.closed = True


def test_the_throttled_sink_waits_then_applies_and_reports_the_wait() -> None:
    t, clock = throttler(10_000)  # 1,000 bytes a cycle
    inner = Recording()
    sink = ThrottledSink(inner, t)
    big = entry(cell(b"r", b"v" * 600))  # 626 bytes
    first = sink.apply([big], "wal.1")
    assert first.throttled_s == 0 and first.cells == 1 and first.retries == 2
    clock.advance(0.04)
    second = sink.apply([big, big], "wal.1")  # 626 + 1252 passes the budget: the next cycle
    assert second.throttled_s == pytest.approx(0.06) and inner.batches == [1, 2]
    third = sink.apply([big], "wal.1")  # 1252 bytes were 2 cycles' worth
    assert third.throttled_s == pytest.approx(0.2)
    sink.close()
    assert inner.closed

    free = ThrottledSink(Recording(), Throttler(0, clock=clock, sleep=clock.sleep))
    assert all(free.apply([big] * 50, "wal.1").throttled_s == 0 for _ in range(20))


def test_throttled_time_adds_up_in_summaries_and_progress() -> None:
    a, b = QueueSummary("rs1", "1", throttled_s=1.25), QueueSummary("rs2", "1", throttled_s=0.5)
    peer = PeerSummary("1", queues=[a, b])
    assert peer.to_json()["throttled_s"] == 1.75 and a.to_json()["throttled_s"] == 1.25
    assert "throttled_s" not in peer.totals()  # the integer counters stay as they were
    assert QueueSummary.from_json(a.to_json()).throttled_s == 1.25
    later = QueueSummary("rs1", "1", status="shipped", throttled_s=0.25)
    a.merge(later)
    assert a.throttled_s == 1.5

    # a progress record takes what each pass's summary waited since it last looked, once
    progress = PendingProgress()
    first = QueueSummary("rs1", "1")
    first.throttled_s = 0.5
    progress.take_throttled(first)
    first.throttled_s = 0.75
    progress.take_throttled(first)
    progress.take_throttled(first)
    second = QueueSummary("rs1", "1", throttled_s=0.25)  # the next pass
    progress.take_throttled(second)
    assert progress.throttled_s == pytest.approx(1.0)
