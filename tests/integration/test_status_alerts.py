"""What an on-call is alerted on, with real miniclusters and real shipping: stuck queues (a
backlog and no progress, from ZooKeeper's times and walship's progress records), shipping
errors counted by kind, pending dead letters, the last successful ship; in the status JSON,
``walship status``, the metrics ``walship metrics serve`` serves, and every metric the
shipped alert rules use."""

from __future__ import annotations

import json
import math
import os
import re
import signal
import subprocess
import sys
import urllib.request
from collections.abc import Callable
from pathlib import Path

import happybase
import pytest
import yaml
from kazoo.client import KazooClient
from replication_helpers import Cluster, ship
from waiting import wait_until

from walship.cli import main
from walship.errors import ERROR_KINDS
from walship.peer import PeerConfig
from walship.replicate import Shipper, WalStore
from walship.replicate.deadletters import replay_dead_letters
from walship.servername import ServerName
from walship.status import QueueStatus, collect_status, stuck_queues
from walship.status.metrics import alert_rules, status_registry
from walship.status.model import ReplicationStatus, iso_ms
from walship.wal import Cell, CellType, WalKey, WalWriter, build_wal_name
from walship.zk import ReplicationPeers, ReplicationQueues, ZnodeLayout, ensure_cluster_id, register_server, zk_client
from walship.zk.records import ProgressStore
from walship_testing.minicluster import AdminClient
from walship_testing.minicluster.process import MiniClusterProcess

pytestmark = pytest.mark.integration

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def status_of(a: Cluster, stuck_after: float, now_ms: int | None = None) -> ReplicationStatus:
    with zk_client(a.zk_hosts) as client:
        return collect_status(
            client, ZnodeLayout(a.parent), WalStore(a.mc.wal_root), "1", stuck_after=stuck_after, now_ms=now_ms
        )


def write(a: Cluster, start: int, n: int) -> None:
    t = a.table()
    for i in range(start, start + n):
        t.put(b"row%05d" % i, {b"r:q": b"v%d" % i})


def with_backlog(status: ReplicationStatus) -> dict[tuple[str, str], QueueStatus]:
    return {(q.server, q.queue_id): q for q in status.peers[0].queues if not q.drained}


def samples(registry_or_url: str | ReplicationStatus) -> Samples:
    from prometheus_client import generate_latest
    from prometheus_client.parser import text_string_to_metric_families

    if isinstance(registry_or_url, str):
        with urllib.request.urlopen(registry_or_url, timeout=10) as resp:
            text = resp.read().decode()
    else:
        status = registry_or_url
        text = generate_latest(status_registry(lambda: status)).decode()
    out: Samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return out


def queue_labels(q: QueueStatus, peer_id: str = "1") -> tuple[tuple[str, str], ...]:
    return (("peer", peer_id), ("queue", q.queue_id), ("server", q.server))


def test_a_backlog_nobody_ships_becomes_stuck_and_shipping_clears_it(
    ab: tuple[Cluster, Cluster], capsys: pytest.CaptureFixture[str]
) -> None:
    a, _ = ab
    write(a, 0, 30)
    first = status_of(a, stuck_after=1.0)
    backlog = with_backlog(first)
    assert backlog  # the table's region is on one server: its queue has the rows
    for q in first.peers[0].queues:
        if q.drained:
            assert q.stalled_s is None and not q.stuck
        else:
            assert q.stalled_s is not None and 0 <= q.stalled_s <= q.lag_s
    # nobody ships: within the threshold's second each queue with a backlog is stuck
    stuck = wait_until(
        lambda: (s := status_of(a, stuck_after=1.0)).peers[0].stuck_queues == len(backlog) and s,
        what="every queue with a backlog to be stuck",
    )
    peer = stuck.peers[0]
    assert {(q.server, q.queue_id) for q in peer.queues if q.stuck} == set(backlog)
    assert all(q.stalled_s is not None and q.stalled_s >= 1.0 for q in peer.queues if q.stuck)
    assert peer.totals()["stuck_queues"] == len(backlog) and {q.state for q in peer.queues} == {"idle"}
    found = stuck_queues(stuck)
    assert found == stuck_queues(stuck.to_json())  # the model and its JSON, as the Airflow task reads it
    assert [s.message for s in found] == [
        f"queue {q.queue_id} of peer 1 on {q.server} is stuck: {q.bytes_queued} bytes queued, "
        f"no progress for {q.stalled_s:.1f} s"
        for q in peer.queues
        if q.stuck
    ]
    metrics = samples(stuck)
    assert metrics[("walship_stuck_queues", (("peer", "1"),))] == len(backlog)
    for q in peer.queues:
        assert metrics[("walship_queue_stuck", queue_labels(q))] == (1 if q.stuck else 0)
        assert metrics[("walship_queue_stalled_seconds", queue_labels(q))] == (q.stalled_s or 0.0)
    # the threshold is the status's: with the default, the same queues are not stuck
    assert status_of(a, stuck_after=600).peers[0].stuck_queues == 0
    flags = ["--zk", a.zk_hosts, "--znode-parent", a.parent, "--wal-root", a.mc.wal_root]
    capsys.readouterr()
    assert main([*flags, "status", "--json", "--stuck-after", "1"]) == 0
    (data,) = json.loads(capsys.readouterr().out)["peers"]
    assert data["totals"]["stuck_queues"] == len(backlog)
    assert {(q["server"], q["queue_id"]) for q in data["queues"] if q["stuck"]} == set(backlog)
    assert main([*flags, "status", "--stuck-after", "1"]) == 0
    text = capsys.readouterr().out
    assert f"; {len(backlog)} queue{'s' if len(backlog) > 1 else ''} STUCK" in text
    assert text.count("STUCK: no progress for ") == len(backlog)
    with pytest.raises(SystemExit):
        main([*flags, "status", "--stuck-after", "0"])
    assert "--stuck-after: must be more than 0 seconds, got '0'" in capsys.readouterr().err

    summary = ship(a)
    assert summary.status == "ok", summary.error
    after = status_of(a, stuck_after=1.0)
    assert all(q.stalled_s is None and not q.stuck for q in after.peers[0].queues)
    assert after.peers[0].stuck_queues == 0 and stuck_queues(after) == []


