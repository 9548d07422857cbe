"""On real HBase 2.6 with its WALs on HDFS (a MiniDFSCluster): walship reads them over WebHDFS,
decodes them cell for cell and ships them."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from real_hbase import all_wal_entries, cluster, create_table, managed_peer, unique, wait_queues_hold_current_wals
from replication_helpers import contents, ship

from walship.harness import HBaseProcess
from walship.zk.localserver import LocalZooKeeper

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def hdfs_source(zk_server: LocalZooKeeper, tmp_path_factory: pytest.TempPathFactory) -> Iterator[HBaseProcess]:
    hb = HBaseProcess(
        "H", tmp_path_factory.mktemp("hbase-hdfs") / "H", zk=zk_server.hosts, znode_parent="/hbase-real-h",
        regionservers=1, wal_fs="hdfs",
    )  # fmt: skip
    hb.start()
    yield hb
    hb.stop()


def test_wals_on_hdfs_are_read_over_webhdfs_and_shipped(
    hdfs_source: HBaseProcess, real_hbase: tuple[HBaseProcess, HBaseProcess]
) -> None:
    _, b_hb = real_hbase
    assert hdfs_source.wal_root.startswith("webhdfs://") and hdfs_source.ready["wal_root"].startswith("hdfs://")
    table = unique("hdfs")
    for hb in (hdfs_source, b_hb):
        create_table(hb, table)
    h, b = cluster(hdfs_source, table), cluster(b_hb, table)
    with managed_peer(h, b, unique("h")) as peer:
        wait_queues_hold_current_wals(h, peer)
        conn = h.conn()
        for ts in (100, 200):
            for i in range(100):
                conn.table(table).put(b"row%03d" % i, {b"r:q": b"v%d" % ts, b"l:x": b"local"}, timestamp=ts)
        conn.close()
        # a WAL being written shows the NameNode's length, which lags what was hflushed; a
        # rolled one is complete (reading an open WAL's visible length belongs with HDFS support)
        hdfs_source.call("roll")
        cells = [
            (c.row, c.family, c.timestamp)
            for e in all_wal_entries(h)
            if e.key.table == table.encode() and not e.is_meta
            for c in e.cells
        ]
        assert sorted(cells) == sorted(
            (b"row%03d" % i, f, ts) for ts in (100, 200) for i in range(100) for f in (b"l", b"r")
        )
        summary = ship(h, peer)
        assert summary.status == "ok", summary.error
        assert len(contents(b)) == 100 and contents(b, versions=5) == contents(h, b"r", versions=5)
