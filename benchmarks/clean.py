"""The log cleaner over many archived WALs, beside a plain per-file, per-znode cleaner, in one run.

Builds, on a real ZooKeeper and a local WAL root, ``--wals`` archived WALs in ``oldWALs/``
(small real WAL files, named as HBase names them, spread over ``--servers`` region servers,
a fifth of them dead), queues of ``--peers`` peers on every live server (the last peer
disabled) plus the dead servers' queues claimed into live ones as recovered queues, each
queue referencing the newest WALs of its server (the further behind its peer, the more), a
few young WALs (inside the TTL) and a few files that are not WALs. Then times, on a fresh
copy of that tree each run:

* ``clean``: :func:`walship.replicate.cleaner.clean` (one consistent snapshot of every queue,
  one listing of ``oldWALs/``, a set lookup per file);
* ``plain``: the same decisions made one file at a time: a stat per file, then an
  ``exists`` per queue for its WAL znode (what HBase's ReplicationLogCleaner did before it
  took a snapshot), then a delete per file: the baseline, timed over ``--plain-files`` files
  drawn evenly from the listing and scaled to all of them (a full run takes minutes).

Both must decide the same for every file they both looked at. Target: the cleaner over
10,000 archived WALs in under 30 s.

    .venv/bin/python benchmarks/clean.py [--wals 10000] [--servers 25] [--peers 4] [--runs 3]
"""

from __future__ import annotations

import argparse
import os
import posixpath
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from benchtools import scratch_zookeeper
from kazoo.client import KazooClient

from walship.peer import PeerConfig
from walship.replicate import WalStore
from walship.replicate.cleaner import clean
from walship.servername import ServerName
from walship.wal import Cell, CellType, WalKey, WalWriter, build_wal_name, is_wal_name
from walship.zk import ReplicationPeers, ReplicationQueues, ZnodeLayout
from walship.zk.encoding import encode_position

PARENT = "/hbase"
T0 = 1_790_000_000_000
TTL = 600.0


def wal_bytes(ts: int) -> bytes:
    """A small real WAL: its header and one entry, no trailer."""
    path = Path(tempfile.mkstemp(prefix="walship-clean-wal-")[1])
    try:
        with open(path, "wb") as f:
            writer = WalWriter(f)
            cells = [Cell(b"row", b"f", b"q", ts, CellType.Put, b"v" * 100)]
            writer.append(WalKey(b"region", b"t", 1, ts, scopes={b"f": 1}), cells)
            writer.close(trailer=False)
        return path.read_bytes()
    finally:
        path.unlink()


