"""walship in Airflow's production topology (tests/topology.py), started once: PostgreSQL,
Redis, the API server, scheduler, DAG processor, triggerer and two Celery workers with FAB's
auth manager, Spark on YARN, and real HBase with its WALs on HDFS (the ``real_hdfs`` fixture)
shipping to a second real HBase.

A mapped DAG of the test's own runs on both workers (its tasks meet at a barrier that only two
workers running at once can pass). Then the scheduled ``walship_replicate`` (its ship jobs in
YARN's cluster deploy mode), the continuous ``walship_tail`` and ``walship_clean`` (on the one
worker consuming ``[walship] cleaner_queue``) run for some minutes under writes; the worker
running the tail is SIGKILLed mid-run: its queue locks are free within the ZooKeeper session
timeout, the tail's retry runs on the other worker, every row written is on the peer and the
runs after the kill are green."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from airflow_env import source_conn
from real_hbase import layout, managed_peer, table_on_both, wait_queues_hold_current_wals
from spark_yarn import ROOT, PacedWriter, rows, yarn_apps, yarn_connection
from topology import Topology, descendants, group_members
from waiting import wait_until

from walship import defaults
from walship.zk import ReplicationQueues, zk_client
from walship.zk.locks import read_holder
from walship_testing.harness import HBaseProcess, harness_dir

pytestmark = [pytest.mark.integration]

WORKERS = ("worker1", "worker2")
#: worker2 alone consumes the cleaner's queue: the only one that may delete WALs
QUEUES = {"worker1": "default", "worker2": "default,walship_clean"}
#: Seconds a walship_tail run lasts here, so that runs after the kill end within the test.
TAIL_DURATION = 60
#: The peer the walship DAGs ship to (added by the test: the DAGs find every managed peer).
PEER = "topo1"

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


topology_fanout()
'''

#: walship's DAGs, as docs/airflow.md installs them: one file calling the provider's factory.
WALSHIP_DAGS = """from walship_airflow.dags import build_all

