"""multiwal (``hbase.wal.provider=multiwal``): a region server writes several WAL groups at
once and one queue per peer lists the WALs of every group. Each group is shipped and finished
on its own: a quiet group's current WAL stays queued however long another group's newer WAL
has had entries, and no group waits for another. On real HBase 2.6 with multiwal on and on
the minicluster started with ``--wal-groups 2``."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pytest
from real_hbase import BACKENDS, cluster, create_table, managed_peer, unique, wait_queues_hold_current_wals
from replication_helpers import Cluster, add_peer, contents, make_cluster, ship
from waiting import wait_until

from walship.replicate import WalStore
from walship.wal import WalReader, parse_wal_name
from walship.zk import ReplicationPeers, ReplicationQueues, ZnodeLayout, zk_client
from walship_testing.harness import HBaseProcess
from walship_testing.minicluster import AdminClient
from walship_testing.minicluster.process import MiniClusterProcess

pytestmark = pytest.mark.integration

GRACE_KEY = "walship.wal.close-grace"


@dataclass
class Source:
    """A multiwal source with two replicated tables on one region server, and a peer of both
    to B, on either backend."""

    a: Cluster  # table t1
    a2: Cluster  # table t2, same cluster
    b: Cluster
    b2: Cluster
    peer: str
    server: str
    roll: Callable[[], None]
    abort: Callable[[], None]

    def queue_wals(self) -> list[str]:
        """The WALs of the server's own queue for the peer, in queue order."""
        with zk_client(self.a.zk_hosts) as client:
            queues = ReplicationQueues(client, ZnodeLayout(self.a.parent)).list_queues(self.peer)
        return [w.name for q in queues if q.server == self.server and not q.recovered for w in q.wals]

    def set_grace(self, seconds: float) -> None:
        with zk_client(self.a.zk_hosts) as client:
            peers = ReplicationPeers(client, ZnodeLayout(self.a.parent))
            peers.modify(
                self.peer,
                lambda p: dataclasses.replace(p, configuration={**p.configuration, GRACE_KEY: str(seconds)}),
            )


def _tables_of(source: Cluster, wal: str) -> set[bytes]:
    store = WalStore(source.mc.wal_root)
    loc = store.locate(wal)
    with store.open(loc) as f:
        return {e.key.table for e in WalReader(f, loc.path).entries() if not e.is_meta}


@pytest.fixture(params=BACKENDS)
def source(request: pytest.FixtureRequest) -> Iterator[Source]:
    grace = {GRACE_KEY: "3600"}
    if request.param == "mini":
        factory: Callable[..., MiniClusterProcess] = request.getfixturevalue("minicluster_factory")
        zk_hosts = request.getfixturevalue("zk_hosts")
        a = make_cluster(factory, zk_hosts, "A", regionservers=2, wal_groups=2)
        b = make_cluster(factory, zk_hosts, "B", regionservers=1)
        for c in (a, b):
            conn = c.conn()
            # regions open on the least loaded server: t there already, a pad table on the
            # other, so t2 joins t
            conn.create_table(b"pad", {"r": {}})
            conn.create_table(b"t2", {"r": {"max_versions": 5}})
            AdminClient(c.mc.admin).set_scope("t2", "r", 1)
            conn.close()
        admin = AdminClient(a.mc.admin)
        owners = {e: rs["name"] for rs in admin.info()["regionservers"] for e in rs["regions"]}
        region = {t["name"]: t["regions"][0] for t in admin.info()["tables"]}
        server = owners[region["t"]]
        assert owners[region["t2"]] == server, owners  # both tables on one server
        add_peer(a, b, **grace)
        yield Source(
            a, dataclasses.replace(a, table_name=b"t2"), b, dataclasses.replace(b, table_name=b"t2"), "1", server,
            lambda: admin.roll(server) and None, lambda: admin.abort_rs(server) and None,
        )  # fmt: skip
        return
    hb: HBaseProcess = request.getfixturevalue("real_multiwal")
    _, b_hb = request.getfixturevalue("real_hbase")
    t1, t2 = unique("mw"), unique("mw")
    for name in (t1, t2):
        create_table(hb, name)
        create_table(b_hb, name)
    # both tables on the server without hbase:meta (an abort of it then moves only them)
    meta = {r["server"] for r in hb.call("regions", table="hbase:meta")}
    server = next(s for s in sorted(hb.servers()) if s not in meta)
    for name in (t1, t2):
        (region,) = hb.call("regions", table=name)
        if region["server"] != server:
            hb.call("move_region", region=region["region"], server=server)
            wait_until(lambda n=name: hb.call("regions", table=n)[0]["server"] == server, what=f"{name} on {server}")
    a = cluster(hb, t1)
    with managed_peer(a, cluster(b_hb, t1), unique("mw"), tables=[t1, t2], **grace) as peer:
        wait_queues_hold_current_wals(a, peer)
        yield Source(
            a, cluster(hb, t2), cluster(b_hb, t1), cluster(b_hb, t2), peer, server,
            lambda: hb.call("roll", server=server) and None, lambda: hb.call("abort_rs", server=server) and None,
        )  # fmt: skip


