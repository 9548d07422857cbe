"""End to end, after HBase's own replication tests: real ZooKeeper, miniclusters over TCP."""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import threading
import uuid
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest
from real_hbase import BACKENDS
from region_ops import wals_by_server
from replication_helpers import (
    SINK_PROTOCOLS,
    TABLE,
    Cluster,
    add_peer,
    contents,
    make_cluster,
    ship,
    tail_in_thread,
)
from waiting import wait_until

from walship.cli import main
from walship.errors import PeerNotFoundError
from walship.peer import PeerConfig
from walship.replicate import Shipper, WalStore
from walship.sinks.base import ApplyStats, FilteredEntry, SinkContext
from walship.sinks.registry import create_sink
from walship.wal import Cell, WalReader, parse_wal_name
from walship.zk import ReplicationPeers, ReplicationQueues, ZnodeLayout, zk_client
from walship_testing.minicluster import AdminClient
from walship_testing.minicluster.process import MiniClusterProcess

pytestmark = pytest.mark.integration


@pytest.fixture(params=SINK_PROTOCOLS)
def sink_protocol(request: pytest.FixtureRequest) -> str:
    """Every test here runs once per sink: one behaviour suite, two backends."""
    return str(request.param)


Factory = Callable[..., MiniClusterProcess]


def wal_entries(cluster: Cluster) -> list:  # type: ignore[type-arg]
    root = cluster.mc.data_dir
    files = [p for p in (root / "WALs").rglob("*") if p.is_file()] + list((root / "oldWALs").iterdir())
    out = []
    for path in sorted(files, key=lambda p: parse_wal_name(p.name)):
        with open(path, "rb") as f:
            out.extend(e for e in WalReader(f, str(path)).entries() if not e.is_meta)
    return out


@pytest.mark.parametrize("backend", BACKENDS)
def test_puts_and_deletes_of_every_kind_arrive(ab: tuple[Cluster, Cluster]) -> None:
    a, b = ab
    t = a.table()
    for ts in (100, 200, 300):
        t.put(b"row1", {b"r:a": b"a%d" % ts, b"r:b": b"b%d" % ts, b"l:x": b"local"}, timestamp=ts)
    t.put(b"row2", {b"r:a": b"keep", b"r:": b"empty qualifier"})
    t.delete(b"row1", columns=[b"r:a"], timestamp=200)  # DeleteColumn
    t.put(b"row3", {b"r:a": b"x", b"r:b": b"y"}, timestamp=50)
    t.delete(b"row3", columns=[b"r"], timestamp=60)  # DeleteFamily
    t.put(b"row4", {b"r:a": b"gone"})
    t.delete(b"row4")  # the whole row
    summary = ship(a)
    assert summary.status == "ok", summary.error
    assert contents(b) == contents(a, b"r")
    assert contents(b)[b"row1"][b"r:a"] == [(b"a300", 300)]
    assert b"row3" not in contents(b) and b"row4" not in contents(b)
    assert contents(b, b"l") == {}
    assert summary.totals()["entries_shipped"] == 9  # a WAL entry a put or delete above, each with cells of r
    # a second pass ships nothing new and changes nothing
    again = ship(a)
    assert again.totals()["entries_shipped"] == 0
    assert contents(b) == contents(a, b"r")


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_thousand_rows(ab: tuple[Cluster, Cluster]) -> None:
    a, b = ab
    with a.table().batch(batch_size=100) as batch:
        for i in range(1000):
            batch.put(b"row-%04d" % i, {b"r:q": b"v%d" % i, b"l:q": b"local"})
    summary = ship(a, max_batches=None)
    # HBase logs the puts of one mutateRows call as one entry; the minicluster one entry a put
    assert summary.totals()["cells_shipped"] == 1000
    assert len(contents(b)) == 1000
    assert contents(b) == contents(a, b"r")


def test_small_batches_commit_positions_as_they_go(ab: tuple[Cluster, Cluster], zk_hosts: str) -> None:
    a, b = ab
    with a.table().batch(batch_size=1) as batch:  # a call, so a WAL entry, a row
        for i in range(300):
            batch.put(b"row-%04d" % i, {b"r:q": b"v"})
    with zk_client(a.zk_hosts) as client:
        from walship.replicate import Shipper, WalStore

        shipper = Shipper(client, ZnodeLayout(a.parent), WalStore(str(a.mc.data_dir)), batch_entries=40)
        first = shipper.ship_peer("1", max_batches=2)
        assert first.totals()["batches"] == 2
        assert 0 < len(contents(b)) < 300
        rest = shipper.ship_peer("1")
    totals = [first.totals(), rest.totals()]
    assert sum(t["entries_shipped"] for t in totals) == 300  # each put once, none twice
    assert sum(t["entries_read"] - t["entries_filtered"] for t in totals) == 300  # (and the region's open marker)
    assert contents(b) == contents(a, b"r")


