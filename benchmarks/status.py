"""Status for many queues, beside a plain per-znode, per-file read of the same state, in one run.

Builds a source with ``--queues`` queues (one peer, one queue per region server) of ``--wals``
WALs each on a real ZooKeeper and a local WAL root (every WAL a small real WAL file, the
oldest of each queue half shipped), then times, each the median of ``--runs``:

* ``status``: :func:`walship.status.collect_status` (pipelined ZooKeeper reads, one listing of
  ``WALs/``, the first unshipped entry decoded per queue);
* ``plain``: the same facts read one znode and one file lookup at a time (what a
  straightforward status would do): the baseline;
* ``scrape``: one HTTP scrape of ``walship metrics serve``'s ``/metrics``.

Target: status for 100 queues x 50 WALs in under 1 s.

    .venv/bin/python benchmarks/status.py [--queues 100] [--wals 50] [--runs 5]
"""

from __future__ import annotations

import argparse
import statistics
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

from benchtools import scratch_zookeeper
from kazoo.client import KazooClient

from walship.peer import PeerConfig
from walship.replicate import WalStore
from walship.servername import ServerName
from walship.status import collect_status
from walship.status.metrics import serve, status_registry
from walship.wal import Cell, CellType, WalKey, WalWriter, build_wal_name
from walship.zk import ReplicationPeers, ReplicationQueues, ZnodeLayout
from walship.zk.cluster import ensure_cluster_id, register_server
from walship.zk.encoding import encode_position
from walship.zk.localserver import free_port
from walship.zk.locks import read_holder
from walship.zk.records import ProgressStore

PARENT = "/hbase"
T0 = 1_790_000_000_000


def build(client: KazooClient, root: Path, queues: int, wals: int) -> None:
    layout = ZnodeLayout(PARENT)
    ensure_cluster_id(client, layout)
    ReplicationPeers(client, layout).add(
        PeerConfig("1", "peer-zk:2181:/hbase", configuration={"walship.sink.thrift": f"127.0.0.1:{free_port()}"})
    )
    progress = ProgressStore(client, layout)
    client.ensure_path(layout.queues)
    value = b"v" * 100
    for s in range(queues):
        server = ServerName(f"rs{s:03d}.bench", 16020, T0 + s)
        register_server(client, layout, str(server))
        wal_dir = root / "WALs" / str(server)
        wal_dir.mkdir(parents=True)
        tx = client.transaction()
        tx.create(layout.replicator(str(server)))
        tx.create(layout.queue(str(server), "1"))
        for w in range(wals):
            ts = T0 + s * 1000 + w
            name = build_wal_name(server, ts)
            with open(wal_dir / name, "wb") as f:
                writer = WalWriter(f)
                offsets = []
                for e in range(3):
                    row = b"row-%d-%d-%d" % (s, w, e)
                    cells = [Cell(row, b"f", b"q", ts, CellType.Put, value)]
                    writer.append(WalKey(b"region", b"t", e + 1, ts + e, scopes={b"f": 1}), cells)
                    offsets.append(writer.offset)
                writer.close(trailer=False)
            tx.create(layout.wal(str(server), "1", name), encode_position(offsets[1] if w == 0 else 0))
        results = tx.commit()
        failed = [r for r in results if isinstance(r, Exception)]
        if failed:
            raise RuntimeError(f"building queues of {server}: {failed[0]!r}")
        progress.record("1", str(server), "1", counters={"cells_shipped": 2}, last_write_time=T0)


def plain(client: KazooClient, walstore: WalStore) -> int:
    """The baseline: one synchronous read per znode and one lookup per file."""
    layout = ZnodeLayout(PARENT)
    queues = ReplicationQueues(client, layout)
    progress = ProgressStore(client, layout)
    total = 0
    for server in queues.replicators():
        for qid in queues.queue_ids(server):
            for wp in queues.wals(server, qid):
                total += max(0, walstore.locate(wp.name, server).size - wp.position)
            progress.get("1", server, qid)
            read_holder(client, layout, server, qid)
    return total


def timed(func: Callable[[], object], runs: int) -> tuple[float, object]:
    times = []
    result: object = None
    for _ in range(runs):
        start = time.perf_counter()
        result = func()
        times.append(time.perf_counter() - start)
    return statistics.median(times), result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--queues", type=int, default=100)
    parser.add_argument("--wals", type=int, default=50)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args(argv)
    with scratch_zookeeper("walship-status-") as (root, client, _hosts):
        started = time.perf_counter()
        build(client, root / "hbase", args.queues, args.wals)
        print(f"built {args.queues} queues x {args.wals} WALs in {time.perf_counter() - started:.1f} s")
        layout = ZnodeLayout(PARENT)
        walstore = WalStore(str(root / "hbase"))

        def status() -> int:
            st = collect_status(client, layout, walstore)
            return sum(q.bytes_queued for p in st.peers for q in p.queues)

        status()  # warm: imports, caches
        t_status, queued = timed(status, args.runs)
        t_plain, queued_plain = timed(lambda: plain(client, walstore), args.runs)
        if queued != queued_plain:
            raise SystemExit(f"status and the plain read disagree: {queued} vs {queued_plain} bytes queued")
        server, port = serve(status_registry(lambda: collect_status(client, layout, walstore)), "127.0.0.1", 0)

        def scrape() -> int:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as resp:
                return len(resp.read())

        scrape()
        t_scrape, size = timed(scrape, args.runs)
        server.shutdown()
        server.server_close()
        wal_count = args.queues * args.wals
        print(f"status: {t_status * 1000:8.1f} ms for {args.queues} queues, {wal_count} WALs ({queued:,} bytes queued)")
        print(f"plain:  {t_plain * 1000:8.1f} ms (one read per znode and file)")
        print(f"ratio:  {t_plain / t_status:8.2f}x faster than plain")
        print(f"scrape: {t_scrape * 1000:8.1f} ms per /metrics scrape ({size:,} bytes)")
        print(f"target: status under 1 s: {'met' if t_status < 1.0 else 'NOT met'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
