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

import os
from datetime import timedelta
from pathlib import Path
from typing import Any

import pendulum
from airflow.sdk import Param, dag, task
from walship_airflow.operators.ship import WalshipShipOperator, spark_pool

SPARK_JOBS = Path(__file__).resolve().parent.parent / "spark_jobs"
COPY_APP = os.environ.get("WALSHIP_COPY_APP", str(SPARK_JOBS / "copy_rows.py"))
PYRUNNER_JAR = os.environ.get("WALSHIP_PYRUNNER_JAR", str(SPARK_JOBS / "pyrunner.jar"))


@dag(
    dag_id="walship_copy",
    schedule=None,
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    max_active_runs=1,
    doc_md=__doc__,
    tags=["walship", "copy"],
    default_args={"owner": "walship", "retries": 1, "retry_delay": timedelta(minutes=1)},
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
            description="copy cells with timestamps before this ISO time, e.g. when the peer was added (empty: all)",
        ),
        "spark_conn_id": Param("spark_default", type="string", minLength=1, description="the Spark connection"),
    },
)
def walship_copy() -> None:
    @task
    def plan(**context: Any) -> list[dict[str, Any]]:
        from walship_airflow.copy import copy_jobs
        from walship_airflow.hooks.source import WalshipHook

        return copy_jobs(WalshipHook().get_source(), context, COPY_APP, PYRUNNER_JAR)

    jobs: Any = plan()
    WalshipShipOperator.partial(task_id="copy", name="walship-copy", pool=spark_pool()).expand_kwargs(jobs)


walship_copy()
