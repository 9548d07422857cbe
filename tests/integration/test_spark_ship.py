"""The ship Spark job through spark-submit on a local Spark: one task per queue."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from fixtures_spark_wal import spark_submit
from region_ops import create_scoped_table
from replication_helpers import TABLE, Cluster, add_peer, contents, make_cluster
from waiting import wait_until

from walship.spark import ship as spark_ship
from walship.spark import warmup
from walship.spark.ship import ShipJob, plan_queues, ship_partition
from walship.zk import ReplicationPeers, ReplicationQueues, ZnodeLayout, zk_client
from walship.zk.records import JobStore
from walship_testing.minicluster import AdminClient
from walship_testing.minicluster.process import MiniClusterProcess

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]


def ship_peer_1(a: Cluster, job_id: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    """The ship job for peer 1 of source ``a``, described as JSON, its summary recorded as ``job_id``."""
    job = ShipJob(zk=a.zk_hosts, znode_parent=a.parent, wal_root=str(a.mc.data_dir), peer_id="1", job_id=job_id)
    return spark_submit("ship.py", ["--job", job.to_json()], tmp_path)


def recorded_summary(a: Cluster, job_id: str) -> dict[str, Any]:
    """The job's summary as the report task reads it: from ZooKeeper, not a local file."""
    with zk_client(a.zk_hosts) as client:
        summary = JobStore(client, ZnodeLayout(a.parent)).get("1", job_id)
    assert summary is not None, f"job {job_id} recorded no summary"
    return summary


