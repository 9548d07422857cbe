"""The peak memory of a shipping pass beside HBase's buffer quota, for small and for large cells.

Starts ZooKeeper and two miniclusters, A and B (peers 1 and 2, both Thrift2 to B, so that a
pass reads each WAL once for two queues, a batch of each in flight at once), and for each
shape loads A, then ships it with ``walship ship --peer 1,2 --parallel 4`` in a child process
of its own and prints the child's peak RSS:

* ``small``: rows of 3 cells of 100 bytes (``--small-rows``);
* ``large``: rows of one 200 KB cell (``--large-rows``), shipped twice: with the default quota
  (``replication.total.buffer.quota``, 256 MiB) and with ``--tight-quota`` MiB, whose batches in
  the background must keep under it;
* ``small cells, Spark task``: the same shape shipped by the Spark ship job (``local[2]``), the
  peak RSS of its Python workers, where its tasks ship (``--no-spark`` leaves it out);
* ``idle``: the same command before anything is written: the process's own size (Python,
  walship, Thrift, ZooKeeper), the baseline each pass is set beside; for the Spark task, the
  job run with nothing new to ship.

The pass's memory is its peak RSS less the idle one's; HBase's region server keeps the edits
it read and has not shipped under the quota, so walship's pass should too.

    .venv/bin/python benchmarks/memory.py [--small-rows 300000] [--large-rows 2000] [--tight-quota 32] [--no-spark]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import happybase
from benchtools import scoped_table, scratch_zookeeper, wait_enqueued

from walship import defaults
from walship.peer import PeerConfig
from walship.replicate import WalStore
from walship.spark.entry import job_settings
from walship.spark.jvm import local_submit_env
from walship.spark.ship import ShipJob
from walship.wal.names import is_checksum_file
from walship.zk import ReplicationPeers, ZnodeLayout
from walship_testing.minicluster.process import MiniClusterProcess

ROOT = Path(__file__).resolve().parent.parent
MIB = 1024 * 1024
#: two peers of B over the same queue's WALs: one read, a batch of each in flight at once
PEERS = "1,2"
LARGE_VALUE = 200 * 1024


def child(argv: list[str]) -> int:
    """Run ``walship`` with ``argv`` in this process; print its peak RSS (MiB) on stderr."""
    from walship.cli import main

    code = main(argv)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"code": code, "peak_mib": peak}), file=sys.stderr)
    return code


def ship(zk: str, a: MiniClusterProcess, peer: str, quota: int) -> dict[str, float]:
    """``walship ship`` of the peer in a child process: its exit, seconds and peak RSS (MiB)."""
    argv = ["--zk", zk, "--znode-parent", "/hbase-a", "--wal-root", str(a.data_dir), "ship", "--peer", peer]
    argv += ["--parallel", "4", "--buffer-quota", str(quota)]
    t0 = time.perf_counter()
    done = subprocess.run([sys.executable, __file__, "--child", *argv], capture_output=True, text=True, timeout=3600)
    seconds = time.perf_counter() - t0
    if done.returncode != 0:
        raise SystemExit(f"walship ship failed ({done.returncode}): {done.stdout[-2000:]}{done.stderr[-2000:]}")
    result = json.loads(done.stderr.strip().splitlines()[-1])
    summary = json.loads(done.stdout)
    shipped = sum(p["totals"]["cells_shipped"] for p in summary.get("peers", [summary]))
    return {"seconds": seconds, "peak_mib": result["peak_mib"], "cells": shipped}


def hwm_mib(pid: int) -> float:
    """The peak RSS (``VmHWM``) of a live process, MiB (0 once it is gone)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def python_descendants(root: int) -> list[int]:
    """The Python processes under ``root`` (its children, theirs, ...), from ``/proc``."""
    parents: dict[int, int] = {}
    names: dict[int, str] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue  # gone meanwhile
        name, _, rest = text.rpartition(")")
        pid = int(stat.parent.name)
        parents[pid], names[pid] = int(rest.split()[1]), name.partition("(")[2]
    found, todo = [], [root]
    while todo:
        parent = todo.pop()
        for pid, ppid in parents.items():
            if ppid == parent:
                todo.append(pid)
                if names[pid].startswith("python"):
                    found.append(pid)
    return found


def is_driver(pid: int) -> bool:
    """Whether the process runs the ship job's driver (its command names the job's file)."""
    try:
        return b"ship.py" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


def spark_ship(zk: str, a: MiniClusterProcess, peers: str) -> dict[str, float]:
    """The ship job of the peers by spark-submit on ``local[2]``, with the settings walship's DAGs
    submit it with: its seconds and the peak RSS of its Python workers (the tasks ship in them,
    not in the driver), the highest ``VmHWM`` seen while the job ran, sampled every 50 ms."""
    bindir = Path(sys.executable).parent
    conf = [arg for key, value in job_settings().items() for arg in ("--conf", f"{key}={value}")]
    job = ShipJob(zk=zk, znode_parent="/hbase-a", wal_root=str(a.data_dir), peer_id=peers)
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        [str(bindir / "spark-submit"), "--master", "local[2]", "--conf", "spark.ui.enabled=false", *conf,
         str(ROOT / "spark_jobs" / "ship.py"), "--job", job.to_json()],
        env=local_submit_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    workers: dict[int, float] = {}
    drivers: set[int] = set()
    while proc.poll() is None:
        for pid in python_descendants(proc.pid):
            if pid not in drivers and pid not in workers and is_driver(pid):
                drivers.add(pid)  # the job's driver (spark_jobs/ship.py) plans; the tasks ship
            if pid not in drivers:
                workers[pid] = max(workers.get(pid, 0.0), hwm_mib(pid))
        time.sleep(0.05)
    out, err = proc.communicate()
    seconds = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"the Spark ship job failed ({proc.returncode}): {out[-2000:]}{err[-2000:]}")
    summary = next(json.loads(line) for line in reversed(out.splitlines()) if line.startswith("{"))
    shipped = sum(p["totals"]["cells_shipped"] for p in summary.get("peers", [summary]))
    return {"seconds": seconds, "peak_mib": max(workers.values(), default=0.0), "cells": shipped}