@pytest.mark.parametrize("backend", BACKENDS)
def test_disabled_peer_gets_nothing_until_enabled(ab: tuple[Cluster, Cluster]) -> None:
    a, b = ab
    with zk_client(a.zk_hosts) as client:
        ReplicationPeers(client, ZnodeLayout(a.parent)).disable("1")
    a.table().put(b"r1", {b"r:q": b"v1"})
    summary = ship(a)
    assert summary.status == "disabled"
    assert contents(b) == {}
    with zk_client(a.zk_hosts) as client:
        ReplicationPeers(client, ZnodeLayout(a.parent)).enable("1")
    assert ship(a).status == "ok"
    assert contents(b) == contents(a, b"r") != {}


def test_removing_and_readding_a_peer(ab: tuple[Cluster, Cluster], sink_protocol: str) -> None:
    a, b = ab
    a.table().put(b"before", {b"r:q": b"1"})
    ship(a)
    with zk_client(a.zk_hosts) as client:
        ReplicationPeers(client, ZnodeLayout(a.parent)).remove("1")
        assert ReplicationQueues(client, ZnodeLayout(a.parent)).list_queues("1") == []
    a.table().put(b"while-removed", {b"r:q": b"2"})
    with pytest.raises(PeerNotFoundError):  # a pass now finds no peer, so ships nothing
        ship(a)
    assert b"while-removed" not in contents(b)
    add_peer(a, b, protocol=sink_protocol)  # the cluster enqueues its current WALs for the new peer (a ZooKeeper watch)
    a.table().put(b"after", {b"r:q": b"3"})
    assert ship(a).status == "ok"
    got = contents(b)
    assert b"after" in got and b"before" in got
    # as on HBase, a re-added peer starts from the beginning of the current WAL
    assert b"while-removed" in got


def logged_cells(cluster: Cluster) -> list[tuple[tuple[uuid.UUID, ...], Cell]]:
    """Every cell of the cluster's WAL entries with the cluster ids of its entry."""
    return [(e.key.cluster_ids, c) for e in wal_entries(cluster) for c in e.cells]


def test_master_master_without_loops(minicluster_factory: Factory, zk_hosts: str, sink_protocol: str) -> None:
    a = make_cluster(minicluster_factory, zk_hosts, "A")
    b = make_cluster(minicluster_factory, zk_hosts, "B")
    add_peer(a, b, protocol=sink_protocol)
    add_peer(b, a, protocol=sink_protocol)
    for i in range(20):
        a.table().put(b"from-a-%02d" % i, {b"r:q": b"a"})
        b.table().put(b"from-b-%02d" % i, {b"r:q": b"b"})
    for _ in range(3):  # ship back and forth until nothing moves
        ship(a)
        ship(b)
    assert contents(a, b"r") == contents(b, b"r")
    assert len(contents(a, b"r")) == 40
    # each edit applied once per cluster: A's WAL holds its own 20 edits and B's 20, no echo
    # (a sink call of several rows is one WAL entry at the peer, as HBase logs a batch: cells count)
    a_ids = {e.key.cluster_ids for e in wal_entries(a)}
    b_id = {e.key.cluster_ids for e in wal_entries(b) if e.key.cluster_ids}
    assert len(logged_cells(a)) == 40 and len(logged_cells(b)) == 40
    assert all(len(ids) <= 1 for ids in a_ids | b_id)


def test_ring_of_three(minicluster_factory: Factory, zk_hosts: str, sink_protocol: str) -> None:
    a = make_cluster(minicluster_factory, zk_hosts, "A")
    b = make_cluster(minicluster_factory, zk_hosts, "B")
    c = make_cluster(minicluster_factory, zk_hosts, "C")
    add_peer(a, b, protocol=sink_protocol)
    add_peer(b, c, protocol=sink_protocol)
    add_peer(c, a, protocol=sink_protocol)
    for i in range(10):
        a.table().put(b"a-%02d" % i, {b"r:q": b"a"})
        c.table().put(b"c-%02d" % i, {b"r:q": b"c"})
    for _ in range(4):
        for src in (a, b, c):
            ship(src)
    assert contents(a, b"r") == contents(b, b"r") == contents(c, b"r")
    assert len(contents(a, b"r")) == 20
    for cl in (a, b, c):  # every edit once per cluster, never back to where it came from
        assert len(logged_cells(cl)) == 20
    ida, idb, idc = (uuid.UUID(x.mc.cluster_id) for x in (a, b, c))
    # C's edits reach A straight from C; A's own edits come back from C never (they carry A's id)
    assert sorted(str(ids) for ids, _ in logged_cells(a)) == sorted([str(())] * 10 + [str((idc,))] * 10)
    # A's edits reach C through B, carrying both ids; C's own are local
    assert sorted(str(ids) for ids, _ in logged_cells(c)) == sorted([str(())] * 10 + [str((ida, idb))] * 10)


