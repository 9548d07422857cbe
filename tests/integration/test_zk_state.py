"""Peers, queues, positions, claims, snapshots and locks against a real ZooKeeper server."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time

import pytest
from conftest import server_name, wal_name
from kazoo.client import KazooClient, KazooState
from waiting import wait_until

from walship.errors import (
    InvalidPeerConfigError,
    PeerExistsError,
    PeerNotFoundError,
    PositionBackwardsError,
    QueueError,
    QueueNotFoundError,
    WalshipError,
    ZkDataError,
    ZkUnavailableError,
)
from walship.peer import MANAGED_KEY, PeerConfig
from walship.replicate import WalStore
from walship.replicate.planner import Planner
from walship.zk import (
    QueueId,
    ReplicationPeers,
    ReplicationQueues,
    WalPosition,
    ZnodeLayout,
    connect,
    ensure_cluster_id,
    live_servers,
    queue_lock,
    read_cluster_id,
    register_server,
)
from walship.zk.encoding import encode_peer, encode_position, encode_server_info
from walship.zk.locks import Holder

pytestmark = pytest.mark.integration

DEAD = server_name(9)


def test_cluster_id_and_live_servers(zk: KazooClient, zk_hosts: str, layout: ZnodeLayout) -> None:
    cid = ensure_cluster_id(zk, layout)
    assert read_cluster_id(zk, layout) == cid
    assert ensure_cluster_id(zk, layout) == cid  # kept
    data, _ = zk.get("/hbase/hbaseid")
    assert data == b"PBUF\x0a\x24" + str(cid).encode()
    other = connect(zk_hosts)
    register_server(other, layout, server_name(1))
    assert live_servers(zk, layout) == [server_name(1)]
    other.stop()
    other.close()
    wait_until(lambda: live_servers(zk, layout) == [], timeout=10, what="the closed server's znode to go")


def test_peers_round_trip(zk: KazooClient, layout: ZnodeLayout) -> None:
    peers = ReplicationPeers(zk, layout)
    p1 = PeerConfig("1", "zkb:2181:/hbase", configuration={"walship.sink.thrift": "b:9090"})
    p2 = PeerConfig("2", "zkc:2181:/hbase", enabled=False, table_cfs={"t1": ("f1", "f2"), "ns:t2": None})
    peers.add(p1)
    peers.add(p2)
    assert peers.list() == [p1, p2]
    assert zk.get("/hbase/replication/peers/1/peer-state")[0] == bytes.fromhex("504255460800")
    assert zk.get("/hbase/replication/peers/2/peer-state")[0] == bytes.fromhex("504255460801")
    assert zk.get("/hbase/replication/peers/2")[0] == encode_peer(p2)
    with pytest.raises(PeerExistsError, match="peer 1 exists"):
        peers.add(p1)
    peers.disable("1")
    assert peers.get("1").enabled is False
    peers.enable("1")
    assert peers.get("1").enabled is True
    updated = peers.update("2", bandwidth=1024)
    assert peers.get("2") == updated and updated.bandwidth == 1024 and updated.enabled is False
    peers.remove("1")
    assert peers.ids() == ["2"]
    with pytest.raises(PeerNotFoundError, match="peer 1 does not exist"):
        peers.get("1")
    with pytest.raises(PeerNotFoundError, match="peer 9"):
        peers.enable("9")
    with pytest.raises(InvalidPeerConfigError, match="'a-b'"):
        peers.get("a-b")


def test_malformed_peer_znode_names_the_path(zk: KazooClient, layout: ZnodeLayout) -> None:
    zk.ensure_path("/hbase/replication/peers/3")
    zk.set("/hbase/replication/peers/3", b"PBUF\xff")
    with pytest.raises(ZkDataError, match="/hbase/replication/peers/3"):
        ReplicationPeers(zk, layout).get("3")


def _queues_with_wals(zk: KazooClient, layout: ZnodeLayout, server: str, peers: list[str], n: int) -> list[str]:
    for p in peers:
        ReplicationPeers(zk, layout).add(PeerConfig(p, "zk:2181:/b"))
    queues = ReplicationQueues(zk, layout)
    wals = [wal_name(server, 1700000000000 + 1000 * i) for i in range(n)]
    for w in wals:
        queues.add_wal(server, w)
    return wals


def test_add_wal_goes_to_every_peer_and_lists_in_order(zk: KazooClient, layout: ZnodeLayout) -> None:
    server = server_name(1)
    # added out of order: listing orders by the WAL timestamp, not by name or creation
    names = [wal_name(server, ts) for ts in (1700000000900, 1700000000010, 1700000000200)]
    ReplicationPeers(zk, layout).add(PeerConfig("1", "zk:2181:/b"))
    ReplicationPeers(zk, layout).add(PeerConfig("2", "zk:2181:/c"))
    queues = ReplicationQueues(zk, layout)
    for n in names:
        assert len(queues.add_wal(server, n)) == 2
    listed = queues.list_queues()
    assert [(q.server, str(q.queue_id)) for q in listed] == [(server, "1"), (server, "2")]
    assert [w.name for w in listed[0].wals] == sorted(names, key=lambda n: int(n.rsplit(".", 1)[1]))
    assert all(w.position == 0 for q in listed for w in q.wals)
    assert [str(q.queue_id) for q in queues.list_queues("2")] == ["2"]


def test_positions_move_forward_only(zk: KazooClient, layout: ZnodeLayout) -> None:
    server = server_name(1)
    (w,) = _queues_with_wals(zk, layout, server, ["1"], 1)
    queues = ReplicationQueues(zk, layout)
    v1 = queues.set_position(server, "1", w, 254)
    assert zk.get(layout.wal(server, "1", w))[0] == bytes.fromhex("5042554608FE01")
    assert queues.get_position(server, "1", w) == (254, v1)
    with pytest.raises(PositionBackwardsError, match="position 100 is behind the stored 254"):
        queues.set_position(server, "1", w, 100)
    assert queues.get_position(server, "1", w)[0] == 254
    v2 = queues.set_position(server, "1", w, 500, version=v1)
    with pytest.raises(QueueError, match="changed"):
        queues.set_position(server, "1", w, 600, version=v1)
    assert queues.get_position(server, "1", w) == (500, v2)
    queues.remove_wals(server, "1", [w])
    with pytest.raises(QueueNotFoundError):
        queues.set_position(server, "1", w, 700)


def test_a_known_position_is_written_at_its_version_and_read_again_once_changed(
    zk: KazooClient, layout: ZnodeLayout
) -> None:
    """The lock holder's commit writes at the version it knows; a znode changed since (by
    anyone) is read again, so a position still never moves backwards and nothing is lost."""
    server = server_name(1)
    w, _ = _queues_with_wals(zk, layout, server, ["1"], 2)
    queues = ReplicationQueues(zk, layout)
    first = queues.wals(server, "1")[0]
    v1 = queues.set_position(server, "1", w, 100, known=first)
    assert queues.get_position(server, "1", w) == (100, v1)
    known = WalPosition(w, 100, v1)
    v2 = queues.set_position(server, "1", w, 200, known=known)
    assert v2 == v1 + 1 and queues.get_position(server, "1", w) == (200, v2)
    # changed behind the caller's back: its stale version is not written over blindly
    zk.set(layout.wal(server, "1", w), encode_position(900))
    with pytest.raises(PositionBackwardsError, match="position 300 is behind the stored 900"):
        queues.set_position(server, "1", w, 300, known=WalPosition(w, 200, v2))
    assert queues.get_position(server, "1", w)[0] == 900
    v4 = queues.set_position(server, "1", w, 950, known=WalPosition(w, 200, v2))  # ahead: written
    assert queues.get_position(server, "1", w) == (950, v4)
    queues.remove_wals(server, "1", [w])
    with pytest.raises(QueueNotFoundError):
        queues.set_position(server, "1", w, 999, known=WalPosition(w, 950, v4))


def test_a_queue_read_again_reuses_what_its_holder_knows_until_its_wals_change(
    zk: KazooClient, layout: ZnodeLayout
) -> None:
    """The lock holder's positions are not read again while the queue's WAL znodes stay the
    same ones; a WAL added or removed, or the queue removed and made again (a peer removed and
    added back, its WALs from 0), and the queue is read whole."""
    server = server_name(1)
    w, w2 = _queues_with_wals(zk, layout, server, ["1"], 2)
    queues = ReplicationQueues(zk, layout)
    first, stamp = queues.read_queue(server, "1")
    read = {p.name: p for p in first}
    v = queues.set_position(server, "1", w, 500, known=read[w])
    mine = (stamp, {w: WalPosition(w, 500, v), w2: read[w2]})
    listed, again = queues.read_queue(server, "1", mine)
    assert [(p.name, p.position, p.version) for p in listed] == [(w, 500, v), (w2, 0, read[w2].version)]
    assert again == stamp  # a position written does not move the stamp
    # a new WAL: read whole (the others' positions from ZooKeeper)
    zk.set(layout.wal(server, "1", w2), encode_position(77))
    w3 = wal_name(server, 1700000009000)
    queues.add_wal(server, w3)
    listed, moved = queues.read_queue(server, "1", mine)
    assert [(p.name, p.position) for p in listed] == [(w, 500), (w2, 77), (w3, 0)] and moved != stamp
    # the queue removed and made again with the same WALs: nothing of before is reused
    queues.remove_queue(server, "1")
    for name in (w, w2, w3):
        queues.add_wal(server, name)
    listed, _ = queues.read_queue(server, "1", (moved, {p.name: p for p in listed}))
    assert [(p.name, p.position) for p in listed] == [(w, 0), (w2, 0), (w3, 0)]


def test_a_servers_liveness_is_read_again_once_older_than_asked(zk: KazooClient, layout: ZnodeLayout) -> None:
    """A tailer asks many times a second: an answer younger than ``max_age`` is reused, an
    older one (or any, without ``max_age``) is read again, so a death shows a moment later."""
    server = server_name(3)
    path = register_server(zk, layout, server)
    planner = Planner(zk, layout, WalStore("memory://walship-live"))
    assert planner.server_live(server, max_age=600)
    zk.delete(path)
    assert planner.server_live(server, max_age=600)  # seen live a moment ago: taken as it was
    assert not planner.server_live(server)  # no age allowed: read now
    assert not planner.server_live(server, max_age=600)


@pytest.mark.parametrize(
    ("announced", "claimed"),
    [
        (None, {"m", "h"}),  # the embedded cluster: walship claims every queue
        ("2.4.18", {"m"}),  # HBase's region servers race for the queues of the peers HBase ships
        ("2.6.1-hadoop3", set()),  # HBase's master claims every queue
    ],
)
def test_who_claims_a_dead_servers_queues_follows_what_live_servers_announce(
    zk: KazooClient, layout: ZnodeLayout, announced: str | None, claimed: set[str]
) -> None:
    """A dead server holds a queue of a managed peer ``m`` and of ``h``, a peer HBase ships. The
    live server's znode says which HBase runs (its RegionServerInfo, as HBase writes it), and
    walship claims the queues the cluster's own claimer would not: none where the master
    claims, only ``m``'s where region servers race, both on the embedded cluster."""
    ReplicationPeers(zk, layout).add(PeerConfig("m", "zk:2181:/b", configuration={MANAGED_KEY: "true"}))
    ReplicationPeers(zk, layout).add(PeerConfig("h", "zk:2181:/c"))
    queues = ReplicationQueues(zk, layout)
    wal = wal_name(DEAD, 1700000000000)
    queues.add_wal(DEAD, wal)
    live = server_name(1)
    register_server(zk, layout, live, b"" if announced is None else encode_server_info(announced))
    result = Planner(zk, layout, WalStore("memory://walship-who-claims")).failover()
    assert {c["queue_id"] for c in result.claimed} == claimed and result.failures == []
    assert result.left_to_master is (announced is not None and announced.startswith("2.6"))
    where = {(q.server, str(q.queue_id)) for q in queues.list_queues()}
    assert where == {(live, f"{p}-{DEAD}") for p in claimed} | {(DEAD, p) for p in {"m", "h"} - claimed}


