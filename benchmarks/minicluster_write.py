"""Minicluster write throughput through happybase, beside the WAL writer's own ceiling.

Starts a local ZooKeeper and a minicluster (3 region servers), then writes rows of 3 cells
(100-byte values) through happybase batches of 1,000 rows, and reports cells/s and the WAL
bytes/s this produced. Beside it, in the same run: the same cells appended straight to a WAL
file with WalWriter, synced every 1,000 rows (no Thrift, no store): the write path's floor
cost, and their ratio. Target: >= 30,000 cells/s through happybase.

    .venv/bin/python benchmarks/minicluster_write.py [--rows 100000]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import happybase

from walship.wal import Cell, CellType, WalKey, WalWriter
from walship.zk.localserver import LocalZooKeeper, free_port
from walship_testing.minicluster.admin import AdminClient
from walship_testing.minicluster.process import MiniClusterProcess

BATCH = 1000
VALUE = b"v" * 100
QUALIFIERS = (b"a", b"b", b"c")


def wal_bytes(data_dir: Path) -> int:
    return sum(p.stat().st_size for p in data_dir.rglob("*") if p.is_file() and "%2C" in p.name)


def through_happybase(mc: MiniClusterProcess, rows: int) -> tuple[float, int]:
    conn = happybase.Connection(*mc.thrift)
    conn.create_table("bench", {"f": {"max_versions": 1}})
    AdminClient(mc.admin).set_scope("bench", "f", 1)
    table = conn.table("bench")
    before = wal_bytes(mc.data_dir)
    t0 = time.perf_counter()
    with table.batch(batch_size=BATCH) as b:
        for i in range(rows):
            b.put(b"%016d" % i, {b"f:" + q: VALUE for q in QUALIFIERS})
    elapsed = time.perf_counter() - t0
    conn.close()
    return elapsed, wal_bytes(mc.data_dir) - before


def straight_to_wal(path: Path, rows: int) -> tuple[float, int]:
    t0 = time.perf_counter()
    with open(path, "wb") as f:
        w = WalWriter(f)
        seq = 0
        for start in range(0, rows, BATCH):
            entries = []
            for i in range(start, min(rows, start + BATCH)):
                seq += 1
                row = b"%016d" % i
                ts = int(time.time() * 1000)
                cells = [Cell(row, b"f", q, ts, CellType.Put, VALUE) for q in QUALIFIERS]
                entries.append((WalKey(b"0" * 32, b"bench", seq, ts, scopes={b"f": 1}), cells))
            w.append_many(entries)
            w.sync()
        w.close()
    return time.perf_counter() - t0, path.stat().st_size


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=100_000)
    args = parser.parse_args(argv)
    cells = args.rows * len(QUALIFIERS)
    with tempfile.TemporaryDirectory(prefix="walship-bench-") as tmp:
        root = Path(tmp)
        zk = LocalZooKeeper(root / "zk", free_port())
        zk.start()
        try:
            mc = MiniClusterProcess("bench", root / "bench", zk=zk.hosts, znode_parent="/hbase-bench")
            mc.start()
            try:
                hb_s, hb_bytes = through_happybase(mc, args.rows)
            finally:
                mc.stop()
        finally:
            zk.stop()
        wal_s, raw_bytes = straight_to_wal(root / "direct.wal", args.rows)
    hb_rate = cells / hb_s
    wal_rate = cells / wal_s
    print(f"rows {args.rows:,}, cells {cells:,} (3 x 100-byte values), batches of {BATCH:,} rows")
    print(
        f"happybase -> minicluster : {hb_rate:12,.0f} cells/s  {hb_bytes / hb_s / 2**20:8.1f} MiB/s of WAL"
        f"  ({hb_s:.1f} s)"
    )
    print(
        f"WalWriter straight       : {wal_rate:12,.0f} cells/s  {raw_bytes / wal_s / 2**20:8.1f} MiB/s of WAL"
        f"  ({wal_s:.1f} s)"
    )
    print(f"ratio minicluster/WAL-only: {hb_rate / wal_rate:.3f}")
    print(f"target >= 30,000 cells/s: {'met' if hb_rate >= 30_000 else 'NOT met'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