def test_spark_job_ships_every_queue_in_parallel(
    minicluster_factory: Callable[..., MiniClusterProcess], zk_hosts: str, tmp_path: Path
) -> None:
    a = make_cluster(minicluster_factory, zk_hosts, "A")
    b = make_cluster(minicluster_factory, zk_hosts, "B")
    add_peer(a, b)
    conn = a.conn()
    conn.create_table("u", {"r": {}})
    AdminClient(a.mc.admin).set_scope("u", "r", 1)
    bconn = b.conn()
    bconn.create_table("u", {"r": {}})
    with a.table().batch() as batch:
        for i in range(300):
            batch.put(b"t-%03d" % i, {b"r:q": b"%d" % i, b"l:q": b"x"})
    with conn.table("u").batch() as batch:  # another table: another region, another server's queue
        for i in range(200):
            batch.put(b"u-%03d" % i, {b"r:q": b"%d" % i})
    done = ship_peer_1(a, "job-1", tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    summary = recorded_summary(a, "job-1")
    printed = [line for line in done.stdout.splitlines() if line.startswith('{"peer_id"')]
    assert json.loads(printed[-1])["totals"] == summary["totals"]  # the same summary on stdout
    assert summary["status"] == "ok"
    assert summary["totals"]["cells_shipped"] == 500
    assert len([q for q in summary["queues"] if q["entries_shipped"]]) == 2  # two queues, two tasks
    assert contents(b) == contents(a, b"r")
    assert dict(bconn.table("u").scan()) == dict(conn.table("u").scan())
    conn.close()
    bconn.close()


def test_spark_job_reports_a_failing_queue(
    minicluster_factory: Callable[..., MiniClusterProcess], zk_hosts: str, tmp_path: Path
) -> None:
    a = make_cluster(minicluster_factory, zk_hosts, "A")
    b = minicluster_factory("B")  # no table t on the peer: the sink refuses the edits
    add_peer(a, Cluster(b, zk_hosts))
    a.table().put(b"r", {b"r:q": b"v"})
    done = ship_peer_1(a, "job-2", tmp_path)
    assert done.returncode == 1
    summary = recorded_summary(a, "job-2")
    assert summary["status"] == "error" and "table t" in summary["error"] and "does not exist" in summary["error"]


def test_a_bad_job_description_is_refused_naming_the_field(tmp_path: Path) -> None:
    done = spark_submit(
        "ship.py",
        [
            "--job",
            '{"zk": "127.0.0.1:1", "znode_parent": "/hbase", "peer_id": "1", "wal_root": "/w", "batch_entries": 0}',
        ],
        tmp_path,
    )
    output = done.stdout + done.stderr  # spark-submit passes the Python driver's stderr on its stdout
    assert done.returncode == 2 and "batch limits must be > 0" in output
    assert "Traceback" not in output


def test_a_lingering_ship_task_ships_edits_written_after_its_first_pass(
    minicluster_factory: Callable[..., MiniClusterProcess], zk_hosts: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The executor side of a job with ``linger``: it goes on shipping its queues' new edits,
    pass after pass, reports one summary per queue adding up every pass, and ends once no new
    edits came for LINGER_QUIET seconds, long before its linger is up."""
    monkeypatch.setattr(spark_ship, "LINGER_QUIET", 5.0)
    a = make_cluster(minicluster_factory, zk_hosts, "A")
    b = make_cluster(minicluster_factory, zk_hosts, "B")
    add_peer(a, b, "1")
    t = a.table()
    for i in range(10):
        t.put(b"early%02d" % i, {b"r:q": b"e"})
    job = ShipJob(zk=a.zk_hosts, znode_parent=a.parent, wal_root=str(a.mc.data_dir), peer_id="1", linger=600)
    with zk_client(a.zk_hosts) as client:
        _, groups = plan_queues(job, client)
    out: list[dict[str, Any]] = []
    worker = threading.Thread(target=lambda: out.extend(ship_partition(job, iter(groups))))
    worker.start()
    try:
        wait_until(lambda: len(contents(b)) == 10, what="the first pass shipped the early rows")
        for i in range(15):
            t.put(b"late%02d" % i, {b"r:q": b"l"})
        wait_until(lambda: len(contents(b)) == 25, what="a later pass shipped the late rows")
        assert worker.is_alive()  # shipped by the lingering task, not by a new job
    finally:
        worker.join(120)
    assert not worker.is_alive()  # quiet for 5 s: it stopped lingering (its linger was 600 s)
    assert sorted((q["server"], q["queue_id"]) for q in out) == sorted(t for group in groups for t in group)
    assert sum(q["entries_shipped"] for q in out) == 25 and all(q["status"] == "shipped" for q in out if q["batches"])
    assert contents(b) == contents(a, b"r")


def test_a_serial_peer_s_job_waits_for_the_queue_that_holds_a_region_s_earlier_edits(
    minicluster_factory: Callable[..., MiniClusterProcess], zk_hosts: str, tmp_path: Path
) -> None:
    """A region moved: a job of only its new server's queue ships up to the region's entry and
    says it waits (its summary, in ZooKeeper); the next job, of every queue, lingering, ships
    the rest in order whichever task goes first. The barriers come over the source's Thrift2
    server named in the job."""
    a = make_cluster(minicluster_factory, zk_hosts, "A")
    b = make_cluster(minicluster_factory, zk_hosts, "B")
    add_peer(a, b)
    with zk_client(a.zk_hosts) as client:
        ReplicationPeers(client, ZnodeLayout(a.parent)).modify("1", lambda p: replace(p, serial=True))
    for c in (a, b):  # scoped from its first open, so that every open is a barrier
        create_scoped_table(c.mc.thrift2, "s")
    a, b = Cluster(a.mc, a.zk_hosts, b"s"), Cluster(b.mc, b.zk_hosts, b"s")
    admin = AdminClient(a.mc.admin)
    (region,) = admin.regions("s")
    old = region["server"]
    new = next(rs["name"] for rs in admin.info()["regionservers"] if rs["alive"] and rs["name"] != old)
    t = a.table()
    for _ in range(4):
        t.counter_inc(b"row", b"r:c")
    admin.move("s", region["region"], new)
    for _ in range(4):
        t.counter_inc(b"row", b"r:c")

    def job(job_id: str, queues: tuple[str, ...] = (), linger: float = 0.0) -> dict[str, Any]:
        spec = ShipJob(
            zk=a.zk_hosts, znode_parent=a.parent, wal_root=str(a.mc.data_dir), peer_id="1", job_id=job_id,
            queues=queues, source_thrift2=a.thrift2_address(), linger=linger,
        )  # fmt: skip
        done = spark_submit("ship.py", ["--job", spec.to_json()], tmp_path)
        assert done.returncode == 0, done.stderr[-3000:]
        return recorded_summary(a, job_id)

    first = job("job-new", (f"{new}/1",))
    (q,) = first["queues"]
    assert first["status"] == "ok" and q["status"] == "waiting-serial" and region["region"] in q["message"]
    assert contents(b, b"r") == {}
    second = job("job-all", linger=60)  # a queue that waits goes again while the job lingers
    assert second["status"] == "ok"
    assert contents(b, b"r") == contents(a, b"r")
    assert int.from_bytes(contents(b, b"r")[b"row"][b"r:c"][0][0], "big") == 8


def held_queue_locks(client: Any, layout: ZnodeLayout) -> set[str]:
    """``server/queue`` of every queue whose shipper lock someone holds now."""
    held = set()
    for server in client.get_children(layout.locks) if client.exists(layout.locks) else []:
        for queue in client.get_children(f"{layout.locks}/{server}"):
            if client.get_children(f"{layout.locks}/{server}/{queue}"):
                held.add(f"{server}/{queue}")
    return held


def test_more_queues_than_spark_slots_are_shipped_at_once(
    minicluster_factory: Callable[..., MiniClusterProcess], zk_hosts: str, tmp_path: Path
) -> None:
    """Three queues, each with a few seconds' shipping, on ``local[2]``: the job runs two
    tasks, one of them ships two queues in threads of its own, so all three queues are held
    (and shipped) at the same time."""
    a = make_cluster(minicluster_factory, zk_hosts, "A", regionservers=3)
    b = make_cluster(minicluster_factory, zk_hosts, "B")
    add_peer(a, b)
    tables = [TABLE.decode(), "u1", "u2"]
    conn, bconn = a.conn(), b.conn()
    for name in tables[1:]:  # another table: another region, on another server
        conn.create_table(name, {"r": {}})
        AdminClient(a.mc.admin).set_scope(name, "r", 1)
        bconn.create_table(name, {"r": {}})
    for name in tables:
        with conn.table(name).batch(batch_size=1000) as batch:
            for i in range(15_000):
                batch.put(b"%s-%05d" % (name.encode(), i), {b"r:q": b"v" * 100})
    layout = ZnodeLayout(a.parent)
    with zk_client(a.zk_hosts) as client:
        queues = ReplicationQueues(client, layout).list_queues("1")
        assert len({q.server for q in queues if q.wals}) == 3  # a table a server
        job = ShipJob(zk=a.zk_hosts, znode_parent=a.parent, wal_root=str(a.mc.data_dir), peer_id="1", job_id="wide")
        done: list[subprocess.CompletedProcess[str]] = []
        submit = threading.Thread(
            target=lambda: done.append(spark_submit("ship.py", ["--job", job.to_json()], tmp_path))
        )

        def all_three_held() -> bool:
            held = len(held_queue_locks(client, layout)) == 3
            assert held or submit.is_alive(), "the job ended without holding the three queues at once"
            return held

        submit.start()
        try:
            wait_until(all_three_held, timeout=300, interval=0.01, what="the three queues held at once, on two slots")
        finally:
            submit.join(300)
    assert done and done[0].returncode == 0, done and done[0].stderr[-3000:]
    summary = recorded_summary(a, "wide")
    assert summary["status"] == "ok" and summary["totals"]["cells_shipped"] == 3 * 15_000
    for name in tables:
        assert dict(bconn.table(name).scan(columns=[b"r"])) == dict(conn.table(name).scan(columns=[b"r"]))
    conn.close()
    bconn.close()


@contextlib.contextmanager
def local_spark(monkeypatch: pytest.MonkeyPatch, **conf: str) -> Iterator[Any]:
    """A SparkSession on ``local[2]`` in this process, its Python workers this interpreter."""
    from pyspark.sql import SparkSession

    monkeypatch.setenv("SPARK_LOCAL_IP", "127.0.0.1")
    monkeypatch.setenv("PYSPARK_PYTHON", sys.executable)
    logging.getLogger("py4j").setLevel(logging.WARNING)  # its finalizer logs after the streams close
    builder = SparkSession.builder.master("local[2]").appName("walship-warm-up-test")
    for key, value in {"spark.ui.enabled": "false", **conf}.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    try:
        yield spark
    finally:
        spark.stop()


def test_the_ship_tasks_find_their_python_workers_started(monkeypatch: pytest.MonkeyPatch) -> None:
    """The warm-up starts a Python worker a slot, with the Thrift sinks (and a copy task's path)
    loaded, and the tasks of
    the job after it run in those workers: their start is out of the ship tasks' window."""
    with local_spark(monkeypatch) as spark:
        warm_up = warmup.WorkerWarmUp(spark)
        warm_up.wait()
        assert len(warm_up.workers) == 2  # one a slot, started at once

        def probe(_: Any) -> Any:
            loaded = ("walship.spark.ship", "walship.sinks.hbase2", "walship.sinks.hbase", "walship.spark.copy")
            yield os.getpid(), all(name in sys.modules for name in loaded)

        after = spark.sparkContext.parallelize(range(4), numSlices=4).mapPartitions(probe).collect()
        assert {pid for pid, _ in after} <= warm_up.workers
        assert all(loaded for _, loaded in after)


def test_no_warm_up_where_spark_keeps_no_python_worker(monkeypatch: pytest.MonkeyPatch) -> None:
    """With ``spark.python.worker.reuse=false`` a started worker would serve no ship task: none is started."""
    with local_spark(monkeypatch, **{warmup.REUSE_KEY: "false"}) as spark:
        warm_up = warmup.WorkerWarmUp(spark)
        warm_up.wait()
        assert warm_up.workers == set()
        assert spark.sparkContext.statusTracker().getJobIdsForGroup() == []  # no job was run


def test_a_warm_up_that_cannot_run_is_cancelled_and_holds_nothing_back(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every slot busy (executors that do not come, on a cluster): the ship stage waits for
    the warm-up only as long as it was told, and the warm-up's job is cancelled, not left queued."""
    with local_spark(monkeypatch) as spark:
        sc = spark.sparkContext

        def fill_the_slots() -> None:
            with contextlib.suppress(Exception):  # cancelled at the end of the test
                sc.parallelize(range(2), 2).foreach(lambda _: time.sleep(60))

        blocker = threading.Thread(target=fill_the_slots, daemon=True)
        blocker.start()
        wait_until(lambda: len(sc.statusTracker().getActiveStageIds()) == 1, timeout=60, what="the slots to fill")
        warm_up = warmup.WorkerWarmUp(spark)
        wait_until(
            lambda: bool(sc.statusTracker().getJobIdsForGroup(warm_up.group)), timeout=30, what="the warm-up job"
        )
        warm_up.wait(timeout=0.5)
        assert blocker.is_alive()  # it returned while the slots are still held: not after the blocker's 60 s
        assert warm_up.workers == set()
        (job,) = sc.statusTracker().getJobIdsForGroup(warm_up.group)
        info = sc.statusTracker().getJobInfo(job)
        assert info is not None and info.status == "FAILED"  # cancelled: Spark reports it failed
        sc.cancelAllJobs()
        blocker.join(timeout=60)


def test_a_failed_spark_job_is_named_by_its_python_error(monkeypatch: pytest.MonkeyPatch) -> None:
    """The warm-up's warning names what stopped its job: the Python error, not Py4J's first line."""
    with local_spark(monkeypatch) as spark, pytest.raises(Exception) as failed:
        spark.sparkContext.parallelize([1], 1).map(lambda _: __import__("no_such_module_here")).collect()
    assert warmup.failure_line(failed.value) == "ModuleNotFoundError: No module named 'no_such_module_here'"
