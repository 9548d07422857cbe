"""A thousand region servers, simulated: what walship's planning, status and cleaner cost as the
queues grow, and the ZooKeeper requests they make a queue.

HBase 3 moved its replication queues out of ZooKeeper because large clusters made the znodes
its bottleneck. This builds, on a real ZooKeeper and a local WAL root, the znodes and small
real WALs of ``--servers`` live region servers (each announced in ``rs/``) and ``--peers``
peers: one queue a server and peer, ``--wals`` WALs each (a WAL is shared by the server's
queues, as in HBase), and ``--archived`` archived WALs a server that no queue holds. It grows
the cluster to each of ``--sizes`` servers and to ``--servers``, and at each it times, the
median of ``--runs``:

* ``plan``: the plan of a shipping pass over every peer (:meth:`Planner.plan`: peers read and
  checked, dead servers looked for, the queues listed with their WALs and positions);
* ``assign``: a Spark ship job's queue assignment on its driver (:func:`plan_queues`: the plan,
  then the queues grouped into tasks);
* ``status``: :func:`walship.status.collect_status` of every peer;
* ``clean``: a cleaner run (dry run: nothing deleted, the same reads and listing);

and counts the ZooKeeper requests each makes a queue (every request kazoo sends, pipelined
ones included). Each figure is printed beside its cost a queue and the ratio of that cost to
the smallest size's (1.0: linear in the queues). Targets, at 1,000 servers x 3 peers:
status < 2 s, planning < 5 s, requests a queue bounded by a constant (not by the WALs).

    .venv/bin/python benchmarks/scale.py [--servers 1000] [--peers 3] [--wals 10] [--archived 2]
                                         [--sizes 250,500] [--runs 3]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from benchtools import scratch_zookeeper
from kazoo.client import KazooClient

from walship.peer import PeerConfig
from walship.replicate import Shipper, WalStore
from walship.replicate.cleaner import clean
from walship.servername import ServerName
from walship.spark.ship import ShipJob, plan_queues
from walship.status import collect_status
from walship.wal import Cell, CellType, WalKey, WalWriter, build_wal_name
from walship.zk import ReplicationPeers, ZnodeLayout
from walship.zk.cluster import ensure_cluster_id
from walship.zk.encoding import encode_position
from walship.zk.localserver import free_port

PARENT = "/hbase"
T0 = 1_790_000_000_000
TARGETS = {"status": 2.0, "plan": 5.0}


def server_name(s: int) -> ServerName:
    return ServerName(f"rs{s:04d}.bench", 16020, T0 + s)


def write_wal(path: Path, ts: int, rows: int = 2) -> None:
    with open(path, "wb") as f:
        writer = WalWriter(f)
        for e in range(rows):
            cells = [Cell(b"row-%d-%d" % (ts, e), b"f", b"q", ts, CellType.Put, b"v" * 100)]
            writer.append(WalKey(b"region", b"t", e + 1, ts + e, scopes={b"f": 1}), cells)
        writer.close(trailer=False)


def setup(client: KazooClient, root: Path, peers: int) -> None:
    layout = ZnodeLayout(PARENT)
    ensure_cluster_id(client, layout)
    registry = ReplicationPeers(client, layout)
    for p in range(1, peers + 1):
        sink = {"walship.sink.thrift": f"127.0.0.1:{free_port()}"}
        registry.add(PeerConfig(str(p), f"peer{p}-zk:2181:/hbase", configuration=sink))
    for path in (layout.queues, layout.live_servers):
        client.ensure_path(path)
    (root / "oldWALs").mkdir(parents=True)


def add_servers(client: KazooClient, root: Path, servers: range, peers: int, wals: int, archived: int) -> None:
    """Servers ``servers``: each live, with its WALs, archived WALs and one queue a peer."""
    layout = ZnodeLayout(PARENT)
    for s in servers:
        server = str(server_name(s))
        wal_dir = root / "WALs" / server
        wal_dir.mkdir(parents=True)
        names = []
        for w in range(wals + archived):
            name = build_wal_name(server_name(s), T0 + s * 1000 + w)
            write_wal((root / "oldWALs" if w < archived else wal_dir) / name, T0 + w)
            names.append(name)
        tx = client.transaction()
        tx.create(layout.live_server(server), b"", ephemeral=True)
        tx.create(layout.replicator(server))
        for p in range(1, peers + 1):
            tx.create(layout.queue(server, str(p)))
            for name in names[archived:]:
                tx.create(layout.wal(server, str(p), name), encode_position(0))
        failed = [r for r in tx.commit() if isinstance(r, Exception)]
        if failed:
            raise RuntimeError(f"building the queues of {server}: {failed[0]!r}")


@contextmanager
def counted(client: KazooClient) -> Iterator[list[int]]:
    """Count every request ``client`` sends inside the block (kazoo queues each through
    ``_call``, synchronous and pipelined alike): the list's one item."""
    count = [0]
    original = client._call

    def call(request: Any, async_object: Any) -> Any:
        count[0] += 1
        return original(request, async_object)

    client._call = call
    try:
        yield count
    finally:
        client._call = original


