"""SEP subscriptions run for real: a ship killed mid-batch, enable/disable, tailing, the
walship_sep DAG, and replaying a window into a subscription (command and DAG)."""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import signal
import subprocess
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from airflow_env import AIRFLOW_MARKS, source_conn, task_failures
from fixtures_spark_wal import HOUR, ms, write_hourly_wals
from kazoo.client import KazooClient
from replication_helpers import Cluster, current_wals_enqueued, make_cluster
from sep_listeners import DELAY_ENV, OUT_ENV, read_events
from waiting import wait_until

from walship.cli import main
from walship.sep.subscriptions import Subscriptions
from walship.servername import ServerName
from walship.zk import ReplicationQueues, ZnodeLayout, ensure_cluster_id, zk_client
from walship.zk.locks import read_holder
from walship_testing.minicluster.process import MiniClusterProcess

pytestmark = [
    pytest.mark.integration,
    *AIRFLOW_MARKS,
]

Factory = Callable[..., MiniClusterProcess]
LISTENER = "sep_listeners:JsonLinesListener"
TESTS = Path(__file__).resolve().parents[1]


def add(a: Cluster, name: str, *extra: str, listener: str = LISTENER) -> None:
    assert main([*a.cli_flags(), "subscription", "add", name, "--listener", listener, *extra]) == 0
    with zk_client(a.zk_hosts) as client:
        queues = ReplicationQueues(client, ZnodeLayout(a.parent))
        wait_until(lambda: current_wals_enqueued(a, queues, name), what=f"WALs queued for {name}")


def cli_env(**extra: str) -> dict[str, str]:
    """The environment of a ``walship`` subprocess: the tests' listeners importable."""
    path = os.pathsep.join(p for p in (str(TESTS), os.environ.get("PYTHONPATH", "")) if p)
    return {**os.environ, "PYTHONPATH": path, **extra}


def rows_of(events: list[dict[str, Any]]) -> list[str]:
    return [e["row"] for e in events]


@pytest.fixture
def events_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    path = str(tmp_path / "events.jsonl")
    monkeypatch.setenv(OUT_ENV, path)
    return path


@pytest.fixture
def a(minicluster_factory: Factory, zk_hosts: str, events_path: str) -> Cluster:
    return make_cluster(minicluster_factory, zk_hosts, "A")


BATCH = 20


