"""HBase's own replication beside walship's, on the same real HBase 2.6 clusters, in one run.

Starts ZooKeeper, a cluster A with one region server and a cluster B with one (the harness's
JVMs, the parallel collector, compactions and region splits off). A and B have the tables ``native`` and
``walship``, one region each: on A both regions sit on its one server, so each peer has one
queue and both queues hold the same WALs. Two peers replicate A to B:

* ``n``: HBase's own (added through HBase's Admin with HBase's defaults: its
  ReplicationSource on A reads the WALs and pushes batches to B's ReplicationSink over RPC),
  table-cfs ``native``;
* ``w``: walship's (added through the Admin DISABLED for HBase, ``walship.managed=true``, adopted
  by walship), shipped through B's Thrift2 server (``--sink thrift2``, the default) or straight
  into B's region server (``--sink hbase``: ``Multi`` calls, as HBase's own sink writes),
  table-cfs ``walship``.

Figures, each round (``--rounds``; medians printed, each round's ratio beside):

* drain: with ``n`` disabled (HBase keeps its WALs queued) ``--rows`` rows of 3 cells (100-byte
  values) are written into each table, in alternating ``putMultiple`` calls of 1,000 rows, so
  both backlogs lie in the same WALs. Then ``n`` is enabled and timed until B holds the last
  row of ``native`` (a queue ships in WAL order, so the last row is the end), and ``n``
  disabled again; then one walship pass ships ``w`` in this process, timed. Both tables are
  flushed on A and B before each side's drain, so each starts on empty memstores with no
  flush of the other's under way. Rows a second each,
  and the ratio (target: walship >= 2.0x HBase's). The CPU each side spends a cell: for HBase
  A's JVM (its ReplicationSource) and B's (the sink), for walship this process and B's JVM.
* lag: ``--rate`` edits a second (one cell a row, ``--rate``/100 rows every 10 ms) for
  ``--seconds`` into ``native`` with ``n`` enabled; then as many into ``walship`` while
  ``walship tail --peer w`` runs in a process of its own. An edit's lag is the write time of
  its WAL entry on B (written as B applies it) less that of its entry on A. p50, p99 and max
  each, and the ratio of the p99s (target: walship's <= a quarter of HBase's); the tailer's CPU
  an edit beside A's JVM's CPU an edit while HBase's source tails.

    .venv/bin/python benchmarks/vs_native.py [--rows 100000] [--rounds 3] [--rate 5000] [--seconds 30]
                                             [--sink thrift2|hbase]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

from real_peer import (
    FAMILY,
    QUALS,
    VALUE,
    Step,
    add_managed,
    process_cpu,
    ratio_line,
    real_pair,
    row_key,
    timed,
)

from walship.replicate import Shipper, WalStore
from walship.thrift.conn import open_thrift2
from walship.thrift.hbase2 import hbase2
from walship.wal import WalReader
from walship.zk import ReplicationQueues, ZnodeLayout, zk_client
from walship.zk.locks import read_holder
from walship_testing.harness import HBaseProcess

NATIVE, WALSHIP = "n", "w"
TABLES = {NATIVE: "native", WALSHIP: "walship"}
DRAIN_TARGET = 2.0
LAG_TARGET = 0.25


def add_peers(a: HBaseProcess, b: HBaseProcess, sink: str) -> None:
    """``n`` (HBase's, disabled) and ``w`` (walship's); returns once A's server queues its WALs
    for both."""
    for table in TABLES.values():
        for hb in (a, b):
            hb.call("create_table", table=table, families=FAMILY)
    a.call("add_peer", peer=NATIVE, cluster_key=b.cluster_key, state="DISABLED", table_cfs={TABLES[NATIVE]: []})
    add_managed(a, b, WALSHIP, TABLES[WALSHIP], sink)
    with zk_client(a.zk_hosts) as client:
        queues = ReplicationQueues(client, ZnodeLayout(a.znode_parent))
        deadline = time.monotonic() + 60
        while not all(any(q.wals for q in queues.list_queues(p)) for p in TABLES):
            if time.monotonic() > deadline:
                raise SystemExit("FAIL: A's server does not queue its WALs for both peers")
            time.sleep(0.1)


def puts(first: int, count: int, cells: int, prefix: bytes = b"") -> list[object]:
    return [
        hbase2.TPut(
            row=prefix + row_key(i),
            columnValues=[hbase2.TColumnValue(family=b"f", qualifier=q, value=VALUE) for q in QUALS[:cells]],
        )
        for i in range(first, first + count)
    ]


def write_backlog(a: HBaseProcess, first: int, rows: int) -> None:
    """``rows`` rows into each table, alternating calls of 1,000: one backlog in the same WALs."""
    with open_thrift2(*a.thrift2) as c:
        for start_row in range(first, first + rows, 1000):
            count = min(1000, first + rows - start_row)
            for table in TABLES.values():
                c.client.putMultiple(table.encode(), puts(start_row, count, len(QUALS)))


def wait_row(b: HBaseProcess, table: str, row: bytes, timeout: float = 600.0) -> None:
    with open_thrift2(*b.thrift2) as c:
        deadline = time.monotonic() + timeout
        while not c.client.exists(table.encode(), hbase2.TGet(row=row)):
            if time.monotonic() > deadline:
                raise SystemExit(f"FAIL: row {row!r} of {table} did not reach B in {timeout:g} s")
            time.sleep(0.01)


def flush_tables(a: HBaseProcess, b: HBaseProcess) -> None:
    for hb in (a, b):
        hb.call("flush", table=TABLES[NATIVE])
        hb.call("flush", table=TABLES[WALSHIP])


def drain_round(a: HBaseProcess, b: HBaseProcess, first: int, rows: int) -> dict[str, Step]:
    write_backlog(a, first, rows)
    flush_tables(a, b)
    with timed(a, b) as native:
        begin = time.perf_counter()
        a.call("enable_peer", peer=NATIVE)
        enabling = Step(wall=time.perf_counter() - begin)
        wait_row(b, TABLES[NATIVE], row_key(first + rows - 1))
    a.call("disable_peer", peer=NATIVE)
    flush_tables(a, b)
    layout = ZnodeLayout(a.znode_parent)
    with (
        zk_client(a.zk_hosts) as client,
        Shipper(client, layout, WalStore(a.wal_root)) as shipper,
        timed(a, b) as ours,
    ):
        cells = int(shipper.ship_peer(WALSHIP).totals()["cells_shipped"])
    if cells != rows * len(QUALS):
        raise SystemExit(f"FAIL: walship shipped {cells} cells of {rows * len(QUALS)}")
    return {"native": native, "walship": ours, "enabling": enabling}


def load(a: HBaseProcess, table: str, prefix: bytes, seconds: float, rate: int) -> int:
    """``rate`` one-cell rows a second into ``table`` for ``seconds``; the rows written."""
    per_tick = max(1, rate // 100)
    n = tick = 0
    with open_thrift2(*a.thrift2) as c:
        begin = time.monotonic()
        while time.monotonic() - begin < seconds:
            c.client.putMultiple(table.encode(), puts(n, per_tick, 1, prefix))
            n += per_tick
            tick += 1
            delay = begin + tick * 0.01 - time.monotonic()
            if delay > 0:
                time.sleep(delay)
    return n


def write_times(hb: HBaseProcess, prefix: bytes) -> dict[bytes, int]:
    """row -> write time (ms) of the first WAL entry of ``hb`` that holds it."""
    store = WalStore(hb.wal_root)
    out: dict[bytes, int] = {}
    for path, archived in store.wal_files():
        if path.rsplit("/", 1)[-1].startswith("."):
            continue  # a checksum file beside a WAL
        with store.open(store.location(path, archived)) as f:
            for e in WalReader(f, path).entries():
                for c in e.cells:
                    if c.row.startswith(prefix):
                        out.setdefault(c.row, e.key.write_time)
    return out


def lags(a: HBaseProcess, b: HBaseProcess, prefix: bytes) -> list[int]:
    wa, wb = write_times(a, prefix), write_times(b, prefix)
    missing = set(wa) - set(wb)
    if missing:
        raise SystemExit(f"FAIL: {len(missing)} edits of {prefix!r} never reached B")
    return [wb[r] - wa[r] for r in wa]


def tailer(a: HBaseProcess, duration: float) -> subprocess.Popen[bytes]:
    """``walship tail --peer w`` in its own process; returns once it holds the peer's queue."""
    cmd = [
        *(sys.executable, "-m", "walship.cli", "--zk", a.zk_hosts, "--znode-parent", a.znode_parent),
        *("--wal-root", a.wal_root, "tail", "--peer", WALSHIP, "--duration", f"{duration:g}"),
    ]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL)
    layout = ZnodeLayout(a.znode_parent)
    with zk_client(a.zk_hosts) as client:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and proc.poll() is None:
            queues = ReplicationQueues(client, layout).list_queues(WALSHIP)
            holders = [read_holder(client, layout, q.server, str(q.queue_id)) for q in queues]
            if queues and all(h is not None and h.owner.startswith("tail") for h in holders):
                return proc
            time.sleep(0.1)
    proc.kill()
    raise SystemExit(f"FAIL: the tailer did not take the queue of peer {WALSHIP}")