build_all(globals())
"""


def libhdfs_env(tmp: Path) -> dict[str, str]:
    """What pyarrow's HDFS client needs in a worker (the check of an ``hdfs://`` archive):
    libhdfs.so and the Hadoop jars the harness resolved, its JVM logging to stderr."""
    libhdfs = Path(sys.prefix) / "libhdfs"
    assert (libhdfs / "libhdfs.so").is_file(), "`make setup` builds libhdfs.so (scripts/libhdfs.sh)"
    log4j = tmp / "log4j.properties"
    log4j.write_text(
        "log4j.rootLogger=WARN,err\nlog4j.appender.err=org.apache.log4j.ConsoleAppender\n"
        "log4j.appender.err.target=System.err\nlog4j.appender.err.layout=org.apache.log4j.PatternLayout\n"
    )
    return {
        "ARROW_LIBHDFS_DIR": str(libhdfs),
        "CLASSPATH": (harness_dir() / "target" / "classpath.txt").read_text().strip(),
        "LIBHDFS_OPTS": f"-Dlog4j.configuration=file:{log4j}",
    }


@pytest.fixture(scope="module")
def topology(
    tmp_path_factory: pytest.TempPathFactory, real_hdfs: HBaseProcess, hdfs_archive: str
) -> Iterator[Topology]:
    base = tmp_path_factory.mktemp("topology")
    marks, dags = base / "marks", base / "dags"  # the tasks' meeting point, the DAGs folder
    marks.mkdir()
    dags.mkdir()
    (dags / "topology_dags.py").write_text(DAGS.format(marks=str(marks)))
    (dags / "walship_dags.py").write_text(WALSHIP_DAGS)
    yarn = real_hdfs.yarn
    assert yarn is not None
    env = {
        "AIRFLOW_VAR_TOPOLOGY_ITEMS": json.dumps([0, 1, 2, 3]),
        # a task whose worker died is failed (and retried) once its heartbeats are missing this
        # long; checked every 2 s (defaults: 300 s, 10 s)
        "AIRFLOW__SCHEDULER__TASK_INSTANCE_HEARTBEAT_TIMEOUT": "20",
        "AIRFLOW__SCHEDULER__TASK_INSTANCE_HEARTBEAT_TIMEOUT_DETECTION_INTERVAL": "2",
        # a task the killed worker had taken from the broker but not started yet stays queued
        # (Celery acks late: the broker hands its message out again only after a day) until it
        # has been queued this long; checked every 10 s (defaults: 600 s, 120 s)
        "AIRFLOW__SCHEDULER__TASK_QUEUED_TIMEOUT": "150",
        "AIRFLOW__SCHEDULER__TASK_QUEUED_TIMEOUT_CHECK_INTERVAL": "10",
        # walship: the source (real HBase, WALs on HDFS), Spark on YARN, the cleaner's queue
        "AIRFLOW_CONN_WALSHIP_SOURCE": source_conn_of(real_hdfs),
        "AIRFLOW_CONN_SPARK_DEFAULT": yarn_connection(yarn, hdfs_archive),
        "AIRFLOW__WALSHIP__SPARK_JOBS": str(ROOT / "spark_jobs"),
        "AIRFLOW__WALSHIP__CLEANER_QUEUE": "walship_clean",
        "AIRFLOW__WALSHIP__TAIL_DURATION": str(TAIL_DURATION),
        **yarn.client_env(),
        **libhdfs_env(base),
    }
    with Topology(base, dags_folder=dags, workers=WORKERS, queues=QUEUES, concurrency=2, env=env) as topo:
        print(f"topology started in {topo.start_seconds:.1f} s", {k: round(v, 1) for k, v in topo.timings.items()})
        yield topo
    assert topo.leftovers() == {}


def source_conn_of(hb: HBaseProcess) -> str:
    """The ``walship_source`` connection of a harness cluster (no chroot: its cluster key has none)."""
    from replication_helpers import Cluster

    return source_conn(Cluster(hb, hb.zk_hosts))


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


def test_a_broker_that_does_not_answer_is_one_line_before_a_component_starts(topology: Topology) -> None:
    """``python -m walship_airflow.checks broker`` (docker-compose.yml runs it before the
    scheduler and every worker): the topology's broker answers; a refused port and a port that
    takes the connection but never answers are one line naming the broker, within the timeout."""
    import socket
    import subprocess

    from walship.zk.localserver import free_port

    def check(url: str | None) -> subprocess.CompletedProcess[str]:
        env = dict(topology.airflow.env)
        if url is not None:
            env["AIRFLOW__CELERY__BROKER_URL"] = url
        return subprocess.run(
            [sys.executable, "-m", "walship_airflow.checks", "broker", "--timeout", "2"],
            capture_output=True, text=True, timeout=60, env=env, check=False,
        )  # fmt: skip

    live = check(None)
    assert (live.returncode, live.stderr) == (0, ""), live.stderr
    refused = f"redis://:hidden@127.0.0.1:{free_port()}/0"
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(1)  # takes connections, never answers
    try:
        for url in (refused, f"redis://127.0.0.1:{silent.getsockname()[1]}/0"):
            began = time.monotonic()
            done = check(url)
            shown = url.replace(":hidden@", ":**@")
            assert done.returncode == 1 and done.stderr.count("\n") == 1, done.stderr
            assert done.stderr.startswith(f"walship: Celery broker {shown} does not answer within 2 s ("), done.stderr
            assert "hidden" not in done.stderr and time.monotonic() - began < 30
    finally:
        silent.close()


def alive(pids: list[int]) -> list[int]:
    """Those of ``pids`` still running (not zombies)."""
    out = []
    for pid in pids:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if state not in ("Z", "X"):
            out.append(pid)
    return out


def runs_after(af: Any, dag_id: str, after: float | None = None) -> list[dict[str, Any]]:
    """The DAG's runs, the newest first; only those that started after ``after`` (epoch seconds) if given."""
    return [
        dict(run)
        for run in af.dag_runs(dag_id)
        if after is None or (run.get("start_date") and datetime.fromisoformat(run["start_date"]).timestamp() > after)
    ]


def runs_now(af: Any, dag_id: str, last: int = 4) -> str:
    """The DAG's last runs and their task instances (state, try, worker), for a failure message."""
    lines = []
    for run in runs_after(af, dag_id)[:last]:
        lines.append(f"{dag_id} {run['dag_run_id']}: {run['state']} (started {run.get('start_date')})")
        for ti in af.task_instances(dag_id, run["dag_run_id"]):
            lines.append(
                f"  {ti['task_id']}[{ti.get('map_index', -1)}] {ti['state']} try {ti.get('try_number')} "
                f"on {ti.get('hostname') or '-'} queued {ti.get('queued_when') or '-'}"
            )
    return "\n".join(lines)


def newest_run(af: Any, dag_id: str, after: float | None = None) -> dict[str, Any] | None:
    """The DAG's newest run, or its newest that started after ``after``."""
    runs = runs_after(af, dag_id, after)
    return runs[0] if runs else None


