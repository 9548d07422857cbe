"""``walship copy`` beside a plain Thrift2 scan of the source, in one run.

Loads ``--rows`` rows (3 cells of 100 bytes each) into a source minicluster over Thrift2,
then times, each the median of ``--runs``:

* ``copy``: :func:`walship.copy.copy` in process (plan, scan the source over Thrift2
  scanners, put every row into the peer in batches of 500 with ``putMultiple``);
* ``plain``: the same Thrift2 scan of the source, read to the end: the baseline.

Prints rows per second of each and their ratio. The first run fills the peer; the later ones
put the same cells again (same timestamps), as a repeated copy does.

    .venv/bin/python benchmarks/first_copy.py [--rows 50000] [--runs 3]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

from verify_rows import load, thrift2_pair

from walship.copy import copy, copy_job
from walship.verify.model import LATEST
from walship.verify.scan import Side
from walship_testing.minicluster.process import MiniClusterProcess


def plain_scan(a: MiniClusterProcess) -> tuple[float, int]:
    t0 = time.perf_counter()
    n = 0
    with Side([a.thrift2], label=a.name, hint="bench") as side:
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
        job = copy_job(
            zk=zk_hosts,
            znode_parent="/hbase-a",
            wal_root=str(a.data_dir),
            source_thrift2=f"{a.thrift2[0]}:{a.thrift2[1]}",
            peer_id="1",
        )
        copy_s, plain_s = [], []
        for _ in range(args.runs):
            t0 = time.perf_counter()
            result = copy(job)
            copy_s.append(time.perf_counter() - t0)
            if result.rows != args.rows or result.cells != 3 * args.rows:
                print(f"FAIL: copied {result.to_json()}")
                return 1
            secs, n = plain_scan(a)
            if n != args.rows:
                print(f"FAIL: the plain scan read {n} rows, expected {args.rows}")
                return 1
            plain_s.append(secs)
        _, on_peer = plain_scan(b)
        if on_peer != args.rows:
            print(f"FAIL: the peer holds {on_peer} rows, expected {args.rows}")
            return 1
    c, p = statistics.median(copy_s), statistics.median(plain_s)
    print(f"rows {args.rows:,} (3 cells x 100 bytes), median of {args.runs}")
    print(f"walship copy (scan the source, put into the peer): {args.rows / c:12,.0f} rows/s  ({c:.2f} s)")
    print(f"plain Thrift2 scan of the source               : {args.rows / p:12,.0f} rows/s  ({p:.2f} s)  <- baseline")
    print(f"ratio copy/plain: {p / c:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
