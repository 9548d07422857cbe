"""Replication lag: tailing beside micro-batches, measured in one run.

Two phases on the same two miniclusters, each writing a steady stream into A (default 1,000
edits/s for 60 s, in batches of 10 rows every 10 ms):

* ``tail``: ``walship tail``'s loop runs during the writes;
* ``micro-batch``: one shipping pass every ``--interval`` seconds (default 60, the schedule of
  ``walship_replicate``; Spark's start-up, about 7 s a run, is not included).

The lag of an edit is the time from its write on A (its WAL entry's write time on A) to its
being applied on B (the write time of its WAL entry on B, written as B applies it). Prints
p50, p99 and max of both. Target: p99 <= 2 s for tailing.

    .venv/bin/python benchmarks/lag.py [--seconds 60] [--rate 1000] [--interval 60]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import happybase

from walship.minicluster.admin import AdminClient
from walship.minicluster.process import MiniClusterProcess
from walship.replicate import Shipper, WalStore
from walship.replicate.tailer import Tailer
from walship.wal import WalReader, parse_wal_name
from walship.zk import PeerConfig, ReplicationPeers, ZnodeLayout, connect, zk_client
from walship.zk.localserver import LocalZooKeeper, free_port


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


def load(a: MiniClusterProcess, prefix: bytes, seconds: float, rate: int) -> int:
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
    conn.close()
    return n


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
    parser.add_argument("--rate", type=int, default=1000, help="edits per second")
    parser.add_argument("--interval", type=float, default=60, help="seconds between micro-batch passes")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="walship-lag-") as tmp:
        root = Path(tmp)
        zk = LocalZooKeeper(root / "zk", free_port())
        zk.start()
        a = MiniClusterProcess("a", root / "a", zk=zk.hosts, znode_parent="/hbase-a", regionservers=1)
        b = MiniClusterProcess("b", root / "b", zk=zk.hosts, znode_parent="/hbase-b", regionservers=1)
        try:
            a.start()
            b.start()
            for mc in (a, b):
                conn = happybase.Connection(*mc.thrift)
                conn.create_table("lag", {"f": {"max_versions": 1}})
                conn.close()
                AdminClient(mc.admin).set_scope("lag", "f", 1)
            host, port = b.thrift
            with zk_client(zk.hosts) as client:
                ReplicationPeers(client, ZnodeLayout("/hbase-a")).add(
                    PeerConfig("1", f"{zk.hosts}:/hbase-b", configuration={"walship.sink.thrift": f"{host}:{port}"})
                )
            time.sleep(0.5)

            # phase 1: tailing
            client = connect(zk.hosts)
            tailer = Tailer(client, ZnodeLayout("/hbase-a"), WalStore(str(a.data_dir)), "1", duration=args.seconds + 5)
            runner = threading.Thread(target=tailer.run)
            runner.start()
            time.sleep(1)
            written = load(a, b"tail-", args.seconds, args.rate)
            runner.join()
            tail_lags = lags(a, b, b"tail-")

            # phase 2: micro-batches every --interval seconds
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
            for mc in (a, b):
                mc.stop()
            zk.stop()
    print(f"steady load: {args.rate:,} edits/s for {args.seconds:g} s ({written:,} edits a phase)")
    print(describe("tail", tail_lags))
    print(describe("micro-batch", batch_lags) + f"  (a pass every {args.interval:g} s)")
    p99 = statistics.quantiles(tail_lags, n=100, method="inclusive")[98] / 1000
    print(f"target tail p99 <= 2 s: {'met' if p99 <= 2 else 'NOT met'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
