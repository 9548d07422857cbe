"""The pure parts of a switchover: the cluster key of a quorum, the tables a request resolves
to, the request's checks, the record's JSON, and the page's section of the records."""

from __future__ import annotations

import re
from html import unescape

import pytest

from walship.errors import ConfigError, InvalidPeerConfigError, SwitchoverError, ZkDataError
from walship.peer import PeerConfig
from walship.switchover import (
    ROLLBACK,
    STEPS,
    SwitchoverRecord,
    SwitchoverRequest,
    cluster_key,
    resolve_tables,
    split_tables,
)
from walship_airflow.plugins.switchovers import render_switchovers


def test_the_cluster_key_of_a_quorum() -> None:
    assert cluster_key("zk1:2181,zk2:2181", "/hbase") == "zk1,zk2:2181:/hbase"
    assert cluster_key("127.0.0.1:40001", "/hbase-a") == "127.0.0.1:40001:/hbase-a"
    assert cluster_key("zk1", "/hbase") == "zk1:2181:/hbase"
    assert cluster_key("zk1:2181/apps", "/hbase") == "zk1:2181:/apps/hbase"
    with pytest.raises(ConfigError, match="different ports"):
        cluster_key("zk1:2181,zk2:2182", "/hbase")


def test_the_tables_are_those_asked_for_or_the_peers() -> None:
    peer = PeerConfig("1", "zk:2181:/hbase", table_cfs={"ns:b": None, "a": ("r",)})
    assert resolve_tables(peer, []) == ("a", "ns:b")
    assert resolve_tables(peer, ["default:t", " u ", "t"]) == ("t", "u")
    with pytest.raises(SwitchoverError, match="peer 2 names no tables .*every table.*--tables"):
        resolve_tables(PeerConfig("2", "zk:2181:/hbase"), [])
    assert split_tables(["t1, t2 t1,,", "t3"]) == ("t1", "t2", "t3")
    assert split_tables([""]) == ()


def test_a_request_names_what_is_wrong() -> None:
    with pytest.raises(SwitchoverError, match="fence 'lock': expected one of read_only, disable"):
        SwitchoverRequest("1", fence="lock")
    with pytest.raises(SwitchoverError, match="drain timeout"):
        SwitchoverRequest("1", drain_timeout=0)
    with pytest.raises(InvalidPeerConfigError):
        SwitchoverRequest("1", reverse_peer_id="a/b")
    assert SwitchoverRequest("7").back_id == "7" and SwitchoverRequest("7", reverse_peer_id="9").back_id == "9"


def record() -> SwitchoverRecord:
    r = SwitchoverRecord("1", "manual__1", "1", "zk-b:2181:/hbase", "zk-a:2181:/hbase", ["t<1>"])
    r.steps["preflight"].state = "done"
    r.steps["preflight"].started_at, r.steps["preflight"].ended_at = 1_767_225_600_000, 1_767_225_601_500
    r.steps["fence"].state = "running"
    r.steps["fence"].started_at = 1_767_225_602_000
    r.steps["fence"].changed.append("table t<1>: READONLY false -> true")
    r.steps["fence"].log_url = "dags/walship_switchover/runs/manual__1/tasks/fence?try_number=1"
    r.fenced["t<1>"] = {"read_only": False, "enabled": True}
    return r


def test_the_record_round_trips_and_a_foreign_one_is_named() -> None:
    r = record()
    back = SwitchoverRecord.from_json(r.to_json(), "/x")
    assert back == r and not back.finished and back.changed_anything
    assert list(back.steps) == [*STEPS, ROLLBACK]
    fresh = SwitchoverRecord("1", "r", "1", "b:1:/b", "a:1:/a", ["t"])
    assert not fresh.changed_anything
    with pytest.raises(ZkDataError, match="/hbase/replication/walship/switchovers/1.*not a walship switchover record"):
        SwitchoverRecord.from_json({"peer_id": "1"}, "/hbase/replication/walship/switchovers/1")


def test_the_pages_section_shows_each_step() -> None:
    assert render_switchovers([]) == ""
    html = render_switchovers([record().to_json()])
    rows = re.findall(r'<tr data-step="([a-z]+)" data-state="([a-z-]+)">', html)
    assert rows == [("preflight", "done"), ("fence", "running"), *((s, "pending") for s in STEPS[2:])]
    assert "t&lt;1&gt;" in html and "<1>" not in html  # escaped
    assert "table t&lt;1&gt;: READONLY false -&gt; true" in html
    assert 'href="../dags/walship_switchover/runs/manual__1/tasks/fence?try_number=1"' in unescape(html)
    assert "<td>1.5 s</td>" in html  # preflight took 1.5 s
    rolled = record()
    rolled.steps[ROLLBACK].state = "done"
    assert 'data-step="rollback"' in render_switchovers([rolled.to_json()])
    assert "cannot be read: zk down" in render_switchovers(None, error="switchovers cannot be read: zk down")
