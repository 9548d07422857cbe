"""The ``walship_add_peer`` DAG, run by Airflow itself (``dag.test()``, and a live ``airflow
standalone`` through its REST API) against real miniclusters A (source) and B (the new peer):
the peer is added through A's master, the rows written before are copied with Spark, the
rows written after are shipped from its queues, the verify finds no bad row, and the peer ends
shipping. A step that fails leaves the peer DISABLED (or not added at all), and the run goes on
from the failed step once it is cleared."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from airflow_env import AIRFLOW_MARKS, Standalone, source_conn, task_failures
from replication_helpers import Cluster, ShippingLoop, contents, make_cluster
from test_scope import create, exists
from waiting import wait_until

from walship.peer import MANAGED_KEY, PeerConfig
from walship.rpc import MasterAdmin
from walship.rpc.peers import MasterPeers, peer_admin
from walship.zk import ReplicationPeers, ZnodeLayout, zk_client
from walship_testing.minicluster import AdminClient
from walship_testing.minicluster.process import MiniClusterProcess

pytestmark = [pytest.mark.integration, *AIRFLOW_MARKS]

PEER = "1"
STEPS = {
    "check", "add", "plan_copy", "copy", "enable", "wait_drained", "plan_verify", "verify", "report", "verified",
    "shipping",
}  # fmt: skip


@pytest.fixture
def pair(minicluster_factory: Callable[..., MiniClusterProcess], zk_hosts: str) -> tuple[Cluster, Cluster]:
    """Source A and B, each with table t (family r scoped 1, l scoped 0); no peer yet."""
    return make_cluster(minicluster_factory, zk_hosts, "A"), make_cluster(minicluster_factory, zk_hosts, "B")


def conf(b: Cluster, **changes: Any) -> dict[str, Any]:
    """Every Param (dag.test() keeps an earlier run's conf in the DAG object's Params): peer 1
    into B over Thrift2, table t family r, with a copy."""
    return {
        "peer_id": PEER,
        "cluster_key": b.cluster_key,
        "protocol": "thrift2",
        "sink_thrift2": b.thrift2_address(),
        "sink_thrift": "",
        "table_cfs": "t:r",
        "namespaces": "",
        "serial": False,
        "bandwidth": 0,
        "copy": True,
        "create_missing": False,
        "copy_margin": 0,
        "configuration": {},
        "drain_timeout": 120,
        "spark_conn_id": "spark_default",
        **changes,
    }


def write(cluster: Cluster, prefix: bytes, n: int, table: bytes = b"t") -> None:
    with cluster.conn().table(table).batch() as batch:
        for i in range(n):
            cells = {b"r:q": b"%d" % i, b"l:q": b"local"} if table == b"t" else {b"f:q": b"%d" % i}
            batch.put(prefix + b"%03d" % i, cells)


def rows(cluster: Cluster, prefix: bytes) -> set[bytes]:
    return {row for row in contents(cluster) if row.startswith(prefix)}


def master_view(a: Cluster) -> tuple[PeerConfig | None, bool]:
    """Peer 1 as A's master lists it (its configuration and HBase's peer-state), and walship's
    switch of it: ``(None, False)`` when the master has no such peer."""
    with zk_client(a.zk_hosts) as client:
        layout = ZnodeLayout(a.parent)
        with MasterAdmin(client, layout) as admin:
            found = {d.peer_id: d for d in admin.list_peers()}
        if PEER not in found:
            assert client.exists(layout.peer(PEER)) is None  # nor a znode behind the master's back
            return None, False
        d = found[PEER]
        return PeerConfig.from_proto(PEER, d.config, enabled=d.enabled), ReplicationPeers(client, layout).switch(PEER)


def states(run: Any) -> dict[str, str]:
    return {ti.task_id: ti.state for ti in run.get_task_instances()}


@pytest.fixture
def shipping(pair: tuple[Cluster, Cluster]) -> Iterator[ShippingLoop]:
    """Peer 1 of the source shipped while the DAG runs."""
    with ShippingLoop((pair[0], PEER)) as s:
        yield s
    assert not s.errors


def test_the_dag_is_manual_with_a_step_per_task(dagbag: Any, pair: tuple[Cluster, Cluster]) -> None:
    dag = dagbag.dags["walship_add_peer"]
    assert set(dag.task_dict) == STEPS | {"disable_on_failure"}
    assert type(dag.timetable).__name__ == "NullTimetable" and dag.max_active_runs == 1
    assert dag.catchup is False and dag.tags and dag.doc_md
    assert set(dag.params) == set(conf(pair[1]))
    assert all(dag.params.get_param(name).description for name in dag.params)
    downstream = {
        "check": {"add"},
        "add": {"plan_copy", "plan_verify"},
        "plan_copy": {"copy"},
        "copy": {"enable"},
        "enable": {"wait_drained"},
        "wait_drained": {"plan_verify"},
        "plan_verify": {"verify", "report"},
        "verify": {"report"},
        "report": {"verified"},
        "verified": {"shipping"},
        "shipping": set(),
    }
    assert {t: dag.task_dict[t].downstream_task_ids - {"disable_on_failure"} for t in STEPS} == downstream
    # the copy may be skipped; a failure anywhere leaves the peer disabled
    assert dag.task_dict["enable"].trigger_rule == "none_failed"
    cleanup = dag.task_dict["disable_on_failure"]
    assert cleanup.trigger_rule == "one_failed" and cleanup.upstream_task_ids == STEPS
    assert dag.task_dict["verified"].retries == 0 and dag.task_dict["copy"].retries >= 1


def test_a_new_peer_is_added_copied_enabled_shipped_and_verified(
    dagbag: Any, pair: tuple[Cluster, Cluster], shipping: ShippingLoop, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With ``copy`` and ``create_missing``: t2 exists on A only and is created on B; the rows
    written before the peer was added (in a WAL rolled before: no queue of it holds them) are
    copied, the rows written after it are not copied but shipped once the peer is enabled; B
    then equals A, the master lists the peer managed and DISABLED in HBase, walship's switch
    ENABLED, and the peer goes on shipping after the run."""
    from walship_airflow import onboarding

    a, b = pair
    a2, b2 = replace(a, table_name=b"t2"), replace(b, table_name=b"t2")
    create(a, "t2", {"f": {"scope": 1, "maxVersions": 3}})
    write(a, b"before", 40)
    write(a, b"before", 10, table=b"t2")
    AdminClient(a.mc.admin).roll()
    monkeypatch.setenv("AIRFLOW_CONN_WALSHIP_SOURCE", source_conn(a))

    # rows written once the peer exists, before its copy; B as the enable task finds it
    seen: dict[str, Any] = {}
    copy_plan, enable_peer = onboarding.copy_plan, onboarding.enable_peer

    def writing_after(added: Any, context: Any, *args: Any, **kwargs: Any) -> Any:
        seen["switch_at_copy"] = master_view(a)[1]
        write(a, b"after", 30)
        return copy_plan(added, context, *args, **kwargs)

    def looking_first(context: Any, *args: Any, **kwargs: Any) -> Any:
        seen["b_before_enable"] = set(contents(b))
        return enable_peer(context, *args, **kwargs)

    monkeypatch.setattr(onboarding, "copy_plan", writing_after)
    monkeypatch.setattr(onboarding, "enable_peer", looking_first)
    run = dagbag.dags["walship_add_peer"].test(run_conf=conf(b, table_cfs="t:r;t2", create_missing=True))
    got = states(run)
    assert run.state == "success", got
    assert {got[t] for t in STEPS} == {"success"} and got["disable_on_failure"] == "skipped", got

    # the copy took what was there before the peer: nothing had shipped while it was disabled
    assert seen["switch_at_copy"] is False
    assert seen["b_before_enable"] == {b"before%03d" % i for i in range(40)}
    # ... and the queues shipped what came after, once enabled: B equals A
    assert rows(b, b"after") == {b"after%03d" % i for i in range(30)}
    assert contents(b) == contents(a, b"r") and contents(b, b"l") == {}
    assert exists(b, "t2") and contents(b2) == contents(a2) and len(contents(b2)) == 10

    check = run.get_task_instance("check").xcom_pull(task_ids="check")
    assert check["created"] == ["created table t2 on peer 1 (families f)"] and check["exists"] is False
    added = run.get_task_instance("add").xcom_pull(task_ids="add")
    assert added["added"] is True and added["state"] == "DISABLED" and added["peer_id"] == PEER
    peer, switch = master_view(a)
    assert peer is not None and switch is True
    assert peer.managed and not peer.enabled  # HBase's peer-state DISABLED: walship alone ships it
    assert peer.cluster_key == b.cluster_key and dict(peer.table_cfs or {}) == {"t": ("r",), "t2": None}
    assert peer.configuration["walship.sink.thrift2"] == b.thrift2_address()
    assert peer.configuration["walship.sink.protocol"] == "thrift2"
    shown = run.get_task_instance("shipping").xcom_pull(task_ids="shipping")
    assert shown["state"] == "ENABLED" and shown["hbase_peer_state"] == "DISABLED" and shown["managed"]
    verified = run.get_task_instance("verified").xcom_pull(task_ids="verified")
    assert verified["BADROWS"] == 0 and verified["GOODROWS"] == 40 + 30 + 10

    # the peer goes on shipping after the run
    write(a, b"later", 5)
    wait_until(lambda: contents(b) == contents(a, b"r"), timeout=60, what="rows written after the run on B")


