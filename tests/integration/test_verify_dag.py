"""The ``walship_verify`` DAG, run by Airflow itself (``dag.test()``) against real miniclusters:
the verify job through Spark, its result read back from ZooKeeper, recorded as an event of
the asset ``walship_verify`` and failing the run on a bad row (the event recorded first)."""

from __future__ import annotations

import datetime
import json
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from airflow_env import AIRFLOW_MARKS, ROOT, source_conn
from replication_helpers import TABLE, Cluster, contents, ship

from walship.verify.model import LATEST
from walship.zk import ZnodeLayout, zk_client
from walship.zk.records import VerifyStore

pytestmark = [
    pytest.mark.integration,
    *AIRFLOW_MARKS,
]

#: every Param: dag.test() keeps an earlier run's conf in the DAG object's Params
DEFAULTS: dict[str, Any] = {
    "peer_id": "1",
    "tables": [],
    "families": "",
    "start_time": "",
    "end_time": "",
    "row_prefixes": [],
    "versions": None,
    "recompare_sleep": 0,
    "repair": False,
    "report_dir": "",
    "spark_conn_id": "spark_default",
}


@pytest.fixture
def sink_protocol() -> str:
    """Verify reads the peer over Thrift2: peer 1 ships over Thrift2 (``walship.sink.thrift2``)."""
    return "thrift2"


def verify_conn(cluster: Cluster) -> str:
    """``AIRFLOW_CONN_WALSHIP_SOURCE`` for the cluster, with its Thrift2 server as the extra ``thrift2``."""
    conn = json.loads(source_conn(cluster))
    conn["extra"] = {**conn["extra"], "thrift2": cluster.thrift2_address()}
    return json.dumps(conn)


def asset_events(run_id: str) -> list[dict[str, Any]]:
    """The extras of the ``walship_verify`` events the run recorded."""
    from airflow.models.asset import AssetEvent, AssetModel
    from airflow.utils.session import create_session
    from sqlalchemy import select

    query = (
        select(AssetEvent.extra)
        .join(AssetModel, AssetModel.id == AssetEvent.asset_id)
        .where(AssetModel.name == "walship_verify", AssetEvent.source_run_id == run_id)
    )
    with create_session(scoped=False) as session:
        return [dict(extra) for (extra,) in session.execute(query).all()]


def states(run: Any) -> dict[str, str]:
    return {ti.task_id: ti.state for ti in run.get_task_instances()}


def test_the_dag_is_daily_over_the_last_day_with_a_trigger_form(dagbag: Any) -> None:
    dag = dagbag.dags["walship_verify"]
    assert set(dag.task_dict) == {"plan", "verify", "report", "check"}
    assert dag.task_dict["plan"].downstream_task_ids == {"verify", "report"}
    assert dag.task_dict["verify"].downstream_task_ids == {"report"}
    assert dag.task_dict["report"].downstream_task_ids == {"check"}
    assert dag.catchup is False and dag.max_active_runs == 1 and dag.tags and dag.doc_md
    assert type(dag.timetable).__name__ == "CronDataIntervalTimetable"
    assert dag.timetable.expression == "0 0 * * *"  # "@daily", with a day-long data interval
    assert set(dag.params) == set(DEFAULTS)
    assert all(dag.params.get_param(name).description for name in DEFAULTS)
    (outlet,) = dag.task_dict["report"].outlets
    assert (outlet.name, outlet.uri) == ("walship_verify", "walship://verify/")  # Airflow adds the "/"
    assert dag.task_dict["check"].retries == 0 and dag.task_dict["verify"].retries >= 1


