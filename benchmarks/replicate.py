"""Replication throughput A -> B beside the sink's ceiling, measured in one run.

Starts ZooKeeper and two miniclusters, writes N cells (100-byte values, 3 cells a row) into A,
then measures side by side:

* ``ship``: walship ships them from A's WALs to B (one pass of the shipper, in process);
* ``ceiling``: the same cells written straight into B with happybase batches of 1,000 rows
  (what B's Thrift server takes at best).

Prints cells/s of both and their ratio (target >= 0.5), and Spark's start-up time for the
ship job measured separately (spark-submit of the job with no queue to ship).

    .venv/bin/python benchmarks/replicate.py [--cells 1000000] [--no-spark]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import happybase

from walship.minicluster.admin import AdminClient
from walship.minicluster.process import MiniClusterProcess
from walship.replicate import Shipper, WalStore
from walship.zk import PeerConfig, ReplicationPeers, ZnodeLayout, zk_client
from walship.zk.localserver import LocalZooKeeper, free_port

ROOT = Path(__file__).resolve().parent.parent
VALUE = b"x" * 100
QUALS = (b"a", b"b", b"c")


def write(conn: happybase.Connection, table: str, rows: int) -> float:
    t = conn.table(table)
    t0 = time.perf_counter()
    with t.batch(batch_size=1000) as b:
        for i in range(rows):
            b.put(b"%016d" % i, {b"f:" + q: VALUE for q in QUALS})
    return time.perf_counter() - t0


def spark_startup(zk: str, wal_root: str) -> float:
    bindir = Path(sys.executable).parent
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PATH": f"{bindir}:{os.environ.get('PATH', '')}"}
    t0 = time.perf_counter()
    subprocess.run(
        [str(bindir / "spark-submit"), "--master", "local[2]", "--conf", "spark.ui.enabled=false",
         str(ROOT / "spark_jobs" / "ship.py"), "--zk", zk, "--znode-parent", "/hbase-a", "--wal-root", wal_root,
         "--peer", "1", "--queues", "nothing/none"],
        env=env, capture_output=True, check=True, timeout=300,
    )  # fmt: skip
    return time.perf_counter() - t0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cells", type=int, default=1_000_000)
    parser.add_argument("--no-spark", action="store_true")
    args = parser.parse_args(argv)
    rows = args.cells // len(QUALS)
    cells = rows * len(QUALS)
    with tempfile.TemporaryDirectory(prefix="walship-bench-") as tmp:
        root = Path(tmp)
        zk = LocalZooKeeper(root / "zk", free_port())
        zk.start()
        a = MiniClusterProcess("a", root / "a", zk=zk.hosts, znode_parent="/hbase-a")
        b = MiniClusterProcess("b", root / "b", zk=zk.hosts, znode_parent="/hbase-b")
        try:
            a.start()
            b.start()
            ca, cb = happybase.Connection(*a.thrift), happybase.Connection(*b.thrift)
            for conn, mc in ((ca, a), (cb, b)):
                conn.create_table("bench", {"f": {"max_versions": 1}})
                AdminClient(mc.admin).set_scope("bench", "f", 1)
            cb.create_table("ceiling", {"f": {"max_versions": 1}})
            host, port = b.thrift
            with zk_client(zk.hosts) as client:
                ReplicationPeers(client, ZnodeLayout("/hbase-a")).add(
                    PeerConfig("1", f"{zk.hosts}:/hbase-b", configuration={"walship.sink.thrift": f"{host}:{port}"})
                )
            time.sleep(0.5)
            load_s = write(ca, "bench", rows)
            with zk_client(zk.hosts) as client:
                shipper = Shipper(client, ZnodeLayout("/hbase-a"), WalStore(str(a.data_dir)))
                t0 = time.perf_counter()
                summary = shipper.ship_peer("1")
                ship_s = time.perf_counter() - t0
            shipped = summary.totals()["cells_shipped"]
            ceiling_s = write(cb, "ceiling", rows)
            startup = None if args.no_spark else spark_startup(zk.hosts, str(a.data_dir))
            ca.close()
            cb.close()
        finally:
            for mc in (a, b):
                mc.stop()
            zk.stop()
    if shipped != cells:
        print(f"FAIL: shipped {shipped} cells, wrote {cells}")
        return 1
    ship_rate, ceiling_rate = cells / ship_s, cells / ceiling_s
    print(f"cells {cells:,} ({rows:,} rows x 3, 100-byte values); loading A took {load_s:.1f} s")
    print(
        f"ship A -> B (walship)     : {ship_rate:12,.0f} cells/s  ({ship_s:.1f} s, {summary.totals()['batches']} batches)"
    )
    print(f"happybase straight into B : {ceiling_rate:12,.0f} cells/s  ({ceiling_s:.1f} s)  <- the sink's ceiling")
    print(
        f"ratio ship/ceiling: {ship_rate / ceiling_rate:.3f}  (target >= 0.5: "
        f"{'met' if ship_rate / ceiling_rate >= 0.5 else 'NOT met'})"
    )
    if startup is not None:
        print(f"Spark start-up (spark-submit of the ship job with nothing to ship, local[2]): {startup:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
