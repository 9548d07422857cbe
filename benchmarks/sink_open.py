"""What opening a peer's sink costs, the way a shipper opens one for each queue of a pass,
beside the same sinks found by scanning the installed packages' entry points each time (what
walship did before it read them once a process), in one run.

A Thrift1 sink and a Thrift2 sink (their connections open lazily, so no server is needed) are
created and closed ``--opens`` times each way; the figures are the medians over ``--rounds``.

    .venv/bin/python benchmarks/sink_open.py [--opens 200] [--rounds 5]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from importlib.metadata import entry_points

from walship.peer import PeerConfig
from walship.sinks.base import SinkContext
from walship.sinks.registry import ENTRY_POINT_GROUP, create_sink

PEERS = [
    PeerConfig("1", "127.0.0.1:2181:/hbase-b", configuration={"walship.sink.thrift": "127.0.0.1:9090"}),
    PeerConfig(
        "2",
        "127.0.0.1:2181:/hbase-b",
        configuration={"walship.sink.protocol": "thrift2", "walship.sink.thrift2": "127.0.0.1:9091"},
    ),
]


def open_sinks(opens: int, scan: bool) -> float:
    """Seconds a sink open takes, on average; with ``scan``, each open also scans the entry
    points as every open did before."""
    context = SinkContext("/wal-root")
    t0 = time.perf_counter()
    for i in range(opens):
        peer = PEERS[i % len(PEERS)]
        if scan:  # the lookup every open made before
            any(
                ep.name == peer.configuration.get("walship.sink.protocol")
                for ep in entry_points(group=ENTRY_POINT_GROUP)
            )
        create_sink(peer, context).close()
    return (time.perf_counter() - t0) / opens


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--opens", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)
    if args.opens < 1 or args.rounds < 1:
        parser.error("--opens and --rounds must be >= 1")
    open_sinks(len(PEERS), scan=False)  # imports and the first read of the entry points
    now: list[float] = []
    before: list[float] = []
    for r in range(args.rounds):
        for scan in (False, True) if r % 2 == 0 else (True, False):
            (before if scan else now).append(open_sinks(args.opens, scan))
    a, b = statistics.median(now), statistics.median(before)
    print(f"sink open, entry points read once a process : {a * 1e3:8.3f} ms")
    print(f"sink open, entry points scanned every open  : {b * 1e3:8.3f} ms  <- baseline (before)")
    print(f"ratio: {b / a:.1f}x faster; saved a queue's pass: {(b - a) * 1e3:.1f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