def lag_phase(a: HBaseProcess, b: HBaseProcess, seconds: float, rate: int) -> dict[str, tuple[list[int], float, float]]:
    """Each side's lags, its source's CPU seconds an edit (HBase's: A's JVM, which also serves
    the writes; walship's: the tailer, its start-up included) and A's JVM's CPU an edit."""
    assert a.proc is not None
    a.call("enable_peer", peer=NATIVE)
    cpu = process_cpu(a.proc.pid)
    written = load(a, TABLES[NATIVE], b"lag-n", seconds, rate)
    wait_row(b, TABLES[NATIVE], b"lag-n" + row_key(written - 1))
    native_cpu = (process_cpu(a.proc.pid) - cpu) / written
    a.call("disable_peer", peer=NATIVE)
    proc = tailer(a, seconds + 5)
    cpu = process_cpu(a.proc.pid)
    written = load(a, TABLES[WALSHIP], b"lag-w", seconds, rate)
    wait_row(b, TABLES[WALSHIP], b"lag-w" + row_key(written - 1))
    a_cpu = (process_cpu(a.proc.pid) - cpu) / written
    tail_cpu = process_cpu(proc.pid) / written
    proc.wait(timeout=60)
    return {
        "native": (lags(a, b, b"lag-n"), native_cpu, native_cpu),
        "walship": (lags(a, b, b"lag-w"), tail_cpu, a_cpu),
    }


