"""Replication throughput on real HBase 2.6 (the harness's clusters), A -> B, beside what one
client gets out of B's Thrift servers, for both sinks, in one run.

Starts ZooKeeper, a cluster A with three region servers and a cluster B with one (each one JVM:
master, region servers, Thrift1 and Thrift2 servers). A has two tables: ``one`` (one region, so
one region server's queue holds its edits) and ``three`` (pre-split, its three regions on A's
three region servers, so each queue holds a third; split the same on B). Eight peers are added
through HBase's Admin, DISABLED for HBase, and adopted by walship: ``one`` and ``three``, each
over Thrift2 and over Thrift1, two more for ``one`` over four connections and two more for
``three`` shipped in this process. Each figure is
``--cells`` cells (100-byte values, 3 cells a row) written into A, then:

* one queue, in process: :meth:`walship.replicate.Shipper.ship_peer` ships ``one`` to B (cells/s,
  and the shipping process's CPU a cell), beside the ceiling: the same cells written straight into
  B by one client (Thrift2: ``putMultiple`` calls of 1,000 rows; Thrift1: happybase batches of
  1,000 rows, ``mutateRows``); target: ship / ceiling >= 0.9; and the same queue's cells shipped
  by a peer set to spread large batches over four connections
  (``walship.sink.thrift.connections=4``; the others take the default, one for B's one server);
* three queues in parallel: the Spark ship job (spark-submit of ``spark_jobs/ship.py --job``, one
  task a queue, on ``--master``) ships ``three`` to B, beside the same one-client ceiling, taken
  again; target: ship / ceiling >= 1.5. Its start-up is left out two ways: the job's time minus
  the same job's run again with its queues drained, and (steadier: no JVM start in it) the
  window of its ship tasks (first launch to last end, from Spark's event log; the Python
  workers' warm-up before them is start-up) minus the drained job's. Beside it: the same three
  queues shipped by walship in this process (one pass, the queues at once, a thread each), and
  three clients at once (a process each, a third of the rows each, as the one-client ceiling
  writes them): what this machine lets three writers put into B while they share its cores
  with it.

Every ratio is taken back to back in its round (which side goes first alternates by round); the
medians over ``--rounds`` are printed with each round's ratio, and, to see what limits a figure,
how many cores each process kept busy in each step (this process, the Spark job's processes, B's
JVM, A's JVM, everything else on the machine), B's CPU a cell, and the rows a Thrift1 sink call
can carry (Thrift1 takes one timestamp a call). A first round of the one-queue figures is left
out (the JVMs' compilers warm up), B (and A after each load) is flushed before every timed step,
and both clusters' compactions and region splits are off, so no step pays for a flush, a compaction
or a split of another.
Both JVMs run the parallel collector with their heap fixed, as production region servers run a
collector on every core (``--collector serial``: as the tests run them, one GC thread, so the
pauses that stop every writer are longer, which takes more from several writers than from one).
On a machine shared with other work, short steps move a lot: a larger ``--cells`` steadies them.

    .venv/bin/python benchmarks/real_peer.py [--cells 300000] [--rounds 3] [--master local[2]] [--no-spark]
        [--collector parallel|serial]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import happybase

from walship.replicate import Shipper, WalStore
from walship.spark.entry import job_settings
from walship.spark.jvm import local_submit_env
from walship.spark.ship import ShipJob
from walship.spark.warmup import WARM_UP_GROUP
from walship.thrift.conn import open_thrift2
from walship.thrift.hbase2 import hbase2
from walship.wal import WalReader
from walship.zk import ReplicationPeers, ReplicationQueues, ZnodeLayout, zk_client
from walship.zk.localserver import LocalZooKeeper, free_port
from walship_testing.harness import COLLECTORS, HBaseProcess

ROOT = Path(__file__).resolve().parent.parent
VALUE = b"x" * 100
QUALS = (b"a", b"b", b"c")
FAMILY = {"f": {"scope": 1, "versions": 1}}
SINKS = ("thrift2", "thrift1")
#: peer id of (table, sink)
PEERS = {("one", "thrift2"): "1", ("one", "thrift1"): "2", ("three", "thrift2"): "3", ("three", "thrift1"): "4"}
#: peer id of (table, sink) with walship.sink.thrift.connections=WIDE (the others: one, B's one
#: server's default)
WIDE_PEERS = {("one", "thrift2"): "5", ("one", "thrift1"): "6"}
WIDE = 4
#: peer id of (table, sink) shipped by walship in this process, beside the Spark job
IN_PROCESS_PEERS = {("three", "thrift2"): "7", ("three", "thrift1"): "8"}
ONE_TARGET = 0.9
THREE_TARGET = 1.5
#: no compaction starts during a run, and no region splits: a step must not pay for another's
#: store files, and a one-region table stays one region (HBase's default policy splits a table's
#: only region at twice the flush size, 256 MB: a few rounds of backlog)
NO_COMPACTIONS = {
    "hbase.hstore.compactionThreshold": "10000",
    "hbase.hstore.blockingStoreFiles": "20000",
    "hbase.regionserver.region.split.policy": "org.apache.hadoop.hbase.regionserver.DisabledRegionSplitPolicy",
}
CLOCK = os.sysconf("SC_CLK_TCK")
#: the Spark settings walship's DAGs submit its jobs with
SETTINGS = [arg for key, value in job_settings().items() for arg in ("--conf", f"{key}={value}")]


def row_key(i: int) -> bytes:
    return b"%016d" % i


# -- CPU and time of a step ----------------------------------------------------------------


def process_cpu(pid: int) -> float:
    """CPU seconds (user + system, every thread) process ``pid`` has used so far (Linux /proc)."""
    stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(stat[11]) + int(stat[12])) / CLOCK


def machine_cpu() -> float:
    """CPU seconds every core of the machine has been busy so far (whoever ran)."""
    user, nice, system, _idle, _iowait, irq, softirq, steal = (
        int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]
    )
    return (user + nice + system + irq + softirq + steal) / CLOCK


def tree_cpu(root: int) -> float:
    """CPU seconds used so far by process ``root`` and its descendants, the children they have
    reaped included (a spark-submit: its JVM and Python workers)."""
    parents: dict[int, int] = {}
    used: dict[int, float] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(entry.path, "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # gone meanwhile
        pid = int(entry.name)
        parents[pid] = int(stat[1])
        used[pid] = sum(int(v) for v in stat[11:15]) / CLOCK
    tree = {root} & used.keys()
    while grown := {pid for pid, parent in parents.items() if parent in tree} - tree:
        tree |= grown
    return sum(used[pid] for pid in tree)


@dataclass
class Step:
    """Wall-clock seconds of one timed step and the CPU seconds spent meanwhile by this process,
    B's JVM, A's JVM, the Spark job (a spark-submit's process tree) and the whole machine; for a
    window of Spark tasks, also the seconds its tasks ran, summed."""

    wall: float = 0.0
    own: float = 0.0
    b: float = 0.0
    a: float = 0.0
    spark: float = 0.0
    machine: float = 0.0
    task_seconds: float = 0.0

    def __sub__(self, other: Step) -> Step:
        return Step(*(getattr(self, f.name) - getattr(other, f.name) for f in fields(Step)))


@contextmanager
def timed(a: HBaseProcess, b: HBaseProcess) -> Iterator[Step]:
    """Measure the ``with`` block into the :class:`Step` it yields."""
    assert a.proc is not None and b.proc is not None
    pa, pb = a.proc.pid, b.proc.pid
    step = Step()
    c0, b0, a0, m0 = time.process_time(), process_cpu(pb), process_cpu(pa), machine_cpu()
    t0 = time.perf_counter()
    yield step
    step.wall = time.perf_counter() - t0
    step.own = time.process_time() - c0
    step.b, step.a, step.machine = process_cpu(pb) - b0, process_cpu(pa) - a0, machine_cpu() - m0


class Sampler:
    """The CPU counters of a :class:`Step` read every 0.1 s in a thread while a spark-submit
    runs (its process tree's among them), so that a window inside its run, a Spark job's tasks,
    can be measured as well as the whole."""

    def __init__(self, a: HBaseProcess, b: HBaseProcess, root: int) -> None:
        assert a.proc is not None and b.proc is not None
        self.pids = (a.proc.pid, b.proc.pid, root)
        self.samples: list[tuple[float, Step]] = [self.read()]
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="cpu-sampler")
        self._thread.start()

    def read(self) -> tuple[float, Step]:
        pa, pb, root = self.pids
        now = time.time()
        counters = Step(0.0, time.process_time(), process_cpu(pb), process_cpu(pa), tree_cpu(root), machine_cpu())
        return now, counters

    def _run(self) -> None:
        while not self._stop.wait(0.1):
            self.samples.append(self.read())

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()
        self.samples.append(self.read())

    def window(self, start: float, end: float) -> Step:
        """The counters from the last sample at or before ``start`` to the first at or after
        ``end`` (epoch seconds); its wall time is ``end - start``."""
        before = [c for t, c in self.samples if t <= start] or [self.samples[0][1]]
        after = [c for t, c in self.samples if t >= end] or [self.samples[-1][1]]
        step = after[0] - before[-1]
        step.wall = end - start
        return step


# -- the clusters, tables and peers --------------------------------------------------------


def start_clusters(root: Path, zk: str, collector: str, a_servers: int = 3) -> tuple[HBaseProcess, HBaseProcess]:
    """A (``a_servers`` region servers) and B (one), started in parallel on one ZooKeeper, their
    JVMs on the ``collector`` (see :data:`walship_testing.harness.process.COLLECTORS`)."""
    common: dict[str, Any] = {"zk": zk, "conf": NO_COMPACTIONS, "collector": collector}
    a = HBaseProcess("A", root / "A", znode_parent="/hbase-a", regionservers=a_servers, **common)
    b = HBaseProcess("B", root / "B", znode_parent="/hbase-b", regionservers=1, **common)
    with ThreadPoolExecutor(max_workers=2) as pool:
        started = [pool.submit(hb.start) for hb in (a, b)]
    for future in started:
        exc = future.exception()
        if exc is not None:
            for hb in (a, b):
                hb.kill()
            raise exc
    return a, b


def ratio_line(label: str, ratios: list[float], target: float) -> str:
    """The median of the rounds' ratios, each round's, and whether the median reaches ``target``."""
    ratio = statistics.median(ratios)
    verdict = "met" if ratio >= target else "NOT met"
    return f"  {label}: {ratio:.2f}x (rounds {', '.join(f'{x:.2f}' for x in ratios)}); target >= {target}: {verdict}"


@contextmanager
def real_pair(collector: str, a_servers: int = 3) -> Iterator[tuple[Path, HBaseProcess, HBaseProcess]]:
    """A scratch folder, a ZooKeeper in it and clusters A and B on it (:func:`start_clusters`):
    (the folder, A, B); all stopped and gone afterwards."""
    with tempfile.TemporaryDirectory(prefix="walship-bench-") as tmp:
        root = Path(tmp)
        zk = LocalZooKeeper(root / "zk", free_port())
        zk.start()
        try:
            a, b = start_clusters(root, zk.hosts, collector, a_servers)
            try:
                yield root, a, b
            finally:
                for hb in (b, a):
                    hb.stop()
        finally:
            zk.stop()


def spread_regions(a: HBaseProcess, table: str) -> list[str]:
    """Move the table's regions so each sits on a region server of its own; their servers."""
    regions = a.call("regions", table=table)
    servers = sorted(a.servers())
    if len(regions) > len(servers):
        raise RuntimeError(f"{table} has {len(regions)} regions for {len(servers)} region servers")
    if len({r["server"] for r in regions}) < len(regions):
        for region, server in zip(regions, servers, strict=False):
            if region["server"] != server:
                a.call("move_region", region=region["region"], server=server)
    deadline = time.monotonic() + 120
    while True:
        placed = [r["server"] for r in a.call("regions", table=table)]
        if len(placed) == len(regions) and len(set(placed)) == len(regions):
            return placed
        if time.monotonic() > deadline:
            raise RuntimeError(f"{table}'s regions are still on {placed}")
        time.sleep(0.2)


def create_tables(a: HBaseProcess, b: HBaseProcess, rows: int) -> list[str]:
    """``one`` and ``three`` on A and B (``three`` split in three), ``ceiling`` on B;
    returns the servers of ``three``'s regions on A."""
    splits = [row_key(rows * k // 3).hex() for k in (1, 2)]
    a.call("create_table", table="one", families=FAMILY)
    a.call("create_table", table="three", families=FAMILY, splits=splits)
    b.call("create_table", table="three", families=FAMILY, splits=splits)  # split as on A, as a peer's table is
    for table in ("one", "ceiling"):
        b.call("create_table", table=table, families=FAMILY)
    return spread_regions(a, "three")


def sink_config(b: HBaseProcess, sink: str) -> dict[str, str]:
    if sink == "hbase":  # B's region servers, found through its ZooKeeper (the peer's cluster key)
        return {"walship.sink.protocol": "hbase"}
    if sink == "thrift2":
        host, port = b.thrift2
        return {"walship.sink.protocol": "thrift2", "walship.sink.thrift2": f"{host}:{port}"}
    host, port = b.thrift
    return {"walship.sink.thrift": f"{host}:{port}"}


def add_managed(
    a: HBaseProcess, b: HBaseProcess, peer: str, table: str, sink: str = "thrift2", extra: dict[str, str] | None = None
) -> None:
    """Peer ``peer`` of A into B through HBase's Admin (DISABLED for HBase, ``table`` only,
    ``sink``'s settings and ``extra``), adopted by walship."""
    a.call(
        "add_peer",
        peer=peer,
        cluster_key=b.cluster_key,
        state="DISABLED",
        configuration={"walship.managed": "true", **sink_config(b, sink), **(extra or {})},
        table_cfs={table: []},
    )
    with zk_client(a.zk_hosts) as client:
        ReplicationPeers(client, ZnodeLayout(a.znode_parent)).adopt(peer)


def add_peers(a: HBaseProcess, b: HBaseProcess) -> None:
    """Every peer of :data:`PEERS` (:func:`add_managed`); returns once every live server of A
    queues its WALs for each."""
    wide = {"walship.sink.thrift.connections": str(WIDE)}
    plain = [*PEERS.items(), *IN_PROCESS_PEERS.items()]
    for ((table, sink), peer), extra in [*((p, {}) for p in plain), *((p, wide) for p in WIDE_PEERS.items())]:
        add_managed(a, b, peer, table, sink, extra)
    servers = set(a.servers())
    deadline = time.monotonic() + 60
    with zk_client(a.zk_hosts) as client:
        queues = ReplicationQueues(client, ZnodeLayout(a.znode_parent))
        for peer in [*PEERS.values(), *WIDE_PEERS.values(), *IN_PROCESS_PEERS.values()]:
            while not servers <= {q.server for q in queues.list_queues(peer) if q.wals}:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"peer {peer}'s queues are not on every server of A")
                time.sleep(0.1)


# -- writing and shipping ------------------------------------------------------------------


def write_thrift1(hb: HBaseProcess, table: str, rows: int, first: int = 0) -> None:
    """The rows (from row ``first`` on) into ``table`` through the cluster's Thrift1 server:
    happybase batches of 1,000."""
    conn = happybase.Connection(*hb.thrift)
    try:
        with conn.table(table).batch(batch_size=1000) as batch:
            for i in range(first, first + rows):
                batch.put(row_key(i), {b"f:" + q: VALUE for q in QUALS})
    finally:
        conn.close()


def write_thrift2(hb: HBaseProcess, table: str, rows: int, first: int = 0) -> None:
    """The rows (from row ``first`` on) into ``table`` through the cluster's Thrift2 server:
    putMultiple calls of 1,000 rows."""
    end = first + rows
    with open_thrift2(*hb.thrift2) as c:
        for start in range(first, end, 1000):
            puts = [
                hbase2.TPut(
                    row=row_key(i),
                    columnValues=[hbase2.TColumnValue(family=b"f", qualifier=q, value=VALUE) for q in QUALS],
                )
                for i in range(start, min(end, start + 1000))
            ]
            c.client.putMultiple(table.encode(), puts)


CEILINGS: dict[str, Callable[..., None]] = {"thrift2": write_thrift2, "thrift1": write_thrift1}


def write_apart(sink: str, hb: HBaseProcess, table: str, rows: int, clients: int) -> None:
    """The rows into ``table`` by ``clients`` clients at once, each a process of its own
    writing its share of the rows as the one-client ceiling does: what the machine lets
    several writers put into B."""
    ctx = multiprocessing.get_context("fork")
    share = -(-rows // clients)
    procs = [
        ctx.Process(target=CEILINGS[sink], args=(hb, table, min(share, rows - first), first))
        for first in range(0, rows, share)
    ]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join()
        if proc.exitcode != 0:
            raise RuntimeError(f"a {sink} client writing into B failed (exit status {proc.exitcode})")


def ship_in_process(a: HBaseProcess, peer: str) -> int:
    """One pass of the shipper over the peer's queues, in this process; the cells shipped."""
    with zk_client(a.zk_hosts) as client, Shipper(client, ZnodeLayout(a.znode_parent), WalStore(a.wal_root)) as s:
        return int(s.ship_peer(peer).totals()["cells_shipped"])


def spark_ship(a: HBaseProcess, b: HBaseProcess, peer: str, master: str, cwd: Path) -> tuple[int, Step, Step]:
    """spark-submit of the ship job for the peer: the cells it shipped (from its summary), the
    whole job as a :class:`Step`, and the window of its tasks (first launch to last end, from
    Spark's event log) as another."""
    bindir = Path(sys.executable).parent
    env = local_submit_env()
    events = Path(tempfile.mkdtemp(prefix="events-", dir=cwd))
    job = ShipJob(zk=a.zk_hosts, znode_parent=a.znode_parent, wal_root=a.wal_root, peer_id=peer)
    cmd = [
        str(bindir / "spark-submit"), "--master", master, "--conf", "spark.ui.enabled=false", *SETTINGS,
        "--conf", "spark.driver.memory=512m", "--conf", "spark.eventLog.enabled=true",
        "--conf", f"spark.eventLog.dir={events.as_uri()}", "--conf", "spark.eventLog.compress=false",
        str(ROOT / "spark_jobs" / "ship.py"), "--job", job.to_json(),
    ]  # fmt: skip
    start = time.time()
    with subprocess.Popen(cmd, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as proc:
        sampler = Sampler(a, b, proc.pid)
        try:
            out, err = proc.communicate(timeout=1800)
        finally:
            sampler.stop()
    end = time.time()
    summaries = [line for line in out.splitlines() if line.startswith("{")]
    # where the job's own time went (imports, session, plan, tasks, record): spark-submit passes
    # the Python driver's stderr on to its stdout
    for line in [*out.splitlines(), *err.splitlines()]:
        if line.startswith("ship.py: timings "):
            print(f"  the ship job of peer {peer}: {line.removeprefix('ship.py: ')}", flush=True)
    if proc.returncode != 0 or not summaries:
        raise RuntimeError(f"the ship job for peer {peer} failed ({proc.returncode}):\n{(out + err)[-3000:]}")
    logged = [
        event
        for log in events.rglob("events_*")  # beside them: Hadoop's .crc files
        for event in map(json.loads, log.read_text().splitlines())
    ]
    # the ship tasks: every stage but the Python workers' warm-up's (a job group of its own)
    warm_up = {
        stage
        for event in logged
        if event.get("Event") == "SparkListenerJobStart"
        and str((event.get("Properties") or {}).get("spark.jobGroup.id", "")).startswith(WARM_UP_GROUP)
        for stage in event["Stage IDs"]
    }
    tasks = [
        (event["Task Info"]["Launch Time"] / 1000, event["Task Info"]["Finish Time"] / 1000)
        for event in logged
        if event.get("Event") == "SparkListenerTaskEnd" and event["Stage ID"] not in warm_up
    ]
    if not tasks:
        raise RuntimeError(f"the ship job for peer {peer} ran no task (its event log is in {events})")
    window = sampler.window(min(t for t, _ in tasks), max(t for _, t in tasks))
    window.task_seconds = sum(finish - launch for launch, finish in tasks)
    return int(json.loads(summaries[-1])["totals"]["cells_shipped"]), sampler.window(start, end), window


def timestamp_runs(a: HBaseProcess, table: str) -> tuple[int, int, int]:
    """The table's cells in A's WALs, its entries (HBase logs a mini-batch of rows as one
    entry) and how many runs of one timestamp they form in WAL order: Thrift1 takes one
    timestamp a call, so the Thrift1 sink needs a call for each run at least."""
    store = WalStore(a.wal_root)
    cells = entries = runs = 0
    for path, archived in store.wal_files():
        if path.rsplit("/", 1)[-1].startswith("."):
            continue  # the local file system's checksum files
        last = None
        with store.open(store.location(path, archived)) as f:
            for entry in WalReader(f, path).entries():
                if entry.key.table != table.encode() or not entry.cells:
                    continue
                cells += len(entry.cells)
                entries += 1
                if entry.cells[0].timestamp != last:
                    runs += 1
                    last = entry.cells[0].timestamp
    return cells, entries, runs


# -- a round -------------------------------------------------------------------------------


def one_queue_round(a: HBaseProcess, b: HBaseProcess, rows: int, ceiling_first: bool = False) -> dict[str, Step]:
    """Load ``one`` on A, then for each sink: ship its peer in process, and the ceiling (first
    when ``ceiling_first``: rounds alternate, so neither side always follows the other)."""
    t0 = time.perf_counter()
    write_thrift1(a, "one", rows)
    print(f"loading A: {rows * len(QUALS) / (time.perf_counter() - t0):,.0f} cells/s", flush=True)
    a.call("flush")
    steps: dict[str, Step] = {}

    def ship(sink: str) -> None:
        for name, peers in (("ship", PEERS), (f"ship x{WIDE}", WIDE_PEERS)):
            b.call("flush")
            with timed(a, b) as steps[f"{sink} {name}"]:
                shipped = ship_in_process(a, peers["one", sink])
            if shipped != rows * len(QUALS):
                raise RuntimeError(f"{sink} {name}: shipped {shipped} cells of one queue, wrote {rows * len(QUALS)}")

    def ceiling(sink: str) -> None:
        b.call("flush")
        with timed(a, b) as steps[f"{sink} ceiling"]:
            CEILINGS[sink](b, "ceiling", rows)

    for sink in SINKS:
        for measure in (ceiling, ship) if ceiling_first else (ship, ceiling):
            measure(sink)
    return steps


def three_queue_round(
    a: HBaseProcess, b: HBaseProcess, rows: int, master: str, cwd: Path, ceiling_first: bool = False
) -> dict[str, Step]:
    """Load ``three`` on A, then for each sink: the Spark job and the same job drained (its
    start-up), and the ceiling (first when ``ceiling_first``); ``<sink> work`` is the job
    without its start-up, ``<sink> task work`` its tasks' window without the drained job's."""
    write_thrift1(a, "three", rows)
    a.call("flush")
    steps: dict[str, Step] = {}

    def ship(sink: str) -> None:
        peer = PEERS["three", sink]
        b.call("flush")
        shipped, steps[f"{sink} spark"], steps[f"{sink} tasks"] = spark_ship(a, b, peer, master, cwd)
        if shipped != rows * len(QUALS):
            raise RuntimeError(f"{sink}: the Spark job shipped {shipped} cells, wrote {rows * len(QUALS)}")
        _, steps[f"{sink} startup"], steps[f"{sink} drained tasks"] = spark_ship(a, b, peer, master, cwd)
        steps[f"{sink} work"] = steps[f"{sink} spark"] - steps[f"{sink} startup"]
        steps[f"{sink} task work"] = steps[f"{sink} tasks"] - steps[f"{sink} drained tasks"]
        b.call("flush")
        with timed(a, b) as steps[f"{sink} in process"]:
            shipped = ship_in_process(a, IN_PROCESS_PEERS["three", sink])
        if shipped != rows * len(QUALS):
            raise RuntimeError(f"{sink}: walship in process shipped {shipped} cells of three queues")

    def ceiling(sink: str) -> None:
        b.call("flush")
        with timed(a, b) as steps[f"{sink} ceiling3"]:
            CEILINGS[sink](b, "ceiling", rows)
        b.call("flush")
        with timed(a, b) as steps[f"{sink} clients3"]:
            write_apart(sink, b, "ceiling", rows, 3)

    for sink in SINKS:
        for measure in (ceiling, ship) if ceiling_first else (ship, ceiling):
            measure(sink)
    return steps


# -- the report ----------------------------------------------------------------------------


def report(
    rounds: list[dict[str, Step]],
    cells: int,
    master: str,
    spread: list[str],
    runs: tuple[int, int, int],
    collector: str,
) -> None:
    def median(key: Callable[[dict[str, Step]], float]) -> float:
        return statistics.median(key(r) for r in rounds)

    def rate(name: str) -> float:
        return median(lambda r: cells / r[name].wall)

    def wall(name: str) -> float:
        return median(lambda r: r[name].wall)

    def ratio(ship: str, ceiling: str) -> tuple[float, list[float]]:
        each = [r[ceiling].wall / r[ship].wall for r in rounds]
        return statistics.median(each), each

    def verdict(value: float, target: float) -> str:
        return f"target >= {target}: {'met' if value >= target else f'NOT met, {value / target:.0%} of it'}"

    print(
        f"\ncells {cells:,} a figure ({cells // 3:,} rows x 3, 100-byte values), {len(rounds)} rounds, "
        f"the clusters' JVMs on the {collector} collector; medians:"
    )
    print("one queue (table 'one', one region), walship in process:")
    for sink, ceiling_name in (("thrift2", "putMultiple"), ("thrift1", "happybase mutateRows")):
        value, each = ratio(f"{sink} ship", f"{sink} ceiling")
        cpu = median(lambda r, s=sink: r[f"{s} ship"].own / cells * 1e6)  # type: ignore[misc]
        print(f"  ship A -> B over {sink:7}                : {rate(f'{sink} ship'):9,.0f} cells/s, "
              f"CPU of the shipping process {cpu:.2f} us a cell")  # fmt: skip
        print(
            f"  {ceiling_name + ' straight into B':38}: {rate(f'{sink} ceiling'):9,.0f} cells/s  <- ceiling, one client"
        )
        print(
            f"  ratio {sink}: {value:.3f} (rounds {', '.join(f'{x:.3f}' for x in each)}; {verdict(value, ONE_TARGET)})"
        )
        wide, each = ratio(f"{sink} ship x{WIDE}", f"{sink} ceiling")
        cpu = median(lambda r, s=sink: r[f"{s} ship x{WIDE}"].own / cells * 1e6)  # type: ignore[misc]
        print(f"  the same over {WIDE} connections (walship.sink.thrift.connections={WIDE}): "
              f"{rate(f'{sink} ship x{WIDE}'):9,.0f} cells/s, CPU {cpu:.2f} us a cell, ratio {wide:.3f} "
              f"(rounds {', '.join(f'{x:.3f}' for x in each)})")  # fmt: skip
        load = median(lambda r, s=sink: r[f"{s} ceiling"].b / r[f"{s} ship"].b)  # type: ignore[misc]
        print(f"  B's JVM CPU for the same cells, ceiling / ship: {load:.3f} (the ratio if B's CPU were the limit)")
    three = "thrift2 work" in rounds[0]
    if three:
        print(
            f"three queues (table 'three', a region on each of {len(set(spread))} servers), Spark ship job on {master}:"
        )
    for sink in SINKS if three else ():
        job, startup, tasks, drained = (
            wall(f"{sink} {name}") for name in ("spark", "startup", "tasks", "drained tasks")
        )
        parallel = median(lambda r, n=f"{sink} tasks": r[n].task_seconds / r[n].wall)  # type: ignore[misc]
        print(f"  {sink}: job {job:.1f} s, start-up {startup:.1f} s (the same job, queues drained); "
              f"its tasks {tasks:.2f} s (drained: {drained:.2f} s), {parallel:.2f} of them at a time")  # fmt: skip
        ceiling = rate(f"{sink} ceiling3")
        for label, name in (("job minus start-up", "work"), ("tasks minus drained tasks", "task work")):
            value, each = ratio(f"{sink} {name}", f"{sink} ceiling3")
            print(f"  ship A -> B over {sink}, {label:25}: {rate(f'{sink} {name}'):9,.0f} cells/s, ratio {value:.3f} "
                  f"(rounds {', '.join(f'{x:.3f}' for x in each)}; {verdict(value, THREE_TARGET)})")  # fmt: skip
        print(f"  {'ceiling, one client':43}: {ceiling:9,.0f} cells/s (the job with its start-up: "
              f"{rate(f'{sink} spark'):,.0f})")  # fmt: skip
        apart, _ = ratio(f"{sink} clients3", f"{sink} ceiling3")
        print(f"  {'three clients at once, a process each':43}: {rate(f'{sink} clients3'):9,.0f} cells/s, "
              f"{apart:.3f}x one client: what this machine lets three writers put into B")  # fmt: skip
        value, each = ratio(f"{sink} task work", f"{sink} clients3")
        print(f"  ship A -> B over {sink}, tasks minus drained, against three clients: {value:.3f} "
              f"(rounds {', '.join(f'{x:.3f}' for x in each)})")  # fmt: skip
        value, each = ratio(f"{sink} in process", f"{sink} ceiling3")
        apart, _ = ratio(f"{sink} in process", f"{sink} clients3")
        print(f"  walship in this process, the three queues at once (a thread each): "
              f"{rate(f'{sink} in process'):,.0f} cells/s, ratio {value:.3f} (rounds "
              f"{', '.join(f'{x:.3f}' for x in each)}; {verdict(value, THREE_TARGET)}), against three clients {apart:.3f}")  # fmt: skip
    print("where the time goes (medians; cores busy during the step: this process, the Spark job's processes,")
    print("B's JVM, A's JVM, the rest and the whole machine; B's JVM CPU a cell):")
    print(f"  {'step':20} {'this proc':>9} {'spark job':>9} {'B JVM':>7} {'A JVM':>7} {'others':>7} {'machine':>8} "
          f"{'B us/cell':>10}")  # fmt: skip
    kinds = (
        ("ship", f"ship x{WIDE}", "ceiling", "tasks", "in process", "ceiling3", "clients3")
        if three
        else ("ship", f"ship x{WIDE}", "ceiling")
    )
    for name in [f"{s} {k}" for s in SINKS for k in kinds]:

        def cores(attr: str, n: str = name) -> float:
            return median(lambda r: getattr(r[n], attr) / r[n].wall)

        b_cell = median(lambda r, n=name: r[n].b / cells * 1e6)  # type: ignore[misc]
        others = cores("machine") - sum(cores(attr) for attr in ("own", "spark", "b", "a"))
        print(f"  {name:20} {cores('own'):9.2f} {cores('spark'):9.2f} {cores('b'):7.2f} {cores('a'):7.2f} "
              f"{others:7.2f} {cores('machine'):8.2f} {b_cell:10.1f}")  # fmt: skip
    print(f"  (the machine has {os.cpu_count()} cores; 'others': every other process on it, ZooKeeper's and other")
    print("  work's; 'machine' all of them;")
    print("  '<sink> tasks' is the window of the Spark job's tasks, from the first launch to the last end)")
    logged, entries, timestamps = runs
    rows = logged / len(QUALS)
    print(f"table 'one' in A's WALs: {rows:,.0f} rows in {entries:,} entries, {timestamps:,} runs of one timestamp: "
          f"a Thrift1 sink call (one timestamp each) carries {rows / max(timestamps, 1):,.0f} rows at most, "
          "the ceiling's 1,000")  # fmt: skip


def progress(what: str, steps: dict[str, Step], cells: int) -> None:
    """One line of a round's steps: seconds, and cells/s of those that move the cells."""
    parts = []
    for name, step in steps.items():
        moved = any(kind in name for kind in ("ship", "ceiling", "work"))
        parts.append(f"{name} {step.wall:.2f} s" + (f" ({cells / step.wall:,.0f} cells/s)" if moved else ""))
    print(f"{what}: {', '.join(parts)}", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cells", type=int, default=300_000, help="cells a figure (3 a row)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of every figure; medians are printed")
    parser.add_argument("--master", default="local[2]", help="Spark master of the ship job")
    parser.add_argument("--no-spark", action="store_true", help="the one-queue figures only")
    parser.add_argument(
        "--collector",
        choices=sorted(COLLECTORS),
        default="parallel",
        help="the clusters' JVM garbage collector (parallel: on every core, the heap fixed; "
        "serial: as the tests run them)",
    )
    args = parser.parse_args(argv)
    if args.cells < 3000 or args.rounds < 1:
        parser.error("--cells must be >= 3000 and --rounds >= 1")
    rows = args.cells // len(QUALS)
    cells = rows * len(QUALS)
    rounds: list[dict[str, Step]] = []
    with real_pair(args.collector) as (root, a, b):
        spread = create_tables(a, b, rows)
        add_peers(a, b)
        # one round unmeasured first: the JVMs' compilers warm up on both Thrift servers
        one_queue_round(a, b, rows)
        for r in range(args.rounds):
            rounds.append(one_queue_round(a, b, rows, ceiling_first=r % 2 == 1))
            progress(f"one queue, round {r + 1}", rounds[-1], cells)
        # the three-queue peers' queues hold the WALs of the loads above (none of their
        # table's edits): one untimed pass moves past them
        for sink in SINKS:
            ship_in_process(a, PEERS["three", sink])
        for r in range(0 if args.no_spark else args.rounds):
            steps = three_queue_round(a, b, rows, args.master, root, ceiling_first=r % 2 == 1)
            rounds[r] |= steps
            progress(f"three queues, round {r + 1}", steps, cells)
        runs = timestamp_runs(a, "one")
    report(rounds, cells, args.master, spread, runs, args.collector)
    return 0


if __name__ == "__main__":
    sys.exit(main())