def test_stalled_counts_from_the_last_committed_position(ab: tuple[Cluster, Cluster]) -> None:
    """Part of the backlog shipped: the queue stalls from its position's write (the WAL
    znode's mtime) and the progress record's last ship, whichever is later; exact, at a
    fixed now, and stuck from the threshold on, not a millisecond before."""
    a, _ = ab
    write(a, 0, 30)
    with zk_client(a.zk_hosts) as client:
        layout = ZnodeLayout(a.parent)
        Shipper(client, layout, WalStore(a.mc.wal_root), batch_entries=5).ship_peer("1", max_batches=1)
        (key,) = with_backlog(status_of(a, stuck_after=600))  # the one with the rows, 5 of them shipped
        (q,) = [q for q in ReplicationQueues(client, layout).list_queues("1") if (q.server, str(q.queue_id)) == key]
        stats = [client.get(layout.wal(q.server, str(q.queue_id), w.name))[1] for w in q.wals]
        record = ProgressStore(client, layout).get("1", q.server, str(q.queue_id))
    assert record is not None and record["last_shipped_at"]
    moved = [s.mtime for s in stats if s.mtime > s.ctime]
    assert moved  # the position was set after the WAL was enqueued
    since = max([*moved, stats[0].ctime, int(record["last_shipped_at"])])
    at = status_of(a, stuck_after=5.0, now_ms=since + 5000)
    (qs,) = [s for s in at.peers[0].queues if (s.server, s.queue_id) == (q.server, str(q.queue_id))]
    assert not qs.drained and qs.stalled_s == 5.0 and qs.stuck
    assert qs.last_shipped_at == int(record["last_shipped_at"])
    assert qs.to_json()["last_shipped_at"] == iso_ms(int(record["last_shipped_at"]))
    before = status_of(a, stuck_after=5.0, now_ms=since + 4999)
    (qs,) = [s for s in before.peers[0].queues if (s.server, s.queue_id) == (q.server, str(q.queue_id))]
    assert qs.stalled_s == 4.999 and not qs.stuck


def test_a_disabled_peer_is_never_stuck(ab: tuple[Cluster, Cluster]) -> None:
    a, _ = ab
    with zk_client(a.zk_hosts) as client:
        ReplicationPeers(client, ZnodeLayout(a.parent)).disable("1")
    write(a, 0, 20)
    stalled = wait_until(
        lambda: (s := status_of(a, stuck_after=1.0)) and with_backlog(s)
        and all((q.stalled_s or 0) >= 1.0 for q in with_backlog(s).values()) and s,
        what="the disabled peer's backlog to stall past the threshold",
    )  # fmt: skip
    peer = stalled.peers[0]
    assert {q.state for q in peer.queues} == {"disabled"}
    assert not any(q.stuck for q in peer.queues) and peer.totals()["stuck_queues"] == 0
    assert stuck_queues(stalled) == []
    assert samples(stalled)[("walship_stuck_queues", (("peer", "1"),))] == 0


