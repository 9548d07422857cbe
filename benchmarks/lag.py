"""Replication lag: tailing beside micro-batches, measured in one run.

Two phases on the same two miniclusters, each writing a steady stream into A (default 5,000
edits/s for 60 s, in happybase batches every 10 ms: ``--rate`` / 100 rows a batch):

* ``tail``: ``walship tail`` runs in its own process during the writes; its CPU time is taken
  from the moment the writes start until it ends (a few seconds after them), and divided by
  the edits it shipped;
* ``micro-batch``: one shipping pass every ``--interval`` seconds (default 60, the schedule of
  ``walship_replicate``; Spark's start-up, about 7 s a run, is not included): the baseline.

The lag of an edit is the time from its write on A (its WAL entry's write time on A) to its
being applied on B (the write time of its WAL entry on B, written as B applies it). Prints
p50, p99 and max of both, and the write rate A sustained. Target: p99 <= 0.25 s for tailing
at 5,000 edits/s.

B is written over Thrift1 (``--sink thrift1``, the default) or Thrift2. Thrift1 takes one
timestamp a call, so the sink makes one call per distinct cell timestamp in a batch: here one
per write batch on A, about 100 a second, each synced to B's WAL; Thrift2 takes a batch in one
call. On a machine short of CPU, B's share of it decides the lag more than the tailer does.

    .venv/bin/python benchmarks/lag.py [--seconds 60] [--rate 5000] [--interval 60] [--no-micro-batch]
                                       [--sink thrift1|thrift2]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import happybase

from walship.peer import PeerConfig
from walship.replicate import Shipper, WalStore
from walship.wal import WalReader, parse_wal_name
from walship.zk import ReplicationPeers, ReplicationQueues, ZnodeLayout, connect, zk_client
from walship.zk.localserver import LocalZooKeeper, free_port
from walship.zk.locks import read_holder
from walship_testing.minicluster.admin import AdminClient
from walship_testing.minicluster.process import MiniClusterProcess


def write_times(data_dir: Path, prefix: bytes) -> dict[bytes, int]:
    """row -> write time (ms) of the WAL entry that holds it."""
    files = [p for p in (data_dir / "WALs").rglob("*") if p.is_file()] + list((data_dir / "oldWALs").iterdir())
    out: dict[bytes, int] = {}
    for path in sorted(files, key=lambda p: parse_wal_name(p.name)):
        with open(path, "rb") as f:
            for e in WalReader(f, str(path)).entries():
                for c in e.cells:
                    if c.row.startswith(prefix):
                        out.setdefault(c.row, e.key.write_time)
    return out


def load(a: MiniClusterProcess, prefix: bytes, seconds: float, rate: int) -> tuple[int, float]:
    """Write ``rate`` edits a second for ``seconds``: (edits written, seconds it took)."""
    conn = happybase.Connection(*a.thrift)
    t = conn.table("lag")
    per_tick = max(1, rate // 100)
    n = 0
    start = time.monotonic()
    tick = 0
    while time.monotonic() - start < seconds:
        with t.batch() as b:
            for _ in range(per_tick):
                b.put(prefix + b"%08d" % n, {b"f:q": b"x" * 100})
                n += 1
        tick += 1
        delay = start + tick * 0.01 - time.monotonic()
        if delay > 0:
            time.sleep(delay)
    took = time.monotonic() - start
    conn.close()
    return n, took


def start_tailer(zk: str, a: MiniClusterProcess, duration: float) -> subprocess.Popen[bytes]:
    """``walship tail --peer 1`` on A, in its own process; returns once it holds every queue."""
    cmd = [
        *(sys.executable, "-m", "walship.cli", "--zk", zk, "--znode-parent", "/hbase-a"),
        *("--wal-root", str(a.data_dir), "tail", "--peer", "1", "--duration", f"{duration:g}"),
    ]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE)
    layout = ZnodeLayout("/hbase-a")
    with zk_client(zk) as client:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            queues = ReplicationQueues(client, layout).list_queues("1")
            holders = [read_holder(client, layout, q.server, str(q.queue_id)) for q in queues]
            if queues and all(h is not None and h.owner == "tail-1" for h in holders):
                return proc
            if proc.poll() is not None:
                break
            time.sleep(0.1)
    proc.kill()
    raise SystemExit("FAIL: the tailer did not take the queues of peer 1")


def cpu_seconds(pid: int) -> float:
    """User and system CPU seconds of a running process so far (Linux: ``/proc/<pid>/stat``)."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    fields = stat[stat.rindex(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def lags(a: MiniClusterProcess, b: MiniClusterProcess, prefix: bytes) -> list[int]:
    wa, wb = write_times(a.data_dir, prefix), write_times(b.data_dir, prefix)
    missing = set(wa) - set(wb)
    if missing:
        raise SystemExit(f"FAIL: {len(missing)} edits never reached B")
    return [wb[r] - wa[r] for r in wa]


