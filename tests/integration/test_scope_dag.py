"""The ``walship_scope`` DAG, run by Airflow itself (``dag.test()``) against real miniclusters:
it fails listing every finding, and succeeds returning the audit when the policy holds."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from airflow_env import AIRFLOW_MARKS, source_conn
from replication_helpers import Cluster, make_cluster
from test_scope import add, create

from walship_testing.minicluster.process import MiniClusterProcess

pytestmark = [
    pytest.mark.integration,
    *AIRFLOW_MARKS,
]


def scope_conn(cluster: Cluster, **extra: Any) -> str:
    """``AIRFLOW_CONN_WALSHIP_SOURCE`` for the cluster, with its Thrift2 server as the extra ``thrift2``."""
    conn = json.loads(source_conn(cluster))
    conn["extra"] = {**conn["extra"], "thrift2": cluster.thrift2_address(), **extra}
    return json.dumps(conn)


@pytest.fixture
def pair(minicluster_factory: Callable[..., MiniClusterProcess], zk_hosts: str) -> tuple[Cluster, Cluster]:
    return make_cluster(minicluster_factory, zk_hosts, "A"), make_cluster(minicluster_factory, zk_hosts, "B")


def test_the_dag_is_daily_and_thin(dagbag: Any) -> None:
    assert "walship_scope" not in {str(k) for k in dagbag.import_errors}
    dag = dagbag.dags["walship_scope"]
    assert set(dag.task_dict) == {"audit"}
    assert dag.catchup is False and dag.max_active_runs == 1 and dag.tags and dag.doc_md
    assert dag.schedule == "@daily"


def test_the_dag_fails_listing_every_finding(
    dagbag: Any, pair: tuple[Cluster, Cluster], monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    a, b = pair
    create(a, "sel0", {"f": {"scope": 0}})
    create(b, "sel0", {"f": {}})
    create(a, "gone", {"f": {"scope": 1}})
    add(a, b, "1", table_cfs={"t": ("r",), "sel0": None, "gone": None, "nosuch": None})
    monkeypatch.setenv("AIRFLOW_CONN_WALSHIP_SOURCE", scope_conn(a))
    capfd.readouterr()
    run = dagbag.dags["walship_scope"].test(run_conf={"peer_id": ""})
    ti = run.get_task_instance("audit")
    assert run.state == "failed" and ti.state == "failed"
    assert ti.try_number == 1  # failed at once: a retry would find the same
    # the task's message lists every finding, data-losing ones first
    log = capfd.readouterr().out
    assert "scope audit: 3 finding(s), 2 would lose data:" in log
    listed = log[log.index("scope audit: 3 finding(s)") :].splitlines()[1:4]
    assert [line.split(": ", 1)[0].strip() for line in listed] == ["peer 1 gone", "peer 1 sel0:f", "peer 1 nosuch"]
    assert (
        listed[1]
        .strip()
        .startswith("peer 1 sel0:f: DATA LOSS selected-scope-0: peer 1 selects sel0:f but its REPLICATION_SCOPE is 0")
    )
    assert listed[2].strip().startswith("peer 1 nosuch: WARNING selected-missing-on-source")
    # and the document is in the XCom "audit"
    doc = ti.xcom_pull(task_ids="audit", key="audit")
    assert doc["data_loss"] is True
    assert {f["code"] for f in doc["peers"][0]["findings"]} == {
        "selected-scope-0", "table-missing-on-peer", "selected-missing-on-source"
    }  # fmt: skip


def test_the_dag_succeeds_returning_the_audit_when_the_policy_holds(
    dagbag: Any, pair: tuple[Cluster, Cluster], monkeypatch: pytest.MonkeyPatch
) -> None:
    a, b = pair
    add(a, b, "1", table_cfs={"t": ("r",)})
    monkeypatch.setenv("AIRFLOW_CONN_WALSHIP_SOURCE", scope_conn(a))
    run = dagbag.dags["walship_scope"].test(run_conf={"peer_id": "1"})
    ti = run.get_task_instance("audit")
    assert run.state == "success" and ti.state == "success"
    doc = ti.xcom_pull(task_ids="audit")
    assert doc["data_loss"] is False and [p["peer_id"] for p in doc["peers"]] == ["1"]
    assert [(r["table"], r["family"], r["selected"]) for r in doc["peers"][0]["tables"]] == [
        ("t", "l", False), ("t", "r", True)
    ]  # fmt: skip


def test_a_connection_without_thrift2_fails_naming_the_extra(
    dagbag: Any, pair: tuple[Cluster, Cluster], monkeypatch: pytest.MonkeyPatch
) -> None:
    a, _ = pair
    monkeypatch.setenv("AIRFLOW_CONN_WALSHIP_SOURCE", source_conn(a, thrift2=False))
    from airflow.sdk.exceptions import AirflowFailException

    from walship_airflow.scope import read_audit

    with pytest.raises(AirflowFailException, match="set the extra 'thrift2'.*of connection walship_source"):
        read_audit()
    run = dagbag.dags["walship_scope"].test(run_conf={"peer_id": ""})
    assert run.get_task_instance("audit").state == "failed"
