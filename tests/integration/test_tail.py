"""Tailing: delivery during a run, hand-over to the next run, sharing queues with the
micro-batch shipper, and a peer outage."""

from __future__ import annotations

import logging
import threading

import pytest
from replication_helpers import SINK_PROTOCOLS, Cluster, contents, ship, tail_in_thread
from waiting import wait_until

from walship.replicate.summary import TailSummary
from walship.replicate.tailer import Tailer
from walship.zk import ReplicationQueues, ZnodeLayout, zk_client
from walship.zk.locks import read_holder
from walship_testing.minicluster import AdminClient

pytestmark = pytest.mark.integration


@pytest.fixture(params=SINK_PROTOCOLS)
def sink_protocol(request: pytest.FixtureRequest) -> str:
    """Every test here runs once per sink: one behaviour suite, two backends."""
    return str(request.param)


def start_tail(a: Cluster, stop: threading.Event) -> tuple[threading.Thread, list[TailSummary]]:
    """A tailer that runs until ``stop`` is set (the test's condition met), or 10 minutes."""
    return tail_in_thread(a, duration=600, rediscover=0.5, stop=stop)


def stopped(tailer: threading.Thread, stop: threading.Event) -> None:
    stop.set()
    tailer.join(timeout=60)
    assert not tailer.is_alive()


def tailer_holds_every_queue(a: Cluster, peer_id: str = "1") -> bool:
    """Every queue of the peer (each live region server has one) is locked by a tailer: its
    holder's owner is ``tail-<peer>``."""
    live = {rs["name"] for rs in AdminClient(a.mc.admin).info()["regionservers"] if rs["alive"]}
    layout = ZnodeLayout(a.parent)
    with zk_client(a.zk_hosts) as client:
        listed = {(q.server, str(q.queue_id)) for q in ReplicationQueues(client, layout).list_queues(peer_id)}
        queues = listed | {(server, peer_id) for server in live}
        holders = [read_holder(client, layout, server, queue_id) for server, queue_id in sorted(queues)]
    return bool(live) and all(h is not None and h.owner == f"tail-{peer_id}" for h in holders)


def sink_failures(records: list[logging.LogRecord]) -> list[str]:
    """The Thrift sink's warnings (its server pool's): a server unreachable, or a call failed
    (each one a retry)."""
    return [
        r.getMessage()
        for r in records
        if r.name.startswith(("walship.sinks", "walship.thrift")) and r.levelno >= logging.WARNING
    ]


def test_tail_delivers_during_the_run_and_hands_over(ab: tuple[Cluster, Cluster]) -> None:
    a, b = ab
    first, s1 = start_tail(a, stop1 := threading.Event())
    tb = b.table()
    a.table().put(b"during-1", {b"r:q": b"1"})
    wait_until(lambda: tb.row(b"during-1"), what="during-1 on B")  # shipped while the run goes on, no pass to wait for
    stopped(first, stop1)
    second, s2 = start_tail(a, stop2 := threading.Event())  # the next continuous run takes over
    a.table().put(b"during-2", {b"r:q": b"2"})
    wait_until(lambda: tb.row(b"during-2"), what="during-2 on B")
    stopped(second, stop2)
    assert s1[0].status == "ok" and s2[0].status == "ok"
    # each run shipped its own row, once
    assert [sum(q["entries_shipped"] for q in s[0].queues.values()) for s in (s1, s2)] == [1, 1]
    assert contents(b) == contents(a, b"r")


def test_tail_and_micro_batch_never_ship_a_queue_together(ab: tuple[Cluster, Cluster]) -> None:
    a, b = ab
    tailer, out = start_tail(a, stop := threading.Event())
    with a.table().batch(batch_size=50) as batch:
        for i in range(2000):
            batch.put(b"row-%04d" % i, {b"r:q": b"%d" % i})
    wait_until(lambda: tailer_holds_every_queue(a), what="the tailer to lock every queue of peer 1")
    summary = ship(a)  # walship_replicate's pass, meanwhile
    busy = [q for q in summary.queues if q.status == "busy"]
    assert busy and all(q.entries_shipped == 0 for q in summary.queues)  # it skipped, and said so
    wait_until(lambda: len(contents(b)) == 2000, timeout=60, what="the 2,000 rows on B")
    stopped(tailer, stop)
    assert out[0].status == "ok"
    assert contents(b) == contents(a, b"r") and len(contents(b)) == 2000


