"""The DAGs with Airflow itself: DagBag import, structure, the trigger, and dag.test() runs."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from airflow_env import AIRFLOW_MARKS, source_conn
from real_hbase import BACKENDS
from replication_helpers import Cluster, add_peer, bytes_by_hand, contents, make_cluster, ship

from walship_testing.minicluster.process import MiniClusterProcess

pytestmark = [
    pytest.mark.integration,
    *AIRFLOW_MARKS,
]


def test_dags_import_without_errors(dagbag: Any) -> None:
    assert dagbag.import_errors == {}
    assert {
        "walship_replicate",
        "walship_clean",
        "walship_tail",
        "walship_scope",
        "walship_verify",
        "walship_copy",
    } <= set(dagbag.dags)
    tail = dagbag.dags["walship_tail"]
    assert tail.max_active_runs == 1 and "continuous" in type(tail.timetable).__name__.lower()


def test_replicate_dag_structure(dagbag: Any) -> None:
    dag = dagbag.dags["walship_replicate"]
    assert set(dag.task_dict) == {"wait_for_unshipped", "plan", "ship", "report"}
    assert dag.task_dict["wait_for_unshipped"].downstream_task_ids == {"plan"}
    assert dag.task_dict["plan"].downstream_task_ids == {"ship", "report"}
    assert dag.task_dict["ship"].downstream_task_ids == {"report"}
    assert dag.max_active_runs == 1 and dag.catchup is False
    assert set(dag.params) == {
        "peer_id", "queue", "max_batches", "batch_entries", "batch_bytes", "max_parallel_jobs", "spark_conn_id",
        "linger",
    }  # fmt: skip
    assert dag.tags and dag.doc_md
    assert all(t.retries >= 1 for t in dag.tasks if t.task_id != "wait_for_unshipped")


REPLICATE_DEFAULTS = {
    "peer_id": "",
    "queue": "",
    "max_batches": 0,
    "batch_entries": 25_000,
    "batch_bytes": 64 << 20,
    "max_parallel_jobs": 4,
    "spark_conn_id": "spark_default",
    "linger": 30,
}


def test_trigger_fires_only_when_there_is_work(
    minicluster_factory: Callable[..., MiniClusterProcess], zk_hosts: str
) -> None:
    from walship_airflow.triggers.queues import UnshippedQueuesTrigger

    a = make_cluster(minicluster_factory, zk_hosts, "A")
    b = make_cluster(minicluster_factory, zk_hosts, "B")
    add_peer(a, b)
    trigger = UnshippedQueuesTrigger(zk_hosts, a.parent, str(a.mc.data_dir), "1", poll_interval=0.2)
    classpath, kwargs = trigger.serialize()
    assert classpath == "walship_airflow.triggers.queues.UnshippedQueuesTrigger"

    async def first_event(t: UnshippedQueuesTrigger, timeout: float) -> Any:
        async def run() -> Any:
            async for event in t.run():
                return event.payload
            return None

        try:
            return await asyncio.wait_for(run(), timeout)
        except TimeoutError:
            return None

    # the region-open markers of table creation are unshipped bytes too: ship them (filtered)
    assert asyncio.run(first_event(UnshippedQueuesTrigger(**kwargs), 20.0))["status"] == "pending"
    ship(a)
    assert asyncio.run(first_event(UnshippedQueuesTrigger(**kwargs), 2.0)) is None  # nothing new
    a.table().put(b"r", {b"r:q": b"v"})
    event = asyncio.run(first_event(UnshippedQueuesTrigger(**kwargs), 20.0))
    assert event is not None and event["status"] == "pending" and len(event["queues"]) == 1
    assert event["backlog_bytes"] == bytes_by_hand(a) > 0  # the one entry written since the pass
    bad = UnshippedQueuesTrigger(zk_hosts, a.parent, str(a.mc.data_dir), "nosuchpeer", poll_interval=0.2)
    failed = asyncio.run(first_event(bad, 10.0))
    assert failed["status"] == "error" and "peer nosuchpeer does not exist" in failed["message"]


@pytest.mark.parametrize("backend", BACKENDS)
def test_dag_test_replicates_through_spark(
    dagbag: Any, ab: tuple[Cluster, Cluster], monkeypatch: pytest.MonkeyPatch
) -> None:
    a, b = ab
    with a.table().batch() as batch:
        for i in range(500):
            batch.put(b"row-%03d" % i, {b"r:q": b"%d" % i, b"l:q": b"local"})
    monkeypatch.setenv("AIRFLOW_CONN_WALSHIP_SOURCE", source_conn(a))
    dag = dagbag.dags["walship_replicate"]
    run = dag.test(run_conf={"peer_id": "1", "max_parallel_jobs": 2})
    states = {ti.task_id: ti.state for ti in run.get_task_instances()}
    assert run.state == "success", states
    assert states["ship"] == "success" and states["report"] == "success"
    assert contents(b) == contents(a, b"r") and len(contents(b)) == 500
    assert contents(b, b"l") == {}


def test_a_manual_run_ships_at_once_or_says_why_not(
    dagbag: Any, minicluster_factory: Callable[..., MiniClusterProcess], zk_hosts: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Triggered by hand right after everything was shipped, a run does not wait for new edits
    and end skipped: it runs the ship jobs it was asked for; a filter matching no queue skips
    the run with the reason in the sensor's log."""
    a = make_cluster(minicluster_factory, zk_hosts, "A")
    b = make_cluster(minicluster_factory, zk_hosts, "B")
    add_peer(a, b)
    a.table().put(b"r1", {b"r:q": b"v"})
    ship(a)  # the scheduled run shipped everything
    monkeypatch.setenv("AIRFLOW_CONN_WALSHIP_SOURCE", source_conn(a))
    dag = dagbag.dags["walship_replicate"]
    run = dag.test(run_conf={"peer_id": "1", "batch_entries": 7, "max_parallel_jobs": 1, "linger": 0})
    states = {ti.task_id: ti.state for ti in run.get_task_instances()}
    assert run.state == "success" and states["ship"] == "success" and states["report"] == "success", states
    plan = next(ti for ti in run.get_task_instances() if ti.task_id == "plan")
    (job,) = plan.xcom_pull(task_ids="plan")
    assert json.loads(job["job"])["batch_entries"] == 7  # the Params were used
    assert job["application_args"] == ["--job", job["job"]] and not job["standalone_cluster"]
    assert contents(b) == contents(a, b"r")
    skipped = dag.test(run_conf={"peer_id": "1", "queue": "no-such-queue"})
    states = {ti.task_id: ti.state for ti in skipped.get_task_instances()}
    assert states["wait_for_unshipped"] == "skipped" and states["ship"] in ("skipped", "upstream_failed", None)


