"""Spark on a real YARN (Hadoop's MiniYARNCluster beside the real HBase's HDFS, the
``real_hdfs`` fixture): walship's jobs in cluster deploy mode, their Python a packed
environment (``walship spark pack``) sent with ``--archives``, the queue and the resources from
the Spark connection. A ship job drains a queue; an executor killed while it ships is replaced
and its task retried without losing an edit; a queue that does not exist, a missing archive
or a ResourceManager that does not answer is one line at the task's start, before any submit.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from airflow_env import AIRFLOW_MARKS, source_conn, task_failures
from real_hbase import layout, managed_peer, table_on_both, wait_queues_hold_current_wals
from replication_helpers import contents
from spark_yarn import ROOT, PacedWriter, rows, yarn_apps, yarn_connection
from waiting import wait_until

from walship.spark.ship import ShipJob
from walship.zk import ReplicationQueues, zk_client
from walship.zk.locks import read_holder
from walship_testing.harness import HBaseProcess, YarnInfo

pytestmark = [pytest.mark.integration, *AIRFLOW_MARKS]

CONN_ID = "spark_yarn"


@pytest.fixture
def on_yarn(real_hdfs: HBaseProcess, packed_env: Path, monkeypatch: pytest.MonkeyPatch) -> YarnInfo:
    """This process and its spark-submits see the harness's YARN; ``spark_yarn`` submits there."""
    yarn = real_hdfs.yarn
    assert yarn is not None and yarn.queues == ("default", "walship")
    for key, value in yarn.client_env().items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv(f"AIRFLOW_CONN_{CONN_ID.upper()}", yarn_connection(yarn, packed_env))
    return yarn


