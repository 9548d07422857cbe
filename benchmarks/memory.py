"""The peak memory of a shipping pass beside HBase's buffer quota, for small and for large cells.

Starts ZooKeeper and two miniclusters, A and B (peers 1 and 2, both Thrift2 to B, so that a
pass reads each WAL once for two queues, a batch of each in flight at once), and for each
shape loads A, then ships it with ``walship ship --peer 1,2 --parallel 4`` in a child process
of its own and prints the child's peak RSS:

* ``small``: rows of 3 cells of 100 bytes (``--small-rows``);
* ``large``: rows of one 200 KB cell (``--large-rows``), shipped twice: with the default quota
  (``replication.total.buffer.quota``, 256 MiB) and with ``--tight-quota`` MiB, whose batches in
  the background must keep under it;
* ``idle``: the same command before anything is written: the process's own size (Python,
  walship, Thrift, ZooKeeper), the baseline each pass is set beside.

The pass's memory is its peak RSS less the idle one's; HBase's region server keeps the edits
it read and has not shipped under the quota, so walship's pass should too.

    .venv/bin/python benchmarks/memory.py [--small-rows 300000] [--large-rows 2000] [--tight-quota 32]
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
from walship.wal.names import is_checksum_file
from walship.zk import ReplicationPeers, ZnodeLayout
from walship_testing.minicluster.process import MiniClusterProcess

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
    done = subprocess.run(
        [sys.executable, __file__, "--child", *argv], capture_output=True, text=True, env={**os.environ}, timeout=3600
    )
    seconds = time.perf_counter() - t0
    if done.returncode != 0:
        raise SystemExit(f"walship ship failed ({done.returncode}): {done.stdout[-2000:]}{done.stderr[-2000:]}")
    result = json.loads(done.stderr.strip().splitlines()[-1])
    summary = json.loads(done.stdout)
    shipped = sum(p["totals"]["cells_shipped"] for p in summary.get("peers", [summary]))
    return {"seconds": seconds, "peak_mib": result["peak_mib"], "cells": shipped}


def load_small(a: MiniClusterProcess, rows: int) -> int:
    conn = happybase.Connection(*a.thrift)
    with conn.table("bench").batch(batch_size=1000) as b:
        for i in range(rows):
            b.put(b"small%011d" % i, {b"f:a": b"x" * 100, b"f:b": b"y" * 100, b"f:c": b"z" * 100})
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
    for name, mib, run, q in runs:
        held = run["peak_mib"] - idle["peak_mib"]
        print(
            f"{name:28}: {run['cells']:>10,.0f} cells, {mib:7.0f} MiB of WALs in {run['seconds']:5.1f} s: "
            f"peak RSS {run['peak_mib']:4.0f} MiB, {held:4.0f} MiB above idle; quota {q // MIB} MiB "
            f"(held / quota {held * MIB / q:.2f})"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