def test_failed_ships_are_counted_by_kind_and_outlive_the_queue_record(ab: tuple[Cluster, Cluster]) -> None:
    a, b = ab
    write(a, 0, 10)
    status = status_of(a, stuck_after=600)
    assert status.peers[0].errors == {} and status.peers[0].to_json()["errors"] == {}
    metrics = samples(status)
    assert {k for k in metrics if k[0] == "walship_ship_errors_total"} == {
        ("walship_ship_errors_total", (("kind", kind), ("peer", "1"))) for kind in ERROR_KINDS
    }
    assert all(metrics[("walship_ship_errors_total", (("kind", k), ("peer", "1")))] == 0 for k in ERROR_KINDS)
    b.mc.stop()  # the peer's Thrift server is down
    failed = [q for q in ship(a).queues if q.status == "error"]
    assert failed
    again = [q for q in ship(a).queues if q.status == "error"]
    assert {(q.server, q.queue_id) for q in again} == {(q.server, q.queue_id) for q in failed}
    peer = status_of(a, stuck_after=600).peers[0]
    assert peer.errors == {"peer-unavailable": 2 * len(failed)}
    assert peer.to_json()["errors"] == {"peer-unavailable": 2 * len(failed)}
    errored = [q for q in peer.queues if (q.server, q.queue_id) in {(f.server, f.queue_id) for f in failed}]
    assert errored and all(q.last_error and q.last_error["kind"] == "peer-unavailable" for q in errored)
    assert all(q.to_json()["last_error"]["kind"] == "peer-unavailable" for q in errored)
    metrics = samples(status_of(a, stuck_after=600))
    for kind in ERROR_KINDS:
        expected = 2 * len(failed) if kind == "peer-unavailable" else 0
        assert metrics[("walship_ship_errors_total", (("kind", kind), ("peer", "1")))] == expected
    # the counts are the peer's: a queue's record removed (its queue drained and gone) keeps them
    with zk_client(a.zk_hosts) as client:
        store = ProgressStore(client, ZnodeLayout(a.parent))
        for q in failed:
            store.remove("1", q.server, q.queue_id)
        assert store.errors("1") == {"peer-unavailable": 2 * len(failed)}
        with pytest.raises(ValueError, match="'kind' must be one of peer-unavailable, .*got 'nope'"):
            store.count_error("1", "nope")


def test_last_ship_time_per_queue_and_peer(ab: tuple[Cluster, Cluster]) -> None:
    a, _ = ab
    write(a, 0, 20)
    before = status_of(a, stuck_after=600)
    assert all(q.last_shipped_at is None for q in before.peers[0].queues)
    metrics = samples(before)
    assert math.isnan(metrics[("walship_peer_last_ship_timestamp_seconds", (("peer", "1"),))])
    assert all(
        math.isnan(metrics[("walship_last_ship_timestamp_seconds", queue_labels(q))]) for q in before.peers[0].queues
    )
    assert ship(a).status == "ok"
    after = status_of(a, stuck_after=600)
    with zk_client(a.zk_hosts) as client:
        store = ProgressStore(client, ZnodeLayout(a.parent))
        records = {(q.server, q.queue_id): store.get("1", q.server, q.queue_id) for q in after.peers[0].queues}
    shipped = {k: int(r["last_shipped_at"]) for k, r in records.items() if r and r.get("last_shipped_at")}
    assert shipped  # the queue with the rows
    metrics = samples(after)
    for q in after.peers[0].queues:
        at = shipped.get((q.server, q.queue_id))
        assert q.last_shipped_at == at and q.to_json()["last_shipped_at"] == iso_ms(at)
        value = metrics[("walship_last_ship_timestamp_seconds", queue_labels(q))]
        assert value == at / 1000 if at is not None else math.isnan(value)
    assert after.peers[0].last_shipped_at == max(shipped.values())
    assert metrics[("walship_peer_last_ship_timestamp_seconds", (("peer", "1"),))] == max(shipped.values()) / 1000


SERVER = ServerName("rs1.example.com", 16020, 1)
SRC = ZnodeLayout("/src")
#: what Thrift1 cannot express: a Delete of one version, a DeleteFamilyVersion
INCOMPATIBLE = [
    Cell(b"row1", b"r", b"q", 1001, CellType.Delete),
    Cell(b"row1", b"r", b"", 1002, CellType.DeleteFamilyVersion),
]


