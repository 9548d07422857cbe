"""The status model with real miniclusters: bytes queued from file sizes and positions, lag,
drained, disabled peers, dead servers, states, ``walship status`` and HBase's layout."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from replication_helpers import Cluster, add_peer, bytes_by_hand, make_cluster, ship
from waiting import wait_until

from walship.cli import main
from walship.replicate import WalStore
from walship.replicate.planner import Planner
from walship.status import collect_status
from walship.status.collect import QueueFiles
from walship.status.model import ReplicationStatus
from walship.zk import ReplicationPeers, ReplicationQueues, ZnodeLayout, queue_lock, zk_client
from walship.zk.locks import Holder
from walship.zk.records import ProgressStore
from walship_testing.minicluster import AdminClient
from walship_testing.minicluster.process import MiniClusterProcess

pytestmark = pytest.mark.integration

QUEUE_KEYS = {
    "server",
    "queue_id",
    "recovered",
    "dead_servers",
    "wals",
    "current_wal",
    "position",
    "bytes_queued",
    "progress_pct",
    "last_shipped_write_time",
    "age_of_last_shipped_op_s",
    "lag_s",
    "holder",
    "last_error",
    "last_backoff",
    "state",
    "bulk_loads",
    "waiting_serial",
    "throttled_s",
    "stalled_s",
    "stuck",
    "last_shipped_at",
}
PEER_KEYS = {
    "peer_id", "state", "hbase_peer_state", "cluster_key", "table_cfs", "peer_count", "queues", "totals", "throttled_s",
    "sink", "bandwidth", "serial", "errors", "dead_letters_pending",
}  # fmt: skip
TOTALS_KEYS = {"queues", "wals", "bytes_queued", "lag_s", "drained", "stuck_queues"}


def status_of(a: Cluster, peer_id: str | None = "1") -> ReplicationStatus:
    with zk_client(a.zk_hosts) as client:
        return collect_status(client, ZnodeLayout(a.parent), WalStore(str(a.mc.data_dir)), peer_id)


def write(a: Cluster, start: int, n: int) -> None:
    t = a.table()
    for i in range(start, start + n):
        t.put(b"row%05d" % i, {b"r:q": b"v%d" % i})


def test_backlog_lag_and_drained_follow_writes_and_shipping(ab: tuple[Cluster, Cluster]) -> None:
    a, _b = ab
    write(a, 0, 200)
    first = status_of(a)
    peer = first.peers[0]
    assert peer.to_json().keys() == PEER_KEYS
    assert all(q.to_json().keys() == QUEUE_KEYS for q in peer.queues)
    assert peer.peer_count.configured == 1 and peer.peer_count.answered == 1
    assert peer.totals()["bytes_queued"] == bytes_by_hand(a) > 0
    assert not peer.drained and peer.totals()["lag_s"] > 0
    assert {q.state for q in peer.queues} == {"idle"}
    assert all(q.recovered is False and q.dead_servers == [] for q in peer.queues)
    lag_before = peer.totals()["lag_s"]
    wait_until(lambda: status_of(a).peers[0].totals()["lag_s"] > lag_before + 0.2, what="lag to grow unshipped")

    summary = ship(a)
    assert summary.status == "ok", summary.error
    after = status_of(a).peers[0]
    totals = after.totals()
    assert totals == {"queues": totals["queues"], "wals": totals["wals"], "bytes_queued": 0, "lag_s": 0.0,
                      "drained": True, "stuck_queues": 0}  # fmt: skip
    assert all(q.progress_pct == 100.0 and q.age_of_last_shipped_op_s == 0.0 for q in after.queues)
    shipped = [q for q in after.queues if q.last_shipped_write_time]
    assert shipped and sum(q.cells_shipped for q in after.queues) == 200


def test_a_disabled_peer_is_disabled_and_its_backlog_grows(ab: tuple[Cluster, Cluster]) -> None:
    a, _ = ab
    with zk_client(a.zk_hosts) as client:
        ReplicationPeers(client, ZnodeLayout(a.parent)).disable("1")
    write(a, 0, 20)
    before = status_of(a).peers[0].totals()["bytes_queued"]
    assert before == bytes_by_hand(a) > 0
    write(a, 20, 50)
    after = status_of(a).peers[0]
    assert after.to_json()["state"] == "disabled" and {q.state for q in after.queues} == {"disabled"}
    assert after.totals()["bytes_queued"] == bytes_by_hand(a) > before


@pytest.mark.parametrize("queue_claims", ["walship"])
def test_dead_server_queues_are_listed_under_it_then_as_recovered(ab: tuple[Cluster, Cluster]) -> None:
    """Until a claimer moves it (walship here; the window before a master's claim is the same),
    a dead server's queue is listed under it as recovered; then under its claimer."""
    a, _ = ab
    write(a, 0, 30)
    admin = AdminClient(a.mc.admin)
    owner = next(rs["name"] for rs in admin.info()["regionservers"] if rs["regions"])
    admin.abort_rs(owner)
    unclaimed = [q for q in status_of(a).peers[0].queues if q.server == owner]
    assert len(unclaimed) == 1 and unclaimed[0].recovered and unclaimed[0].dead_servers == [owner]
    assert unclaimed[0].bytes_queued > 0
    with zk_client(a.zk_hosts) as client:
        planner = Planner(client, ZnodeLayout(a.parent), WalStore(str(a.mc.data_dir)))
        assert planner.failover().claimed
    queues = status_of(a).peers[0].queues
    recovered = [q for q in queues if q.recovered]
    assert owner not in {q.server for q in queues}
    assert len(recovered) == 1 and recovered[0].dead_servers == [owner] and recovered[0].queue_id == f"1-{owner}"


def test_queue_states_shipping_waiting_peer_and_stuck(ab: tuple[Cluster, Cluster], tmp_path: Path) -> None:
    a, b = ab
    write(a, 0, 10)
    with zk_client(a.zk_hosts) as client:
        layout = ZnodeLayout(a.parent)
        q = ReplicationQueues(client, layout).list_queues("1")[0]
        qid = str(q.queue_id)
        with queue_lock(client, layout, q.server, qid, holder=Holder.here("test", run_id="run-1")) as lock:
            assert lock.held
            held = next(s for s in status_of(a).peers[0].queues if s.queue_id == qid and s.server == q.server)
            assert held.state == "shipping" and held.holder and held.holder["run_id"] == "run-1"
            ProgressStore(client, layout).record("1", q.server, qid, backoff=(0.4, "Thrift call failed: refused"))
            waiting = next(s for s in status_of(a).peers[0].queues if s.queue_id == qid and s.server == q.server)
            assert waiting.state == "waiting-peer" and waiting.last_backoff
            assert waiting.last_backoff["reason"] == "Thrift call failed: refused"
    # a peer whose sink does not answer: shipping fails, the queue is stuck
    b.mc.stop()
    summary = ship(a)
    assert summary.status == "error"
    peer = status_of(a).peers[0]
    assert peer.peer_count.answered == 0 and peer.peer_count.configured == 1
    stuck = [q for q in peer.queues if q.state == "stuck"]
    assert stuck and all(q.last_error and q.last_error["message"] for q in stuck)


def test_status_cli_json_hbase_and_table(ab: tuple[Cluster, Cluster], capsys: pytest.CaptureFixture[str]) -> None:
    a, _ = ab
    write(a, 0, 25)
    g = ["--zk", a.zk_hosts, "--znode-parent", a.parent, "--wal-root", str(a.mc.data_dir)]
    assert main([*g, "status", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert set(data) == {"generated_at", "peers"} and data["generated_at"].endswith("Z")
    (peer,) = data["peers"]
    assert set(peer) == PEER_KEYS and peer["peer_id"] == "1" and peer["state"] == "enabled"
    assert peer["hbase_peer_state"] == "enabled"  # added as HBase would, not managed
    assert set(peer["totals"]) == TOTALS_KEYS
    assert all(set(q) == QUEUE_KEYS for q in peer["queues"])
    assert main([*g, "status", "--format", "hbase"]) == 0
    out = capsys.readouterr().out
    sources = [line for line in out.splitlines() if line.strip().startswith("SOURCE: PeerID=1")]
    assert len(sources) == peer["totals"]["queues"]
    assert all("AgeOfLastShippedOp=" in s and "SizeOfLogQueue=" in s and "Replication Lag=" in s for s in sources)
    assert main([*g, "status"]) == 0
    out = capsys.readouterr().out
    assert "peer 1: enabled" in out and "not drained" in out
    assert main([*g, "status", "--peer", "nope"]) == 1
    assert "peer nope does not exist" in capsys.readouterr().err


def test_status_without_a_wal_root_names_the_flag(capsys: pytest.CaptureFixture[str], zk_hosts: str) -> None:
    env = os.environ.pop("WALSHIP_WAL_ROOT", None)
    try:
        assert main(["--zk", zk_hosts, "status"]) == 1
    finally:
        if env is not None:
            os.environ["WALSHIP_WAL_ROOT"] = env
    assert "--wal-root" in capsys.readouterr().err


def test_a_wal_archived_between_its_lookup_and_its_read_is_read_where_it_went(
    minicluster_factory: Callable[..., MiniClusterProcess], zk_hosts: str
) -> None:
    """A scrape right after a roll: the WAL the roll closes is found under WALs/ and archived
    before its first unshipped entry is read. The status reads it in oldWALs/ (it was a 500 of
    ``walship metrics serve``)."""
    a = make_cluster(minicluster_factory, zk_hosts, "A", regionservers=1)
    b = make_cluster(minicluster_factory, zk_hosts, "B", regionservers=1)
    add_peer(a, b)
    write(a, 0, 20)
    with zk_client(a.zk_hosts) as client:
        layout = ZnodeLayout(a.parent)
        (queue,) = ReplicationQueues(client, layout).list_queues("1")
        files = QueueFiles(client, layout, WalStore(a.mc.wal_root), [queue])
        first = queue.wals[-1]
        located = files.locate(queue, first.name)
        assert located is not None and not located.archived
        AdminClient(a.mc.admin).roll()  # closes the WAL and archives it at once
        assert not Path(located.path).exists()
        write_time = files.first_unshipped_write_time(queue, [(first.position, located)])
    assert write_time is not None and 0 < write_time <= time.time() * 1000
