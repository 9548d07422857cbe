"""Rolls in HBase's order (the new WAL enqueued before the old one gets its last entries and
trailer) under concurrent writes, rolls and tailing: nothing is lost."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest
from replication_helpers import add_peer, contents, make_cluster, tail_in_thread
from waiting import wait_until

from walship_testing.minicluster import AdminClient
from walship_testing.minicluster.process import MiniClusterProcess

pytestmark = pytest.mark.integration

ROWS = 3000


def test_nothing_is_lost_when_wals_roll_in_hbase_order_while_tailing(
    minicluster_factory: Callable[..., MiniClusterProcess], zk_hosts: str
) -> None:
    a = make_cluster(minicluster_factory, zk_hosts, "A", regionservers=1, wal_roll_size=16 * 1024, roll_order="hbase")
    b = make_cluster(minicluster_factory, zk_hosts, "B", regionservers=1)
    add_peer(a, b)
    stop = threading.Event()
    tailing, result = tail_in_thread(a, duration=300, idle_sleep=0.02, stop=stop)
    try:
        table = a.table()
        admin = AdminClient(a.mc.admin)
        written = 0
        # one put at a time: many rolls, each leaving the old WAL open a moment; on until at least
        # two rolled WALs were archived (a roll completes 0.5 s after it began, so how many a fixed
        # number of puts makes depends on how fast they go)
        while written < ROWS or (len(admin.info()["old_wals"]) < 2 and written < 20 * ROWS):
            table.put(b"row-%05d" % written, {b"r:q": b"v%d" % written})
            written += 1
        wait_until(lambda: len(contents(b)) == written, timeout=120, what=f"all {written} rows on B")
    finally:
        stop.set()
        tailing.join(60)
    assert result and result[0].status == "ok", result
    assert contents(b) == contents(a, b"r")
    info = admin.info()
    assert len(info["old_wals"]) >= 2  # it did roll (archiving at the next roll) while the tailer shipped