def plan(wals: int, servers: int) -> tuple[list[ServerName], list[ServerName], dict[str, list[str]]]:
    """(live servers, dead servers, WAL names of each server, oldest first)."""
    names = [ServerName(f"rs{s:03d}.bench", 16020, T0 + s) for s in range(servers)]
    dead = names[: max(1, servers // 5)]
    live = names[len(dead) :]
    per = {
        str(s): [build_wal_name(s, T0 + i * servers + n) for i in range(wals // servers)] for n, s in enumerate(names)
    }
    return live, dead, per


def build_queues(
    client: KazooClient, live: list[ServerName], dead: list[ServerName], per: dict[str, list[str]], peers: int
) -> int:
    """Every live server's queue of every peer, and the dead servers' queues claimed into live
    ones; the queue of peer ``p`` references its server's newest ``5 * 2**(p - 1)`` WALs."""
    layout = ZnodeLayout(PARENT)
    rp = ReplicationPeers(client, layout)
    for p in range(1, peers + 1):
        rp.add(PeerConfig(str(p), f"peer{p}-zk:2181:/hbase", enabled=p < peers))
    client.ensure_path(layout.queues)
    count = 0
    for i, server in enumerate(live):
        owned = [(str(server), str(p), str(server)) for p in range(1, peers + 1)]
        claimed = [(str(server), f"{p}-{d}", str(d)) for d in dead[i :: len(live)] for p in range(1, peers + 1)]
        tx = client.transaction()
        tx.create(layout.replicator(str(server)))
        for owner, qid, wal_server in owned + claimed:
            tx.create(layout.queue(owner, qid))
            keep = 5 * 2 ** (int(qid.split("-")[0]) - 1)
            for name in per[wal_server][-keep:]:
                tx.create(layout.wal(owner, qid, name), encode_position(0))
            count += 1
        failed = [r for r in tx.commit() if isinstance(r, Exception)]
        if failed:
            raise RuntimeError(f"building queues of {server}: {failed[0]!r}")
    return count


def build_files(root: Path, per: dict[str, list[str]], referenced: frozenset[str], young: int) -> None:
    """Every WAL in ``oldWALs/``, old enough for the TTL but the ``young`` newest of those no
    queue references; and three files that are not WALs."""
    archive = root / "oldWALs"
    archive.mkdir(parents=True)
    now = time.time()
    body = wal_bytes(T0)
    names = sorted((n for ns in per.values() for n in ns), key=lambda n: int(n.rsplit(".", 1)[1]))
    young_names = set([n for n in names if n not in referenced][-young:] if young else [])
    for i, name in enumerate(names):
        path = archive / name
        path.write_bytes(body)
        age = 10.0 if name in young_names else 3600.0 + len(names) - i
        os.utime(path, (now - age, now - age))
    for other in ("README", "notes.txt", ".hidden-tmp"):
        (archive / other).write_bytes(b"not a WAL")
        os.utime(archive / other, (now - 7200, now - 7200))


def plain(client: KazooClient, walstore: WalStore, paths: list[str]) -> set[str]:
    """The baseline: per file a stat, an ``exists`` per queue for its WAL znode, a delete."""
    layout = ZnodeLayout(PARENT)
    queues = ReplicationQueues(client, layout)
    qpaths = [layout.queue(s, q) for s in queues.replicators() for q in queues.queue_ids(s)]
    deleted = set()
    for path in paths:
        name = posixpath.basename(path)
        if not is_wal_name(name):
            continue
        info = walstore.fs.info(path)
        if any(client.exists(f"{q}/{name}") is not None for q in qpaths):
            continue
        if time.time() - float(info["mtime"]) <= TTL:
            continue
        walstore.fs.rm(path)
        deleted.add(name)
    return deleted


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--wals", type=int, default=10_000, help="archived WALs")
    parser.add_argument("--servers", type=int, default=25, help="region servers (a fifth dead)")
    parser.add_argument("--peers", type=int, default=4, help="peers (the last one disabled)")
    parser.add_argument("--young", type=int, default=500, help="WALs inside the TTL")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--plain-files", type=int, default=500, help="files the plain cleaner is timed over")
    args = parser.parse_args(argv)
    with scratch_zookeeper("walship-clean-") as (base, client, _hosts):
        live, dead, per = plan(args.wals, args.servers)
        queue_count = build_queues(client, live, dead, per, args.peers)
        layout = ZnodeLayout(PARENT)
        referenced = ReplicationQueues(client, layout).all_wals()
        pristine = base / "pristine"
        started = time.perf_counter()
        build_files(pristine, per, referenced, args.young)
        total = sum(len(v) for v in per.values())
        print(
            f"built {total:,} archived WALs ({len(referenced):,} referenced by {queue_count} queues of "
            f"{len(live)} live and {len(dead)} dead servers, {args.young} young) in "
            f"{time.perf_counter() - started:.1f} s"
        )

        def fresh(name: str) -> WalStore:
            root = base / name
            if root.exists():
                shutil.rmtree(root)
            shutil.copytree(pristine, root, copy_function=_copy_keeping_times)
            return WalStore(str(root))

        times: list[float] = []
        phases: dict[str, list[float]] = {"snapshot": [], "listing": []}
        deleted: set[str] = set()
        for _ in range(args.runs):
            walstore = fresh("run")
            t = time.perf_counter()
            ReplicationQueues(client, layout).all_wals()
            phases["snapshot"].append(time.perf_counter() - t)
            t = time.perf_counter()
            walstore.list_archive()
            phases["listing"].append(time.perf_counter() - t)
            t = time.perf_counter()
            report = clean(client, layout, walstore, ttl=TTL)
            times.append(time.perf_counter() - t)
            deleted = set(report.deleted_files)
            left = {p.name for p in (base / "run" / "oldWALs").iterdir()}
            if left & deleted or referenced - left:
                raise SystemExit("FAIL: the cleaner deleted a referenced WAL, or left a deleted one")
        t_clean = statistics.median(times)

        walstore = fresh("plain")
        listing = sorted(p for p, _, _ in walstore.list_archive())
        step = max(1, len(listing) // args.plain_files)
        sample = listing[::step][: args.plain_files]
        t = time.perf_counter()
        plain_deleted = plain(client, walstore, sample)
        t_sample = time.perf_counter() - t
        sampled = {posixpath.basename(p) for p in sample}
        if plain_deleted != deleted & sampled:
            raise SystemExit(
                f"FAIL: the cleaner and the plain cleaner disagree on {len(plain_deleted ^ (deleted & sampled))} files"
            )
        t_plain = t_sample * len(listing) / len(sample)
        print(
            f"clean:  {t_clean:8.2f} s for {len(listing):,} files: {report.deleted.files:,} deleted, "
            f"{report.kept_referenced.files:,} referenced, {report.kept_young.files:,} young, "
            f"{len(report.not_wal)} not WALs (median of {args.runs})"
        )
        print(
            f"        of which a snapshot of the queues {statistics.median(phases['snapshot']) * 1000:.0f} ms, "
            f"a listing of oldWALs/ {statistics.median(phases['listing']) * 1000:.0f} ms"
        )
        print(
            f"plain:  {t_plain:8.2f} s (one stat, {queue_count} exists and a delete per file: "
            f"{t_sample:.2f} s for {len(sample)} files, scaled to {len(listing):,})"
        )
        print(f"ratio:  {t_plain / t_clean:8.1f}x faster than plain")
        print(f"target: clean over {total:,} archived WALs under 30 s: {'met' if t_clean < 30 else 'NOT met'}")
    return 0


def _copy_keeping_times(src: str, dst: str) -> str:
    return str(shutil.copy2(src, dst))


if __name__ == "__main__":
    raise SystemExit(main())
