"""CPU a ZooKeeper round trip costs a walship process: kazoo's own threading handler (a new
selector built for every wait of its connection thread) beside walship's ``PollingHandler``
(one ``poll`` a wait), alternating in one process against one local ZooKeeper server.

Each round times ``--ops`` reads (``get``) and as many position-sized writes (``set``) of one
znode per handler, and the process's CPU (user + system, both of kazoo's threads and the
caller's) and wall time; prints the medians a round in microseconds an operation and the
ratio of the two handlers.

    .venv/bin/python benchmarks/zk_ops.py [--ops 2000] [--rounds 3]
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

from kazoo.client import KazooClient
from kazoo.handlers.threading import SequentialThreadingHandler

from walship.zk.handler import PollingHandler
from walship.zk.localserver import LocalZooKeeper, free_port

HANDLERS: dict[str, Callable[[], SequentialThreadingHandler]] = {
    "kazoo's handler": SequentialThreadingHandler,
    "PollingHandler": PollingHandler,
}


def cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def round_trips(hosts: str, make: Callable[[], SequentialThreadingHandler], ops: int) -> dict[str, tuple[float, float]]:
    """(CPU us, wall us) an operation, for gets and sets."""
    client = KazooClient(hosts, handler=make())
    client.start(timeout=30)
    try:
        client.ensure_path("/bench")
        out: dict[str, tuple[float, float]] = {}
        for name in ("get", "set"):
            c0, t0 = cpu(), time.perf_counter()
            for _ in range(ops):
                if name == "get":
                    client.get("/bench")
                else:
                    client.set("/bench", b"x" * 7)
            out[name] = ((cpu() - c0) / ops * 1e6, (time.perf_counter() - t0) / ops * 1e6)
        return out
    finally:
        client.stop()
        client.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ops", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="walship-zkops-") as tmp:
        zk = LocalZooKeeper(Path(tmp), free_port())
        zk.start()
        try:
            runs: dict[str, list[dict[str, tuple[float, float]]]] = {name: [] for name in HANDLERS}
            for _ in range(args.rounds):
                for name, make in HANDLERS.items():
                    runs[name].append(round_trips(zk.hosts, make, args.ops))
        finally:
            zk.stop()
    medians = {
        name: {op: tuple(statistics.median(r[op][i] for r in rounds) for i in (0, 1)) for op in ("get", "set")}
        for name, rounds in runs.items()
    }
    print(f"ZooKeeper round trips, {args.ops:,} of each a round, median of {args.rounds} rounds:")
    for name, ops in medians.items():
        print(
            f"  {name:<16}: get {ops['get'][0]:5.0f} us CPU ({ops['get'][1]:5.0f} us wall), "
            f"set {ops['set'][0]:5.0f} us CPU ({ops['set'][1]:5.0f} us wall)"
        )
    base, new = medians["kazoo's handler"], medians["PollingHandler"]
    print(
        f"  ratio (PollingHandler / kazoo's): get {new['get'][0] / base['get'][0]:.2f}, "
        f"set {new['set'][0] / base['set'][0]:.2f} of the CPU"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
