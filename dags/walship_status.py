"""
### walship_status

Samples the replication status of the source cluster (connection `walship_source`) once a
minute: **record** reads what `walship status --json` shows and records an event of the asset
`walship_status` (`walship://status`) whose extra holds, per peer, the bytes queued, the lag
in seconds, whether it is drained and its number of queues.

The "Replication" page of the Airflow UI (`/walship/`) draws its charts from these events (the
last 24 hours): keep this DAG unpaused. No catch-up: a missed minute is simply not sampled.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pendulum
from airflow.sdk import dag, task
from walship_airflow.status import STATUS_ASSET


@dag(
    dag_id="walship_status",
    schedule=timedelta(minutes=1),
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    max_active_runs=1,
    doc_md=__doc__,
    tags=["walship", "status"],
    default_args={"owner": "walship", "retries": 1, "retry_delay": timedelta(seconds=15)},
)
def walship_status() -> None:
    @task(outlets=[STATUS_ASSET])
    def record(**context: Any) -> dict[str, Any]:
        from walship_airflow.status import record_sample

        return record_sample(context)

    record()


walship_status()