def test_without_a_copy_only_the_edits_written_after_the_add_reach_the_peer(
    dagbag: Any, pair: tuple[Cluster, Cluster], shipping: ShippingLoop, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``copy`` false: the copy is skipped (Airflow's skip), the peer is enabled all the same,
    and the verify compares only the cells written since the peer was added."""
    from walship_airflow import onboarding

    a, b = pair
    write(a, b"before", 20)
    AdminClient(a.mc.admin).roll()
    monkeypatch.setenv("AIRFLOW_CONN_WALSHIP_SOURCE", source_conn(a))
    copy_plan = onboarding.copy_plan

    def writing_after(added: Any, context: Any, *args: Any, **kwargs: Any) -> Any:
        write(a, b"after", 15)
        return copy_plan(added, context, *args, **kwargs)

    monkeypatch.setattr(onboarding, "copy_plan", writing_after)
    run = dagbag.dags["walship_add_peer"].test(run_conf=conf(b, copy=False))
    got = states(run)
    assert run.state == "success", got
    assert got["plan_copy"] == got["copy"] == "skipped" and got["enable"] == got["shipping"] == "success", got
    assert set(contents(b)) == {b"after%03d" % i for i in range(15)}  # nothing of before
    assert {row: contents(a, b"r")[row] for row in contents(b)} == contents(b)
    verified = run.get_task_instance("verified").xcom_pull(task_ids="verified")
    assert verified["BADROWS"] == 0 and verified["GOODROWS"] == 15
    assert master_view(a)[1] is True


def test_a_failed_step_leaves_the_peer_disabled_and_a_second_run_finishes(
    dagbag: Any,
    pair: tuple[Cluster, Cluster],
    shipping: ShippingLoop,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
) -> None:
    """B holds a row A does not: the verify fails the run after the peer was enabled, and the
    peer is left DISABLED. With the row gone, a second run with the same Params takes the peer
    as added (same configuration), copies again (nothing changes), enables and verifies it."""
    a, b = pair
    write(a, b"row", 20)
    b.table().put(b"stray", {b"r:q": b"only on B"})
    monkeypatch.setenv("AIRFLOW_CONN_WALSHIP_SOURCE", source_conn(a))
    dag = dagbag.dags["walship_add_peer"]
    capfd.readouterr()
    run = dag.test(run_conf=conf(b))
    got = states(run)
    assert run.state == "failed" and got["verified"] == "failed" and got["disable_on_failure"] == "failed", got
    assert got["enable"] == "success" and got["shipping"] == "upstream_failed", got
    verify_failed, cleanup_failed = task_failures(capfd.readouterr().out)
    assert "verify of peer 1: 1 bad row(s) in t" in verify_failed
    assert "walship_add_peer failed at verified: peer 1 is left DISABLED (walship's switch" in cleanup_failed
    peer, switch = master_view(a)
    assert peer is not None and peer.managed and not peer.enabled and switch is False

    b.table().delete(b"stray")
    run = dag.test(run_conf=conf(b))
    got = states(run)
    assert run.state == "success", got
    added = run.get_task_instance("add").xcom_pull(task_ids="add")
    assert added["added"] is False and added["state"] == "DISABLED"  # as the failed run left it
    peer, switch = master_view(a)
    assert peer is not None and switch is True
    assert contents(b) == contents(a, b"r") and len(contents(b)) == 20


@pytest.mark.parametrize(
    ("changes", "reason"),
    [
        ({"cluster_key": "b-zk:2181"}, "Param cluster_key: invalid cluster key 'b-zk:2181'"),
        ({"peer_id": "a-b"}, "Param peer_id: invalid peer id 'a-b': must not contain '-'"),
        ({"sink_thrift2": "b-thrift2"}, "Param sink_thrift2: invalid walship.sink.thrift2 'b-thrift2'"),
        ({"protocol": "thrift1"}, "Param sink_thrift: required with protocol thrift1"),
        ({"table_cfs": "t:r,,l"}, "Param table_cfs: invalid table-cfs part 't:r,,l'"),
        ({"configuration": {"walship.nosuch": "x"}}, "Param configuration: peer 1: unknown configuration key"),
        ({"configuration": {"walship.sink.thrift2": "x:1"}}, "walship.sink.thrift2 is set by the Param sink_thrift2"),
        ({"table_cfs": "t:r;nosuch"}, "Param table_cfs: peer 1's table-cfs names table nosuch"),
        ({"table_cfs": "t"}, "DATA LOSS selected-scope-0: peer 1 selects t:l but its REPLICATION_SCOPE is 0"),
        ({"table_cfs": "t:r;t2"}, "DATA LOSS table-missing-on-peer: table t2 does not exist on peer 1"),
    ],
)
def test_a_failed_check_names_the_param_and_adds_nothing(
    dagbag: Any,
    pair: tuple[Cluster, Cluster],
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
    changes: dict[str, Any],
    reason: str,
) -> None:
    a, b = pair
    create(a, "t2", {"f": {"scope": 1}})  # on A only; create_missing is off
    monkeypatch.setenv("AIRFLOW_CONN_WALSHIP_SOURCE", source_conn(a))
    capfd.readouterr()
    run = dagbag.dags["walship_add_peer"].test(run_conf=conf(b, **changes))
    got = states(run)
    assert run.state == "failed" and got["check"] == "failed" and got["add"] == "upstream_failed", got
    assert run.get_task_instance("check").try_number == 1  # not retried: a retry would find the same
    out = capfd.readouterr().out
    check_failed, cleanup_failed = task_failures(out)
    assert reason in out, check_failed
    assert "walship_add_peer failed at check: no peer was added or changed" in cleanup_failed
    if "table-missing-on-peer" in reason:
        assert "the Param create_missing creates the tables" in out
    assert master_view(a) == (None, False)
    assert not exists(b, "t2")


def test_a_peer_with_another_configuration_is_named_and_left_alone(
    dagbag: Any, pair: tuple[Cluster, Cluster], monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    a, b = pair
    theirs = PeerConfig(
        PEER, b.cluster_key, table_cfs={"t": None}, configuration={**b.sink_config("thrift2"), MANAGED_KEY: "true"}
    )
    with zk_client(a.zk_hosts) as client:
        peers = peer_admin(client, ZnodeLayout(a.parent))
        assert isinstance(peers, MasterPeers)
        with peers.admin:
            peers.add(theirs)
    monkeypatch.setenv("AIRFLOW_CONN_WALSHIP_SOURCE", source_conn(a))
    capfd.readouterr()
    run = dagbag.dags["walship_add_peer"].test(run_conf=conf(b, bandwidth=1000))
    assert run.state == "failed" and states(run)["check"] == "failed"
    check_failed, cleanup_failed = task_failures(capfd.readouterr().out)
    assert (
        "peer 1 exists with another configuration: table_cfs is 'default.t', the Params ask for 'default.t:r'; "
        "bandwidth is 0, the Params ask for 1000; configuration walship.sink.thrift is "
    ) in check_failed
    assert "no peer was added or changed (peer 1 is as it was)" in cleanup_failed
    peer, switch = master_view(a)
    assert peer is not None and dict(peer.table_cfs or {}) == {"t": None} and peer.bandwidth == 0
    assert switch is True  # still shipping as before


def test_a_live_airflow_run_whose_copy_failed_goes_on_once_the_copy_is_cleared(
    pair: tuple[Cluster, Cluster], shipping: ShippingLoop, tmp_path: Path
) -> None:
    """Triggered through the REST API of ``airflow standalone``: B's Thrift2 server goes away
    once the peer is added, so the copy into it fails (after its retry) and the run fails with
    the peer DISABLED. With a Thrift2 server back on the same port, the ``copy`` task cleared
    (with its downstream tasks, as from the UI) runs again alone, and the run ends with the
    peer shipping and B equal to A."""
    a, b = pair
    write(a, b"before", 30)
    AdminClient(a.mc.admin).roll()
    thrift2 = b.thrift2_address()
    with Standalone(tmp_path, {"AIRFLOW_CONN_WALSHIP_SOURCE": source_conn(a)}) as airflow:

        def unpaused() -> bool:
            r = airflow.api("PATCH", "/dags/walship_add_peer", json={"is_paused": False})
            return r is not None and r.status_code == 200 and r.json()["is_paused"] is False

        wait_until(unpaused, timeout=240, interval=1, what="walship_add_peer parsed and unpaused")
        r = airflow.api("POST", "/dags/walship_add_peer/dagRuns", json={"logical_date": None, "conf": conf(b)})
        assert r is not None and r.status_code == 200, None if r is None else r.text
        run_id = r.json()["dag_run_id"]

        def run_state() -> str:
            r = airflow.api("GET", f"/dags/walship_add_peer/dagRuns/{run_id}")
            return "" if r is None or r.status_code != 200 else str(r.json()["state"])

        def task_states() -> dict[str, str]:
            r = airflow.api("GET", f"/dags/walship_add_peer/dagRuns/{run_id}/taskInstances")
            assert r is not None and r.status_code == 200
            return {ti["task_id"]: ti["state"] for ti in r.json()["task_instances"]}

        def switch_created() -> bool:
            with zk_client(a.zk_hosts) as client:
                return client.exists(ZnodeLayout(a.parent).walship_peer_state(PEER)) is not None

        wait_until(switch_created, timeout=300, interval=0.05, what="peer 1 added by the run")
        AdminClient(b.mc.admin).stop_thrift(thrift2)
        wait_until(lambda: run_state() in ("failed", "success"), timeout=400, interval=2, what="the run to fail")
        got = task_states()
        assert run_state() == "failed", got
        assert got["copy"] == "failed" and got["enable"] == "upstream_failed", got
        assert got["disable_on_failure"] == "failed", got
        peer, switch = master_view(a)
        assert peer is not None and peer.managed and switch is False

        AdminClient(b.mc.admin).start_thrift("thrift2", int(thrift2.rsplit(":", 1)[1]))
        body = {
            "dry_run": False,
            "dag_run_id": run_id,
            "task_ids": ["copy"],
            "include_downstream": True,
            "only_failed": False,
        }
        r = airflow.api("POST", "/dags/walship_add_peer/clearTaskInstances", json=body)
        assert r is not None and r.status_code == 200, None if r is None else r.text
        cleared = {ti["task_id"] for ti in r.json()["task_instances"]}
        assert "copy" in cleared and "check" not in cleared and "add" not in cleared, cleared
        wait_until(lambda: run_state() in ("failed", "success"), timeout=400, interval=2, what="the run to end")
        got = task_states()
        assert run_state() == "success", got
        assert got["check"] == got["add"] == got["copy"] == got["shipping"] == "success", got
    peer, switch = master_view(a)
    assert peer is not None and switch is True
    assert contents(b) == contents(a, b"r") and len(contents(b)) == 30
