"""CPU a small Thrift call costs the shipping process: sent from the caller's own thread (how a
sink sends a batch under ``INLINE_CELLS`` cells, a tailer's) beside handed to the sink's sender
thread one by one (:mod:`walship.sinks.inorder`, how larger batches go), in one process, over
one connection to a minicluster's Thrift1 server.

Each round sends ``--calls`` ``mutateRowsTs`` calls of ``--rows`` rows of one 100-byte cell (a
tailer's call: one write batch of a client, one timestamp), encoded beforehand, each way, and
times the process's CPU (user + system; the server is another process) and wall time. Prints
the medians a call and the ratio of the two ways.

    PYTHONPATH=src .venv/bin/python benchmarks/sink_calls.py [--calls 400] [--rows 50] [--rounds 3]
"""

from __future__ import annotations

import argparse
import resource
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import happybase

from walship.sinks.base import ApplyStats
from walship.sinks.inorder import Sender
from walship.thrift.conn1 import open_connection
from walship.thrift.encoded import EncodedCall, encode_mutate_rows_ts
from walship.zk.localserver import LocalZooKeeper, free_port
from walship_testing.minicluster.process import MiniClusterProcess


class Cell(NamedTuple):
    row: bytes
    family: bytes
    qualifier: bytes
    timestamp: int
    type: int
    value: bytes
    tags: bytes


def cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def send_inline(conn: Any, calls: list[EncodedCall]) -> None:
    for call in calls:
        conn.client.send_encoded(call)


def send_by_sender(conn: Any, calls: list[EncodedCall]) -> None:
    sender = Sender(lambda call, what, stats: conn.client.send_encoded(call), "walship-bench")
    try:
        with sender.batch(ApplyStats()) as batch:
            for call in calls:
                batch.send(call, "edits to table t")
    finally:
        sender.close()


WAYS: dict[str, Callable[[Any, list[EncodedCall]], None]] = {"inline": send_inline, "sender thread": send_by_sender}


def timed(
    send_all: Callable[[Any, list[EncodedCall]], None], conn: Any, calls: list[EncodedCall]
) -> tuple[float, float]:
    """(CPU us, wall us) a call."""
    c0, t0 = cpu(), time.perf_counter()
    send_all(conn, calls)
    return (cpu() - c0) / len(calls) * 1e6, (time.perf_counter() - t0) / len(calls) * 1e6


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=400)
    parser.add_argument("--rows", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    runs: dict[str, list[tuple[float, float]]] = {way: [] for way in WAYS}
    with tempfile.TemporaryDirectory(prefix="walship-sinkcalls-") as tmp:
        root = Path(tmp)
        zk = LocalZooKeeper(root / "zk", free_port())
        zk.start()
        b = MiniClusterProcess("b", root / "b", zk=zk.hosts, znode_parent="/hbase-b", regionservers=1)
        try:
            b.start()
            admin = happybase.Connection(*b.thrift)
            admin.create_table("t", {"f": {"max_versions": 1}})
            admin.close()
            conn: Any = open_connection(*b.thrift)
            for r in range(args.rounds):
                for way in runs:
                    base = (r * len(runs) + len(runs[way])) * args.calls * args.rows
                    calls: list[EncodedCall] = []
                    for i in range(args.calls):
                        ts = 1_700_000_000_000 + base + i
                        rows = [
                            (b"r%09d" % (base + i * args.rows + j), [Cell(b"", b"f", b"q", ts, 4, b"x" * 100, b"")])
                            for j in range(args.rows)
                        ]
                        calls.append(encode_mutate_rows_ts("binary", b"t", rows, ts, {b"_cs.id": b"\0\0\0\0"}))
                    runs[way].append(timed(WAYS[way], conn, calls))
            conn.close()
        finally:
            b.stop()
            zk.stop()
    medians = {way: (statistics.median(c for c, _ in r), statistics.median(w for _, w in r)) for way, r in runs.items()}
    print(f"Thrift1 mutateRowsTs calls of {args.rows} rows, {args.calls} a round, median of {args.rounds} rounds:")
    for way, (c, w) in medians.items():
        print(f"  {way:<14}: {c:5.0f} us CPU a call ({w:6.0f} us wall)")
    print(f"  ratio (inline / sender thread): {medians['inline'][0] / medians['sender thread'][0]:.2f} of the CPU")
    return 0


if __name__ == "__main__":
    sys.exit(main())