def test_the_time_range_of_scheduled_and_manual_runs() -> None:
    from walship_airflow.verify import time_range

    day = datetime.datetime(2026, 5, 1, tzinfo=datetime.UTC)
    next_day = day + datetime.timedelta(days=1)
    ms = int(day.timestamp() * 1000)

    def context(run_type: str | None) -> dict[str, Any]:
        return {
            "dag_run": SimpleNamespace(run_type=run_type),
            "data_interval_start": day if run_type else None,
            "data_interval_end": next_day if run_type else None,
        }

    none = {"start_time": "", "end_time": None}
    assert time_range(none, context("scheduled")) == (ms, ms + 86_400_000)
    assert time_range(none, context("backfill")) == (ms, ms + 86_400_000)
    assert time_range(none, context("manual")) == (0, LATEST)  # by hand: the whole history
    assert time_range(none, context(None)) == (0, LATEST)
    # a Param wins, each bound on its own
    assert time_range({"start_time": "2026-05-01T12:00:00Z", "end_time": ""}, context("scheduled")) == (
        ms + 43_200_000,
        ms + 86_400_000,
    )
    assert time_range({"start_time": "", "end_time": "2026-05-01T06:00:00"}, context("manual")) == (0, ms + 21_600_000)
    from airflow.sdk.exceptions import AirflowFailException

    with pytest.raises(AirflowFailException, match="Param end_time: not an ISO time: 'yesterday'"):
        time_range({"end_time": "yesterday"}, context("manual"))


