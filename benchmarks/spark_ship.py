"""Three queues shipped in parallel by the Spark ship job, beside one client's ceiling and one
process shipping the queues one after another, in one run.

Starts ZooKeeper, a minicluster A with three region servers (three tables, one region on each
server, so each server's queue holds a third of the edits) and a minicluster B. Each round
writes ``--cells`` more cells into A (100-byte values, 3 cells a row), then measures side by side:

* ``spark ship``: spark-submit of the ship job for peer 1 (A -> B over Thrift1), one Spark task
  per queue on ``local[2]``: the figure, with and without its start-up;
* ``spark start-up``: the same job once more, its queues now drained: what a job costs with
  nothing to ship (the JVM, the driver's plan, Python workers, ZooKeeper sessions, the queues'
  locks); the driver alone (a job with no task) is printed once beside it;
  and the same drained job without the driver's class archive (:mod:`walship.spark.jvm`:
  walship's Java options only), its baseline; with ``spark.python.worker.reuse=false``: each
  ship task starts its own Python worker, as before the workers' warm-up (its baseline); and
  with Spark's own Python daemon (``spark.python.daemon.module=pyspark.daemon``: pyspark
  compiled from Spark's source archive in each Python process), the baseline of walship's
  (:mod:`walship.spark.daemon`);
* ``one process``: walship ships peer 2 (A -> B, the same sink) in process, the queues at once;
* ``ceiling``: the same cells written straight into B with happybase batches of 1,000 rows,
  one client: what one client gets out of B's Thrift1 server.

Medians over ``--rounds`` are printed, and how busy B's server (one process) was in each.
Target: the Spark job, start-up left out, above 1.0x the single-client ceiling.

    .venv/bin/python benchmarks/spark_ship.py [--cells 600000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import happybase

from walship.peer import PeerConfig
from walship.replicate import Shipper, WalStore
from walship.spark.daemon import DAEMON_KEY
from walship.spark.entry import JVM_OPTIONS, job_settings
from walship.spark.warmup import REUSE_KEY
from walship.zk import ReplicationPeers, ReplicationQueues, ZnodeLayout, zk_client
from walship.zk.localserver import LocalZooKeeper, free_port
from walship_testing.minicluster.admin import AdminClient
from walship_testing.minicluster.process import MiniClusterProcess

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


def cpu_seconds(pid: int) -> float:
    """CPU time (user + system) the process has used so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


#: The phases of a job's time that the job prints (spark_jobs/ship.py), in order.
PHASES = ("imports", "spark_session", "plan", "workers", "tasks", "record")