def quantiles(values: list[int]) -> tuple[float, float, float]:
    q = statistics.quantiles(values, n=100, method="inclusive")
    return q[49] / 1000, q[98] / 1000, max(values) / 1000


def report(rounds: list[dict[str, Step]], rows: int, lag: dict[str, tuple[list[int], float, float]] | None) -> None:
    cells = rows * len(QUALS)
    print(f"\ndrain of a backlog of {rows:,} rows ({cells:,} cells) a round, one queue each, {len(rounds)} rounds")
    ratios = [r["native"].wall / r["walship"].wall for r in rounds]
    for side in ("native", "walship"):
        walls = [r[side].wall for r in rounds]
        source = [(r[side].a if side == "native" else r[side].own) / cells * 1e6 for r in rounds]
        sink = [r[side].b / cells * 1e6 for r in rounds]
        name = "HBase's own" if side == "native" else "walship pass"
        print(
            f"  {name:<13} {rows / statistics.median(walls):10,.0f} rows/s  median {statistics.median(walls):6.2f} s"
            f"  source CPU {statistics.median(source):5.2f} us a cell, B's JVM {statistics.median(sink):5.2f} us a cell"
        )
    print(ratio_line("walship / HBase", ratios, DRAIN_TARGET))
    enabling = statistics.median(r["enabling"].wall for r in rounds)
    after = [(r["native"].wall - r["enabling"].wall) / r["walship"].wall for r in rounds]
    print(
        f"  of HBase's time, its enable_peer call (a master procedure) took {enabling:.2f} s; from its return: "
        f"walship / HBase {statistics.median(after):.2f}x"
    )
    if lag is None:
        return
    print("\nlag at a steady rate (write time on B less write time on A)")
    p99 = {}
    for side, (values, cpu, a_cpu) in lag.items():
        p50, p99[side], top = quantiles(values)
        name = "HBase's own" if side == "native" else "walship tail"
        who = "A's JVM (writes and source)" if side == "native" else f"A's JVM {a_cpu * 1e6:.1f}, the tailer"
        print(
            f"  {name:<13} {len(values):7,} edits  p50 {p50:6.3f} s  p99 {p99[side]:6.3f} s  max {top:6.3f} s"
            f"  {who}: {cpu * 1e6:6.1f} us CPU an edit"
        )
    hbase_source = lag["native"][1] - lag["walship"][2]
    print(
        f"  HBase's source, A's JVM less what it spends serving the writes alone: {hbase_source * 1e6:.1f} us CPU an edit"
    )
    share = p99["walship"] / p99["native"]
    verdict = "met" if share <= LAG_TARGET else "NOT met"
    print(f"  walship's p99 / HBase's: {share:.3f}; target <= {LAG_TARGET}: {verdict}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=100_000, help="rows of a backlog (3 cells each)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--rate", type=int, default=5000, help="edits a second of the lag phase")
    parser.add_argument("--seconds", type=float, default=30, help="seconds of the lag phase (0: none)")
    parser.add_argument(
        "--sink",
        choices=("thrift2", "hbase"),
        default="thrift2",
        help="how walship writes into B: its Thrift2 server, or straight into its region server (sink hbase)",
    )
    args = parser.parse_args(argv)
    if args.rows < 1000 or args.rounds < 1 or args.rate < 100 or args.seconds < 0:
        parser.error("--rows must be >= 1000, --rounds >= 1, --rate >= 100, --seconds >= 0")
    rounds: list[dict[str, Step]] = []
    lag = None
    with real_pair("parallel", a_servers=1) as (_root, a, b):
        add_peers(a, b, args.sink)
        print(f"walship writes into B with sink {args.sink}", flush=True)
        # unmeasured, a whole backlog: both sides' code in the JVMs compiled before the rounds (with
        # a short warm-up HBase's own drain gets faster round by round, walship's does not)
        drain_round(a, b, 0, args.rows)
        for r in range(args.rounds):
            rounds.append(drain_round(a, b, (r + 1) * args.rows, args.rows))
            n, w = rounds[-1]["native"].wall, rounds[-1]["walship"].wall
            print(f"round {r + 1}: HBase's own {n:.2f} s, walship {w:.2f} s ({n / w:.2f}x)", flush=True)
        if args.seconds:
            lag = lag_phase(a, b, args.seconds, args.rate)
    report(rounds, args.rows, lag)
    return 0


if __name__ == "__main__":
    sys.exit(main())