def test_the_replicate_dag_ships_in_cluster_mode_on_yarn_with_the_packed_environment(
    dagbag: Any, real_hdfs: HBaseProcess, real_hbase: tuple[HBaseProcess, HBaseProcess], on_yarn: YarnInfo,
    monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    """With ZooKeeper credentials in the source connection: they reach the driver in YARN's
    application master and the executors as a file, never on spark-submit's command line."""
    from test_dags import REPLICATE_DEFAULTS

    h, b = table_on_both(real_hdfs, real_hbase[1], "yarn")
    with managed_peer(h, b, "y1") as peer:
        wait_queues_hold_current_wals(h, peer)
        with h.table().batch() as batch:
            for i in range(300):
                batch.put(b"row-%03d" % i, {b"r:q": b"%d" % i, b"l:x": b"local"})
        conn = {**json.loads(source_conn(h)), "login": "walship", "password": "zk-secret"}
        monkeypatch.setenv("AIRFLOW_CONN_WALSHIP_SOURCE", json.dumps(conn))
        before = {app["id"] for app in yarn_apps(on_yarn)}
        capfd.readouterr()
        conf = {**REPLICATE_DEFAULTS, "peer_id": peer, "max_parallel_jobs": 1, "spark_conn_id": CONN_ID, "linger": 0}
        run = dagbag.dags["walship_replicate"].test(run_conf=conf)
        states = {ti.task_id: ti.state for ti in run.get_task_instances()}
        assert run.state == "success", states
        assert contents(b) == contents(h, b"r") and len(contents(b)) == 300
        out = capfd.readouterr().out
        assert "spark.yarn.appMasterEnv.WALSHIP_ZK_AUTH_FILE=walship-zk-auth" in out
        assert "WALSHIP_ZK_AUTH=" not in out and "zk-secret" not in out
    (app,) = [app for app in yarn_apps(on_yarn) if app["id"] not in before]
    # the driver ran in YARN's application master, in the connection's queue, and succeeded
    assert (app["name"], app["queue"], app["finalStatus"]) == ("walship-ship", "walship", "SUCCEEDED")
    assert app["amContainerLogs"]


def executor_group(pid: int) -> int:
    """The process group of the YARN container running the Python worker ``pid``: the group of
    its executor's JVM (YARN starts each container in a session of its own)."""
    current = pid
    while current > 1:
        cmdline = Path(f"/proc/{current}/cmdline").read_bytes()
        if b"YarnCoarseGrainedExecutorBackend" in cmdline:
            return os.getpgid(current)
        current = int(Path(f"/proc/{current}/stat").read_text().rsplit(")", 1)[1].split()[1])
    raise AssertionError(f"python worker {pid} does not run under a YARN executor")


def test_an_executor_killed_while_it_ships_is_replaced_and_its_task_retried_without_loss(
    real_hdfs: HBaseProcess, real_hbase: tuple[HBaseProcess, HBaseProcess], on_yarn: YarnInfo, hdfs_archive: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    from walship_airflow.hooks.spark import WalshipSparkHook

    monkeypatch.setenv(f"AIRFLOW_CONN_{CONN_ID.upper()}", yarn_connection(on_yarn, hdfs_archive))
    h, b = table_on_both(real_hdfs, real_hbase[1], "kill")
    with managed_peer(h, b, "y2") as peer:
        wait_queues_hold_current_wals(h, peer)
        # about 2,000 rows a second until the executor's task is retried: edits to ship throughout
        with PacedWriter(h, pause=0.05) as writer:
            job = ShipJob(
                zk=h.zk_hosts, znode_parent=h.parent, wal_root=real_hdfs.wal_root, peer_id=peer,
                batch_entries=100, linger=25, lock_wait=30, job_id=f"kill-{peer}",
            )  # fmt: skip
            hook = WalshipSparkHook(CONN_ID)
            kwargs = hook.submit_kwargs(str(ROOT / "spark_jobs" / "ship.py"), "", job.to_json())
            assert kwargs["archives"] == f"{hdfs_archive}#walship-env" and kwargs["num_executors"] == 2
            submit = WalshipSparkHook(
                CONN_ID, conf={**kwargs["conf"], "spark.yarn.submit.waitAppCompletion": "true"},
                archives=kwargs["archives"], num_executors=2, executor_cores=1, executor_memory="512m",
                driver_memory="512m", name="walship-ship-kill", application_args=kwargs["application_args"],
            )  # fmt: skip
            result: list[BaseException | None] = []

            def run() -> None:
                try:
                    submit.submit(kwargs["application"])
                    result.append(None)
                except BaseException as exc:
                    result.append(exc)

            submitter = threading.Thread(target=run, daemon=True)
            submitter.start()
            with zk_client(h.zk_hosts) as client:
                queues = ReplicationQueues(client, layout(h))
                (q,) = queues.list_queues(peer)

                def holder_pid() -> int | None:
                    holder = read_holder(client, layout(h), q.server, str(q.queue_id))
                    return holder.pid if holder and holder.pid else None

                def shipping() -> bool:
                    (now,) = queues.list_queues(peer)
                    return holder_pid() is not None and any(w.position > 0 for w in now.wals)

                wait_until(shipping, timeout=180, what=f"an executor shipping peer {peer}'s queue")
                pid = holder_pid()
                assert pid is not None
                os.killpg(executor_group(pid), signal.SIGKILL)
                # another executor takes the task over once the dead one's lock is gone
                wait_until(
                    lambda: (p := holder_pid()) is not None and p != pid, timeout=120,
                    what="the killed executor's task retried on another executor",
                )  # fmt: skip
        submitter.join(timeout=300)
        assert result == [None], result
        # the job lingered until no new edit came: every row written is on the peer
        assert rows(b) == rows(h) and len(rows(b)) == writer.written
    (app,) = [a for a in yarn_apps(on_yarn) if a["name"] == "walship-ship-kill"]
    assert app["finalStatus"] == "SUCCEEDED"


def test_a_bad_queue_or_archive_or_a_silent_resourcemanager_is_one_line_at_the_start(
    dagbag: Any, real_hdfs: HBaseProcess, real_hbase: tuple[HBaseProcess, HBaseProcess], on_yarn: YarnInfo,
    packed_env: Path, tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    from airflow.sdk.exceptions import AirflowException, AirflowFailException
    from test_dags import REPLICATE_DEFAULTS

    from walship_airflow.hooks.spark import WalshipSparkHook

    def check(conn: str, error: type[Exception] = AirflowException) -> str:
        """The one line the check of ``conn`` fails with (AirflowFailException: no retry)."""
        monkeypatch.setenv(f"AIRFLOW_CONN_{CONN_ID.upper()}", conn)
        with pytest.raises(AirflowException) as raised:
            WalshipSparkHook(CONN_ID).check()
        assert type(raised.value) is error
        message = str(raised.value)
        assert "\n" not in message
        return message

    WalshipSparkHook(CONN_ID).check()  # the fixture's connection is good
    message = check(yarn_connection(on_yarn, packed_env, queue="etl"), AirflowFailException)
    assert message == (
        f"YARN queue (connection {CONN_ID}) 'etl' does not exist at ResourceManager http://{on_yarn.webapp} "
        "(its queues: default, walship)"
    )
    missing = tmp_path / "nope" / "walship-env.tar.gz"
    message = check(yarn_connection(on_yarn, missing), AirflowFailException)
    assert (
        message
        == f"Spark archive (connection {CONN_ID}) {missing} does not exist (build one with `walship spark pack`)"
    )
    from walship.zk.localserver import free_port

    silent = f"127.0.0.1:{free_port()}"
    message = check(yarn_connection(on_yarn, packed_env, yarn_resourcemanager_webapp_address=silent))
    assert message.startswith(f"YARN ResourceManager http://{silent} does not answer")

    # `walship spark pack` with a wheel or constraints file that is not there: one line, nothing written
    out = tmp_path / "env.tar.gz"
    for flag in ("--wheel", "--constraint"):
        done = subprocess.run(
            [str(Path(sys.executable).parent / "walship"), "spark", "pack", "-o", str(out), flag, str(missing)],
            capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
        assert (done.returncode, done.stderr) == (1, f"walship: {flag} {missing}: no such file\n")
        assert not out.exists()

    # in a DAG run: the ship task fails at its start, naming the queue, and nothing is submitted
    h, b = table_on_both(real_hdfs, real_hbase[1], "badq")
    with managed_peer(h, b, "y3") as peer:
        wait_queues_hold_current_wals(h, peer)
        h.table().put(b"row", {b"r:q": b"v"})
        monkeypatch.setenv("AIRFLOW_CONN_WALSHIP_SOURCE", source_conn(h))
        monkeypatch.setenv(f"AIRFLOW_CONN_{CONN_ID.upper()}", yarn_connection(on_yarn, packed_env, queue="etl"))
        before = len(yarn_apps(on_yarn))
        capfd.readouterr()
        conf = {**REPLICATE_DEFAULTS, "peer_id": peer, "max_parallel_jobs": 1, "spark_conn_id": CONN_ID, "linger": 0}
        run = dagbag.dags["walship_replicate"].test(run_conf=conf)
        states = {ti.task_id: ti.state for ti in run.get_task_instances()}
        assert states["ship"] == "failed", states
        failures = task_failures(capfd.readouterr().out)
        assert any("YARN queue (connection spark_yarn) 'etl' does not exist" in f for f in failures), failures
        assert len(yarn_apps(on_yarn)) == before