def test_a_ship_killed_mid_batch_delivers_again_only_the_unacknowledged_batch(
    a: Cluster, events_path: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    add(a, "sub")
    total = 120
    t = a.table()
    for i in range(total):
        t.put(b"row-%03d" % i, {b"r:a": b"v%d" % i})
    cmd = [sys.executable, "-m", "walship.cli", *a.cli_flags(), "ship", "--peer", "sub", "--batch-entries", str(BATCH)]
    # each batch sleeps after its events are written; a short session frees the killed one's lock soon
    env = cli_env(**{DELAY_ENV: "0.5", "WALSHIP_ZK_SESSION_TIMEOUT": "2"})
    with open(tmp_path / "ship.err", "w") as err:
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=err)
        try:
            wait_until(lambda: read_events(events_path), timeout=60, interval=0.01, what="a batch delivered")
        finally:
            proc.send_signal(signal.SIGKILL)
            proc.wait()
    before = read_events(events_path)
    with zk_client(a.zk_hosts) as client:
        committed = {
            w.name: w.position
            for q in ReplicationQueues(client, ZnodeLayout(a.parent)).list_queues("sub")
            for w in q.wals
        }
    assert 0 < len(before) < total, (tmp_path / "ship.err").read_text()[-2000:]
    capsys.readouterr()
    # the killed shipper's lock lives until its session expires: wait for it
    assert main([*a.cli_flags(), "ship", "--peer", "sub", "--batch-entries", str(BATCH), "--lock-wait", "30"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["status"] == "ok" and "busy" not in summary["queue_states"], summary
    events = read_events(events_path)
    assert set(rows_of(events)) == {f"row-{i:03d}" for i in range(total)}  # every workload event
    counts = Counter((e["wal"], e["offset"], e["row"]) for e in events)
    duplicates = {key for key, n in counts.items() if n > 1}
    assert max(counts.values()) <= 2
    # delivered before the kill past the committed position: the unacknowledged batch, delivered again
    unacknowledged = {(e["wal"], e["offset"], e["row"]) for e in before if e["offset"] >= committed[e["wal"]]}
    assert duplicates == unacknowledged
    assert len({(wal, offset) for wal, offset, _ in duplicates}) <= BATCH


def show(a: Cluster, name: str, capsys: pytest.CaptureFixture[str], *, as_json: bool = True) -> Any:
    capsys.readouterr()
    assert main([*a.cli_flags(), "subscription", "show", name, *(["--json"] if as_json else [])]) == 0
    out = capsys.readouterr().out
    return json.loads(out) if as_json else out


def ship_sub(a: Cluster, name: str, capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    capsys.readouterr()
    assert main([*a.cli_flags(), "ship", "--peer", name]) == 0
    summary: dict[str, Any] = json.loads(capsys.readouterr().out)
    return summary


def test_b_disabled_delivers_nothing_enabled_resumes_show_tells(
    a: Cluster, events_path: str, capsys: pytest.CaptureFixture[str]
) -> None:
    add(a, "sub", "--threads", "2", "--payload-column", "r:p")
    info = show(a, "sub", capsys)
    assert info["state"] == "ENABLED" and info["threads"] == 2 and info["payload_column"] == "r:p"
    assert info["listener"] == LISTENER and info["cluster_id"]
    t = a.table()
    for i in range(5):
        t.put(b"first-%d" % i, {b"r:a": b"v"})
    ship_sub(a, "sub", capsys)
    assert sorted(rows_of(read_events(events_path))) == [f"first-{i}" for i in range(5)]

    assert main([*a.cli_flags(), "subscription", "disable", "sub"]) == 0
    assert show(a, "sub", capsys)["state"] == "DISABLED"
    assert re.search(r"^state\s+DISABLED$", show(a, "sub", capsys, as_json=False), re.M)
    for i in range(5):
        t.put(b"second-%d" % i, {b"r:a": b"v"})
    assert ship_sub(a, "sub", capsys)["status"] == "disabled"
    assert len(read_events(events_path)) == 5  # nothing delivered while disabled

    assert main([*a.cli_flags(), "subscription", "enable", "sub"]) == 0
    assert show(a, "sub", capsys)["state"] == "ENABLED"
    ship_sub(a, "sub", capsys)
    rows = rows_of(read_events(events_path))  # from where it was: the second rows, each once
    assert sorted(rows) == sorted([f"first-{i}" for i in range(5)] + [f"second-{i}" for i in range(5)])


def test_c_tail_delivers_events_written_while_it_runs(a: Cluster, events_path: str, tmp_path: Path) -> None:
    add(a, "sub")
    cmd = [sys.executable, "-m", "walship.cli", *a.cli_flags(), "tail", "--peer", "sub", "--duration", "6"]
    with open(tmp_path / "tail.err", "w") as err:
        proc = subprocess.Popen(cmd, env=cli_env(), stdout=subprocess.PIPE, stderr=err, text=True)
        try:
            with zk_client(a.zk_hosts) as client:
                layout = ZnodeLayout(a.parent)
                queues = ReplicationQueues(client, layout).list_queues("sub")
                wait_until(
                    lambda: all(read_holder(client, layout, q.server, str(q.queue_id)) for q in queues),
                    timeout=30,
                    what="the tailer holding the subscription's queues",
                )
            t = a.table()
            for i in range(10):
                t.put(b"live-%d" % i, {b"r:a": b"v"})
            wanted = {f"live-{i}" for i in range(10)}
            wait_until(lambda: set(rows_of(read_events(events_path))) == wanted, timeout=30, what="the live rows")
            out, _ = proc.communicate(timeout=60)
        finally:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, (tmp_path / "tail.err").read_text()[-2000:]
    assert json.loads(out)["status"] == "ok"
    assert len(read_events(events_path)) == 10


def test_d_sep_dag_runs_the_subscriptions_or_waits_then_skips(
    dagbag: Any, a: Cluster, events_path: str, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("AIRFLOW_CONN_WALSHIP_SOURCE", source_conn(a))
    dag = dagbag.dags["walship_sep"]
    assert dag.max_active_runs == 1 and "continuous" in type(dag.timetable).__name__.lower()
    # with no subscription it waits up to the duration (on a fake clock in the test below), then skips
    idle = dag.test(run_conf={"subscriptions": "", "duration": 2})
    states = {ti.task_id: ti.state for ti in idle.get_task_instances()}
    assert idle.state == "success" and states["tail"] == "skipped", states

    add(a, "sub")
    add(a, "sub2", listener="sep_listeners:SecondJsonLinesListener")
    for i in range(20):
        a.table().put(b"dag-%02d" % i, {b"r:a": b"v"})
    run = dag.test(run_conf={"subscriptions": "", "duration": 3})  # every enabled subscription
    states = {ti.task_id: ti.state for ti in run.get_task_instances()}
    assert run.state == "success", states
    wanted = [f"dag-{i:02d}" for i in range(20)]
    assert sorted(rows_of(read_events(events_path))) == wanted
    assert sorted(rows_of(read_events(events_path + ".second"))) == wanted

    capfd.readouterr()
    bad = dag.test(run_conf={"subscriptions": "sub,nosuch", "duration": 2})
    assert bad.state == "failed"
    assert bad.get_task_instance("tail").try_number == 1  # at once: no retry makes it a subscription
    (reason,) = task_failures(capfd.readouterr().out)
    assert reason.endswith(
        "Param subscriptions: subscription nosuch does not exist (/hbase-a/replication/peers/nosuch)"
    )


def test_a_run_with_nothing_to_do_waits_for_a_subscription(zk: KazooClient, zk_hosts: str) -> None:
    """What the walship_sep DAG's task does first: it waits (here on a fake clock) up to its
    duration for an enabled subscription, and takes one that appears meanwhile."""
    from walship_airflow.sep import await_subscriptions

    layout = ZnodeLayout("/hbase")
    subs = Subscriptions(zk, layout, zk_hosts)
    now = [0.0]
    slept: list[float] = []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        now[0] += seconds

    assert await_subscriptions(subs, "", wait=5, poll=2, clock=lambda: now[0], sleep=sleep) == []
    assert slept == [2, 2, 1]  # up to the duration, no more, no busy loop
    subs.add(subs.config("off", listener=LISTENER, enabled=False))

    def add_on_second_look(seconds: float) -> None:
        sleep(seconds)
        if len(slept) == 5:
            subs.add(subs.config("late", listener=LISTENER))

    assert await_subscriptions(subs, " ", wait=60, poll=2, clock=lambda: now[0], sleep=add_on_second_look) == ["late"]
    assert await_subscriptions(subs, "off, late,off", wait=0) == ["off", "late"]  # named: disabled ones too


SRC = ZnodeLayout("/src")
SERVER = ServerName("rs1.example.com", 16020, 1)
H0 = dt.datetime(2026, 11, 20, 10, tzinfo=dt.UTC)


def row(h: int, i: int) -> str:
    return f"skip-h{h}-{i:02d}" if i in (4, 8) else f"h{h}-{i:02d}"


@pytest.fixture
def replay_source(zk: KazooClient, zk_hosts: str, tmp_path: Path, events_path: str) -> Path:
    """WALs of three hours (a new WAL each hour, all archived but the last), an edit a minute
    for 10 minutes each hour; subscription ``sub`` starting 2.5 minutes into the first hour,
    its filter dropping rows ``skip-*``."""
    ensure_cluster_id(zk, SRC)
    subs = Subscriptions(zk, SRC, zk_hosts)
    start = ms(H0 + dt.timedelta(minutes=2, seconds=30))
    subs.add(subs.config("sub", listener=LISTENER, start_time=start, filter="sep_listeners:skip_rows"))
    root = tmp_path / "src"
    write_hourly_wals(root, SERVER, H0, lambda h, i: row(h, i).encode(), lambda h, i: b"v")
    return root


def test_e_replay_into_a_subscription_delivers_the_window_only(
    dagbag: Any,
    zk_hosts: str,
    replay_source: Path,
    events_path: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    g = ["--zk", zk_hosts, "--znode-parent", SRC.parent, "--wal-root", str(replay_source)]
    capsys.readouterr()
    assert main([*g, "replay", "--peer", "sub", "--from", "2026-11-20T10:00:00Z", "--to", "2026-11-20T11:05:30Z"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["entries_in_window"] == 16 and report["gaps"] == [], report
    assert report["cells_shipped"] == 10, report  # delivered: from the start time on, filtered
    # hour 0 from the start time on (minute 3), hour 1 up to minute 5; never the skip-* rows
    expected = [f"h0-{i:02d}" for i in (3, 5, 6, 7, 9)] + [f"h1-{i:02d}" for i in (0, 1, 2, 3, 5)]
    assert rows_of(read_events(events_path)) == expected

    Path(events_path).unlink()
    hostport, _, chroot = zk_hosts.partition("/")
    monkeypatch.setenv(
        "AIRFLOW_CONN_WALSHIP_SOURCE",
        json.dumps(
            {
                "conn_type": "walship",
                "host": f"{hostport}/{chroot}",
                "extra": {"znode_parent": SRC.parent, "wal_root": str(replay_source)},
            }
        ),
    )
    dag = dagbag.dags["walship_replay"]
    # a run at T replays the hour that ended at T: the first hour
    run = dag.test(logical_date=H0 + HOUR, run_conf={"peer_id": "sub", "allow_gaps": False})
    assert run.state == "success"
    assert rows_of(read_events(events_path)) == [f"h0-{i:02d}" for i in (3, 5, 6, 7, 9)]
    with zk_client(zk_hosts) as client:  # no queue position moved, no queue made
        assert ReplicationQueues(client, SRC).list_queues() == []