def test_dag_ships_in_cluster_deploy_mode_on_a_standalone_master(
    dagbag: Any,
    minicluster_factory: Callable[..., MiniClusterProcess],
    zk_hosts: str,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    """spark-submit in cluster deploy mode against a standalone master and worker: the driver
    runs in the worker's own directory, and the report still finds the summary (ZooKeeper)."""
    from spark_standalone import standalone_spark

    a = make_cluster(minicluster_factory, zk_hosts, "A")
    b = make_cluster(minicluster_factory, zk_hosts, "B")
    add_peer(a, b)
    with a.table().batch() as batch:
        for i in range(200):
            batch.put(b"row-%03d" % i, {b"r:q": b"%d" % i})
    monkeypatch.setenv("AIRFLOW_CONN_WALSHIP_SOURCE", source_conn(a))
    with standalone_spark(tmp_path) as spark:
        monkeypatch.setenv(
            "AIRFLOW_CONN_SPARK_STANDALONE",
            json.dumps(
                {
                    "conn_type": "spark",
                    "host": f"spark://{spark.host}",
                    "port": spark.port,
                    "extra": {
                        "deploy-mode": "cluster",
                        "rest-port": spark.rest_port,
                        "pyspark_python": sys.executable,
                        "spark_conf": {
                            "spark.driver.memory": "512m",
                            "spark.executor.memory": "512m",
                            "spark.driver.cores": "1",
                            "spark.executor.cores": "1",
                            "spark.cores.max": "1",
                        },
                    },
                }
            ),
        )
        # every Param given: dag.test() keeps an earlier run's conf in the DAG object's Params
        conf = {
            **REPLICATE_DEFAULTS,
            "peer_id": "1",
            "max_parallel_jobs": 1,
            "spark_conn_id": "spark_standalone",
            "linger": 0,
        }
        run = dagbag.dags["walship_replicate"].test(run_conf=conf)
        states = {ti.task_id: ti.state for ti in run.get_task_instances()}
        assert run.state == "success", states
        drivers = [p for p in spark.work_dir.iterdir() if p.name.startswith("driver-")]
    assert len(drivers) == 1, states  # the driver ran on the worker, not in the Airflow task
    assert contents(b) == contents(a, b"r") and len(contents(b)) == 200


def test_dag_replicates_from_a_source_behind_a_digest_acl(
    dagbag: Any,
    minicluster_factory: Callable[..., MiniClusterProcess],
    zk_hosts: str,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
) -> None:
    """The source's znodes need credentials: Airflow takes them from the walship_source
    connection only (its extra ``zk_auth``), and hands them to the Spark job itself through
    the environment: the credential shows in no task log line and no spark-submit command."""
    from kazoo.security import make_digest_acl

    from walship.zk import zk_client

    with zk_client(zk_hosts, auth="digest:walship:s3cret") as client:
        client.create("/hbase-a", b"", acl=[make_digest_acl("walship", "s3cret", all=True)])
    monkeypatch.setenv("WALSHIP_ZK_AUTH", "digest:walship:s3cret")  # the source cluster's own processes
    a = make_cluster(minicluster_factory, zk_hosts, "A")
    b = make_cluster(minicluster_factory, zk_hosts, "B")
    add_peer(a, b)
    with a.table().batch() as batch:
        for i in range(100):
            batch.put(b"row-%03d" % i, {b"r:q": b"%d" % i})
    monkeypatch.delenv("WALSHIP_ZK_AUTH")  # from here on, the connection is the only source of them
    conn = json.loads(source_conn(a))
    dag = dagbag.dags["walship_replicate"]
    conn["extra"]["zk_auth"] = "digest:walship:s3cret"
    monkeypatch.setenv("AIRFLOW_CONN_WALSHIP_SOURCE", json.dumps(conn))
    capfd.readouterr()
    run = dag.test(run_conf={**REPLICATE_DEFAULTS, "peer_id": "1", "max_parallel_jobs": 1, "linger": 0})
    states = {ti.task_id: ti.state for ti in run.get_task_instances()}
    assert run.state == "success", states
    assert contents(b) == contents(a, b"r") and len(contents(b)) == 100
    logged = capfd.readouterr()
    assert "spark-submit" in logged.out + logged.err  # the submit's command was logged ...
    assert "s3cret" not in logged.out + logged.err  # ... without the credential


def test_clean_dag_run(dagbag: Any, zk_hosts: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import time as _time

    from walship.servername import ServerName
    from walship.wal import build_wal_name
    from walship.zk import ReplicationQueues, ZnodeLayout, zk_client

    server = ServerName("rs.example.com", 16020, 1)
    old, kept = build_wal_name(server, 1), build_wal_name(server, 2)
    (tmp_path / "oldWALs").mkdir()
    for name in (old, kept):
        p = tmp_path / "oldWALs" / name
        p.write_bytes(b"x")
        os.utime(p, (_time.time() - 2 * 86400, _time.time() - 2 * 86400))  # past the default TTL, a day
    with zk_client(zk_hosts) as client:
        ReplicationQueues(client, ZnodeLayout("/hbase")).add_wal(str(server), kept, peer_ids=["1"])
    hostport, _, chroot = zk_hosts.partition("/")
    monkeypatch.setenv(
        "AIRFLOW_CONN_WALSHIP_SOURCE",
        json.dumps(
            {
                "conn_type": "walship",
                "host": f"{hostport}/{chroot}",
                "extra": {"znode_parent": "/hbase", "wal_root": str(tmp_path)},
            }
        ),
    )
    run = dagbag.dags["walship_clean"].test()
    assert run.state == "success"
    assert {p.name for p in (tmp_path / "oldWALs").iterdir()} == {kept}


def test_tail_dag_run(
    dagbag: Any, minicluster_factory: Callable[..., MiniClusterProcess], zk_hosts: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    a = make_cluster(minicluster_factory, zk_hosts, "A")
    b = make_cluster(minicluster_factory, zk_hosts, "B")
    add_peer(a, b)
    for i in range(20):
        a.table().put(b"t-%02d" % i, {b"r:q": b"%d" % i})
    monkeypatch.setenv("AIRFLOW_CONN_WALSHIP_SOURCE", source_conn(a))
    run = dagbag.dags["walship_tail"].test(run_conf={"peer_id": "1", "duration": 3, "gather": 0.2})
    assert run.state == "success"
    assert contents(b) == contents(a, b"r") and len(contents(b)) == 20
    from airflow.sdk.exceptions import ParamValidationError

    gather = dagbag.dags["walship_tail"].params.get_param("gather")
    assert gather.value == 0.1  # the default, [walship] tail_gather unset
    for bad in (-1, 11):
        with pytest.raises(ParamValidationError):
            gather.resolve(bad)
