"""Three queues shipped in parallel by the Spark ship job, beside one client's ceiling and one
process shipping the queues one after another, in one run.

Starts ZooKeeper, a minicluster A with three region servers (three tables, one region on each
server, so each server's queue holds a third of the edits) and a minicluster B, writes
``--cells`` cells into A (100-byte values, 3 cells a row), then measures side by side:

* ``spark start-up``: spark-submit of the ship job with no queue to ship (``local[2]``);
* ``spark ship``: spark-submit of the ship job for peer 1 (A -> B over Thrift1), one Spark task
  per queue on ``local[2]``: the figure, with and without its start-up;
* ``one process``: walship ships peer 2 (A -> B, the same sink) in process, queue after queue;
* ``ceiling``: the same cells written straight into B with happybase batches of 1,000 rows,
  one client: what one client gets out of B's Thrift1 server.

Target: the Spark job, start-up left out, above 1.0x the single-client ceiling.

    .venv/bin/python benchmarks/spark_ship.py [--cells 600000]
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
from walship.zk import PeerConfig, ReplicationPeers, ReplicationQueues, ZnodeLayout, zk_client
from walship.zk.localserver import LocalZooKeeper, free_port

ROOT = Path(__file__).resolve().parent.parent
VALUE = b"x" * 100
QUALS = (b"a", b"b", b"c")
TABLES = ("t0", "t1", "t2")


def write(conn: happybase.Connection, tables: tuple[str, ...], rows: int) -> float:
    t0 = time.perf_counter()
    for name in tables:
        with conn.table(name).batch(batch_size=1000) as b:
            for i in range(rows // len(tables)):
                b.put(b"%016d" % i, {b"f:" + q: VALUE for q in QUALS})
    return time.perf_counter() - t0


def spark_submit(zk: str, wal_root: str, *args: str) -> float:
    bindir = Path(sys.executable).parent
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PATH": f"{bindir}:{os.environ.get('PATH', '')}"}
    t0 = time.perf_counter()
    subprocess.run(
        [str(bindir / "spark-submit"), "--master", "local[2]", "--conf", "spark.ui.enabled=false",
         str(ROOT / "spark_jobs" / "ship.py"), "--zk", zk, "--znode-parent", "/hbase-a", "--wal-root", wal_root,
         *args],
        env=env, capture_output=True, check=True, timeout=900,
    )  # fmt: skip
    return time.perf_counter() - t0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cells", type=int, default=600_000)
    args = p.parse_args(argv)
    rows = args.cells // len(QUALS) // len(TABLES) * len(TABLES)
    cells = rows * len(QUALS)
    with tempfile.TemporaryDirectory(prefix="walship-bench-") as tmp:
        root = Path(tmp)
        zk = LocalZooKeeper(root / "zk", free_port())
        zk.start()
        a = MiniClusterProcess("a", root / "a", zk=zk.hosts, znode_parent="/hbase-a", regionservers=3)
        b = MiniClusterProcess("b", root / "b", zk=zk.hosts, znode_parent="/hbase-b", regionservers=1)
        try:
            for mc in (a, b):
                mc.start()
                conn = happybase.Connection(*mc.thrift)
                for name in TABLES:
                    conn.create_table(name, {"f": {"max_versions": 1}})
                    AdminClient(mc.admin).set_scope(name, "f", 1)
                if mc is b:
                    conn.create_table("ceiling", {"f": {"max_versions": 1}})
                conn.close()
            servers = {rs["name"] for rs in AdminClient(a.admin).info()["regionservers"] if rs["regions"]}
            host, port = b.thrift
            with zk_client(zk.hosts) as client:
                peers = ReplicationPeers(client, ZnodeLayout("/hbase-a"))
                for pid in ("1", "2"):
                    sink = {"walship.sink.thrift": f"{host}:{port}"}
                    peers.add(PeerConfig(pid, f"{zk.hosts}:/hbase-b", configuration=sink))
                queues = ReplicationQueues(client, ZnodeLayout("/hbase-a"))
                deadline = time.monotonic() + 30
                while len({q.server for q in queues.list_queues("2")}) < 3 and time.monotonic() < deadline:
                    time.sleep(0.05)
            ca = happybase.Connection(*a.thrift)
            load_s = write(ca, TABLES, rows)
            ca.close()
            wal_root = str(a.data_dir)
            startup_s = spark_submit(zk.hosts, wal_root, "--peer", "1", "--queues", "nothing/none")
            spark_s = spark_submit(zk.hosts, wal_root, "--peer", "1")
            with zk_client(zk.hosts) as client:
                shipper = Shipper(client, ZnodeLayout("/hbase-a"), WalStore(wal_root))
                t0 = time.perf_counter()
                summary = shipper.ship_peer("2")
                one_s = time.perf_counter() - t0
            shipped = summary.totals()["cells_shipped"]
            cb = happybase.Connection(*b.thrift)
            ceiling_s = write(cb, ("ceiling",), rows)
            cb.close()
        finally:
            for mc in (a, b):
                mc.stop()
            zk.stop()
    if shipped != cells:
        print(f"FAIL: shipped {shipped} cells in process, wrote {cells}")
        return 1
    work_s = max(spark_s - startup_s, 1e-9)
    rate = {"spark": cells / work_s, "spark_all": cells / spark_s, "one": cells / one_s, "ceiling": cells / ceiling_s}
    print(f"cells {cells:,} over {len(servers)} region servers' queues; loading A took {load_s:.1f} s")
    print(f"spark start-up (ship job, nothing to ship)  : {startup_s:8.1f} s")
    print(f"spark ship job, local[2], one task a queue   : {spark_s:8.1f} s")
    print(f"  without its start-up                      : {rate['spark']:10,.0f} cells/s")
    print(f"  with it                                   : {rate['spark_all']:10,.0f} cells/s")
    print(f"one process, queue after queue              : {rate['one']:10,.0f} cells/s  ({one_s:.1f} s)")
    print(f"happybase straight into B, one client       : {rate['ceiling']:10,.0f} cells/s  <- ceiling")
    ratio = rate["spark"] / rate["ceiling"]
    print(f"spark (start-up left out) / ceiling: {ratio:.3f}  (target > 1.0: {'met' if ratio > 1.0 else 'NOT met'})")
    print(f"spark with start-up / ceiling: {rate['spark_all'] / rate['ceiling']:.3f}")
    print(f"one process / ceiling: {rate['one'] / rate['ceiling']:.3f}")
    print(f"start-up share of the job: {startup_s / spark_s:.0%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
