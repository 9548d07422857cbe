"""A pass's groups of queues shipped in threads (:class:`GroupThreads`): every group at once,
the others halted when one fails, the first error raised, the threads' reads counted once."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from walship.errors import SinkError
from walship.peer import PeerConfig
from walship.replicate.groupthreads import GroupKey, GroupThreads, Members
from walship.replicate.reader import OpenReaders
from walship.replicate.summary import QueueSummary
from walship.replicate.walfiles import ReadStats

PEER = PeerConfig("1", "h:2181:/b")


def group(server: str) -> tuple[GroupKey, Members]:
    return (server, ("1",)), [(PEER, server, "1")]


class Sibling:
    """Ships a group by waiting for the pass to halt, or for all groups to have started;
    fails for the servers in ``failing``."""

    def __init__(self, halt: threading.Event, started: threading.Barrier, failing: set[str]) -> None:
        self.halt, self.started, self.failing = halt, started, failing
        self.read_stats = ReadStats()
        self.readers = OpenReaders()
        self.seen_readers: list[OpenReaders] = []
        self.closed = False

    def ship_groups(self, groups: list[Members], filters: Any, max_batches: int | None) -> list[list[QueueSummary]]:
        ((_, server, qid),) = groups[0]
        self.seen_readers.append(self.readers)
        self.read_stats.opens += 1
        self.read_stats.bytes += 100
        self.started.wait(10)  # every group at once, or this breaks
        if server in self.failing:
            raise SinkError(f"peer 1 refused a batch of {server}")
        if self.failing:
            assert self.halt.wait(10)  # halted by the failing group
        return [[QueueSummary(server, qid)]]

    def __exit__(self, *exc: object) -> None:
        self.closed = True


def run(threads: GroupThreads, servers: list[str], failing: set[str], stats: ReadStats) -> list[Sibling]:
    made: list[Sibling] = []
    started = threading.Barrier(len(servers))

    def sibling(halt: threading.Event) -> Sibling:
        made.append(Sibling(halt, started, failing))
        return made[-1]

    groups = dict(group(s) for s in servers)
    threads.run(len(servers), sibling, groups, {}, None, dict, stats)
    return made


def test_every_group_at_once_and_their_reads_counted_once() -> None:
    threads, stats = GroupThreads(), ReadStats()
    made = run(threads, ["rs1", "rs2", "rs3"], set(), stats)
    assert len(made) == 3 and all(s.closed for s in made)
    assert (stats.opens, stats.bytes) == (3, 300) and threads.bytes_read() == 0 and threads.halt is None


def test_a_failing_group_halts_the_others_and_its_error_is_raised() -> None:
    threads, stats = GroupThreads(), ReadStats()
    with pytest.raises(SinkError, match="rs2"):
        run(threads, ["rs1", "rs2", "rs3"], {"rs2"}, stats)
    assert stats.opens == 3  # every thread's reads, the failed one's too
    assert threads.halt is None


def test_a_group_keeps_its_readers_from_pass_to_pass() -> None:
    threads, stats = GroupThreads(), ReadStats()
    first = run(threads, ["rs1", "rs2"], set(), stats)
    second = run(threads, ["rs1", "rs2"], set(), stats)
    by_first = {id(r) for s in first for r in s.seen_readers}
    by_second = {id(r) for s in second for r in s.seen_readers}
    assert len(by_first) == 2 and by_first == by_second