def describe(name: str, values: list[int]) -> str:
    q = statistics.quantiles(values, n=100, method="inclusive")
    return (
        f"{name:<12}: {len(values):7,} edits  p50 {q[49] / 1000:6.2f} s  p99 {q[98] / 1000:6.2f} s  "
        f"max {max(values) / 1000:6.2f} s"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--rate", type=int, default=5000, help="edits per second")
    parser.add_argument("--interval", type=float, default=60, help="seconds between micro-batch passes")
    parser.add_argument("--no-micro-batch", action="store_true", help="the tail phase only")
    parser.add_argument(
        "--sink",
        choices=("thrift1", "thrift2"),
        default="thrift1",
        help="how B is written to: Thrift1 (one call per cell timestamp) or Thrift2 (one call per batch)",
    )
    args = parser.parse_args(argv)
    batch_lags: list[int] = []
    summary: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="walship-lag-") as tmp:
        root = Path(tmp)
        zk = LocalZooKeeper(root / "zk", free_port())
        zk.start()
        a = MiniClusterProcess("a", root / "a", zk=zk.hosts, znode_parent="/hbase-a", regionservers=1)
        b = MiniClusterProcess("b", root / "b", zk=zk.hosts, znode_parent="/hbase-b", regionservers=1)
        proc: subprocess.Popen[bytes] | None = None
        try:
            a.start()
            b.start()
            for mc in (a, b):
                conn = happybase.Connection(*mc.thrift)
                conn.create_table("lag", {"f": {"max_versions": 1}})
                conn.close()
                AdminClient(mc.admin).set_scope("lag", "f", 1)
            if args.sink == "thrift2":
                host, port = b.thrift2
                sink = {"walship.sink.protocol": "thrift2", "walship.sink.thrift2": f"{host}:{port}"}
            else:
                host, port = b.thrift
                sink = {"walship.sink.thrift": f"{host}:{port}"}
            with zk_client(zk.hosts) as client:
                ReplicationPeers(client, ZnodeLayout("/hbase-a")).add(
                    PeerConfig("1", f"{zk.hosts}:/hbase-b", configuration=sink)
                )
            time.sleep(0.5)

            # phase 1: tailing, in a process of its own (so its CPU time is its own)
            proc = start_tailer(zk.hosts, a, args.seconds + 5)
            cpu_before = cpu_seconds(proc.pid)
            children = resource.getrusage(resource.RUSAGE_CHILDREN)
            written, took = load(a, b"tail-", args.seconds, args.rate)
            out, _ = proc.communicate(timeout=args.seconds + 120)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            tail_cpu = (after.ru_utime - children.ru_utime) + (after.ru_stime - children.ru_stime) - cpu_before
            summary = json.loads(out)
            tail_lags = lags(a, b, b"tail-")

            # phase 2: micro-batches every --interval seconds
            if not args.no_micro_batch:
                client = connect(zk.hosts)
                shipper = Shipper(client, ZnodeLayout("/hbase-a"), WalStore(str(a.data_dir)))
                stop = threading.Event()

                def passes() -> None:
                    while not stop.wait(args.interval):
                        shipper.ship_peer("1")

                ticker = threading.Thread(target=passes)
                ticker.start()
                load(a, b"batch-", args.seconds, args.rate)
                stop.set()
                ticker.join()
                shipper.ship_peer("1")  # the last pass: whatever the interval left behind
                batch_lags = lags(a, b, b"batch-")
                client.stop()
                client.close()
        finally:
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait()
            for mc in (a, b):
                mc.stop()
            zk.stop()
    # an edit is a row of one cell; a write batch's rows are one WAL entry, as HBase logs a batch
    shipped = sum(q["cells_shipped"] for q in summary["queues"].values())
    print(
        f"steady load: {args.rate:,} edits/s for {args.seconds:g} s: {written:,} edits written in "
        f"{took:.1f} s ({written / took:,.0f} edits/s sustained); B written over {args.sink}"
    )
    print(describe("tail", tail_lags))
    if batch_lags:
        print(describe("micro-batch", batch_lags) + f"  (a pass every {args.interval:g} s)")
    print(
        f"tail CPU    : {tail_cpu:.2f} s for {shipped:,} edits shipped in {summary['passes']:,} passes: "
        f"{tail_cpu / max(shipped, 1) * 1e6:.1f} us per edit (from the first write to the tailer's end)"
    )
    p99 = statistics.quantiles(tail_lags, n=100, method="inclusive")[98] / 1000
    print(f"target tail p99 <= 0.25 s: {'met' if p99 <= 0.25 else 'NOT met'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