def children_cpu() -> float:
    """CPU seconds (user + system) of this process's ended children and theirs."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def spark_submit(
    zk: str,
    wal_root: str,
    *args: str,
    timings: dict[str, float] | None = None,
    walship_settings: bool = True,
    extra: dict[str, str] | None = None,
) -> float:
    """Seconds of a spark-submit of the ship job, with the settings walship's DAGs submit it
    with (:func:`~walship.spark.entry.job_settings`) or Spark's defaults, and ``extra``;
    ``timings`` gets the phases it printed and ``cpu``, the CPU seconds of all its processes."""
    bindir = Path(sys.executable).parent
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PATH": f"{bindir}:{os.environ.get('PATH', '')}"}
    settings = (job_settings() if walship_settings else {}) | (extra or {})
    conf = [arg for key, value in settings.items() for arg in ("--conf", f"{key}={value}")]
    cpu0 = children_cpu()
    t0 = time.perf_counter()
    done = subprocess.run(
        [str(bindir / "spark-submit"), "--master", "local[2]", "--conf", "spark.ui.enabled=false", *conf,
         str(ROOT / "spark_jobs" / "ship.py"), "--zk", zk, "--znode-parent", "/hbase-a", "--wal-root", wal_root,
         *args],
        env=env, capture_output=True, check=True, timeout=900, text=True,
    )  # fmt: skip
    took = time.perf_counter() - t0
    if timings is not None:
        timings["cpu"] = children_cpu() - cpu0
        for line in (done.stdout + done.stderr).splitlines():
            if line.startswith("ship.py: timings "):
                timings.update(json.loads(line.removeprefix("ship.py: timings ")))
    return took


def drained(secs: dict[str, float], zk: str, wal_root: str, name: str, **how: Any) -> None:
    """The drained job once more, submitted ``how`` (see :func:`spark_submit`): its seconds
    into ``secs`` as ``startup_<name>``, what it printed (and ``cpu``) as ``<name>_<phase>``."""
    timings: dict[str, float] = {}
    secs[f"startup_{name}"] = spark_submit(zk, wal_root, "--peer", "1", timings=timings, **how)
    secs |= {f"{name}_{k}": v for k, v in timings.items()}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cells", type=int, default=600_000)
    p.add_argument("--rounds", type=int, default=3, help="rounds of load and the four measures; medians are printed")
    args = p.parse_args(argv)
    rows = args.cells // len(QUALS) // len(TABLES) * len(TABLES)
    cells = rows * len(QUALS)
    rounds: list[tuple[dict[str, float], dict[str, float]]] = []
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
            wal_root = str(a.data_dir)
            assert b.proc is not None
            driver_s = spark_submit(zk.hosts, wal_root, "--peer", "1", "--queues", "nothing/none")
            for r in range(args.rounds):
                ca = happybase.Connection(*a.thrift)
                load_s = write(ca, TABLES, rows)
                ca.close()
                secs: dict[str, float] = {}
                busy: dict[str, float] = {}  # CPU seconds of B's server in each phase
                cpu0 = cpu_seconds(b.proc.pid)
                secs["spark"] = spark_submit(zk.hosts, wal_root, "--peer", "1")
                busy["spark"] = cpu_seconds(b.proc.pid) - cpu0
                # the same job again, its queues drained: its start-up, task launches included
                phases: dict[str, float] = {}
                secs["startup"] = spark_submit(zk.hosts, wal_root, "--peer", "1", timings=phases)
                secs |= {f"phase_{k}": v for k, v in phases.items()}
                # and its baselines, each the drained job changed in one way
                # Spark's own JVM settings
                drained(secs, zk.hosts, wal_root, "plain", walship_settings=False)
                # walship's Java options, not the driver's class archive
                drained(secs, zk.hosts, wal_root, "unarchived", extra={"spark.driver.extraJavaOptions": JVM_OPTIONS})
                # the Python workers started by the ship tasks (no reuse: no warm-up)
                drained(secs, zk.hosts, wal_root, "cold", extra={REUSE_KEY: "false"})
                # Spark's own Python daemon: pyspark imported from its source archive
                drained(secs, zk.hosts, wal_root, "zip", extra={DAEMON_KEY: "pyspark.daemon"})
                with zk_client(zk.hosts) as client:
                    shipper = Shipper(client, ZnodeLayout("/hbase-a"), WalStore(wal_root))
                    cpu0 = cpu_seconds(b.proc.pid)
                    t0 = time.perf_counter()
                    summary = shipper.ship_peer("2")
                    secs["one"] = time.perf_counter() - t0
                    busy["one"] = cpu_seconds(b.proc.pid) - cpu0
                if summary.totals()["cells_shipped"] != cells:
                    print(f"FAIL: shipped {summary.totals()['cells_shipped']} cells in process, wrote {cells}")
                    return 1
                cb = happybase.Connection(*b.thrift)
                cpu0 = cpu_seconds(b.proc.pid)
                secs["ceiling"] = write(cb, ("ceiling",), rows)
                busy["ceiling"] = cpu_seconds(b.proc.pid) - cpu0
                cb.close()
                secs["work"] = secs["spark"] - secs["startup"]  # <= 0: the start-up varied more
                busy["work"] = busy["spark"]
                rounds.append((secs, busy))
                print(f"round {r + 1}: loading A took {load_s:.1f} s; spark job {secs['spark']:.1f} s, the same job "
                      f"drained {secs['startup']:.1f} s, one process {secs['one']:.1f} s, ceiling {secs['ceiling']:.1f} s")  # fmt: skip
        finally:
            for mc in (a, b):
                mc.stop()
            zk.stop()

    def median(key: Callable[[dict[str, float], dict[str, float]], float]) -> float:
        """The median over the rounds that give a number (``nan``: none does)."""
        values = [v for v in (key(secs, busy) for secs, busy in rounds) if not math.isnan(v)]
        return statistics.median(values) if values else math.nan

    def rate(name: str) -> float:
        """Cells a second, a median of the rounds whose time is above 0 (the job less its
        start-up is not, where the start-up varied more than the work took)."""
        return median(lambda secs, _, n=name: cells / secs[n] if secs[n] > 0 else math.nan)  # type: ignore[misc]

    def ratio(name: str) -> float:
        return median(lambda secs, _, n=name: secs["ceiling"] / secs[n] if secs[n] > 0 else math.nan)  # type: ignore[misc]

    unmeasured = sum(1 for secs, _ in rounds if secs["work"] <= 0)

    startup = median(lambda secs, _: secs["startup"])
    print(f"cells {cells:,} a round over {len(servers)} region servers' queues, {args.rounds} rounds; medians:")
    print(f"spark-submit of the ship job, no task (driver only): {driver_s:8.1f} s")
    print(
        f"spark start-up (the same job, queues drained)      : {startup:8.1f} s, "
        f"{median(lambda secs, _: secs['phase_cpu']):.2f} s of CPU (all its processes)"
    )
    print(
        f"  the same with Spark's own JVM settings           : {median(lambda secs, _: secs['startup_plain']):8.1f} s, "
        f"{median(lambda secs, _: secs['plain_cpu']):.2f} s of CPU  <- baseline"
    )
    print(
        f"  its Python workers started by its tasks (no warm-up: {REUSE_KEY}=false): "
        f"{median(lambda secs, _: secs['startup_cold']):.1f} s, {median(lambda secs, _: secs['cold_cpu']):.2f} s of CPU, "
        f"its tasks {median(lambda secs, _: secs.get('cold_tasks', 0.0)):.2f} s (warm: "
        f"{median(lambda secs, _: secs.get('phase_tasks', 0.0)):.2f} s)"
    )
    print(
        f"  warm-up / none: time {median(lambda secs, _: secs['startup'] / secs['startup_cold']):.3f}, "
        f"CPU {median(lambda secs, _: secs['phase_cpu'] / secs['cold_cpu']):.3f}"
    )
    print(
        f"  its Python workers through Spark's own daemon ({DAEMON_KEY}=pyspark.daemon): "
        f"{median(lambda secs, _: secs['startup_zip']):.1f} s, {median(lambda secs, _: secs['zip_cpu']):.2f} s of CPU, "
        f"the wait for its workers {median(lambda secs, _: secs.get('zip_workers', 0.0)):.2f} s (walship's daemon: "
        f"{median(lambda secs, _: secs.get('phase_workers', 0.0)):.2f} s)  <- baseline"
    )
    print(
        f"  walship's daemon / Spark's: time {median(lambda secs, _: secs['startup'] / secs['startup_zip']):.3f}, "
        f"CPU {median(lambda secs, _: secs['phase_cpu'] / secs['zip_cpu']):.3f}"
    )
    print(
        f"  without the driver's class archive (walship.spark.jvm): "
        f"{median(lambda secs, _: secs['startup_unarchived']):.1f} s, "
        f"{median(lambda secs, _: secs['unarchived_cpu']):.2f} s of CPU, its session "
        f"{median(lambda secs, _: secs.get('unarchived_spark_session', 0.0)):.2f} s (with it: "
        f"{median(lambda secs, _: secs.get('phase_spark_session', 0.0)):.2f} s)  <- baseline"
    )
    print(
        f"  with the archive / without: time {median(lambda secs, _: secs['startup'] / secs['startup_unarchived']):.3f}, "
        f"CPU {median(lambda secs, _: secs['phase_cpu'] / secs['unarchived_cpu']):.3f}"
    )
    print(
        f"  walship's settings / Spark's: time {median(lambda secs, _: secs['startup'] / secs['startup_plain']):.3f}, "
        f"CPU {median(lambda secs, _: secs['phase_cpu'] / secs['plain_cpu']):.3f}"
    )
    print(f"spark ship job, local[2], one task a queue          : {median(lambda secs, _: secs['spark']):8.1f} s")
    print(
        f"  without its start-up                             : {rate('work'):10,.0f} cells/s"
        + (
            f" ({unmeasured} of {len(rounds)} rounds left out: the start-up varied more than the work)"
            if unmeasured
            else ""
        )
    )
    print(f"  with it                                          : {rate('spark'):10,.0f} cells/s")
    print(f"one process, the queues at once (a thread each)     : {rate('one'):10,.0f} cells/s")
    print(f"happybase straight into B, one client              : {rate('ceiling'):10,.0f} cells/s  <- ceiling")
    target = ratio("work")
    print(f"spark (start-up left out) / ceiling: {target:.3f}  (target > 1.0: {'met' if target > 1.0 else 'NOT met'})")
    print(f"spark with start-up / ceiling: {ratio('spark'):.3f}")
    print(f"one process / ceiling: {ratio('one'):.3f}")
    print(f"start-up share of the job: {median(lambda secs, _: secs['startup'] / secs['spark']):.0%}")
    print("the drained job's time (medians), as the job measures it:")
    for phase in PHASES:
        print(f"  {phase:<14}: {median(lambda secs, _, k=phase: secs.get(f'phase_{k}', 0.0)):6.2f} s")  # type: ignore[misc]
    rest = median(lambda secs, _: secs["startup"] - sum(secs.get(f"phase_{k}", 0.0) for k in PHASES))
    print(f"  {'JVM, Python':<14}: {rest:6.2f} s  (spark-submit's own start and stop, outside the job's main)")
    # how much of its time B's server (one process) was busy, and its CPU per cell: a parallel
    # job can gain over one client only as far as one client leaves the server idle
    for name in ("work", "one", "ceiling"):
        share = median(lambda secs, busy, n=name: min(busy[n], secs[n]) / secs[n])  # type: ignore[misc]
        per_cell = median(lambda secs, busy, n=name: busy[n] / cells * 1e6)  # type: ignore[misc]
        label = "spark" if name == "work" else name
        print(f"B's server, {label:8}: busy {share:4.0%} of the time, {per_cell:5.1f} us CPU a cell")
    return 0


if __name__ == "__main__":
    sys.exit(main())
