"""Writing into a real HBase 2.6 peer: through its Thrift2 server beside straight into its region
server (``ClientService.Multi``, :mod:`walship.rpc.multi`), in one run.

Starts ZooKeeper and one cluster (the harness's JVM: master, one region server and its Thrift2
server; the parallel collector, compactions and region splits off) with two one-region tables, then each round
(``--rounds``; the order of the two alternates) writes ``--rows`` rows of 3 cells (100-byte
values, every cell's timestamp explicit, as a sink sends them) into each, in calls of 1,000
rows from one client:

* ``thrift2``: ``putMultiple`` calls to the Thrift2 server (what the Thrift2 sink sends; the
  server turns each into a client ``batch`` to the region server): the baseline;
* ``multi``: ``Multi`` calls to the region server holding the region, the cells in a
  ``KeyValueCodec`` cell block (what HBase's own client and replication sink send).

Prints, each round and as medians: cells/s, the cluster JVM's CPU a cell (the peer's cost) and
this process's; the ratio of ``multi`` to ``thrift2`` in cells/s and in the peer's CPU a cell.
The peer's CPU a cell is what decides a drain on a machine whose cores the peer shares.

    .venv/bin/python benchmarks/peer_write.py [--rows 100000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from real_peer import FAMILY, NO_COMPACTIONS, QUALS, VALUE, process_cpu, row_key

from walship.rpc.auth import SimpleAuth
from walship.rpc.multi import RegionServerClient, RowMutation
from walship.thrift.conn import open_thrift2
from walship.thrift.hbase2 import hbase2
from walship.wal import Cell, CellType
from walship.zk.localserver import LocalZooKeeper, free_port
from walship_testing.harness import HBaseProcess

CALL_ROWS = 1000
KINDS = ("thrift2", "multi")


def region_name(hb: HBaseProcess, table: str) -> bytes:
    """The table's one region's full name: its row in hbase:meta (read whole: meta's rows
    compare by its own comparator)."""
    with open_thrift2(*hb.thrift2) as c:
        rows = [
            r.row
            for r in c.client.getScannerResults(b"hbase:meta", hbase2.TScan(), 10_000)
            if r.row.startswith(table.encode() + b",")
        ]
    if len(rows) != 1:
        raise SystemExit(f"FAIL: {table} has {len(rows)} regions in hbase:meta, expected 1")
    return bytes(rows[0])


def thrift2_writer(hb: HBaseProcess) -> tuple[Callable[[int, int, int], None], Callable[[], None]]:
    conn = open_thrift2(*hb.thrift2)
    client = conn.__enter__()

    def write(first: int, count: int, ts: int) -> None:
        puts = [
            hbase2.TPut(
                row=row_key(i),
                columnValues=[hbase2.TColumnValue(family=b"f", qualifier=q, value=VALUE, timestamp=ts) for q in QUALS],
            )
            for i in range(first, first + count)
        ]
        client.client.putMultiple(b"thrift2", puts)

    return write, lambda: conn.__exit__(None, None, None)


def multi_writer(hb: HBaseProcess) -> tuple[Callable[[int, int, int], None], Callable[[], None]]:
    region = region_name(hb, "multi")
    host, port, _ = hb.call("regions", table="multi")[0]["server"].split(",")
    rs = RegionServerClient(host, int(port), SimpleAuth())

    def write(first: int, count: int, ts: int) -> None:
        mutations = []
        for i in range(first, first + count):
            row = row_key(i)
            mutations.append(RowMutation(row, False, [Cell(row, b"f", q, ts, int(CellType.Put), VALUE) for q in QUALS]))
        failed = rs.multi(region, mutations)
        if failed:
            raise SystemExit(f"FAIL: {len(failed)} mutations failed, the first: {failed[0]}")

    return write, rs.close


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    cells = args.rows * len(QUALS)
    results: dict[str, list[tuple[float, float, float]]] = {k: [] for k in KINDS}
    with tempfile.TemporaryDirectory(prefix="walship-bench-") as tmp:
        root = Path(tmp)
        zk = LocalZooKeeper(root / "zk", free_port())
        zk.start()
        hb = HBaseProcess(
            "B",
            root / "B",
            zk=zk.hosts,
            znode_parent="/hbase-b",
            regionservers=1,
            conf=NO_COMPACTIONS,
            collector="parallel",
        )
        hb.start()
        assert hb.proc is not None
        pid = hb.proc.pid
        try:
            for table in KINDS:
                hb.call("create_table", table=table, families=FAMILY)
            writers = {"thrift2": thrift2_writer(hb), "multi": multi_writer(hb)}
            for rnd in range(args.rounds):
                first = rnd * args.rows
                for kind in KINDS if rnd % 2 == 0 else KINDS[::-1]:
                    write = writers[kind][0]
                    ts = int(time.time() * 1000)
                    b0, c0, w0 = process_cpu(pid), time.process_time(), time.perf_counter()
                    for start in range(first, first + args.rows, CALL_ROWS):
                        write(start, min(CALL_ROWS, first + args.rows - start), ts)
                    wall = time.perf_counter() - w0
                    peer, own = process_cpu(pid) - b0, time.process_time() - c0
                    results[kind].append((cells / wall, peer / cells * 1e6, own / cells * 1e6))
                    print(
                        f"round {rnd + 1} {kind:<7}: {cells / wall:10,.0f} cells/s  the peer's JVM "
                        f"{peer / cells * 1e6:5.2f} us a cell  this process {own / cells * 1e6:5.2f} us",
                        flush=True,
                    )
            for _, close in writers.values():
                close()
            with open_thrift2(*hb.thrift2) as c:  # every row of the last round is there, whole
                for table in KINDS:
                    got = c.client.get(table.encode(), hbase2.TGet(row=row_key(args.rounds * args.rows - 1)))
                    if len(got.columnValues) != len(QUALS):
                        print(f"FAIL: the last row of {table} holds {len(got.columnValues)} cells")
                        return 1
        finally:
            hb.stop()
            zk.stop()
    med = {k: [statistics.median(r[i] for r in results[k]) for i in range(3)] for k in KINDS}
    print(f"{args.rows:,} rows of 3 cells a round, {args.rounds} rounds, calls of {CALL_ROWS:,} rows; medians:")
    for kind in KINDS:
        rate, peer, own = med[kind]
        print(f"  {kind:<7}: {rate:10,.0f} cells/s  the peer's JVM {peer:5.2f} us a cell  this process {own:5.2f} us")
    ratios = [m[0] / t[0] for m, t in zip(results["multi"], results["thrift2"], strict=True)]
    print(
        f"multi / thrift2: {statistics.median(ratios):.2f}x the cells/s (rounds {', '.join(f'{r:.2f}' for r in ratios)}),"
        f" {med['thrift2'][1] / med['multi'][1]:.2f}x less of the peer's CPU a cell"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