def test_a_position_follows_the_queue_a_master_claimed_from_under_its_shipper(
    zk: KazooClient, layout: ZnodeLayout
) -> None:
    """A shipper applied a batch of a dead server's queue, then found the queue claimed (by a
    master that takes no walship lock): the batch's position goes to the recovered queue
    ``1-<dead>``, forward only and under that queue's lock, so the batch is not shipped again."""
    (w,) = _queues_with_wals(zk, layout, DEAD, ["1"], 1)
    queues = ReplicationQueues(zk, layout)
    queues.set_position(DEAD, "1", w, 100)
    live = server_name(1)
    assert queues.claim_queue(DEAD, "1", live) == f"1-{DEAD}"  # the master's claim
    with pytest.raises(QueueNotFoundError):
        queues.set_position(DEAD, "1", w, 500)  # the shipper's commit after its batch was applied

    assert queues.follow_claim(DEAD, "1", w, 500) == f"{live}/1-{DEAD}"
    assert queues.read_queue(live, f"1-{DEAD}")[0][0].position == 500
    assert queues.follow_claim(DEAD, "1", w, 300) is None  # never backwards
    with queue_lock(zk, layout, live, f"1-{DEAD}", holder=Holder.here("shipper")) as lock:
        assert lock.held
        assert queues.follow_claim(DEAD, "1", w, 900) is None  # its shipper holds it: it wins
    assert queues.read_queue(live, f"1-{DEAD}")[0][0].position == 500
    assert queues.follow_claim(DEAD, "2", w, 900) is None  # no such claim: nothing written
    assert queues.follow_claim(DEAD, "1", wal_name(DEAD, 1800000000000), 900) is None  # not its WAL


