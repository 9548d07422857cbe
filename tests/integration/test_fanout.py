"""One WAL read for many peers: ``ship``/``tail --peer 1,2,subs`` read each WAL once, from the
lowest position of the queues, and feed every queue's filter and sink, each position committed
on its own; a failing queue stops alone."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from replication_helpers import Cluster, add_peer, contents, current_wals_enqueued, make_cluster, tail_in_thread
from sep_listeners import FAIL_ENV, OUT_ENV, read_events
from waiting import wait_until

from walship.cli import main
from walship.replicate import WalStore
from walship.wal import WalReader
from walship.wal.entries import BATCH
from walship.zk import ReplicationQueues, ZnodeLayout, zk_client
from walship_testing.minicluster import AdminClient
from walship_testing.minicluster.process import MiniClusterProcess

pytestmark = pytest.mark.integration

Factory = Callable[..., MiniClusterProcess]


@pytest.fixture
def abc(
    minicluster_factory: Factory, zk_hosts: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> tuple[Cluster, Cluster, Cluster]:
    monkeypatch.setenv(OUT_ENV, str(tmp_path / "events.jsonl"))
    a, b, c = (make_cluster(minicluster_factory, zk_hosts, name) for name in ("A", "B", "C"))
    add_peer(a, b, "1")
    add_peer(a, c, "2", protocol="thrift2")
    assert main([*a.cli_flags(), "subscription", "add", "subs", "--listener", "sep_listeners:JsonLinesListener"]) == 0
    with zk_client(a.zk_hosts) as client:
        queues = ReplicationQueues(client, ZnodeLayout(a.parent))
        wait_until(lambda: current_wals_enqueued(a, queues, "subs"), what="WALs queued for subs")
    return a, b, c


def ship_json(a: Cluster, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict[str, Any]]:
    capsys.readouterr()
    code = main([*a.cli_flags(), "ship", *args])
    return code, json.loads(capsys.readouterr().out)


def positions(a: Cluster, peer_id: str) -> dict[str, int]:
    with zk_client(a.zk_hosts) as client:
        queues = ReplicationQueues(client, ZnodeLayout(a.parent))
        return {w.name: w.position for q in queues.list_queues(peer_id) for w in q.wals}


def assert_not_past(a: Cluster, peer_id: str, row: bytes) -> None:
    """The peer's queue still holds the WAL entry of ``row`` and its committed position lies at
    or before that entry: the row was neither shipped nor skipped."""
    store = WalStore(a.mc.wal_root)
    found = []
    for wal, position in positions(a, peer_id).items():
        loc = store.locate(wal)
        with store.open(loc) as f:
            for entry in WalReader(f, loc.path).entries():
                if any(c.row == row for c in entry.cells):
                    found.append((wal, entry.offset, position))
    assert found, f"no queued WAL of peer {peer_id} holds {row!r} any more"
    for wal, offset, position in found:
        assert position <= offset, f"peer {peer_id}'s position {position} in {wal} passed {row!r} at {offset}"


def test_one_read_feeds_every_peer_from_the_lowest_position(
    abc: tuple[Cluster, Cluster, Cluster], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a, b, c = abc
    t = a.table()
    for i in range(60):
        t.put(b"row%02d" % i, {b"r:a": b"v%d" % i, b"l:x": b"local"}, timestamp=1000 + i)
    t.delete(b"row07")
    # the subscription runs ahead: its position is past the others'
    code, first = ship_json(a, capsys, "--peer", "subs", "--batch-entries", "10", "--max-batches", "2")
    assert code == 0 and first["totals"]["entries_read"] == 20
    ahead = positions(a, "subs")
    assert positions(a, "1") != ahead

    code, out = ship_json(a, capsys, "--peer", "1,2,subs")
    assert code == 0, out
    assert [p["peer_id"] for p in out["peers"]] == ["1", "2", "subs"]
    # one read fed three queues: fewer bytes read than the queues consumed between them
    consumed = sum(p["totals"]["bytes_read"] for p in out["peers"])
    assert 0 < out["wal_reads"]["bytes"] < consumed
    assert contents(b) == contents(a, b"r") == contents(c)
    events = read_events(str(tmp_path / "events.jsonl"))
    keys = [(e["wal"], e["offset"], e["row"]) for e in events]
    assert len(keys) == len(set(keys)), "the subscription got an event twice"
    assert {e["row"] for e in events} == {f"row{i:02d}" for i in range(60)}
    # every queue moved to the same end, each on its own
    assert positions(a, "1") == positions(a, "2") == positions(a, "subs")
    by_peer = {p["peer_id"]: p["totals"]["entries_read"] for p in out["peers"]}
    assert by_peer["1"] == by_peer["2"] == by_peer["subs"] + 20

    # a backlog shipped to each peer in turn reads the WAL once per peer; as one pass, once
    def backlog(tag: bytes) -> None:
        for i in range(200):
            t.put(b"%s%03d" % (tag, i), {b"r:a": b"x" * 50})

    backlog(b"apart")
    apart = 0
    for peer in ("1", "2", "subs"):
        code, one = ship_json(a, capsys, "--peer", peer)
        assert code == 0 and one["totals"]["entries_read"] == 200
        apart += one["wal_reads"]["bytes"]
    backlog(b"together")
    code, together = ship_json(a, capsys, "--peer", "1,2,subs")
    assert code == 0 and [p["totals"]["entries_read"] for p in together["peers"]] == [200, 200, 200]
    assert together["wal_reads"]["bytes"] * 2 < apart, (together["wal_reads"], apart)


def test_a_failing_queue_stops_alone(
    abc: tuple[Cluster, Cluster, Cluster],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    a, b, c = abc
    t = a.table()
    for i in range(30):
        t.put(b"row%02d" % i, {b"r:a": b"v%d" % i})
    monkeypatch.setenv(FAIL_ENV, "row11")
    code, out = ship_json(a, capsys, "--peer", "1,subs,2", "--batch-entries", "5")
    assert code == 1 and out["status"] == "error"
    states = {p["peer_id"]: p["status"] for p in out["peers"]}
    assert states == {"1": "ok", "subs": "error", "2": "ok"}
    assert "listener refuses row row11" in out["peers"][1]["error"]
    assert contents(b) == contents(a, b"r") == contents(c)
    delivered = {e["row"] for e in read_events(str(tmp_path / "events.jsonl"))}
    assert "row11" not in delivered and "row00" in delivered  # batches before the refused one
    assert_not_past(a, "subs", b"row11")  # its queue stopped at the refused batch, nothing skipped
    monkeypatch.delenv(FAIL_ENV)
    code, out = ship_json(a, capsys, "--peer", "subs,1")
    assert code == 0
    delivered = {e["row"] for e in read_events(str(tmp_path / "events.jsonl"))}
    assert delivered == {f"row{i:02d}" for i in range(30)}
    assert out["peers"][1]["totals"]["entries_read"] == 0  # peer 1 had nothing left


def test_tail_follows_several_peers_with_one_read(
    abc: tuple[Cluster, Cluster, Cluster], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    a, b, _ = abc
    stop = threading.Event()
    monkeypatch.setenv(FAIL_ENV, "fail-once")
    thread, out = tail_in_thread(a, ["1", "subs"], duration=60, rediscover=0.5, idle_sleep=0.05, stop=stop)
    try:
        t = a.table()
        t.put(b"fail-once", {b"r:a": b"x"})
        # the listener refuses; the tailer backs off and keeps the queue, peer 1 goes on
        wait_until(lambda: b"fail-once" in contents(b), what="peer 1 shipped while the listener refuses")
        for i in range(20):
            t.put(b"tail%02d" % i, {b"r:a": b"v"})
        wait_until(lambda: len(contents(b)) == 21, what="peer 1 caught up")
    finally:
        stop.set()
        thread.join(30)
    (summary,) = out
    assert summary.peer_id == "1,subs"
    assert summary.outages >= 1 and summary.status == "ok", summary
    # one read: each pass opened each of the three servers' WALs once, for both peers (no
    # WAL rolled meanwhile); a read per peer would open each twice
    with zk_client(a.zk_hosts) as client:
        queues = ReplicationQueues(client, ZnodeLayout(a.parent))
        wals = {w.name for peer in ("1", "subs") for q in queues.list_queues(peer) for w in q.wals}
    assert len(wals) == 3
    assert summary.wal_reads["opens"] == len(wals) * summary.passes, (summary.wal_reads, summary.passes)
    # the subscription's queue was kept, not dropped: its position never passed the refused row
    events = read_events(str(tmp_path / "events.jsonl"))
    assert "fail-once" not in {e["row"] for e in events}
    assert_not_past(a, "subs", b"fail-once")


def test_a_dead_servers_queues_are_claimed_and_drained_for_peers_and_subscriptions(
    abc: tuple[Cluster, Cluster, Cluster], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a, b, c = abc
    for i in range(40):
        a.table().put(b"r%02d" % i, {b"r:q": b"%d" % i})
    admin = AdminClient(a.mc.admin)
    owner = next(rs["name"] for rs in admin.info()["regionservers"] if rs["regions"])
    admin.abort_rs(owner)
    for i in range(40, 50):
        a.table().put(b"r%02d" % i, {b"r:q": b"%d" % i})
    code, out = ship_json(a, capsys, "--peer", "1,2,subs")
    assert code == 0, out
    assert all(peer["claimed"] == [] for peer in out["peers"])  # A's master claimed them, as HBase 2.5+'s
    for peer in out["peers"]:  # each recovered queue drained and deleted
        removed = [q["queue_id"] for q in peer["queues"] if q["queue_removed"]]
        assert removed == [f"{peer['peer_id']}-{owner}"], peer
    assert contents(b) == contents(a, b"r") == contents(c) and len(contents(b)) == 50
    events = read_events(str(tmp_path / "events.jsonl"))
    keys = [(e["wal"], e["offset"], e["row"]) for e in events]
    assert len(keys) == len(set(keys)) and {e["row"] for e in events} == {f"r{i:02d}" for i in range(50)}
    with zk_client(a.zk_hosts) as client:
        queues = ReplicationQueues(client, ZnodeLayout(a.parent)).list_queues()
    assert all(not q.recovered for q in queues) and owner not in {q.server for q in queues}


def test_batches_in_the_background_keep_under_the_buffer_quota(
    abc: tuple[Cluster, Cluster, Cluster], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two peers' queues read together hold a batch each in flight, and one each being read;
    with a quota of one byte each batch is cut at once and the second waits its turn (applied
    before reading on), nothing lost; with the default quota both go."""
    from walship.replicate import quota

    a, b, c = abc
    t = a.table()
    for i in range(200):
        t.put(b"row%03d" % i, {b"r:a": b"x" * 50})
    monkeypatch.setattr(quota, "_process_quota", None)
    code, out = ship_json(a, capsys, "--peer", "1,2", "--batch-entries", "20", "--buffer-quota", "1")
    assert code == 0, out
    tight = quota._process_quota
    assert tight is not None and tight.limit == 1
    assert tight.refused > 0 and tight.used == 0
    # what was held at once is one batch of each queue: 20 entries of one cell and their bytes
    assert 0 < tight.peak <= 2 * 20 * (quota.ENTRY_OVERHEAD + quota.CELL_OVERHEAD + 200)
    assert contents(b) == contents(a, b"r") == contents(c)

    for i in range(200):
        t.put(b"more%03d" % i, {b"r:a": b"y" * 50})
    monkeypatch.setattr(quota, "_process_quota", None)
    code, out = ship_json(a, capsys, "--peer", "1,2", "--batch-entries", "20")
    assert code == 0, out
    roomy = quota._process_quota
    assert roomy is not None and roomy.refused == 0 and roomy.used == 0
    assert roomy.peak > tight.peak  # two batches in flight at once
    assert contents(b) == contents(a, b"r") == contents(c)

    # batches being read count too: a full quota cuts them, whatever --batch-entries says
    for i in range(200):
        t.put(b"last%03d" % i, {b"r:a": b"z" * 50})
    code, out = ship_json(a, capsys, "--peer", "1,2", "--buffer-quota", "1")
    assert code == 0, out
    assert [p["totals"]["entries_shipped"] for p in out["peers"]] == [200, 200]
    # a run of the reader each: at most BATCH entries
    assert all(p["totals"]["batches"] >= 200 // BATCH for p in out["peers"]), out
    code, out = ship_json(a, capsys, "--peer", "1,2")
    assert code == 0 and [p["totals"]["batches"] for p in out["peers"]] == [0, 0]  # nothing new
    assert contents(b) == contents(a, b"r") == contents(c)