def load_small(a: MiniClusterProcess, rows: int, tag: bytes = b"small") -> int:
    conn = happybase.Connection(*a.thrift)
    with conn.table("bench").batch(batch_size=1000) as b:
        for i in range(rows):
            b.put(b"%s%011d" % (tag, i), {b"f:a": b"x" * 100, b"f:b": b"y" * 100, b"f:c": b"z" * 100})
    conn.close()
    return rows * 3


def load_large(a: MiniClusterProcess, rows: int, tag: bytes) -> int:
    conn = happybase.Connection(*a.thrift)
    value = os.urandom(LARGE_VALUE)
    with conn.table("bench").batch(batch_size=10) as b:
        for i in range(rows):
            b.put(b"%s%011d" % (tag, i), {b"f:v": value})
    conn.close()
    return rows


def wal_mib(a: MiniClusterProcess) -> float:
    """The MiB of A's WALs, live and archived."""
    store = WalStore(str(a.data_dir))
    return sum(os.path.getsize(path) for path, _ in store.wal_files() if not is_checksum_file(Path(path).name)) / MIB


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--child"]:
        return child(argv[1:])
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--small-rows", type=int, default=300_000)
    parser.add_argument("--large-rows", type=int, default=2000)
    parser.add_argument("--tight-quota", type=int, default=32, help="MiB, the large shape's second pass")
    parser.add_argument("--no-spark", action="store_true", help="leave out the Spark ship task")
    args = parser.parse_args(argv)
    quota = defaults.TOTAL_BUFFER_QUOTA
    with scratch_zookeeper("walship-memory-") as (root, client, hosts):
        a = MiniClusterProcess("a", root / "a", zk=hosts, znode_parent="/hbase-a")
        b = MiniClusterProcess("b", root / "b", zk=hosts, znode_parent="/hbase-b")
        try:
            a.start()
            b.start()
            scoped_table(a)
            scoped_table(b)
            peers = ReplicationPeers(client, ZnodeLayout("/hbase-a"))
            host, port = b.thrift2
            conf = {"walship.sink.protocol": "thrift2", "walship.sink.thrift2": f"{host}:{port}"}
            for peer in PEERS.split(","):
                peers.add(PeerConfig(peer, f"{hosts}:/hbase-b", configuration=conf))
            wait_enqueued(client, ZnodeLayout("/hbase-a"), PEERS.split(","))
            idle = ship(hosts, a, PEERS, quota)  # nothing written yet
            runs: list[tuple[str, float, dict[str, float], int]] = []
            before = wal_mib(a)
            cells = load_small(a, args.small_rows)
            runs.append(("small cells", wal_mib(a) - before, ship(hosts, a, PEERS, quota), quota))
            if not args.no_spark:
                spark_idle = spark_ship(hosts, a, PEERS)  # nothing new to ship
                before = wal_mib(a)
                cells = load_small(a, args.small_rows, b"spark")
                spark = spark_ship(hosts, a, PEERS)
                runs.append(("small cells, Spark task", wal_mib(a) - before, spark, quota))
                if spark["cells"] != 2 * cells:
                    raise SystemExit(f"the Spark job shipped {spark['cells']} cells of {2 * cells}")
            for tag, q in ((b"large", quota), (b"tight", args.tight_quota * MIB)):
                before = wal_mib(a)
                cells = load_large(a, args.large_rows, tag)
                runs.append((f"200 KB cells, quota {q // MIB} MiB", wal_mib(a) - before, ship(hosts, a, PEERS, q), q))
                if runs[-1][2]["cells"] != 2 * cells:
                    raise SystemExit(f"shipped {runs[-1][2]['cells']} cells of {cells}")
        finally:
            a.stop()
            b.stop()
    print(f"idle pass (nothing queued): peak RSS {idle['peak_mib']:.0f} MiB  <- the baseline")
    if not args.no_spark:
        print(
            f"idle Spark job's Python workers: peak RSS {spark_idle['peak_mib']:.0f} MiB  <- the Spark task's baseline"
        )
    for name, mib, run, q in runs:
        base = spark_idle if "Spark" in name else idle
        held = run["peak_mib"] - base["peak_mib"]
        print(
            f"{name:28}: {run['cells']:>10,.0f} cells, {mib:7.0f} MiB of WALs in {run['seconds']:5.1f} s: "
            f"peak RSS {run['peak_mib']:4.0f} MiB, {held:4.0f} MiB above idle; quota {q // MIB} MiB "
            f"(held / quota {held * MIB / q:.2f})"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
