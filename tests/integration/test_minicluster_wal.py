"""The minicluster's WALs, queues, restarts, crashes and aborted region servers."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import happybase
import pytest
from kazoo.client import KazooClient
from waiting import wait_until

from walship.cli import main
from walship.peer import PeerConfig
from walship.wal import CellType, WalReader, parse_wal_name
from walship.zk import ReplicationPeers, ReplicationQueues, ZnodeLayout, live_servers, read_cluster_id
from walship.zk.cluster import server_version
from walship_testing.minicluster import AdminClient, encode_cluster_ids
from walship_testing.minicluster.process import MiniClusterProcess

pytestmark = pytest.mark.integration

Hbase = __import__("Hbase_thrift")


def all_entries(data_dir: Path) -> list:  # type: ignore[type-arg]
    files = [p for p in (data_dir / "WALs").rglob("*") if p.is_file()] + list((data_dir / "oldWALs").iterdir())
    out = []
    for path in sorted(files, key=lambda p: parse_wal_name(p.name)):
        with open(path, "rb") as f:
            out.extend(WalReader(f, str(path)).entries())
    return out


def connect(mc: MiniClusterProcess) -> happybase.Connection:
    return happybase.Connection(*mc.thrift)


def test_wal_entries_carry_scopes_cluster_ids_types_and_timestamps(
    minicluster: MiniClusterProcess, zk: KazooClient
) -> None:
    c = connect(minicluster)
    c.create_table("demo", {"r": {}, "l": {}})
    admin = AdminClient(minicluster.admin)
    admin.set_scope("demo", "r", 1)
    t = c.table("demo")
    t.put(b"row1", {b"r:a": b"1", b"l:b": b"2"}, timestamp=1000)
    t.delete(b"row1", columns=[b"r:a"], timestamp=1001)
    t.delete(b"row2", columns=[b"l"], timestamp=1002)
    origin = [uuid.uuid4(), uuid.uuid4()]
    m = Hbase.Mutation(column=b"r:x", value=b"replicated", isDelete=False)
    c.client.mutateRowTs(b"demo", b"row3", [m], 1003, {b"_cs.id": encode_cluster_ids(origin)})
    entries = [e for e in all_entries(minicluster.data_dir) if not e.is_meta]
    assert [(c.row, c.family, c.qualifier, c.timestamp, c.type) for e in entries for c in e.cells] == [
        (b"row1", b"r", b"a", 1000, CellType.Put),
        (b"row1", b"l", b"b", 1000, CellType.Put),
        (b"row1", b"r", b"a", 1001, CellType.DeleteColumn),
        (b"row2", b"l", b"", 1002, CellType.DeleteFamily),
        (b"row3", b"r", b"x", 1003, CellType.Put),
    ]
    assert all(dict(e.key.scopes) == {b"r": 1} for e in entries)
    assert [e.key.cluster_ids for e in entries] == [(), (), (), tuple(origin)]
    assert {e.key.table for e in entries} == {b"demo"}
    seqs = [e.key.sequence_id for e in entries]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
    assert len({e.key.encoded_region_name for e in entries}) == 1
    metas = [e for e in all_entries(minicluster.data_dir) if e.is_meta]
    assert metas and metas[0].cells[0].qualifier == b"HBASE::REGION_EVENT::REGION_OPEN"
    assert read_cluster_id(zk, ZnodeLayout("/hbase-a")) == uuid.UUID(minicluster.cluster_id)
    c.close()


def test_rolls_add_wals_to_every_peer_queue_first(minicluster: MiniClusterProcess, zk: KazooClient) -> None:
    layout = ZnodeLayout("/hbase-a")
    peers = ReplicationPeers(zk, layout)
    peers.add(PeerConfig("1", "127.0.0.1:2181:/hbase-b"))
    peers.add(PeerConfig("2", "127.0.0.1:2181:/hbase-c"))
    admin = AdminClient(minicluster.admin)
    info = admin.info()
    server = info["regionservers"][0]["name"]
    before = info["regionservers"][0]["wal"]
    rolled = admin.roll(server)["rolled"]
    assert rolled == [before]
    info = admin.info()
    current = info["regionservers"][0]["wal"]
    assert current != before
    assert before in info["old_wals"] and current in info["wals"][server]
    queues = ReplicationQueues(zk, layout)
    for peer in ("1", "2"):
        assert current in [w.name for w in queues.wals(server, peer)]
    # The other servers enqueue their WALs for a new peer on their own, a moment later, as
    # HBase's do (each creates the queue's znode, then the WAL's): wait for every live
    # server's queue of both peers to hold that server's current WAL.
    currents = {rs["name"]: rs["wal"] for rs in info["regionservers"] if rs["alive"]}

    def every_queue_holds_current() -> bool:
        held = {(q.server, q.queue_id.peer_id): [w.name for w in q.wals] for q in queues.list_queues()}
        return all(currents[s] in held.get((s, p), []) for s in currents for p in ("1", "2"))

    wait_until(every_queue_holds_current, what="every live server's queues of peers 1 and 2 to hold its current WAL")
    with open(minicluster.data_dir / "oldWALs" / before, "rb") as f:
        reader = WalReader(f, before)
        list(reader.entries())
        assert reader.has_trailer


def test_roll_size_rolls_by_itself(minicluster_factory: object) -> None:
    mc = minicluster_factory("S", wal_roll_size=64 * 1024, regionservers=1)  # type: ignore[operator]
    c = connect(mc)
    c.create_table("t", {"f": {}})
    with c.table("t").batch(batch_size=200) as b:
        for i in range(3000):
            b.put(b"r%05d" % i, {b"f:q": b"x" * 100})
    info = AdminClient(mc.admin).info()
    assert len(info["old_wals"]) >= 3
    entries = all_entries(mc.data_dir)
    assert sum(len(e.cells) for e in entries if not e.is_meta) == 3000
    c.close()


def test_restart_after_sigkill_recovers_every_acknowledged_write(minicluster_factory: object, zk: KazooClient) -> None:
    mc = minicluster_factory("K", regionservers=2)  # type: ignore[operator]
    c = connect(mc)
    c.create_table("t", {"f": {"max_versions": 2}})
    t = c.table("t")
    with t.batch(batch_size=100) as b:
        for i in range(500):
            b.put(b"r%04d" % i, {b"f:q": b"v%d" % i})
    t.delete(b"r0007")
    t.put(b"r0008", {b"f:q": b"second"})
    c.close()
    old_servers = [rs["name"] for rs in AdminClient(mc.admin).info()["regionservers"]]
    mc.kill()  # SIGKILL: no clean shutdown, WALs without trailer
    mc.start()
    c = connect(mc)
    t = c.table("t")
    rows = dict(t.scan())
    assert len(rows) == 499 and b"r0007" not in rows
    assert rows[b"r0008"] == {b"f:q": b"second"}
    assert t.cells(b"r0008", b"f:q", versions=5) == [b"second", b"v8"]
    info = AdminClient(mc.admin).info()
    assert not set(old_servers) & {rs["name"] for rs in info["regionservers"]}
    assert len(info["old_wals"]) >= 2  # the crashed servers' WALs, replayed and archived
    # the killed servers' ZooKeeper sessions expire after the session timeout, as on HBase
    expected = sorted(rs["name"] for rs in info["regionservers"])
    wait_until(
        lambda: live_servers(zk, ZnodeLayout("/hbase-k")) == expected,
        what="the killed servers' znodes to expire",
    )
    c.close()


def test_sigterm_closes_wals_with_trailers(minicluster_factory: object) -> None:
    mc = minicluster_factory("T", regionservers=2)  # type: ignore[operator]
    c = connect(mc)
    c.create_table("t", {"f": {}})
    c.table("t").put(b"r", {b"f:q": b"v"})
    c.close()
    assert mc.stop() == 0
    olds = list((mc.data_dir / "oldWALs").iterdir())
    assert len(olds) == 2 and not any(p.is_file() for p in (mc.data_dir / "WALs").rglob("*"))
    for p in olds:
        with open(p, "rb") as f:
            reader = WalReader(f, str(p))
            list(reader.entries())
            assert reader.has_trailer and not reader.incomplete_tail
    mc.start()
    c = connect(mc)
    assert c.table("t").row(b"r") == {b"f:q": b"v"}
    c.close()


@pytest.mark.parametrize("queue_claims", ["master", "walship"])
def test_abort_rs(
    minicluster_factory: object, zk: KazooClient, capsys: pytest.CaptureFixture[str], queue_claims: str
) -> None:
    """An aborted region server: no trailer, its WALs archived, its regions on live servers; its
    queue claimed by the master (as HBase 2.5+'s, under a live server as ``1-<dead>``, in the
    abort) or left for walship to claim. Its znode said which: the HBase version it announces."""
    mc = minicluster_factory("X", regionservers=3, queue_claims=queue_claims)  # type: ignore[operator]
    layout = ZnodeLayout("/hbase-x")
    ReplicationPeers(zk, layout).add(PeerConfig("1", "127.0.0.1:2181:/hbase-y"))
    c = connect(mc)
    c.create_table("t", {"f": {}})
    AdminClient(mc.admin).roll()  # the new WALs join peer 1's queues
    t = c.table("t")
    for i in range(20):
        t.put(b"r%02d" % i, {b"f:q": b"%d" % i})
    info = AdminClient(mc.admin).info()
    owner = next(rs["name"] for rs in info["regionservers"] if rs["regions"])
    wal = next(rs["wal"] for rs in info["regionservers"] if rs["name"] == owner)
    announced = server_version(zk, layout, owner)
    assert announced == ((2, 6) if queue_claims == "master" else None)
    assert main(["minicluster", "abort-rs", "--admin", mc.admin, owner]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["aborted"] == owner and result["regions_moved"]
    assert owner not in live_servers(zk, layout)
    path = mc.data_dir / "oldWALs" / wal
    with open(path, "rb") as f:
        reader = WalReader(f, str(path))
        assert len([e for e in reader.entries() if not e.is_meta]) == 20
        assert not reader.has_trailer  # crashed: no trailer
    queues = ReplicationQueues(zk, layout)
    holding = [(q.server, str(q.queue_id)) for q in queues.list_queues() if wal in [w.name for w in q.wals]]
    if queue_claims == "master":
        ((claimer, queue_id),) = holding
        assert claimer in live_servers(zk, layout) and queue_id == f"1-{owner}"
        assert zk.exists(layout.replicator(owner)) is None
    else:
        assert holding == [(owner, "1")]  # waits for walship
    t.put(b"after", {b"f:q": b"x"})  # the region moved to a live server
    assert t.row(b"after") == {b"f:q": b"x"}
    assert t.row(b"r05") == {b"f:q": b"5"}
    info = AdminClient(mc.admin).info()
    assert [rs["alive"] for rs in info["regionservers"] if rs["name"] == owner] == [False]
    assert main(["minicluster", "abort-rs", "--admin", mc.admin, owner]) == 1
    assert "already dead" in capsys.readouterr().err
    c.close()


def test_two_clusters_on_one_zookeeper(minicluster_factory: object, zk: KazooClient) -> None:
    a = minicluster_factory("A")  # type: ignore[operator]
    b = minicluster_factory("B")  # type: ignore[operator]
    assert a.cluster_id != b.cluster_id
    ca, cb = connect(a), connect(b)
    ca.create_table("t", {"f": {}})
    cb.create_table("u", {"f": {}})
    ca.table("t").put(b"r", {b"f:q": b"a"})
    assert ca.tables() == [b"t"] and cb.tables() == [b"u"]
    assert read_cluster_id(zk, ZnodeLayout("/hbase-a")) == uuid.UUID(a.cluster_id)
    assert read_cluster_id(zk, ZnodeLayout("/hbase-b")) == uuid.UUID(b.cluster_id)
    assert len(live_servers(zk, ZnodeLayout("/hbase-a"))) == 3 == len(live_servers(zk, ZnodeLayout("/hbase-b")))
    ca.close()
    cb.close()


def test_admin_commands_and_errors(minicluster: MiniClusterProcess, capsys: pytest.CaptureFixture[str]) -> None:
    c = connect(minicluster)
    c.create_table("demo", {"r": {}})
    assert main(["minicluster", "set-scope", "--admin", minicluster.admin, "demo", "r", "1"]) == 0
    capsys.readouterr()
    assert main(["minicluster", "info", "--admin", minicluster.admin, "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["tables"][0]["families"]["r"]["scope"] == 1
    assert main(["minicluster", "info", "--admin", minicluster.admin]) == 0
    assert "r(scope=1" in capsys.readouterr().out
    assert main(["minicluster", "set-scope", "--admin", minicluster.admin, "demo", "zz", "1"]) == 1
    assert "no column family" in capsys.readouterr().err
    assert main(["minicluster", "set-scope", "--admin", minicluster.admin, "nope", "r", "1"]) == 1
    assert "does not exist" in capsys.readouterr().err
    assert main(["minicluster", "roll", "--admin", minicluster.admin, "no,such,server"]) == 1
    assert "no region server" in capsys.readouterr().err
    assert main(["minicluster", "info", "--admin", "127.0.0.1:1"]) == 1
    assert "no minicluster answers" in capsys.readouterr().err
    c.close()


def test_split_move_and_merge_commands(minicluster: MiniClusterProcess, capsys: pytest.CaptureFixture[str]) -> None:
    """``walship minicluster split``, ``move`` and ``merge`` do to the table's regions what the
    admin endpoint does, and the rows stay where a client finds them."""
    c = connect(minicluster)
    c.create_table("t", {"f": {}})
    for i in range(10):
        c.table("t").put(b"r%02d" % i, {b"f:q": b"%d" % i})
    admin = AdminClient(minicluster.admin)
    (whole,) = admin.regions("t")

    assert main(["minicluster", "split", "--admin", minicluster.admin, "--table", "t", "--row", "r05"]) == 0
    capsys.readouterr()
    low, high = admin.regions("t")
    assert bytes.fromhex(high["start"]) == b"r05" and whole["region"] not in (low["region"], high["region"])

    others = [rs["name"] for rs in admin.info()["regionservers"] if rs["name"] != high["server"]]
    argv = ["minicluster", "move", "--admin", minicluster.admin, "--table", "t", "--region", high["region"]]
    assert main([*argv, "--to", others[0]]) == 0
    capsys.readouterr()
    assert [r["server"] for r in admin.regions("t")] == [low["server"], others[0]]

    regions = f"{low['region']},{high['region']}"
    assert main(["minicluster", "merge", "--admin", minicluster.admin, "--table", "t", "--regions", regions]) == 0
    capsys.readouterr()
    (merged,) = admin.regions("t")
    assert merged["start"] == "" and merged["end"] == ""
    assert [row for row, _ in c.table("t").scan()] == [b"r%02d" % i for i in range(10)]
    c.close()
