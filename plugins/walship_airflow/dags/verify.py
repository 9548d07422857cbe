"""
### walship_verify

Compares a peer with the source cluster (connection `walship_source`, whose extra `thrift2`
names the source's Thrift2 server) row by row, as `walship verify --json` does, with Spark
(connection `spark_default`, or the Param `spark_conn_id`):

1. **plan** — the Params and the time range made into the verify job's description.
2. **verify** — `spark_jobs/verify.py --job <JSON> --job-id <run>`: one Spark task per split
   (region); the driver records the result in walship's znodes, whichever host it ran on.
3. **report** — reads the result from ZooKeeper and records it as an event of the asset
   `walship_verify` (`walship://verify`): peer, counters, time range, tables, bad rows.
4. **check** — fails the run (no retry) when `BADROWS` > 0, listing the counters and up to 20
   bad rows. The event is recorded first, so a failed run has one too.

The time range of cell timestamps, `[start, end)`: `start_time` / `end_time` when given (ISO,
e.g. `2026-05-01T00:00:00Z`); else a scheduled run covers its data interval (the last day); a
run triggered by hand covers the whole history. Daily, one run at a time, no catch-up.
`repair` makes each bad row of the peer equal to the source's (then the run succeeds when
every bad row was repaired).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from airflow.sdk import DAG, CronDataIntervalTimetable, Param, dag, task

from walship_airflow.dags.common import dag_kwargs, pyrunner_jar, spark_conn_param, spark_job
from walship_airflow.operators.ship import WalshipVerifyOperator, spark_pool
from walship_airflow.sources import Source
from walship_airflow.verify import verify_asset


def build(source: Source) -> DAG:
    """``walship_verify`` of a source."""
    conn_id = source.conn_id
    asset = verify_asset(source)

    @dag(
        **dag_kwargs(
            source,
            "walship_verify",
            __doc__,
            tags=["verify"],
            default_args={"retries": 1, "retry_delay": timedelta(minutes=1)},
            # data intervals of a day: "@daily" alone would be a CronTriggerTimetable, whose
            # interval is empty (start == end)
            schedule=CronDataIntervalTimetable("@daily", timezone="UTC"),
            max_active_runs=1,
        ),
        params={
            "peer_id": Param("1", type="string", minLength=1, description="the peer to verify"),
            "tables": Param(
                [],
                type=["null", "array"],
                items={"type": "string"},
                description="tables to verify, one a line (empty: every table the peer replicates)",
            ),
            "families": Param(
                "",
                type=["null", "string", "array"],
                items={"type": "string"},
                description='only these families: "f1,f2" or a JSON list (empty: every replicated family)',
            ),
            "start_time": Param(
                "",
                type=["null", "string"],
                description="compare cells with timestamps >= this, ISO (empty: the data interval's start "
                "for a scheduled run, else no bound)",
            ),
            "end_time": Param(
                "",
                type=["null", "string"],
                description="compare cells with timestamps < this, ISO (empty: the data interval's end "
                "for a scheduled run, else no bound)",
            ),
            "row_prefixes": Param(
                [],
                type=["null", "array"],
                items={"type": "string"},
                description="only rows starting with these prefixes, one a line (\\xNN escapes; empty: every row)",
            ),
            "versions": Param(
                None, type=["null", "integer"], minimum=1, description="versions compared per column (empty: VERSIONS)"
            ),
            "recompare_sleep": Param(
                2, type="number", minimum=0, description="seconds before rows found different are read again"
            ),
            "repair": Param(False, type="boolean", description="make each bad row of the peer equal to the source's"),
            "report_dir": Param(
                "",
                type=["null", "string"],
                description="write every bad row (and repair) here, a path or URL the Spark driver can write "
                "(empty: no report)",
            ),
            "spark_conn_id": spark_conn_param(),
        },
    )
    def walship_verify() -> None:
        @task
        def plan(**context: Any) -> list[dict[str, Any]]:
            from walship_airflow.hooks.source import WalshipHook
            from walship_airflow.verify import verify_jobs

            app = spark_job("verify.py", "WALSHIP_VERIFY_APP")
            return verify_jobs(WalshipHook(conn_id).get_source(), context, app, pyrunner_jar())

        jobs: Any = plan()  # an XComArg: the tasks below take what it resolves to
        verify = WalshipVerifyOperator.partial(
            task_id="verify", name="walship-verify", walship_conn_id=conn_id, pool=spark_pool()
        ).expand_kwargs(jobs)

        @task(outlets=[asset])
        def report(jobs: list[dict[str, Any]], **context: Any) -> dict[str, Any]:
            from walship_airflow.hooks.source import WalshipHook
            from walship_airflow.verify import report_result

            return report_result(WalshipHook(conn_id).get_source(), jobs, context, asset)

        @task(retries=0)
        def check(extra: dict[str, Any]) -> dict[str, Any]:
            from walship_airflow.verify import check_result

            return check_result(extra)

        result: Any = report(jobs)
        verify >> result
        check(result)

    return walship_verify()