def measured(client: KazooClient, func: Callable[[], int], runs: int) -> tuple[float, int, int]:
    """(median seconds, ZooKeeper requests of one run, what the run returned: queues seen)."""
    times = []
    requests = seen = 0
    for _ in range(runs):
        with counted(client) as count:
            start = time.perf_counter()
            seen = func()
            times.append(time.perf_counter() - start)
        requests = count[0]
    return statistics.median(times), requests, seen


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--servers", type=int, default=1000)
    parser.add_argument("--peers", type=int, default=3)
    parser.add_argument("--wals", type=int, default=10, help="WALs a queue")
    parser.add_argument("--archived", type=int, default=2, help="archived WALs a server that no queue holds")
    parser.add_argument("--sizes", default="250,500", help="smaller server counts measured first, on the way up")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args(argv)
    sizes = sorted({int(x) for x in args.sizes.split(",") if x.strip()} | {args.servers})
    if sizes[0] < 1 or sizes[-1] > args.servers or args.peers < 1 or args.wals < 1 or args.runs < 1:
        parser.error("--sizes between 1 and --servers, --peers >= 1, --wals >= 1, --runs >= 1")
    peer_ids = [str(p) for p in range(1, args.peers + 1)]
    rows: list[tuple[str, int, float, int, int]] = []  # step, queues, seconds, requests, queues seen
    with scratch_zookeeper("walship-scale-") as (root, client, hosts):
        setup(client, root / "hbase", args.peers)
        layout = ZnodeLayout(PARENT)
        walstore = WalStore(str(root / "hbase"))
        job = ShipJob(zk=hosts, znode_parent=PARENT, wal_root=str(root / "hbase"), peer_id=",".join(peer_ids))
        shipper = Shipper(client, layout, walstore)
        c = client

        def plan() -> int:
            return sum(len(q) for q in shipper.planner.plan(peer_ids).queues.values())

        def assign() -> int:
            return sum(len(g) for g in plan_queues(job, c)[1])

        def status() -> int:
            return sum(len(p.queues) for p in collect_status(c, layout, walstore, probe_timeout=0.05).peers)

        def cleaner() -> int:
            return clean(c, layout, walstore, ttl=0, dry_run=True).deleted.files

        built = 0
        for n in sizes:
            started = time.perf_counter()
            add_servers(client, root / "hbase", range(built, n), args.peers, args.wals, args.archived)
            built, size = n, n * args.peers
            print(
                f"{n:,} servers x {args.peers} peers = {size:,} queues of {args.wals} WALs "
                f"({n * (args.wals + args.archived):,} WAL files; built in {time.perf_counter() - started:.1f} s)"
            )
            steps: dict[str, Callable[[], int]] = {
                "plan": plan,
                "assign": assign,
                "status": status,
                "clean": cleaner,
            }
            for step, func in steps.items():
                func()  # warm: imports, caches
                seconds, requests, seen = measured(client, func, args.runs)
                rows.append((step, size, seconds, requests, seen))
                print(
                    f"  {step:<7} {seconds:7.3f} s  {requests:7,} ZooKeeper requests "
                    f"({requests / size:5.2f} a queue)  [{seen:,} queues or files]",
                    flush=True,
                )
    report(rows)
    return 0


def report(rows: list[tuple[str, int, float, int, int]]) -> None:
    print("\nstep     queues    seconds   ms a queue  vs smallest   requests a queue  vs smallest")
    smallest: dict[str, tuple[float, float]] = {}
    for step, size, seconds, requests, _seen in rows:
        per_queue, req_per_queue = seconds / size * 1000, requests / size
        base = smallest.setdefault(step, (per_queue, req_per_queue))
        print(
            f"{step:<7} {size:7,} {seconds:10.3f} {per_queue:11.3f} {per_queue / base[0]:11.2f}x "
            f"{req_per_queue:17.2f} {req_per_queue / base[1]:11.2f}x"
        )
    full = {step: seconds for step, _size, seconds, _r, _s in rows}  # the last (largest) size of each
    for step, target in TARGETS.items():
        if step in full:
            verdict = "met" if full[step] < target else "NOT met"
            print(f"{step}: {full[step]:.2f} s at the full size; target < {target:g} s: {verdict}")


if __name__ == "__main__":
    sys.exit(main())