def test_concurrent_position_writers_never_go_backwards(zk_hosts: str, layout: ZnodeLayout) -> None:
    """Four writers race positions up; every write that landed is recorded with the znode
    version it made, and in version order the positions only ever rise."""
    clients = [connect(zk_hosts) for _ in range(4)]
    server = server_name(1)
    (w,) = _queues_with_wals(clients[0], layout, server, ["1"], 1)
    errors: list[Exception] = []
    landed: list[tuple[int, int]] = []  # (znode version, position) of each write
    refused: list[int] = []
    lock = threading.Lock()

    def writer(client: KazooClient, start: int) -> None:
        q = ReplicationQueues(client, layout)
        for pos in range(start, 400, 4):
            try:
                version = q.set_position(server, "1", w, pos)
            except PositionBackwardsError:
                with lock:
                    refused.append(pos)
                continue
            except Exception as exc:
                errors.append(exc)
                continue
            with lock:
                landed.append((version, pos))

    threads = [threading.Thread(target=writer, args=(c, i)) for i, c in enumerate(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert len(landed) + len(refused) == 400
    by_version: dict[int, set[int]] = {}
    for version, pos in landed:
        by_version.setdefault(version, set()).add(pos)
    assert all(len(p) == 1 for p in by_version.values()), by_version  # one position per version
    in_order = [next(iter(by_version[v])) for v in sorted(by_version)]
    assert in_order == sorted(set(in_order)), in_order  # strictly rising with the version
    assert in_order[-1] == 399
    assert ReplicationQueues(clients[0], layout).get_position(server, "1", w)[0] == 399
    for c in clients:
        c.stop()
        c.close()


def test_malformed_position_names_the_znode(zk: KazooClient, layout: ZnodeLayout) -> None:
    server = server_name(1)
    (w,) = _queues_with_wals(zk, layout, server, ["1"], 1)
    zk.set(layout.wal(server, "1", w), b"garbage!!")
    with pytest.raises(ZkDataError, match=f"znode /hbase/replication/rs/{server}/1/{w}"):
        ReplicationQueues(zk, layout).list_queues()


def test_claim_moves_queue_with_positions(zk: KazooClient, layout: ZnodeLayout) -> None:
    wals = _queues_with_wals(zk, layout, DEAD, ["1", "2"], 3)
    queues = ReplicationQueues(zk, layout)
    queues.set_position(DEAD, "1", wals[0], 1234)
    dest = server_name(1)
    claimed = queues.claim_all(DEAD, dest)
    assert sorted(claimed) == [("1", f"1-{DEAD}"), ("2", f"2-{DEAD}")]
    assert zk.exists(layout.replicator(DEAD)) is None
    listed = {str(q.queue_id): q for q in queues.list_queues()}
    assert set(listed) == {f"1-{DEAD}", f"2-{DEAD}"}
    q1 = listed[f"1-{DEAD}"]
    assert q1.server == dest and q1.recovered and q1.queue_id.dead_servers == (DEAD,)
    assert [(w.name, w.position) for w in q1.wals] == [(wals[0], 1234), (wals[1], 0), (wals[2], 0)]
    # claimed again from the second server: the chain of dead servers grows
    third = server_name(2)
    again = queues.claim_all(dest, third)
    assert sorted(n for _, n in again) == [f"1-{DEAD}-{dest}", f"2-{DEAD}-{dest}"]
    assert {str(q.queue_id.dead_servers) for q in queues.list_queues()} == {str((DEAD, dest))}


def test_claim_of_a_removed_peer_removes_the_queue(zk: KazooClient, layout: ZnodeLayout) -> None:
    _queues_with_wals(zk, layout, DEAD, ["1"], 2)
    queues = ReplicationQueues(zk, layout)
    zk.create(layout.wal(DEAD, "7", wal_name(DEAD, 5)), b"", makepath=True)  # peer 7 does not exist
    claimed = queues.claim_all(DEAD, server_name(1))
    assert claimed == [("1", f"1-{DEAD}")]
    assert queues.replicators() == [server_name(1)]


def test_claim_refuses_when_a_position_moved_meanwhile(zk: KazooClient, layout: ZnodeLayout) -> None:
    """A position written between the claimer's read and its multi must not be lost."""
    wals = _queues_with_wals(zk, layout, DEAD, ["1"], 2)
    queues = ReplicationQueues(zk, layout)

    class Racing(ReplicationQueues):
        raced = False

        def claim_queue(self, dead_server: str, queue_id: str, dest_server: str, *, attempts: int = 5) -> str | None:
            original_get = self.client.get

            def get(path: str, watch: object = None) -> object:
                result = original_get(path)
                if path.endswith(wals[0]) and not Racing.raced:
                    Racing.raced = True
                    queues.set_position(DEAD, "1", wals[0], 999)  # a shipper commits meanwhile
                return result

            self.client.get = get  # type: ignore[method-assign]
            try:
                return super().claim_queue(dead_server, queue_id, dest_server, attempts=attempts)
            finally:
                self.client.get = original_get  # type: ignore[method-assign]

    new_id = Racing(zk, layout).claim_queue(DEAD, "1", server_name(1))
    assert Racing.raced and new_id == f"1-{DEAD}"
    (q,) = queues.list_queues()
    assert q.wals[0].position == 999  # the retry carried the newer position


CLAIMER = """
import json, sys
from walship.zk import ReplicationQueues, ZnodeLayout, connect
hosts, dead, me = sys.argv[1], sys.argv[2], sys.argv[3]
client = connect(hosts)
queues = ReplicationQueues(client, ZnodeLayout("/hbase"))
print("ready", flush=True)
sys.stdin.readline()  # the go, once every claimer is ready
print(json.dumps(queues.claim_all(dead, me)))
client.stop()
"""


@pytest.mark.parametrize("claimers", [2, 4])
def test_concurrent_claimers_each_queue_exactly_once(
    zk: KazooClient, zk_hosts: str, layout: ZnodeLayout, claimers: int
) -> None:
    peers = [str(i) for i in range(1, 9)]
    wals = _queues_with_wals(zk, layout, DEAD, peers, 4)
    queues = ReplicationQueues(zk, layout)
    for i, p in enumerate(peers):
        queues.set_position(DEAD, p, wals[0], 100 + i)
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", CLAIMER, zk_hosts, DEAD, server_name(10 + i)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(claimers)
    ]
    for proc in procs:  # every claimer connected to ZooKeeper (connect() gives up after 10 s)...
        assert proc.stdout is not None
        assert proc.stdout.readline() == "ready\n", proc.communicate(timeout=60)[1]
    for proc in procs:  # ...then all claim at once
        assert proc.stdin is not None
        proc.stdin.write("go\n")
        proc.stdin.flush()
    results = []
    for proc in procs:
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
        results.append(json.loads(out))
    claimed = [old for r in results for old, _ in r]
    assert sorted(claimed) == sorted(peers)  # each queue exactly once across all claimers
    listed = queues.list_queues()
    assert sorted(str(q.queue_id) for q in listed) == sorted(f"{p}-{DEAD}" for p in peers)
    for q in listed:
        assert [w.name for w in q.wals] == wals
        assert q.wals[0].position == 100 + peers.index(q.peer_id)
    assert DEAD not in queues.replicators()


def expire_session(client: KazooClient, hosts: str) -> None:
    """Expire a client's session as ZooKeeper does: another client on the same session closes it."""
    session_id, password = client.client_id
    ghost = KazooClient(hosts=hosts, client_id=(session_id, password))
    ghost.start()
    ghost.stop()
    ghost.close()


class _ExpiringClaimer(ReplicationQueues):
    """Claims as walship does; after ``after`` queues its ZooKeeper session is expired (a
    real expiry, by a second client on the same session) before the next queue is claimed."""

    def __init__(self, client: KazooClient, layout: ZnodeLayout, hosts: str, after: int) -> None:
        super().__init__(client, layout)
        self.hosts = hosts
        self.after = after
        self.expired = False
        self.before_expiry: list[str] = []
        self.session_before = client.client_id[0]

    def claim_queue(self, dead_server: str, queue_id: str, dest_server: str, *, attempts: int = 5) -> str | None:
        if not self.expired and len(self.before_expiry) == self.after:
            lost = threading.Event()

            def on_state(state: str) -> bool:
                if state == KazooState.LOST:
                    lost.set()
                    return True
                return False

            self.client.add_listener(on_state)
            expire_session(self.client, self.hosts)
            assert lost.wait(30), "the claimer's session did not expire"
            self.expired = True
        new_id = super().claim_queue(dead_server, queue_id, dest_server, attempts=attempts)
        if not self.expired:
            self.before_expiry.append(queue_id)
        return new_id


@pytest.mark.parametrize("after", [0, 1, 7, 19])
def test_session_expired_mid_claim_leaves_no_half_moved_queue(
    zk: KazooClient, zk_hosts: str, layout: ZnodeLayout, after: int
) -> None:
    """The claimer's session expires after it claimed ``after`` of 20 queues: the claim stops
    with walship's error, every queue is whole in one place with its positions,
    and a second claimer finishes the rest."""
    peers = [str(i) for i in range(1, 21)]
    wals = _queues_with_wals(zk, layout, DEAD, peers, 3)
    for p in peers:
        ReplicationQueues(zk, layout).set_position(DEAD, p, wals[1], 10 * int(p))
    claimer = connect(zk_hosts)
    expiring = _ExpiringClaimer(claimer, layout, zk_hosts, after)
    outcome: list[object] = []
    try:
        outcome.append(expiring.claim_all(DEAD, server_name(1)))
    except WalshipError as exc:  # anything else (kazoo's own errors among them) fails the test
        outcome.append(exc)
    finally:
        claimer.stop()
        claimer.close()
    assert expiring.expired  # the session did expire in the middle of the claim
    assert len(expiring.before_expiry) == after  # ... after exactly that many queues
    queues = ReplicationQueues(zk, layout)
    listed = queues.list_queues()
    assert sorted(q.peer_id for q in listed) == sorted(peers)  # nothing lost, nothing doubled
    for q in listed:  # every queue whole, wherever it is, positions kept
        assert [w.name for w in q.wals] == wals
        assert q.wals[1].position == 10 * int(q.peer_id)
        assert (q.server, q.recovered) in {(DEAD, False), (server_name(1), True)}
    moved = sorted(q.peer_id for q in listed if q.recovered)
    (result,) = outcome  # the expired session stops the claim with walship's error ...
    assert isinstance(result, ZkUnavailableError), result
    assert f"of {DEAD} into {server_name(1)}" in str(result)
    # ... and what it had claimed before the expiry, and only that, stayed claimed
    assert moved == sorted(QueueId.parse(q).peer_id for q in expiring.before_expiry)
    queues.claim_all(DEAD, server_name(2))
    final = queues.list_queues()
    assert sorted(q.peer_id for q in final) == sorted(peers)
    assert all(q.recovered for q in final)
    assert DEAD not in queues.replicators()


def test_snapshot_is_consistent_under_concurrent_claims(zk: KazooClient, zk_hosts: str, layout: ZnodeLayout) -> None:
    """WALs that stay referenced while their queue moves between servers appear in every
    snapshot. Every server keeps a pinned queue, so no replicator znode is created or
    removed: only the claims themselves can tell the snapshot that something moved."""
    for p in ("1", "2"):
        ReplicationPeers(zk, layout).add(PeerConfig(p, "zk:2181:/b"))
    queues = ReplicationQueues(zk, layout)
    servers = [server_name(i) for i in range(20, 24)]
    for s in servers:
        queues.add_wal(s, wal_name(s, 1600000000000), peer_ids=["2"])  # pinned, never moves
    moving = {wal_name(servers[0], 1700000000000 + i) for i in range(3)}
    for w in moving:
        queues.add_wal(servers[0], w, peer_ids=["1"])
    referenced = queues.all_wals()
    assert moving <= referenced
    done = threading.Event()
    mover = connect(zk_hosts)
    moves = 0

    def move() -> None:
        nonlocal moves
        q = ReplicationQueues(mover, layout)
        owner, qid = servers[0], "1"
        try:
            for _i in range(120):
                dest = servers[(servers.index(owner) + 1) % len(servers)]
                new_id = q.claim_queue(owner, qid, dest)
                assert new_id is not None
                owner, qid = dest, new_id
                moves += 1
                time.sleep(0.01)  # deliberate: space the moves so that snapshots interleave with them
        finally:
            done.set()

    t = threading.Thread(target=move)
    t.start()
    snapshots = 0
    try:
        while not done.is_set():
            snap = queues.all_wals()
            assert referenced <= snap, referenced - snap
            snapshots += 1
    finally:
        t.join()
        mover.stop()
        mover.close()
    assert moves == 120 and snapshots > 5
    assert queues.all_wals() == referenced


def test_lock_excludes_a_second_shipper(zk: KazooClient, zk_hosts: str, layout: ZnodeLayout) -> None:
    other = connect(zk_hosts)
    server = server_name(1)
    first = Holder.here("first", run_id="scheduled__1")
    try:
        with queue_lock(zk, layout, server, "1", holder=first) as held:
            assert held.held
            with queue_lock(other, layout, server, "1", holder=Holder.here("second")) as second:
                assert not second.held
                assert second.holder == first  # who has it, as the lock's znode says
                assert "Airflow run scheduled__1" in second.describe()
            with queue_lock(other, layout, server, "2", holder=Holder.here("second")) as different_queue:
                assert different_queue.held
        with queue_lock(other, layout, server, "1") as after:
            assert after.held
    finally:
        other.stop()
        other.close()


def test_lock_is_released_when_the_holder_dies(zk: KazooClient, zk_hosts: str, layout: ZnodeLayout) -> None:
    holder = connect(zk_hosts)
    server = server_name(1)
    try:
        lock = holder.Lock(layout.queue_lock(server, "1"), identifier="dying")
        assert lock.acquire(blocking=False)
        with queue_lock(zk, layout, server, "1") as held:
            assert not held.held
            assert held.holder is not None and held.holder.owner == "dying"  # not walship's JSON: kept as is
    finally:
        holder.stop()  # the session ends, the lock's ephemeral node goes
        holder.close()
    with queue_lock(zk, layout, server, "1", timeout=10) as held:
        assert held.held


def test_position_written_to_a_claimed_queue_fails(zk: KazooClient, layout: ZnodeLayout) -> None:
    wals = _queues_with_wals(zk, layout, DEAD, ["1"], 1)
    queues = ReplicationQueues(zk, layout)
    queues.claim_all(DEAD, server_name(1))
    with pytest.raises(QueueNotFoundError, match="claimed or removed"):
        queues.set_position(DEAD, "1", wals[0], 10)
    assert zk.exists(layout.wal(DEAD, "1", wals[0])) is None


def test_legacy_position_is_read(zk: KazooClient, layout: ZnodeLayout) -> None:
    wals = _queues_with_wals(zk, layout, DEAD, ["1"], 1)
    zk.set(layout.wal(DEAD, "1", wals[0]), (4096).to_bytes(8, "big"))
    queues = ReplicationQueues(zk, layout)
    assert queues.get_position(DEAD, "1", wals[0])[0] == 4096
    queues.set_position(DEAD, "1", wals[0], 5000)
    assert zk.get(layout.wal(DEAD, "1", wals[0]))[0] == encode_position(5000)
