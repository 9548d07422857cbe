"""Replication throughput A -> B beside the sink's ceiling, for both sinks, measured in one run.

Starts ZooKeeper and three miniclusters, writes N cells (100-byte values, 3 cells a row) into
A, then measures side by side:

* ``ship thrift1``: walship ships them from A's WALs to B over Thrift1 (peer 1, one pass of the
  shipper, in process);
* ``ship thrift1, one batch at a time``: the same to B (peer 3) with the shipper's pipelining
  off (each batch applied before the next is read): the pipelining's baseline;
* ``ceiling thrift1``: the same cells written straight into B with happybase batches of 1,000
  rows (what B's Thrift1 server takes at best);
* ``ship thrift2``: walship ships them to C over Thrift2 (peer 2, exact deletes, per-cell
  timestamps);
* ``ceiling thrift2``: the same cells written straight into C with ``putMultiple`` calls of
  1,000 rows.

Each round loads N more cells into A and measures all five; the medians over ``--rounds`` are
printed: cells/s of each, each sink's ratio to its own ceiling (target >= 0.8; the median of the
rounds' ratios, each taken back to back) and the Thrift2 sink beside the Thrift1 sink, and
Spark's start-up time for the ship job measured separately (spark-submit of the job with no
queue to ship).

    .venv/bin/python benchmarks/replicate.py [--cells 1000000] [--rounds 3] [--no-spark]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import happybase

from walship.peer import PeerConfig
from walship.replicate import Shipper, WalStore
from walship.thrift.conn import open_thrift2
from walship.thrift.hbase2 import hbase2
from walship.wal import WalReader
from walship.wal.names import is_checksum_file
from walship.zk import ReplicationPeers, ZnodeLayout, zk_client
from walship.zk.localserver import LocalZooKeeper, free_port
from walship_testing.minicluster.admin import AdminClient
from walship_testing.minicluster.process import MiniClusterProcess

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


def write_thrift2(mc: MiniClusterProcess, table: str, rows: int) -> float:
    with open_thrift2(*mc.thrift2) as c:
        t0 = time.perf_counter()
        for start in range(0, rows, 1000):
            puts = [
                hbase2.TPut(
                    row=b"%016d" % i,
                    columnValues=[hbase2.TColumnValue(family=b"f", qualifier=q, value=VALUE) for q in QUALS],
                )
                for i in range(start, min(rows, start + 1000))
            ]
            c.client.putMultiple(table.encode(), puts)
        return time.perf_counter() - t0


def ship_peer(zk: str, a: MiniClusterProcess, peer_id: str, *, pipeline: bool = True) -> tuple[float, int, int, float]:
    """One pass of the shipper for the peer: seconds, cells shipped, batches, and the CPU
    seconds (user + system, every thread of this process) the pass took."""
    with zk_client(zk) as client:
        shipper = Shipper(client, ZnodeLayout("/hbase-a"), WalStore(str(a.data_dir)), pipeline=pipeline)
        t0, c0 = time.perf_counter(), time.process_time()
        summary = shipper.ship_peer(peer_id)
        elapsed, cpu = time.perf_counter() - t0, time.process_time() - c0
    totals = summary.totals()
    return elapsed, int(totals["cells_shipped"]), int(totals["batches"]), cpu


def decode_floor(a: MiniClusterProcess) -> tuple[int, float]:
    """Cells in A's WALs and the CPU seconds it takes only to decode them (the compiled
    decoder, cells left in its buffers): the floor of any shipper's cost per cell."""
    store = WalStore(str(a.data_dir))
    cells = 0
    c0 = time.process_time()
    for path, archived in store.wal_files():
        if is_checksum_file(path.rsplit("/", 1)[-1]):
            continue
        with store.open(store.location(path, archived)) as f:
            for entry in WalReader(f, path).entries():
                cells += len(entry.cells)
    return cells, time.process_time() - c0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cells", type=int, default=1_000_000)
    parser.add_argument("--no-spark", action="store_true")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of load, ship and ceiling; medians are printed")
    args = parser.parse_args(argv)
    rows = args.cells // len(QUALS)
    cells = rows * len(QUALS)
    with tempfile.TemporaryDirectory(prefix="walship-bench-") as tmp:
        root = Path(tmp)
        zk = LocalZooKeeper(root / "zk", free_port())
        zk.start()
        rounds: list[dict[str, float]] = []
        clusters = {n: MiniClusterProcess(n, root / n, zk=zk.hosts, znode_parent=f"/hbase-{n}") for n in "abc"}
        a, b, c = clusters["a"], clusters["b"], clusters["c"]
        try:
            for mc in clusters.values():
                mc.start()
                conn = happybase.Connection(*mc.thrift)
                conn.create_table("bench", {"f": {"max_versions": 1}})
                if mc is not a:
                    conn.create_table("ceiling", {"f": {"max_versions": 1}})
                conn.close()
                AdminClient(mc.admin).set_scope("bench", "f", 1)
            with zk_client(zk.hosts) as client:
                peers = ReplicationPeers(client, ZnodeLayout("/hbase-a"))
                host, port = b.thrift
                peers.add(
                    PeerConfig("1", f"{zk.hosts}:/hbase-b", configuration={"walship.sink.thrift": f"{host}:{port}"})
                )
                peers.add(  # the same sink, shipped one batch at a time: the pipelining's baseline
                    PeerConfig("3", f"{zk.hosts}:/hbase-b", configuration={"walship.sink.thrift": f"{host}:{port}"})
                )
                host, port = c.thrift2
                peers.add(
                    PeerConfig(
                        "2",
                        f"{zk.hosts}:/hbase-c",
                        configuration={"walship.sink.protocol": "thrift2", "walship.sink.thrift2": f"{host}:{port}"},
                    )
                )
            time.sleep(0.5)
            for r in range(args.rounds):
                ca = happybase.Connection(*a.thrift)
                load_s = write(ca, "bench", rows)
                ca.close()
                secs: dict[str, float] = {}
                secs["s1"], shipped1, batches1, cpu1 = ship_peer(zk.hosts, a, "1")
                secs["s3"], shipped3, _, _ = ship_peer(zk.hosts, a, "3", pipeline=False)
                secs["s2"], shipped2, batches2, cpu2 = ship_peer(zk.hosts, a, "2")
                decoded, floor_cpu = decode_floor(a)
                cb = happybase.Connection(*b.thrift)
                secs["c1"] = write(cb, "ceiling", rows)
                cb.close()
                secs["c2"] = write_thrift2(c, "ceiling", rows)
                if shipped1 != cells or shipped2 != cells or shipped3 != cells:
                    print(f"FAIL: shipped {shipped1} cells over Thrift1 and {shipped2} over Thrift2, wrote {cells}")
                    return 1
                rounds.append(
                    {name: cells / t for name, t in secs.items()}
                    | {"cpu1": cpu1 / cells * 1e6, "cpu2": cpu2 / cells * 1e6, "floor": floor_cpu / decoded * 1e6}
                )
                print(f"round {r + 1}: loading A took {load_s:.1f} s; " + ", ".join(
                    f"{name} {cells / t:,.0f} cells/s" for name, t in secs.items()) + f"; batches {batches1}/{batches2}")  # fmt: skip
            startup = None if args.no_spark else spark_startup(zk.hosts, str(a.data_dir))
        finally:
            for mc in clusters.values():
                mc.stop()
            zk.stop()

    def median(key: Callable[[dict[str, float]], float]) -> float:
        return statistics.median(key(r) for r in rounds)

    rate = {name: median(lambda r, n=name: r[n]) for name in ("s1", "s3", "c1", "s2", "c2")}  # type: ignore[misc]
    print(f"cells {cells:,} a round ({rows:,} rows x 3, 100-byte values), {args.rounds} rounds; medians:")
    print(f"ship A -> B over Thrift1 (walship) : {rate['s1']:12,.0f} cells/s")
    print(f"  the same, one batch at a time      : {rate['s3']:12,.0f} cells/s  <- no pipelining")
    print(f"happybase straight into B (Thrift1): {rate['c1']:12,.0f} cells/s  <- Thrift1 ceiling")
    print(f"ship A -> C over Thrift2 (walship) : {rate['s2']:12,.0f} cells/s")
    print(f"putMultiple straight into C        : {rate['c2']:12,.0f} cells/s  <- Thrift2 ceiling")
    # each round's ratio, then their median: the two sides of a ratio ran back to back
    for sink, ship_key, ceiling_key in (("Thrift1", "s1", "c1"), ("Thrift2", "s2", "c2")):
        ratio = median(lambda r, s=ship_key, c=ceiling_key: r[s] / r[c])  # type: ignore[misc]
        print(f"ratio ship/ceiling {sink}: {ratio:.3f}  (target >= 0.8: {'met' if ratio >= 0.8 else 'NOT met'})")
    print(f"Thrift2 sink / Thrift1 sink: {median(lambda r: r['s2'] / r['s1']):.3f}")
    cpu = {key: median(lambda r, k=key: r[k]) for key in ("cpu1", "cpu2", "floor")}  # type: ignore[misc]
    print(
        f"CPU of the shipping process a cell, Thrift1 : {cpu['cpu1']:6.2f} us  (a row of 3: {3 * cpu['cpu1']:.2f} us)"
    )
    print(f"CPU of the shipping process a cell, Thrift2 : {cpu['cpu2']:6.2f} us  (target <= 2.5 us)")
    print(f"CPU to decode a cell of the same WALs       : {cpu['floor']:6.2f} us  <- the floor")
    print(f"Thrift2 shipping CPU / decode floor: {cpu['cpu2'] / cpu['floor']:.1f}")
    print(f"Thrift1 pipelined / one batch at a time: {median(lambda r: r['s1'] / r['s3']):.3f}")
    if startup is not None:
        print(f"Spark start-up (spark-submit of the ship job with nothing to ship, local[2]): {startup:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