def latest(cluster: Cluster) -> dict[bytes, dict[bytes, tuple[bytes, int]]]:
    conn = cluster.conn()
    rows = dict(conn.table(b"t").scan(columns=[b"r"], include_timestamp=True, batch_size=2000))
    conn.close()
    return rows


def test_ship_killed_mid_batch_then_rerun(ab: tuple[Cluster, Cluster], tmp_path: Path) -> None:
    a, b = ab
    total = 20_000
    with a.table().batch(batch_size=1000) as batch:
        for i in range(total):
            batch.put(b"row-%05d" % i, {b"r:q": b"v%d" % i})
    env = {
        **os.environ,
        "WALSHIP_ZK": a.zk_hosts,
        "WALSHIP_ZNODE_PARENT": a.parent,
        "WALSHIP_WAL_ROOT": str(a.mc.data_dir),
    }
    cmd = [sys.executable, "-m", "walship.cli", "ship", "--peer", "1", "--batch-entries", "50"]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    tb = b.table()
    try:
        wait_until(lambda: tb.row(b"row-00000"), timeout=120, interval=0.01, what="the first batch applied on B")
    finally:
        proc.send_signal(signal.SIGKILL)  # a batch or more is applied, most are not
        proc.wait()
    partial = len(latest(b))
    assert 0 < partial < total
    # the killed shipper's lock lives until its ZooKeeper session expires: wait for it
    done = subprocess.run(
        [*cmd, "--lock-wait", "60"], env=env, capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["status"] == "ok" and "busy" not in summary["queue_states"], (done.stdout, done.stderr)
    assert latest(b) == latest(a)
    assert len(latest(b)) == total


@pytest.mark.parametrize("queue_claims", ["master", "walship"])
def test_failover_claims_and_drains_a_dead_servers_queue(ab: tuple[Cluster, Cluster], queue_claims: str) -> None:
    """A's master claims the aborted server's queue as HBase 2.5+'s does (walship then claims
    nothing), or walship claims it; either way walship drains the recovered queue and deletes it."""
    a, b = ab
    for i in range(50):
        a.table().put(b"r%02d" % i, {b"r:q": b"%d" % i})
    admin = AdminClient(a.mc.admin)
    owner = next(rs["name"] for rs in admin.info()["regionservers"] if rs["regions"])
    admin.abort_rs(owner)
    for i in range(50, 60):
        a.table().put(b"r%02d" % i, {b"r:q": b"%d" % i})
    summary = ship(a)
    assert summary.status == "ok", summary.error
    by_walship = [(c["dead_server"], c["queue_id"], c["new_queue_id"]) for c in summary.claimed]
    assert by_walship == ([(owner, "1", f"1-{owner}")] if queue_claims == "walship" else [])
    # the drained recovered queue deleted
    assert [q.queue_id for q in summary.queues if q.queue_removed] == [f"1-{owner}"]
    assert contents(b) == contents(a, b"r")
    assert len(contents(b)) == 60
    with zk_client(a.zk_hosts) as client:
        queues = ReplicationQueues(client, ZnodeLayout(a.parent)).list_queues()
    assert all(not q.recovered for q in queues) and owner not in {q.server for q in queues}


def test_a_batch_applied_as_the_master_claims_its_queue_is_not_shipped_again(
    minicluster_factory: Factory, zk_hosts: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A tailer ships an aborted server's queue where it is (8 MB at 2 MB/s) when A's master
    claims it, a second after the abort, as HBase 2.5+'s does, taking no walship lock: the
    batch applied as the queue moved has its position carried to the recovered queue, so B
    applies every row once, nothing lost and nothing twice."""
    a = make_cluster(minicluster_factory, zk_hosts, "A", regionservers=2, claim_delay=1.0)
    b = make_cluster(minicluster_factory, zk_hosts, "B")
    add_peer(a, b)
    assert main([*a.cli_flags(), "peer", "set", "1", "--bandwidth", "2000000"]) == 0
    admin = AdminClient(a.mc.admin)
    owner = next(rs["name"] for rs in admin.info()["regionservers"] if rs["regions"])
    value = bytes(range(256)) * 4096  # 1 MiB
    stop = threading.Event()
    caplog.set_level(logging.INFO, logger="walship.zk.claims")
    thread, out = tail_in_thread(a, duration=120, idle_sleep=0.05, stop=stop)
    try:
        for i in range(8):
            a.table().put(b"big%d" % i, {b"r:q": value})
        admin.abort_rs(owner)
        wait_until(lambda: len(contents(b)) == 8, timeout=60, what="every row on B")
        wait_until(lambda: not any(owner in key for key in queue_keys(a)), timeout=60, what=f"no queue of {owner}")
    finally:
        stop.set()
        thread.join(60)
    (summary,) = out
    assert summary.status == "ok" and summary.claimed == [], summary
    applied = Counter(
        c.row for entries in wals_by_server(b.mc.wal_root).values() for e in entries if not e.is_meta for c in e.cells
    )
    assert applied == {b"big%d" % i: 1 for i in range(8)}
    assert "carried to" in caplog.text, caplog.text
    assert contents(b) == contents(a, b"r")


def queue_keys(a: Cluster) -> list[str]:
    with zk_client(a.zk_hosts) as client:
        return [f"{q.server}/{q.queue_id}" for q in ReplicationQueues(client, ZnodeLayout(a.parent)).list_queues()]


def test_a_pass_ships_the_queues_of_different_servers_at_once(minicluster_factory: Factory, zk_hosts: str) -> None:
    """One pass over queues of three servers ships them at once, each in a thread with a sink
    of its own, as a region server ships each queue in a thread: each queue's first batch
    waits at a barrier for the other two's (shipped one after another, the first would wait
    alone and fail), and every row arrives."""
    a = make_cluster(minicluster_factory, zk_hosts, "A", regionservers=3)
    b = make_cluster(minicluster_factory, zk_hosts, "B")
    add_peer(a, b)
    tables, conn, bconn = [TABLE.decode(), "u1", "u2"], a.conn(), b.conn()
    for name in tables[1:]:  # another table: another region, on another server
        conn.create_table(name, {"r": {}})
        AdminClient(a.mc.admin).set_scope(name, "r", 1)
        bconn.create_table(name, {"r": {}})
    for name in tables:
        with conn.table(name).batch() as batch:
            for i in range(50):
                batch.put(b"%s-%02d" % (name.encode(), i), {b"r:q": b"v"})
    meet = threading.Barrier(3, timeout=60)

    class Meeting:
        """The peer's own sink; its first batch waits for the other queues' first."""

        def __init__(self, peer: PeerConfig) -> None:
            self.sink, self.met = create_sink(peer, SinkContext(a.mc.wal_root)), False

        def apply(self, entries: Sequence[FilteredEntry], wal: str) -> ApplyStats:
            if entries and not self.met:
                meet.wait()
                self.met = True
            return self.sink.apply(entries, wal)

        def close(self) -> None:
            self.sink.close()

    with zk_client(a.zk_hosts) as client:
        queues = ReplicationQueues(client, ZnodeLayout(a.parent)).list_queues("1")
        assert len({q.server for q in queues if q.wals}) == 3  # a table a server
        with Shipper(client, ZnodeLayout(a.parent), WalStore(a.mc.wal_root), sink_factory=Meeting) as shipper:
            summary = shipper.ship_peer("1")
    assert summary.status == "ok", summary.to_json()
    assert summary.totals()["cells_shipped"] == 150
    for name in tables:
        assert dict(bconn.table(name).scan()) == dict(conn.table(name).scan(columns=[b"r"]))


def test_a_halted_pass_stops_each_queue_after_its_batch_under_way_and_loses_nothing(
    ab: tuple[Cluster, Cluster],
) -> None:
    """What stops the other groups of a pass when one fails (or the pass is interrupted): each
    queue ships the batch under way, commits its position and stops; the next pass ships the
    rest, nothing lost, nothing twice."""
    a, b = ab
    with a.table().batch(batch_size=1) as batch:  # a call, so a WAL entry, a row
        for i in range(100):
            batch.put(b"h-%03d" % i, {b"r:q": b"v"})
    halt = threading.Event()
    applied: list[int] = []

    class Halting:
        """The peer's own sink; after its first batch the pass is told to halt."""

        def __init__(self, peer: PeerConfig) -> None:
            self.sink = create_sink(peer, SinkContext(a.mc.wal_root))

        def apply(self, entries: Sequence[FilteredEntry], wal: str) -> ApplyStats:
            stats = self.sink.apply(entries, wal)
            applied.append(len(entries))
            halt.set()
            return stats

        def close(self) -> None:
            self.sink.close()

    with zk_client(a.zk_hosts) as client:
        store = WalStore(a.mc.wal_root)
        with Shipper(client, ZnodeLayout(a.parent), store, batch_entries=10, sink_factory=Halting) as shipper:
            shipper.halt = halt
            first = shipper.ship_peer("1")
        assert first.status == "ok" and first.totals()["batches"] == len(applied) <= 2  # a batch under way each
        assert 0 < len(contents(b)) < 100
        with Shipper(client, ZnodeLayout(a.parent), store, batch_entries=10) as shipper:
            rest = shipper.ship_peer("1")
    assert first.totals()["entries_shipped"] + rest.totals()["entries_shipped"] == 100
    assert contents(b) == contents(a, b"r")
