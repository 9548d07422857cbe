"""``walship verify`` beside a plain scan of both sides, in one run.

Loads ``--rows`` rows (3 cells of 100 bytes each, the same timestamps) into a source and a
peer minicluster directly over Thrift2, then times, each the median of ``--runs``:

* ``verify``: :func:`walship.verify.verify` in process (plan, scan both sides over Thrift2
  scanners, merge by key, compare every cell);
* ``plain``: the same two Thrift2 scans, read to the end one after the other, without
  merging or comparing: the baseline.

Prints rows per second of each and their ratio (target: verify >= 0.5 x plain).

    .venv/bin/python benchmarks/verify_rows.py [--rows 50000] [--runs 3]
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from benchtools import scoped_table

from walship.peer import PeerConfig
from walship.thrift.conn import open_thrift2
from walship.thrift.hbase2 import hbase2
from walship.verify import VerifyJob, verify
from walship.verify.model import LATEST
from walship.verify.scan import Side
from walship.zk import ReplicationPeers, ZnodeLayout, zk_client
from walship.zk.localserver import LocalZooKeeper, free_port
from walship_testing.minicluster.process import MiniClusterProcess

VALUE = b"x" * 100
QUALS = (b"a", b"b", b"c")


def load(mc: MiniClusterProcess, rows: int) -> None:
    with open_thrift2(*mc.thrift2) as c:
        for start in range(0, rows, 1000):
            puts = [
                hbase2.TPut(
                    row=b"%016d" % i,
                    columnValues=[hbase2.TColumnValue(family=b"f", qualifier=q, value=VALUE) for q in QUALS],
                    timestamp=1_000_000,
                )
                for i in range(start, min(rows, start + 1000))
            ]
            c.client.putMultiple(b"bench", puts)


@contextlib.contextmanager
def thrift2_pair() -> Iterator[tuple[str, MiniClusterProcess, MiniClusterProcess]]:
    """A ZooKeeper and two miniclusters, each with table ``bench`` (family ``f``, scope 1);
    peer 1 of A ships into B over Thrift2. Yields (ZooKeeper hosts, A, B); all stopped after."""
    with tempfile.TemporaryDirectory(prefix="walship-bench-") as tmp:
        root = Path(tmp)
        zk = LocalZooKeeper(root / "zk", free_port())
        zk.start()
        a = MiniClusterProcess("a", root / "a", zk=zk.hosts, znode_parent="/hbase-a")
        b = MiniClusterProcess("b", root / "b", zk=zk.hosts, znode_parent="/hbase-b")
        try:
            for mc in (a, b):
                mc.start()
                scoped_table(mc)
            host, port = b.thrift2
            with zk_client(zk.hosts) as client:
                ReplicationPeers(client, ZnodeLayout("/hbase-a")).add(
                    PeerConfig(
                        "1",
                        f"{zk.hosts}:/hbase-b",
                        configuration={"walship.sink.protocol": "thrift2", "walship.sink.thrift2": f"{host}:{port}"},
                    )
                )
            yield zk.hosts, a, b
        finally:
            for mc in (a, b):
                mc.stop()
            zk.stop()


def plain_scan(a: MiniClusterProcess, b: MiniClusterProcess) -> tuple[float, int]:
    t0 = time.perf_counter()
    n = 0
    for mc in (a, b):
        with Side([mc.thrift2], label=mc.name, hint="bench") as side:
            for _ in side.scan("bench", b"", b"", {b"f": 1}, 0, LATEST):
                n += 1
    return time.perf_counter() - t0, n


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=50_000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args(argv)
    with thrift2_pair() as (zk_hosts, a, b):
        load(a, args.rows)
        load(b, args.rows)
        job = VerifyJob(
            zk=zk_hosts,
            znode_parent="/hbase-a",
            wal_root=str(a.data_dir),
            source_thrift2=f"{a.thrift2[0]}:{a.thrift2[1]}",
            peer_id="1",
            recompare_sleep=0,
        )
        verify_s, plain_s = [], []
        for _ in range(args.runs):
            t0 = time.perf_counter()
            result = verify(job)
            verify_s.append(time.perf_counter() - t0)
            if result.counters.good != args.rows or not result.ok:
                print(f"FAIL: {result.counters.to_json()}")
                return 1
            secs, n = plain_scan(a, b)
            if n != 2 * args.rows:
                print(f"FAIL: the plain scan read {n} rows, expected {2 * args.rows}")
                return 1
            plain_s.append(secs)
    v, p = statistics.median(verify_s), statistics.median(plain_s)
    print(f"rows {args.rows:,} per side (3 cells x 100 bytes), median of {args.runs}")
    print(f"walship verify (scan both, merge, compare): {args.rows / v:12,.0f} rows/s  ({v:.2f} s)")
    print(f"plain Thrift2 scan of both sides          : {args.rows / p:12,.0f} rows/s  ({p:.2f} s)  <- baseline")
    print(f"ratio verify/plain: {p / v:.3f}  (target >= 0.5: {'met' if p / v >= 0.5 else 'NOT met'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
