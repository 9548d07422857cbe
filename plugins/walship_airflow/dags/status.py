"""
### walship_status

Samples the replication status of the source cluster (connection `walship_source`) once a
minute: **record** reads what `walship status --json` shows and records an event of the asset
`walship_status` (`walship://status`) whose extra holds, per peer, the bytes queued, the lag
in seconds, whether it is drained and its number of queues.

The "Replication" page of the Airflow UI (`/walship/`) draws its charts from these events (the
last 24 hours): keep this DAG unpaused. No catch-up: a missed minute is simply not sampled.

**check** fails when a queue has a backlog and made no progress for `stuck_after` seconds
(Param; default `[walship] stuck_after`, 600), naming each such queue, so that the DAGs'
failure notifier (`[walship] on_failure_notifier`) tells someone. A disabled peer's queues
are never stuck (their backlog grows by design).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from airflow.sdk import DAG, Param, dag, task

from walship_airflow.dags.common import dag_kwargs
from walship_airflow.sources import Source
from walship_airflow.status import status_asset, stuck_after_default


def build(source: Source) -> DAG:
    """``walship_status`` of a source."""
    asset = status_asset(source)

    @dag(
        **dag_kwargs(
            source,
            "walship_status",
            __doc__,
            tags=["status"],
            default_args={"retries": 1, "retry_delay": timedelta(seconds=15)},
            schedule=timedelta(minutes=1),
            max_active_runs=1,
        ),
        params={
            "stuck_after": Param(
                stuck_after_default(),
                type="number",
                minimum=1,
                description="seconds a queue with a backlog may make no progress before check fails",
            ),
        },
    )
    def walship_status() -> None:
        @task(outlets=[asset])
        def record(**context: Any) -> dict[str, Any]:
            from walship_airflow.status import record_sample

            return record_sample(context, source)

        @task(retries=0)
        def check(**context: Any) -> dict[str, Any]:
            from walship_airflow.status import check_stuck

            return check_stuck(source, float(context["params"]["stuck_after"]))

        record() >> check()

    return walship_status()