def test_a_clean_peer_passes_a_changed_row_fails_the_run_and_repair_fixes_it(
    ab: tuple[Cluster, Cluster], dagbag: Any, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    a, b = ab
    source = a.conn()
    with source.table(TABLE).batch(timestamp=1000) as batch:
        for i in range(20):
            batch.put(b"row%02d" % i, {b"r:q": b"v%d" % i, b"l:q": b"local"})
    source.close()
    ship(a)
    monkeypatch.setenv("AIRFLOW_CONN_WALSHIP_SOURCE", verify_conn(a))
    dag = dagbag.dags["walship_verify"]

    # 1. clean: success, and an event with every row good
    run = dag.test(run_conf={**DEFAULTS, "tables": ["t"], "families": "r"})
    assert run.state == "success", states(run)
    (event,) = asset_events(run.run_id)
    assert event["counters"]["GOODROWS"] == 20 and event["counters"]["BADROWS"] == 0
    assert event["peer_id"] == "1" and event["tables"] == ["t"] and event["families"] == ["r"]
    assert event["time_range"] == {"start": None, "end": None}  # by hand, no times: the whole history
    # the Spark job left its result in walship's znodes, where the report read it
    with zk_client(a.zk_hosts) as client:
        record = VerifyStore(client, ZnodeLayout(a.parent)).get("1", event["job_id"])
    assert record is not None and record["status"] == "ok" and record["counters"] == event["counters"]

    # 2. a row changed on the peer: the run fails naming it, the event recorded all the same
    peer = b.conn()
    peer.table(TABLE).put(b"row03", {b"r:q": b"changed"}, timestamp=1000)
    peer.close()
    capfd.readouterr()
    run = dag.test(run_conf=DEFAULTS)
    got = states(run)
    assert run.state == "failed" and got["check"] == "failed", got
    assert got["verify"] == got["report"] == "success", got
    assert run.get_task_instance("check").try_number == 1  # not retried: a retry would find the same
    (event,) = asset_events(run.run_id)
    assert event["counters"]["BADROWS"] == 1 and event["counters"]["CONTENT_DIFFERENT_ROWS"] == 1
    assert event["counters"]["GOODROWS"] == 19 and event["bad_rows"] == ["row03"] and event["status"] == "bad_rows"
    log = capfd.readouterr().out
    assert "verify of peer 1: 1 bad row(s) in t" in log and "bad rows: row03" in log

    # 3. repair: success, and the peer equals the source again
    run = dag.test(run_conf={**DEFAULTS, "families": ["r"], "repair": True})
    assert run.state == "success", states(run)
    (event,) = asset_events(run.run_id)
    assert event["counters"]["BADROWS"] == 0 and event["counters"]["REPAIRED_ROWS"] == 1
    assert event["found"]["BADROWS"] == 1 and event["repair"] is True
    assert contents(b) == contents(a, b"r")


def test_results_live_in_their_own_znodes_and_errors_say_whether_to_retry(zk_hosts: str) -> None:
    from walship.errors import ConfigError, PeerNotFoundError, VerifyError, VerifyUnavailableError
    from walship.spark.verify import error_record
    from walship.verify import VerifyJob

    layout = ZnodeLayout("/hbase")
    with zk_client(zk_hosts) as client:
        store = VerifyStore(client, layout)
        store.put("1", "manual__x", {"counters": {"BADROWS": 0}, "status": "ok"})
        assert client.exists("/hbase/replication/walship/verify/1/manual__x")
        assert not client.exists("/hbase/replication/walship/jobs/1/manual__x")  # not a ship job
        assert store.get("1", "manual__x")["counters"] == {"BADROWS": 0}
        # too large a result loses its detail, never its counters
        huge = {"counters": {"BADROWS": 9}, "bad_rows": ["r" * 1000] * 1000, "repair": [{"x": "y" * 1000}] * 200}
        store.put("1", "big", huge)
        kept = store.get("1", "big")
        assert kept["counters"] == {"BADROWS": 9} and kept["bad_rows_truncated"] and kept["repair"] == []
        store.delete("1", "big")
        store.delete("1", "big")  # gone already: fine
        assert store.get("1", "big") is None

    job = VerifyJob(zk=zk_hosts, znode_parent="/hbase", wal_root="/w", source_thrift2="h:1", peer_id="1")
    assert not error_record(job, VerifyError("--table x: no such table"))["retryable"]
    assert not error_record(job, PeerNotFoundError("peer 9 does not exist"))["retryable"]
    assert not error_record(job, ConfigError("bad"))["retryable"]
    record = error_record(job, VerifyUnavailableError("the source cluster does not answer"))
    assert record["retryable"] and record["status"] == "error" and record["error_type"] == "VerifyUnavailableError"


def test_the_verify_task_fails_with_the_recorded_reason_and_retries_only_when_it_may_help(
    ab: tuple[Cluster, Cluster], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The verify task's real spark-submit fails three ways: the job recorded a reason a retry
    cannot mend, one it may mend, or nothing (Spark itself failed, an earlier record forgotten)."""
    from airflow.sdk.exceptions import AirflowException, AirflowFailException

    from walship.verify import VerifyJob
    from walship.zk.localserver import free_port
    from walship_airflow.hooks.spark import WalshipSparkHook
    from walship_airflow.operators.ship import WalshipVerifyOperator

    a, _ = ab
    monkeypatch.setenv("AIRFLOW_CONN_WALSHIP_SOURCE", verify_conn(a))
    hook = WalshipSparkHook()

    def submit(job: VerifyJob, app: Path = ROOT / "spark_jobs" / "verify.py") -> None:
        kwargs = hook.submit_kwargs(
            str(app), str(ROOT / "spark_jobs" / "pyrunner.jar"), job.to_json(), ["--job-id", "run1"]
        )
        WalshipVerifyOperator(task_id="verify", job_id="run1", **kwargs).execute({})

    job = VerifyJob(
        zk=a.zk_hosts,
        znode_parent=a.parent,
        wal_root=str(a.mc.data_dir),
        source_thrift2=a.thrift2_address(),
        peer_id="1",
        tables=("nosuch",),
    )
    with pytest.raises(AirflowFailException, match="verify of peer 1 failed: --table nosuch: no such table"):
        submit(job)
    with zk_client(a.zk_hosts) as client:  # recorded under the job id, not retryable
        record = VerifyStore(client, ZnodeLayout(a.parent)).get("1", "run1")
    assert record is not None and record["error_type"] == "VerifyError" and not record["retryable"]

    nobody = replace(job, tables=(TABLE.decode(),), source_thrift2=f"127.0.0.1:{free_port()}")
    with pytest.raises(AirflowException, match="verify of peer 1 failed: .*127.0.0.1") as caught:
        submit(nobody)
    assert not isinstance(caught.value, AirflowFailException)  # Airflow retries it

    with pytest.raises(AirflowException, match="Cannot execute") as caught:  # no record, none stale
        submit(job, ROOT / "spark_jobs" / "nosuch.py")
    assert "verify of peer" not in str(caught.value)