def test_walship_replicates_under_writes_through_a_killed_worker(
    topology: Topology, real_hdfs: HBaseProcess, real_hbase: tuple[HBaseProcess, HBaseProcess]
) -> None:
    af = topology.airflow
    yarn = real_hdfs.yarn
    assert yarn is not None
    h, b = table_on_both(real_hdfs, real_hbase[1], "topo")
    with managed_peer(h, b, PEER) as peer, zk_client(h.zk_hosts) as client:
        wait_queues_hold_current_wals(h, peer)
        queues = ReplicationQueues(client, layout(h))
        with PacedWriter(h, pause=0.5) as writer:  # about 200 rows a second throughout
            for dag_id in ("walship_clean", "walship_replicate", "walship_tail"):
                af.wait_for_dag(dag_id)
                af.unpause(dag_id)
            # the cleaner's first run (catch-up off: the latest interval, at once) on worker2
            clean = wait_until(lambda: newest_run(af, "walship_clean"), timeout=120, what="walship_clean's run")
            assert af.wait_run("walship_clean", clean["dag_run_id"], timeout=300) == "success", af.describe()
            (cleaned,) = af.task_instances("walship_clean", clean["dag_run_id"])
            assert cleaned["hostname"] == "worker2" and cleaned["queue"] == "walship_clean"

            # the tail ships: its worker, and the lock of its queue (held by the task's process)
            def tailing() -> tuple[str, str, int] | None:
                af.check()
                run = newest_run(af, "walship_tail")
                if run is None or run["state"] != "running":
                    return None
                ti = af.task_instance("walship_tail", run["dag_run_id"], "tail")
                (q,) = queues.list_queues(peer)
                holder = read_holder(client, layout(h), q.server, str(q.queue_id))
                if ti is None or ti["state"] != "running" or holder is None or not rows(b):
                    return None
                # early in the run, so that it is killed mid-run, not as it hands over
                if time.time() - datetime.fromisoformat(ti["start_date"]).timestamp() > TAIL_DURATION / 3:
                    return None
                return run["dag_run_id"], str(ti["hostname"]), holder.pid

            # a replicate run has shipped or found the tail's queue busy meanwhile: its jobs ran on YARN
            wait_until(
                lambda: any(r["state"] == "success" for r in runs_after(af, "walship_replicate")),
                timeout=300, interval=1, what="a walship_replicate run to end green",
            )  # fmt: skip
            tail_run, victim, holder_pid = wait_until(tailing, timeout=300, interval=1, what="walship_tail shipping")
            (survivor,) = set(WORKERS) - {victim}
            pgid = af.components[victim].pid
            under = descendants(pgid)
            assert holder_pid in under, f"the tail's process {holder_pid} is not {victim}'s"
            killed_at = time.time()
            af.kill_worker(victim, also=under)
            assert not group_members(pgid) and not alive(under), f"{victim}'s processes outlived SIGKILL"

            # no queue stays locked past the lock timeout: the killed task's ZooKeeper session ends
            (q,) = queues.list_queues(peer)
            wait_until(
                lambda: (holder := read_holder(client, layout(h), q.server, str(q.queue_id))) is None
                or holder.pid != holder_pid,
                timeout=defaults.ZK_SESSION_TIMEOUT + 10, interval=0.5,
                what=f"the queue lock of the killed tail (pid {holder_pid}) to be free",
            )  # fmt: skip

            # the tail's retry runs on the other worker
            def retried() -> bool:
                ti = af.task_instance("walship_tail", tail_run, "tail") or {}
                return int(ti.get("try_number") or 0) >= 2 and ti.get("hostname") == survivor

            wait_until(retried, timeout=180, interval=1, what=f"walship_tail's retry on {survivor}")
            # go on writing until a replicate run and a tail run that started after the kill are done
            for dag_id in ("walship_replicate", "walship_tail"):
                try:
                    wait_until(
                        # any of them: the tail's runs follow each other, the newest is nearly always running
                        lambda d=dag_id: any(  # type: ignore[misc]
                            r["state"] in ("success", "failed") for r in runs_after(af, d, killed_at)
                        ),
                        timeout=420, interval=2, what=f"a {dag_id} run started after the kill to end",
                    )  # fmt: skip
                except AssertionError as exc:
                    raise AssertionError(f"{exc}\n{runs_now(af, dag_id)}\n{af.describe()}") from None
        # every row written is on the peer (the tail runs go on shipping), then the DAGs rest
        wait_until(lambda: len(rows(b)) == writer.written, timeout=300, interval=2, what="every row on the peer")
        assert rows(b) == rows(h)
        for dag_id in ("walship_replicate", "walship_tail"):
            af.api("PATCH", f"/dags/{dag_id}", json={"is_paused": True})
        # the runs after the kill are green, the killed tail's run too (its retry finished it)
        for dag_id in ("walship_replicate", "walship_tail"):
            later = runs_after(af, dag_id, killed_at)
            assert later and all(r["state"] in ("success", "running", "queued") for r in later), (dag_id, later)
            assert any(r["state"] == "success" for r in later), (dag_id, later)
        assert af.wait_run("walship_tail", tail_run, timeout=TAIL_DURATION * 3) == "success", af.describe()
        final = af.task_instance("walship_tail", tail_run, "tail") or {}
        assert (final.get("try_number"), final.get("state"), final.get("hostname")) == (2, "success", survivor)
        (first, *_) = af.tries("walship_tail", tail_run, "tail")
        assert (first["try_number"], first["state"], first["hostname"]) == (1, "failed", victim)
        shipped = [a for a in yarn_apps(yarn) if a["name"] == "walship-ship"]
        assert shipped and all(a["queue"] == "walship" for a in shipped)
        assert af.components[survivor].alive(), af.describe()