def test_dead_letters_pending_until_replayed(
    zk: KazooClient, zk_hosts: str, minicluster_factory: Callable[..., MiniClusterProcess], tmp_path: Path
) -> None:
    """A WAL written here holds a put and two deletes Thrift1 cannot express; the peer
    dead-letters them: two pending, until a replay over Thrift2 applies them."""
    b = minicluster_factory("B")
    conn = happybase.Connection(*b.thrift)
    conn.create_table("t", {"r": {"max_versions": 5}})
    conn.close()
    AdminClient(b.admin).set_scope("t", "r", 1)
    ensure_cluster_id(zk, SRC)
    register_server(zk, SRC, str(SERVER))
    host, port = b.thrift
    peers = ReplicationPeers(zk, SRC)
    peers.add(
        PeerConfig(
            "1",
            f"{zk_hosts.partition('/')[0]}:/{zk_hosts.partition('/')[2]}/hbase-b",
            configuration={"walship.sink.thrift": f"{host}:{port}", "walship.incompatible": "deadletter"},
        )
    )
    wal = build_wal_name(SERVER, 1_700_000_000_000)
    ReplicationQueues(zk, SRC).add_wal(str(SERVER), wal)
    folder = tmp_path / "src" / "WALs" / str(SERVER)
    folder.mkdir(parents=True)
    with open(folder / wal, "wb") as f, WalWriter(f) as w:
        key = WalKey(b"0" * 32, b"t", 1, 1_700_000_000_001, scopes={b"r": 1})
        w.append(key, [Cell(b"row1", b"r", b"q", 1000, CellType.Put, b"v")])
        w.append(WalKey(b"0" * 32, b"t", 2, 1_700_000_000_002, scopes={b"r": 1}), INCOMPATIBLE)
    walstore = WalStore(str(tmp_path / "src"))

    def pending() -> int | None:
        status = collect_status(zk, SRC, walstore, "1")
        value = samples(status)[("walship_dead_letters_pending", (("peer", "1"),))]
        assert status.peers[0].to_json()["dead_letters_pending"] == value
        return status.peers[0].dead_letters_pending

    assert pending() == 0
    assert Shipper(zk, SRC, walstore).ship_peer("1").totals()["deadlettered"] == 2
    assert pending() == 2
    thrift2 = {"walship.sink.protocol": "thrift2", "walship.sink.thrift2": f"{b.thrift2[0]}:{b.thrift2[1]}"}
    peers.update("1", configuration={**peers.get("1").configuration, **thrift2})
    assert replay_dead_letters(zk, SRC, walstore, "1").cells_applied == 2
    assert pending() == 0


def rule_metric_names() -> set[str]:
    """Every metric name the shipped alert rules' expressions use."""
    rules = [r for g in yaml.safe_load(alert_rules())["groups"] for r in g["rules"]]
    assert len(rules) == 7
    return {name for r in rules for name in re.findall(r"\bwalship_[a-z_]+\b", r["expr"])}


def test_metrics_serve_serves_every_metric_the_alert_rules_use(ab: tuple[Cluster, Cluster]) -> None:
    a, _ = ab
    write(a, 0, 20)
    wait_until(lambda: status_of(a, stuck_after=1.0).peers[0].stuck_queues > 0, what="a queue stuck past a second")
    cmd = [sys.executable, "-m", "walship.cli", "--zk", a.zk_hosts, "--znode-parent", a.parent]
    cmd += ["--wal-root", a.mc.wal_root, "metrics", "serve", "--port", "0", "--host", "127.0.0.1", "--stuck-after", "1"]
    with subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"}
    ) as proc:
        try:
            assert proc.stdout is not None
            line = proc.stdout.readline()
            assert line.startswith("walship metrics on http://127.0.0.1:"), line
            metrics = samples(line.split()[-1])
        finally:
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=30) == 0
    served = {name for name, _ in metrics}
    used = rule_metric_names()
    assert used <= served, used - served
    assert used == {
        "walship_status_up",
        "walship_queue_stalled_seconds",
        "walship_queue_stuck",
        "walship_ship_errors_total",
        "walship_dead_letters_pending",
        "walship_queue_lag_seconds",
        "walship_peer_enabled",
        "walship_bulk_loads_total",
        "walship_last_ship_timestamp_seconds",
    }
    status = status_of(a, stuck_after=1.0)
    stuck = [q for q in status.peers[0].queues if q.stuck]
    assert metrics[("walship_status_up", ())] == 1
    assert metrics[("walship_stuck_queues", (("peer", "1"),))] == len(stuck)
    assert all(metrics[("walship_queue_stuck", queue_labels(q))] == 1 for q in stuck)
    assert all(metrics[("walship_queue_stalled_seconds", queue_labels(q))] >= 1.0 for q in stuck)
    assert metrics[("walship_dead_letters_pending", (("peer", "1"),))] == 0
    assert metrics[("walship_bulk_loads_not_shipped", (("peer", "1"),))] == 0


def test_metrics_rules_prints_the_rules_file(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["metrics", "rules"]) == 0
    assert capsys.readouterr().out == alert_rules()
    assert alert_rules() == (Path(__file__).parents[2] / "src/walship/status/alerts.yml").read_text()