def test_a_tailer_ships_each_entry_once_over_many_passes(ab: tuple[Cluster, Cluster]) -> None:
    """The tailer keeps its queues' positions between passes (reading them once, as HBase's
    sources do): each pass starts where the last one committed, so over many passes every cell
    is shipped exactly once, and the positions it leaves in ZooKeeper are where it stopped."""
    a, b = ab
    stop = threading.Event()
    tailer, out = tail_in_thread(a, duration=120, rediscover=0.5, gather=0, stop=stop)
    tb = b.table()
    for wave in range(6):
        with a.table().batch(batch_size=20) as batch:
            for i in range(50):
                batch.put(b"wave-%d-%03d" % (wave, i), {b"r:q": b"%d" % i})
        wait_until(lambda w=wave: tb.row(b"wave-%d-049" % w), what=f"wave {wave} on B")
    wait_until(lambda: contents(b) == contents(a, b"r"), what="every wave on B")
    stop.set()
    tailer.join(timeout=60)
    summary = out[0]
    assert summary.status == "ok" and summary.passes >= 6
    assert sum(q["cells_shipped"] for q in summary.queues.values()) == 300
    after = ship(a)  # the next run starts at the positions the tailer left: nothing to ship
    assert all(q.status != "error" for q in after.queues)
    assert sum(q.entries_shipped for q in after.queues) == 0


def test_a_queue_made_anew_under_a_tailer_is_shipped_from_its_start(ab: tuple[Cluster, Cluster]) -> None:
    """Positions kept between passes are the ones of the queue the tailer read: the peer's
    queues removed and made again under it (as removing the peer and adding it back does, its
    WALs enqueued at their start) are read whole, and shipped from their start again."""
    a, b = ab
    stop = threading.Event()
    running: list[Tailer] = []
    tailer, out = tail_in_thread(a, duration=120, rediscover=60, gather=0, stop=stop, tailers=running)
    tb = b.table()
    for i in range(20):
        a.table().put(b"first-%02d" % i, {b"r:q": b"1"})
    wait_until(lambda: tb.row(b"first-19"), what="the first rows on B")
    wait_until(lambda: running[0].idle.is_set(), what="the tailer to wait idle")
    with zk_client(a.zk_hosts) as client:
        queues = ReplicationQueues(client, ZnodeLayout(a.parent))
        for q in queues.list_queues("1"):
            queues.remove_queue(q.server, str(q.queue_id))
            for wal in q.wals:
                queues.add_wal(q.server, wal.name, ["1"])
    for i in range(20):
        a.table().put(b"second-%02d" % i, {b"r:q": b"2"})
    wait_until(lambda: tb.row(b"second-19"), what="the second rows on B")
    stop.set()
    tailer.join(timeout=60)
    summary = out[0]
    assert summary.status == "ok"
    # the first rows twice (before, and again from the start of the queue made anew), the second once
    assert sum(q["cells_shipped"] for q in summary.queues.values()) == 20 + 20 + 20
    assert contents(b) == contents(a, b"r")


def test_tail_rides_out_a_peer_outage(ab: tuple[Cluster, Cluster], caplog: pytest.LogCaptureFixture) -> None:
    a, b = ab
    caplog.set_level(logging.WARNING, logger="walship")
    tailer, out = start_tail(a, stop := threading.Event())
    a.table().put(b"before", {b"r:q": b"0"})
    wait_until(lambda: b.table().row(b"before"), what="before on B")
    b.mc.stop()  # the peer goes away
    seen = len(caplog.records)
    for i in range(30):
        a.table().put(b"while-down-%02d" % i, {b"r:q": b"%d" % i})
    # the tailer tries to ship them while the peer is down, and finds it unreachable
    wait_until(lambda: sink_failures(caplog.records[seen:]), what="the tailer's sink to find B unreachable")
    b.mc.start()  # and comes back on the same ports
    wait_until(lambda: len(contents(b)) == 31, timeout=40, what="the 31 rows on B")
    stopped(tailer, stop)
    retried = sum(q["sink_retries"] for q in out[0].queues.values())
    assert out[0].status == "ok" and (out[0].outages or retried), out[0]  # it saw the outage, and rode it out
    assert contents(b) == contents(a, b"r")