def _write(c: Cluster, rows: range, value: bytes) -> None:
    conn = c.conn()
    table = conn.table(c.table_name)
    for i in rows:
        table.put(b"row%04d" % i, {b"r:q": value + b"%d" % i})
    conn.close()


def _rows(c: Cluster) -> set[bytes]:
    return set(contents(c))


def test_a_quiet_wal_group_stays_queued_and_no_group_waits_for_another(source: Source) -> None:
    before = set(source.queue_wals())
    source.roll()
    # the roll gave each of the server's two WAL groups a new current WAL
    wait_until(lambda: len(set(source.queue_wals()) - before) >= 2, what="a new WAL of each group queued")
    _write(source.a, range(50), b"a")
    _write(source.a2, range(50), b"b")
    fresh = [w for w in source.queue_wals() if w not in before]
    groups = {parse_wal_name(w).group: w for w in fresh}  # each group's current WAL
    assert len(groups) == 2 and all(".regiongroup-" in g for g in groups), fresh
    by_table = {t: w for w in groups.values() for t in _tables_of(source.a, w)}
    t1, t2 = source.a.table_name, source.a2.table_name
    assert {t1, t2} <= set(by_table) and by_table[t1] != by_table[t2], by_table  # one group each
    order = source.queue_wals()
    quiet, busy = sorted((by_table[t1], by_table[t2]), key=order.index)
    quiet_side = source.a if by_table[t1] == quiet else source.a2
    quiet_peer = source.b if quiet_side is source.a else source.b2

    # both groups' WALs are current (open): the earlier one must not hold back the later one
    summary = ship(source.a, source.peer)
    assert summary.status == "ok", summary.error
    assert _rows(source.b) == {b"row%04d" % i for i in range(50)}
    assert _rows(source.b2) == {b"row%04d" % i for i in range(50)}
    assert {quiet, busy} <= set(source.queue_wals())

    # no grace at all: the quiet group's WAL is still being written, whatever the busy group's
    # newer WAL holds, so it stays queued ...
    source.set_grace(0)
    _write(source.a if quiet_side is not source.a else source.a2, range(50, 60), b"n")
    assert ship(source.a, source.peer).status == "ok"
    assert quiet in source.queue_wals(), (quiet, source.queue_wals())
    # ... and what its group appends later is shipped
    _write(quiet_side, range(100, 120), b"q")
    summary = ship(source.a, source.peer)
    assert summary.status == "ok", summary.error
    assert {b"row%04d" % i for i in range(100, 120)} <= _rows(quiet_peer)
    assert contents(source.b) == contents(source.a, b"r") and contents(source.b2) == contents(source.a2, b"r")


def test_a_dead_multiwal_servers_queue_is_shipped_whole_and_removed(source: Source) -> None:
    _write(source.a, range(200), b"a")
    _write(source.a2, range(200), b"b")
    queued = source.queue_wals()
    assert len({parse_wal_name(w).group for w in queued}) == 2, queued
    source.abort()

    def drained() -> bool:
        summary = ship(source.a, source.peer)
        assert summary.status == "ok", summary.error
        with zk_client(source.a.zk_hosts) as client:
            left = [
                q for q in ReplicationQueues(client, ZnodeLayout(source.a.parent)).list_queues(source.peer)
                if source.server in (q.server, *q.queue_id.dead_servers)
            ]  # fmt: skip
        return not left

    # every group's WALs of the dead server shipped, then its (recovered) queue removed
    wait_until(drained, timeout=240, interval=1.0, what=f"no queue of {source.server} left for peer {source.peer}")
    assert contents(source.b) == contents(source.a, b"r") and len(contents(source.b)) == 200
    assert contents(source.b2) == contents(source.a2, b"r") and len(contents(source.b2)) == 200
    if isinstance(source.a.mc, HBaseProcess):
        source.a.mc.call("start_rs")  # back to two region servers
