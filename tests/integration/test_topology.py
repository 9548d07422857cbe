"""Airflow's production topology (tests/topology.py) works as one: PostgreSQL, Redis, the API
server, scheduler, DAG processor, triggerer and two Celery workers, with FAB's auth manager.
A mapped DAG of the test's own runs on both workers (its tasks meet at a barrier that only two
workers running at once can pass), and a run whose worker is SIGKILLed mid-task still ends
green: the scheduler notices the task's missing heartbeats and its retry runs on the other
worker."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from topology import Topology, group_members
from waiting import wait_until

pytestmark = [pytest.mark.integration]

WORKERS = ("worker1", "worker2")

#: The DAGs folder of this test: ``{marks}`` becomes the directory the tasks meet in.
DAGS = '''
"""The topology test's DAGs."""

import time
from datetime import timedelta
from pathlib import Path

from airflow.sdk import Variable, dag, task

MARKS = Path({marks!r})


@dag(schedule=None, catchup=False, tags=["topology"])
def topology_fanout():
    @task
    def items() -> list[int]:
        return list(Variable.get("topology_items", deserialize_json=True))  # from the topology's env

    @task
    def work(item: int) -> None:
        (MARKS / f"fanout-started-{{item}}").touch()
        deadline = time.monotonic() + 120
        # a barrier: passed only while another worker runs a second item at the same time
        while len(list(MARKS.glob("fanout-started-*"))) < 2:
            if time.monotonic() > deadline:
                raise TimeoutError("no second item ran beside this one")
            time.sleep(0.1)

    work.expand(item=items())


@dag(schedule=None, catchup=False, tags=["topology"])
def topology_failover():
    @task(retries=1, retry_delay=timedelta(seconds=1))
    def wait_for_release() -> None:
        release = MARKS / "release"
        deadline = time.monotonic() + 300
        while not release.exists():
            if time.monotonic() > deadline:
                raise TimeoutError(f"{{release}} did not appear")
            time.sleep(0.1)

    wait_for_release()


topology_fanout()
topology_failover()
'''


@pytest.fixture(scope="module")
def topology(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Topology]:
    base = tmp_path_factory.mktemp("topology")
    marks, dags = base / "marks", base / "dags"  # the tasks' meeting point, the DAGs folder
    marks.mkdir()
    dags.mkdir()
    (dags / "topology_dags.py").write_text(DAGS.format(marks=str(marks)))
    env = {
        "AIRFLOW_VAR_TOPOLOGY_ITEMS": json.dumps([0, 1, 2, 3]),
        # a task whose worker died is failed (and retried) once its heartbeats are missing this
        # long; checked every 2 s (defaults: 300 s, 10 s)
        "AIRFLOW__SCHEDULER__TASK_INSTANCE_HEARTBEAT_TIMEOUT": "20",
        "AIRFLOW__SCHEDULER__TASK_INSTANCE_HEARTBEAT_TIMEOUT_DETECTION_INTERVAL": "2",
    }
    with Topology(base, dags_folder=dags, workers=WORKERS, concurrency=1, env=env) as topo:
        print(f"topology started in {topo.start_seconds:.1f} s", {k: round(v, 1) for k, v in topo.timings.items()})
        yield topo
    assert topo.leftovers() == {}


def _run(topo: Topology, dag_id: str) -> str:
    topo.airflow.wait_for_dag(dag_id)
    topo.airflow.unpause(dag_id)
    return topo.airflow.trigger(dag_id)


def test_mapped_tasks_run_on_both_workers(topology: Topology) -> None:
    af = topology.airflow
    run_id = _run(topology, "topology_fanout")

    state = af.wait_run("topology_fanout", run_id, timeout=300)

    assert state == "success", af.describe()
    tis = af.task_instances("topology_fanout", run_id)
    work = [ti for ti in tis if ti["task_id"] == "work"]
    assert sorted(ti["map_index"] for ti in work) == [0, 1, 2, 3]
    assert {ti["state"] for ti in tis} == {"success"}
    assert {ti["hostname"] for ti in work} == set(WORKERS), [(ti["map_index"], ti["hostname"]) for ti in work]


def test_a_killed_worker_s_task_is_retried_on_the_other(topology: Topology) -> None:
    af = topology.airflow
    run_id = _run(topology, "topology_failover")

    def running() -> str | None:
        af.check()
        tries = af.tries("topology_failover", run_id, "wait_for_release")
        return str(tries[-1]["hostname"]) if tries and tries[-1]["state"] == "running" else None

    victim = wait_until(running, timeout=180, interval=0.5, what="wait_for_release to run on a worker")
    assert victim in WORKERS
    (survivor,) = set(WORKERS) - {victim}
    pgid = af.components[victim].pid
    af.kill_worker(victim)
    assert not group_members(pgid), f"{victim}'s processes outlived SIGKILL"
    (topology.base / "marks" / "release").touch()

    state = af.wait_run("topology_failover", run_id, timeout=240)

    assert state == "success", af.describe()
    tries = af.tries("topology_failover", run_id, "wait_for_release")
    assert [(t["try_number"], t["state"], t["hostname"]) for t in tries] == [
        (1, "failed", victim),
        (2, "success", survivor),
    ]
    assert af.components[survivor].alive(), af.describe()
