"""Tailing: delivery during a run, hand-over to the next run, sharing queues with the
micro-batch shipper, and a peer outage."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from replication_helpers import Cluster, add_peer, contents, make_cluster, ship

from walship.minicluster.process import MiniClusterProcess
from walship.replicate import WalStore
from walship.replicate.tailer import Tailer, TailSummary
from walship.zk import ZnodeLayout, connect

pytestmark = pytest.mark.integration


def start_tail(a: Cluster, duration: float) -> tuple[threading.Thread, list[TailSummary]]:
    out: list[TailSummary] = []

    def run() -> None:
        client = connect(a.zk_hosts)
        try:
            out.append(
                Tailer(
                    client, ZnodeLayout(a.parent), WalStore(str(a.mc.data_dir)), "1", duration=duration, rediscover=0.5
                ).run()
            )
        finally:
            client.stop()
            client.close()

    t = threading.Thread(target=run)
    t.start()
    return t, out


def wait_for(predicate: Callable[[], Any], timeout: float = 30.0) -> bool:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return False


@pytest.fixture
def ab(minicluster_factory: Callable[..., MiniClusterProcess], zk_hosts: str) -> tuple[Cluster, Cluster]:
    a = make_cluster(minicluster_factory, zk_hosts, "A")
    b = make_cluster(minicluster_factory, zk_hosts, "B")
    add_peer(a, b)
    return a, b


def test_tail_delivers_during_the_run_and_hands_over(ab: tuple[Cluster, Cluster]) -> None:
    a, b = ab
    first, s1 = start_tail(a, duration=4)
    tb = b.table()
    a.table().put(b"during-1", {b"r:q": b"1"})
    assert wait_for(lambda: tb.row(b"during-1"))  # shipped while the run goes on, no pass to wait for
    first.join()
    second, s2 = start_tail(a, duration=4)  # the next continuous run takes over
    a.table().put(b"during-2", {b"r:q": b"2"})
    assert wait_for(lambda: tb.row(b"during-2"))
    second.join()
    assert s1[0].status == "ok" and s2[0].status == "ok"
    assert sum(q["entries_shipped"] for q in s1[0].queues.values()) >= 1
    assert contents(b) == contents(a, b"r")


def test_tail_and_micro_batch_never_ship_a_queue_together(ab: tuple[Cluster, Cluster]) -> None:
    a, b = ab
    tailer, out = start_tail(a, duration=5)
    with a.table().batch(batch_size=50) as batch:
        for i in range(2000):
            batch.put(b"row-%04d" % i, {b"r:q": b"%d" % i})
    time.sleep(1.0)  # the tailer holds every queue by now
    summary = ship(a)  # walship_replicate's pass, meanwhile
    busy = [q for q in summary.queues if q.status == "busy"]
    assert busy and all(q.entries_shipped == 0 for q in summary.queues)  # it skipped, and said so
    tailer.join()
    assert out[0].status == "ok"
    assert contents(b) == contents(a, b"r") and len(contents(b)) == 2000


def test_tail_rides_out_a_peer_outage(ab: tuple[Cluster, Cluster]) -> None:
    a, b = ab
    tailer, out = start_tail(a, duration=25)
    a.table().put(b"before", {b"r:q": b"0"})
    assert wait_for(lambda: b.table().row(b"before"))
    b.mc.stop()  # the peer goes away
    for i in range(30):
        a.table().put(b"while-down-%02d" % i, {b"r:q": b"%d" % i})
    time.sleep(2)
    b.mc.start()  # and comes back on the same ports
    assert wait_for(lambda: len(contents(b)) == 31, timeout=40)
    tailer.join()
    retried = sum(q["sink_retries"] for q in out[0].queues.values())
    assert out[0].status == "ok" and (out[0].outages or retried), out[0]  # it saw the outage, and rode it out
    assert contents(b) == contents(a, b"r")
