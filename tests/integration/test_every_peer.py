"""Runs that name no peer ship every enabled peer walship manages, as the peers are at each
run: the scheduled ``walship_replicate`` and ``walship_tail`` runs, with Airflow itself
(``dag.test()``) and Spark, into two peers; a peer added between runs needs no DAG change."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from airflow_env import AIRFLOW_MARKS, Standalone, source_conn
from replication_helpers import Cluster, add_peer, contents, make_cluster
from waiting import wait_until

from walship.peer import MANAGED_KEY
from walship.replicate.planner import Planner
from walship.replicate.walstore import WalStore
from walship.zk import ZnodeLayout, zk_client
from walship.zk.peers import ReplicationPeers
from walship_testing.minicluster.process import MiniClusterProcess

pytestmark = [pytest.mark.integration, *AIRFLOW_MARKS]

MANAGED = {MANAGED_KEY: "true"}


@pytest.fixture
def abc(minicluster_factory: Callable[..., MiniClusterProcess], zk_hosts: str) -> tuple[Cluster, Cluster, Cluster]:
    """Source A with managed peer 1 into B; C waits to become peer 2."""
    a, b, c = (make_cluster(minicluster_factory, zk_hosts, name) for name in "ABC")
    add_peer(a, b, "1", **MANAGED)
    return a, b, c


def write(a: Cluster, prefix: bytes, n: int) -> None:
    with a.table().batch() as batch:
        for i in range(n):
            batch.put(prefix + b"%03d" % i, {b"r:q": b"%d" % i, b"l:q": b"local"})


def rows_from(a: Cluster, prefix: bytes) -> dict[bytes, Any]:
    return {row: cells for row, cells in contents(a, b"r").items() if row.startswith(prefix)}


def test_the_peers_a_run_ships_when_it_names_none(abc: tuple[Cluster, Cluster, Cluster]) -> None:
    a, b, c = abc
    add_peer(a, c, "2", **MANAGED)
    add_peer(a, b, "legacy")  # not managed: HBase's own replication ships it, not walship
    add_peer(a, c, "3", **MANAGED)
    with zk_client(a.zk_hosts) as client:
        layout = ZnodeLayout(a.parent)
        ReplicationPeers(client, layout).disable("3")
        planner = Planner(client, layout, WalStore(a.mc.wal_root))
        assert planner.shipped_peer_ids() == ["1", "2"]
        assert planner.resolve_peers("") == ["1", "2"] and planner.resolve_peers("2,1,2") == ["2", "1"]
        write(a, b"p", 5)
        pending = planner.pending("")
        assert {q.queue_id for q in pending} == {"1", "2"}  # a queue of each, on the one server

    from walship_airflow.triggers.queues import UnshippedQueuesTrigger

    async def first() -> Any:
        async for event in UnshippedQueuesTrigger(a.zk_hosts, a.parent, a.mc.wal_root, "").run():
            return event.payload
        return None

    event = asyncio.run(first())
    assert event["status"] == "pending" and sorted(q.rsplit("/", 1)[1] for q in event["queues"]) == ["1", "2"]


def test_scheduled_replicate_runs_ship_every_peer_and_pick_up_a_new_one(
    dagbag: Any, abc: tuple[Cluster, Cluster, Cluster], monkeypatch: pytest.MonkeyPatch
) -> None:
    a, b, c = abc
    monkeypatch.setenv("AIRFLOW_CONN_WALSHIP_SOURCE", source_conn(a))
    dag = dagbag.dags["walship_replicate"]
    assert dag.params["peer_id"] == ""  # a scheduled run names no peer
    write(a, b"first", 50)
    run = dag.test(run_conf={"peer_id": "", "linger": 0})
    states = {ti.task_id: ti.state for ti in run.get_task_instances()}
    assert run.state == "success", states
    assert contents(b) == contents(a, b"r") and len(contents(b)) == 50
    # peer 2 is added between two runs: the next run ships it too, nothing in the DAG changed
    add_peer(a, c, "2", **MANAGED)
    write(a, b"second", 40)
    run = dag.test(run_conf={"peer_id": "", "linger": 0})
    states = {ti.task_id: ti.state for ti in run.get_task_instances()}
    assert run.state == "success", states
    assert contents(b) == contents(a, b"r") and len(contents(b)) == 90
    # C has what was written once it was a peer (and what its first WAL held before: HBase
    # queues the current WAL whole for a new peer), each row as on A
    on_c, on_a = contents(c), contents(a, b"r")
    assert rows_from(a, b"second").items() <= on_c.items() and on_c.items() <= on_a.items()
    report = run.get_task_instance("report").xcom_pull(task_ids="report")
    assert report["peers"] == ["1", "2"] and report["peer_id"] == ""


def test_a_tail_run_naming_no_peer_tails_every_peer(
    dagbag: Any, abc: tuple[Cluster, Cluster, Cluster], monkeypatch: pytest.MonkeyPatch
) -> None:
    a, b, c = abc
    add_peer(a, c, "2", **MANAGED)
    write(a, b"t", 30)
    monkeypatch.setenv("AIRFLOW_CONN_WALSHIP_SOURCE", source_conn(a))
    run = dagbag.dags["walship_tail"].test(run_conf={"peer_id": "", "duration": 3})
    assert run.state == "success"
    assert contents(b) == contents(a, b"r") and len(contents(b)) == 30
    assert contents(c) == contents(a, b"r")


def test_a_live_airflow_schedules_runs_that_ship_every_peer(
    abc: tuple[Cluster, Cluster, Cluster], tmp_path: Path
) -> None:
    """``airflow standalone`` with the scheduler's own runs of walship_replicate (unpaused,
    nothing triggered by hand): both peers end up equal to A."""
    a, b, c = abc
    add_peer(a, c, "2", **MANAGED)
    write(a, b"live", 60)
    with Standalone(tmp_path, {"AIRFLOW_CONN_WALSHIP_SOURCE": source_conn(a)}) as airflow:

        def unpaused() -> bool:
            r = airflow.api("PATCH", "/dags/walship_replicate", json={"is_paused": False})
            return r is not None and r.status_code == 200 and r.json()["is_paused"] is False

        wait_until(unpaused, timeout=240, interval=1, what="walship_replicate parsed and unpaused")

        def scheduled_runs(state: str) -> list[dict[str, Any]]:
            r = airflow.api("GET", "/dags/walship_replicate/dagRuns", params={"state": state})
            runs = [] if r is None or r.status_code != 200 else r.json()["dag_runs"]
            return [run for run in runs if run["run_type"] == "scheduled"]

        def shipped() -> bool:
            assert not scheduled_runs("failed"), f"a scheduled run failed:\n{airflow.log.read_text()[-3000:]}"
            return bool(scheduled_runs("success")) and len(contents(b)) == 60 and len(contents(c)) == 60

        wait_until(shipped, timeout=420, interval=2, what="a scheduled run that shipped both peers")
    assert contents(b) == contents(a, b"r") == contents(c)
