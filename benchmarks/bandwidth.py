"""A peer's bandwidth limit: the rate walship ships at under a limit, beside the limit and
beside the same data shipped unlimited, measured in one run.

Starts ZooKeeper and two miniclusters, A and B, and three peers from A to B over Thrift1:
peer 1 unlimited, peer 2 limited to 1 MB/s and peer 3 to 5 MB/s (``--limits``). Each round
writes ``--mb`` MB of cells into A (1,000-byte values, one cell a row), queued for all three
peers, then ships them peer by peer (the order turns from round to round), one pass of the
shipper each (in process, the same batches of ``--batch-bytes`` for all). The bytes counted are
what the throttler counts: the cells' serialized size as KeyValues, seen by the sink.

The throttler is HBase's: a batch that would bring a 100 ms cycle's bytes to its budget
(limit / 10) waits for the next cycle, so a cycle carries a whole number of batches and the
rate falls short of the limit by up to one batch a cycle; batches well under the budget (32
KiB here, against 100 KB at 1 MB/s) keep it within a few percent.

Prints, each the median of its rounds, the achieved rate of each peer beside its limit (target:
within 10 % of the limit), the time the shipper waited for the limit, and the ratio of each
limited run's time to the unlimited one's.

    .venv/bin/python benchmarks/bandwidth.py [--mb 10] [--rounds 3] [--limits 1000000,5000000]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import happybase
from benchtools import scoped_table, wait_enqueued

from walship.peer import PeerConfig
from walship.replicate import Shipper, WalStore
from walship.replicate.throttle import batch_size
from walship.sinks.base import ApplyStats, FilteredEntry, Sink, SinkContext
from walship.sinks.registry import create_sink
from walship.zk import ReplicationPeers, ZnodeLayout, zk_client
from walship.zk.localserver import LocalZooKeeper, free_port
from walship_testing.minicluster.process import MiniClusterProcess

PARENT = "/hbase-a"
VALUE = b"x" * 1000


class Counting:
    """The peer's sink, counting the bytes the throttler in front of it counted."""

    def __init__(self, inner: Sink) -> None:
        self.inner = inner
        self.bytes = 0

    def apply(self, entries: Sequence[FilteredEntry], wal: str) -> ApplyStats:
        self.bytes += batch_size(entries)
        return self.inner.apply(entries, wal)

    def close(self) -> None:
        self.inner.close()


def write(conn: happybase.Connection, round_: int, rows: int) -> None:
    t = conn.table("bench")
    with t.batch(batch_size=500) as b:
        for i in range(rows):
            b.put(b"%02d-%013d" % (round_, i), {b"f:q": VALUE})


def ship(zk: str, root: str, peer_id: str, batch_bytes: int) -> tuple[float, int, float, int]:
    """One pass for the peer: (seconds, bytes counted, seconds throttled, cells shipped)."""
    sinks: list[Counting] = []

    def counting(peer: PeerConfig) -> Sink:
        sinks.append(Counting(create_sink(peer, SinkContext(root))))
        return sinks[-1]

    with zk_client(zk) as client:
        shipper = Shipper(client, ZnodeLayout(PARENT), WalStore(root), batch_bytes=batch_bytes, sink_factory=counting)
        t0 = time.perf_counter()
        summary = shipper.ship_peer(peer_id)
        elapsed = time.perf_counter() - t0
    if summary.status != "ok":
        raise SystemExit(f"peer {peer_id}: {summary.error}")
    return elapsed, sum(s.bytes for s in sinks), summary.throttled_s, summary.totals()["cells_shipped"]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--mb", type=float, default=10.0, help="MB of cells written and shipped a round (default 10)")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--limits", default="1000000,5000000", help="bytes/s of the limited peers (default 1 and 5 MB/s)")
    p.add_argument("--batch-bytes", type=int, default=32768, help="the shipper's batch size (default 32 KiB)")
    args = p.parse_args(argv)
    limits = [int(v) for v in args.limits.split(",")]
    peers = {"1": 0} | {str(i + 2): limit for i, limit in enumerate(limits)}
    rows = int(args.mb * 1e6) // (len(VALUE) + 38)
    results: dict[str, list[tuple[float, int, float]]] = {pid: [] for pid in peers}
    with tempfile.TemporaryDirectory(prefix="walship-bench-") as tmp:
        zk = LocalZooKeeper(Path(tmp) / "zk", free_port())
        zk.start()
        a = MiniClusterProcess("a", Path(tmp) / "a", zk=zk.hosts, znode_parent=PARENT)
        b = MiniClusterProcess("b", Path(tmp) / "b", zk=zk.hosts, znode_parent="/hbase-b")
        try:
            for mc in (a, b):
                mc.start()
                scoped_table(mc)
            host, port = b.thrift
            with zk_client(zk.hosts) as client:
                registry = ReplicationPeers(client, ZnodeLayout(PARENT))
                for pid, limit in peers.items():
                    sink = {"walship.sink.thrift": f"{host}:{port}"}
                    registry.add(PeerConfig(pid, f"{zk.hosts}:/hbase-b", configuration=sink, bandwidth=limit))
                wait_enqueued(client, ZnodeLayout(PARENT), peers)
            root = str(a.data_dir)
            for r in range(args.rounds):
                conn = happybase.Connection(*a.thrift)
                write(conn, r, rows)
                conn.close()
                line = []
                order = list(peers)[r % len(peers) :] + list(peers)[: r % len(peers)]
                for pid in order:
                    limit = peers[pid]
                    seconds, counted, throttled, cells = ship(zk.hosts, root, pid, args.batch_bytes)
                    if cells != rows:
                        raise SystemExit(f"peer {pid}: shipped {cells} cells, wrote {rows}")
                    results[pid].append((seconds, counted, throttled))
                    name = f"{limit / 1e6:g} MB/s" if limit else "unlimited"
                    line.append(f"{name} {counted / seconds / 1e6:.2f} MB/s in {seconds:.2f} s")
                print(f"round {r + 1}: " + "; ".join(line))
        finally:
            a.stop()
            b.stop()
            zk.stop()

    base = statistics.median(s for s, _, _ in results["1"])
    size = statistics.median(c for _, c, _ in results["1"])
    print(f"\n{size / 1e6:.2f} MB of cells a round ({rows:,} cells of 1,000-byte values), batches of "
          f"{args.batch_bytes:,} bytes, median of {args.rounds} rounds:")  # fmt: skip
    print(f"{'limit':>12} {'achieved':>12} {'of limit':>9} {'seconds':>8} {'throttled':>10} {'time / unlimited':>17}")
    ok = True
    for pid, limit in peers.items():
        secs = statistics.median(s for s, _, _ in results[pid])
        rate = statistics.median(c / s for s, c, _ in results[pid])
        throttled = statistics.median(t for _, _, t in results[pid])
        shown = f"{limit / 1e6:g} MB/s" if limit else "unlimited"
        of_limit = f"{rate / limit:9.3f}" if limit else f"{'-':>9}"
        print(f"{shown:>12} {rate / 1e6:7.2f} MB/s {of_limit} {secs:8.2f} {throttled:9.2f}s {secs / base:17.2f}")
        if limit:
            ok = ok and abs(rate / limit - 1) <= 0.1
    print(f"\nevery limited peer within 10 % of its limit: {'yes' if ok else 'NO'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
