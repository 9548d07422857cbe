"""
### walship_copy

The first copy of a new peer (`walship copy` as a Spark job): the rows the peer selects
(its table-cfs or namespaces, REPLICATION_SCOPE 1) are read from the source's Thrift2 server
(the extra `thrift2` of the connection `walship_source`) and put into the peer's
`walship.sink.thrift2` servers, every version with its own timestamp, one Spark task per
source region.

The runbook: add the peer (its queues start with the current WALs), trigger this DAG with
`until` the moment it was added, let `walship_replicate` ship, then `walship_verify` shows
0 bad rows. A copy can run again: it changes nothing that is already there.

Manual only. Params: `peer_id`, `tables` (empty: every table the peer replicates), `until`
(ISO; cells with earlier timestamps; empty: all), `spark_conn_id`.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from airflow.sdk import DAG, Param, dag, task

from walship_airflow.dags.common import dag_kwargs, pyrunner_jar, spark_conn_param, spark_job
from walship_airflow.operators.ship import WalshipShipOperator, spark_pool
from walship_airflow.sources import Source


def build(source: Source) -> DAG:
    """``walship_copy`` of a source."""
    conn_id = source.conn_id

    @dag(
        **dag_kwargs(
            source,
            "walship_copy",
            __doc__,
            tags=["copy"],
            default_args={"retries": 1, "retry_delay": timedelta(minutes=1)},
            schedule=None,
            max_active_runs=1,
        ),
        params={
            "peer_id": Param("", type="string", minLength=1, description="the peer to fill"),
            "tables": Param(
                [],
                type=["null", "array"],
                items={"type": "string"},
                description="tables to copy, one a line (empty: every table the peer replicates)",
            ),
            "until": Param(
                "",
                type="string",
                description="copy cells with timestamps before this ISO time, e.g. when the peer was added "
                "(empty: all)",
            ),
            "spark_conn_id": spark_conn_param(),
        },
    )
    def walship_copy() -> None:
        @task
        def plan(**context: Any) -> list[dict[str, Any]]:
            from walship_airflow.copy import copy_jobs
            from walship_airflow.hooks.source import WalshipHook

            app = spark_job("copy_rows.py", "WALSHIP_COPY_APP")
            return copy_jobs(WalshipHook(conn_id).get_source(), context, app, pyrunner_jar())

        jobs: Any = plan()
        WalshipShipOperator.partial(
            task_id="copy", name="walship-copy", walship_conn_id=conn_id, pool=spark_pool()
        ).expand_kwargs(jobs)

    return walship_copy()
