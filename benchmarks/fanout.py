"""One WAL read for many peers, beside one pass per peer, in one run.

Starts ZooKeeper and a minicluster A with ``--peers`` peers (4 by default; their sinks take
batches and drop them, so only reading, decoding and filtering are measured), then, for
``--rounds`` rounds, writes a backlog of ``--cells`` cells (100-byte values, 3 cells a row)
and ships it, alternating:

* ``apart``: one pass per peer (``walship ship --peer 1``, then 2, 3, 4): the baseline;
* ``together``: one pass for all of them (``walship ship --peer 1,2,3,4``).

Prints, each the median of its rounds, the WAL bytes read (what the file reads returned) and
the seconds, and the ratios apart / together.

    .venv/bin/python benchmarks/fanout.py [--peers 4] [--cells 300000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import happybase
from benchtools import wait_enqueued

from walship.peer import PeerConfig
from walship.replicate import Shipper, WalStore
from walship.sinks.base import ApplyStats, FilteredEntry, Sink
from walship.zk import ReplicationPeers, ZnodeLayout, zk_client
from walship.zk.cluster import ensure_cluster_id
from walship.zk.localserver import LocalZooKeeper, free_port
from walship_testing.minicluster.admin import AdminClient
from walship_testing.minicluster.process import MiniClusterProcess

PARENT = "/hbase-a"
VALUE = b"x" * 100
QUALS = (b"a", b"b", b"c")


class Drop:
    """A sink that takes every batch and keeps nothing."""

    def apply(self, entries: Sequence[FilteredEntry], wal: str) -> ApplyStats:
        return ApplyStats(cells=sum(len(e.cells) for e in entries), calls=1)

    def close(self) -> None:
        pass


def drop_sink(peer: PeerConfig) -> Sink:
    return Drop()


def write(conn: happybase.Connection, rows: int, round_: int) -> None:
    t = conn.table("t")
    with t.batch(batch_size=1000) as b:
        for i in range(rows):
            b.put(b"%02d-%012d" % (round_, i), {b"f:" + q: VALUE for q in QUALS})


def ship(zk: str, root: str, groups: list[list[str]]) -> tuple[float, int, int]:
    """Ship each group of peers in one pass; (seconds, WAL bytes read, entries read per peer)."""
    with zk_client(zk) as client:
        shipper = Shipper(client, ZnodeLayout(PARENT), WalStore(root), sink_factory=drop_sink)
        t0 = time.perf_counter()
        entries = 0
        for group in groups:
            for summary in shipper.ship_peers(group):
                assert summary.status == "ok", summary.error
                entries = summary.totals()["entries_read"]
        return time.perf_counter() - t0, shipper.read_stats.bytes, entries


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--peers", type=int, default=4)
    p.add_argument("--cells", type=int, default=300_000)
    p.add_argument("--rounds", type=int, default=3)
    args = p.parse_args(argv)
    rows = args.cells // len(QUALS)
    peers = [str(i) for i in range(1, args.peers + 1)]
    with tempfile.TemporaryDirectory(prefix="walship-bench-") as tmp:
        zk = LocalZooKeeper(Path(tmp) / "zk", free_port())
        zk.start()
        zk_hosts = zk.hosts
        a = MiniClusterProcess("a", Path(tmp) / "a", zk=zk_hosts, znode_parent=PARENT)
        try:
            a.start()
            conn = happybase.Connection(*a.thrift)
            conn.create_table("t", {"f": {"max_versions": 1}})
            AdminClient(a.admin).set_scope("t", "f", 1)
            with zk_client(zk_hosts) as client:
                registry = ReplicationPeers(client, ZnodeLayout(PARENT))
                for pid in peers:
                    ensure_cluster_id(client, ZnodeLayout(f"/peer-{pid}"))  # a peer cluster's id, as HBase keeps it
                    registry.add(PeerConfig(pid, f"{zk_hosts}:/peer-{pid}"))
                wait_enqueued(client, ZnodeLayout(PARENT), peers)
            root = str(a.data_dir)
            results: dict[str, list[tuple[float, int]]] = {"apart": [], "together": []}
            for r in range(args.rounds * 2):
                mode = "apart" if r % 2 == 0 else "together"
                write(conn, rows, r)
                groups = [[pid] for pid in peers] if mode == "apart" else [peers]
                seconds, read, entries = ship(zk_hosts, root, groups)
                results[mode].append((seconds, read))
                print(
                    f"round {r // 2 + 1} {mode:>8}: {seconds:7.2f} s, {read / 2**20:8.1f} MiB read, {entries:,} entries"
                )
            conn.close()
        finally:
            a.stop()
            zk.stop()
    med: dict[str, tuple[float, float]] = {
        m: (statistics.median(s for s, _ in v), statistics.median(b for _, b in v)) for m, v in results.items()
    }
    print()
    print(f"{'':10} {'seconds':>9} {'MiB read':>10} {'cells/s (all peers)':>20}")
    for mode, (secs, nbytes) in med.items():
        rate = args.cells * args.peers / secs
        print(f"{mode:10} {secs:9.2f} {nbytes / 2**20:10.1f} {rate:20,.0f}")
    (sa, ba), (st, bt) = med["apart"], med["together"]
    print(
        f"\n{args.peers} peers: together reads {ba / bt:.2f}x fewer bytes and takes {sa / st:.2f}x less time than apart"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
