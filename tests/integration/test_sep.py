"""SEP subscriptions: a listener gets every row's events, in WAL order, from the same queues,
filters and positions as any peer."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from replication_helpers import Cluster, current_wals_enqueued, make_cluster
from sep_listeners import OUT_ENV, read_events
from waiting import wait_until

from walship.cli import main
from walship.zk import ReplicationQueues, ZnodeLayout, zk_client
from walship_testing.minicluster.process import MiniClusterProcess

pytestmark = pytest.mark.integration

Factory = Callable[..., MiniClusterProcess]
LISTENER = "sep_listeners:JsonLinesListener"


def add(a: Cluster, name: str, *extra: str) -> None:
    assert main([*a.cli_flags(), "subscription", "add", name, "--listener", LISTENER, *extra]) == 0
    with zk_client(a.zk_hosts) as client:
        queues = ReplicationQueues(client, ZnodeLayout(a.parent))
        wait_until(lambda: current_wals_enqueued(a, queues, name), what=f"WALs queued for {name}")


@pytest.fixture
def a(minicluster_factory: Factory, zk_hosts: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Cluster:
    monkeypatch.setenv(OUT_ENV, str(tmp_path / "events.jsonl"))
    return make_cluster(minicluster_factory, zk_hosts, "A")


def test_listener_gets_every_row_in_wal_order(a: Cluster, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    add(a, "sub1", "--payload-column", "r:p", "--filter", "sep_listeners:skip_rows")
    t = a.table()
    for ts in (100, 200, 300):
        for row in (b"row1", b"row2"):
            t.put(row, {b"r:a": b"a%d" % ts, b"r:p": b"P%d" % ts, b"l:x": b"local"}, timestamp=ts)
    t.put(b"skip1", {b"r:a": b"dropped"})
    t.delete(b"row1", columns=[b"r:a"])
    t.delete(b"row2", columns=[b"r"])
    t.delete(b"row1")
    capsys.readouterr()
    assert main([*a.cli_flags(), "ship", "--peer", "sub1"]) == 0, capsys.readouterr().err
    events = read_events(str(tmp_path / "events.jsonl"))
    assert {e["row"] for e in events} == {"row1", "row2"}
    for row in ("row1", "row2"):
        mine = [e for e in events if e["row"] == row]
        assert [(e["wal"], e["offset"]) for e in mine] == sorted((e["wal"], e["offset"]) for e in mine)
        assert [e["payload"] for e in mine[:3]] == ["P100", "P200", "P300"]
        assert all(c[0] == "r" for e in mine for c in e["cells"])  # family l is scope 0
    types = {c[3] for e in events for c in e["cells"]}
    assert {"Put", "DeleteColumn", "DeleteFamily"} <= types
    capsys.readouterr()
    assert main([*a.cli_flags(), "peer", "list", "--json"]) == 0
    (peer,) = json.loads(capsys.readouterr().out)
    assert peer["subscription"] is True and peer["managed"] is True


def test_bad_input_is_a_clear_error(a: Cluster, capsys: pytest.CaptureFixture[str]) -> None:
    base = [*a.cli_flags(), "subscription", "add"]
    for args, needle in (
        (["s1", "--listener", "nosuch"], "no listener 'nosuch'"),
        (["s1", "--listener", "sep_listeners:NoProcessEvents"], "process_events"),
        (["s1", "--listener", LISTENER, "--threads", "0"], "walship.sep.threads"),
        (["s1", "--listener", LISTENER, "--payload-column", "nocolon"], "walship.sep.payload-column"),
        (["s1", "--listener", LISTENER, "--start-time", "yesterday"], "--start-time"),
        (["s1", "--parquet", "file:///tmp/x", "--threads", "2"], "--threads does not apply to a change log"),
    ):
        capsys.readouterr()
        assert main([*base, *args]) == 1, args
        err = capsys.readouterr().err
        assert needle in err and "Traceback" not in err, err
    add(a, "s1")
    assert main([*base, "s1", "--listener", LISTENER]) == 1
    assert "exists already" in capsys.readouterr().err
    capsys.readouterr()
    assert main([*a.cli_flags(), "subscription", "list", "--json"]) == 0
    (info,) = json.loads(capsys.readouterr().out)
    assert info["name"] == "s1" and info["listener"] == LISTENER and info["threads"] == 1
    assert main([*a.cli_flags(), "subscription", "disable", "s1"]) == 0
    assert main([*a.cli_flags(), "subscription", "remove", "s1"]) == 0
    with zk_client(a.zk_hosts) as client:
        layout = ZnodeLayout(a.parent)
        assert client.exists(layout.subscription("s1")) is None
        assert ReplicationQueues(client, layout).list_queues("s1") == []


def test_start_time_threads_and_a_failing_listener(
    a: Cluster, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    t = a.table()
    t.put(b"before", {b"r:a": b"old"})  # written before the subscription's start time
    add(a, "sub2", "--start-time", "now", "--threads", "4")
    for i in range(40):
        for v in range(3):
            t.put(b"row%02d" % i, {b"r:a": b"v%d" % v})
    monkeypatch.setenv("SEP_TEST_FAIL_ROW", "row07")
    capsys.readouterr()
    assert main([*a.cli_flags(), "ship", "--peer", "sub2"]) == 1  # the listener refuses a batch
    summary = json.loads(capsys.readouterr().out)
    assert "listener refuses row row07" in summary["error"]
    assert main([*a.cli_flags(), "status", "--peer", "sub2", "--json"]) == 0  # the queue's last error names it
    status = json.loads(capsys.readouterr().out)
    errors = [(q["last_error"] or {}).get("message", "") for p in status["peers"] for q in p["queues"]]
    assert any("row07" in e for e in errors), errors
    monkeypatch.delenv("SEP_TEST_FAIL_ROW")
    assert main([*a.cli_flags(), "ship", "--peer", "sub2"]) == 0
    events = read_events(str(tmp_path / "events.jsonl"))
    rows = {e["row"] for e in events}
    assert "before" not in rows and rows == {f"row{i:02d}" for i in range(40)}
    for i in range(40):  # every version of every row, in WAL order, each row on one worker
        mine = [e for e in events if e["row"] == f"row{i:02d}"]
        values = [c[4] for e in mine for c in e["cells"]]
        assert values[-3:] == ["v0", "v1", "v2"] and len({e["thread"] for e in mine}) == 1
    assert len({e["thread"] for e in events}) > 1  # rows spread over the workers
