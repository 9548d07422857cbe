"""Compressed WALs (``hbase.regionserver.wal.enablecompression``, tags and values too) through
the whole path on the minicluster started with ``--wal-compression``: tailing under rolls in
HBase's order, status and replay; and a tailer that goes on from where its last pass stopped,
decoding only new bytes, rather than rebuilding a compressed WAL's dictionaries each pass.
(What real HBase writes with each setting: test_real_wal_compression.py.)"""

from __future__ import annotations

import datetime as dt
import threading
from collections.abc import Callable

import pytest
from replication_helpers import add_peer, contents, make_cluster, tail_in_thread
from waiting import wait_until

from walship.replicate import Shipper, WalStore
from walship.replicate.replay import replay
from walship.status import collect_status
from walship.wal import WalReader
from walship.zk import ZnodeLayout, zk_client
from walship_testing.minicluster.process import MiniClusterProcess

pytestmark = pytest.mark.integration

COMPRESSED = {"wal_compression": True, "wal_tag_compression": True, "wal_value_compression": "gz"}


def test_compressed_wals_tail_replay_and_status(
    minicluster_factory: Callable[..., MiniClusterProcess], zk_hosts: str
) -> None:
    a = make_cluster(
        minicluster_factory, zk_hosts, "A", regionservers=2, wal_roll_size=32 * 1024, roll_order="hbase", **COMPRESSED
    )
    b = make_cluster(minicluster_factory, zk_hosts, "B", regionservers=1)
    add_peer(a, b)
    begin = dt.datetime.now(dt.UTC)
    stop = threading.Event()
    tailing, result = tail_in_thread(a, duration=300, idle_sleep=0.02, stop=stop)
    try:
        table = a.table()
        for i in range(600):
            table.put(b"row%04d" % i, {b"r:q": b"value %d " % i * 8, b"r:n": b"%d" % i, b"l:x": b"local"})
            if i % 5 == 0:
                table.delete(b"row%04d" % (i // 2), columns=[b"r:n"])
        wait_until(lambda: contents(b) == contents(a, b"r"), timeout=120, what="B equal to A")
    finally:
        stop.set()
        tailing.join(60)
    assert result and result[0].status == "ok", result
    store = WalStore(a.mc.wal_root)
    wals = [p for p, _ in store.wal_files()]
    with store.fs.open(wals[0], "rb") as f:
        assert WalReader(f, wals[0]).compressed is not None  # the minicluster wrote compressed WALs
    with zk_client(a.zk_hosts) as client:
        status = collect_status(client, ZnodeLayout(a.parent), store, "1", probe_timeout=0).to_json()
        assert all(q["last_error"] is None and q["bytes_queued"] == 0 for q in status["peers"][0]["queues"])
        report = replay(client, ZnodeLayout(a.parent), store, "1", begin, dt.datetime.now(dt.UTC))
    assert report.entries_in_window >= 600 and report.not_wals == []


def test_a_tailer_decodes_only_the_new_bytes_of_a_compressed_wal(
    minicluster_factory: Callable[..., MiniClusterProcess], zk_hosts: str
) -> None:
    a = make_cluster(minicluster_factory, zk_hosts, "A", regionservers=1, **COMPRESSED)
    b = make_cluster(minicluster_factory, zk_hosts, "B", regionservers=1)
    add_peer(a, b)
    table = a.table()
    with table.batch(batch_size=500) as batch:
        for i in range(5000):
            batch.put(b"row%05d" % i, {b"r:q": b"v%d" % i})
    with zk_client(a.zk_hosts) as client:
        shipper = Shipper(client, ZnodeLayout(a.parent), WalStore(a.mc.wal_root))
        assert shipper.ship_peer("1").status == "ok"
        first = shipper.read_stats.bytes
        for i in range(20):  # one edit, one pass, twenty times over the same open WAL
            table.put(b"more%02d" % i, {b"r:q": b"x"})
            assert shipper.ship_peer("1").totals()["entries_shipped"] == 1
        later = shipper.read_stats.bytes - first
    assert len(contents(b)) == 5020
    # each pass read what was new (a few KiB), not the whole WAL again to rebuild its dictionaries
    assert first > 50_000 and later < first // 4, (first, later)
