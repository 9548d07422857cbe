"""
### walship_maintenance

Keeps Airflow's own records to a bounded age: `walship_replicate` runs every minute and the
tail and SEP DAGs continuously, so without this the metadata database and the task logs grow
without end. Daily:

1. **clean_db** — `airflow db clean` of every table (runs, task instances, XComs, asset events,
   the log table...) for records older than `keep_days`, without archive tables.
2. **prune_logs** — task log files older than `keep_days` under Airflow's log folder, and the
   folders left empty.

`keep_days` defaults to `$WALSHIP_KEEP_DAYS` (30 when unset).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from airflow.sdk import DAG, Param, dag, task

from walship_airflow.dags.common import dag_kwargs
from walship_airflow.maintenance import keep_days_default
from walship_airflow.sources import Source


def build() -> DAG:
    """``walship_maintenance``: one per Airflow, whatever its sources."""

    @dag(
        **dag_kwargs(
            Source(),
            "walship_maintenance",
            __doc__,
            tags=["maintenance"],
            default_args={"retries": 1, "retry_delay": timedelta(minutes=10)},
            schedule="@daily",
            max_active_runs=1,
        ),
        params={
            "keep_days": Param(
                keep_days_default(), type="integer", minimum=0, description="days of runs and task logs to keep"
            ),
        },
    )
    def walship_maintenance() -> None:
        @task
        def clean_db(**context: Any) -> dict[str, Any]:
            from walship_airflow.maintenance import clean_db, cut_of

            return clean_db(cut_of(int(context["params"]["keep_days"])))

        @task
        def prune_logs(**context: Any) -> dict[str, Any]:
            from airflow.sdk.configuration import conf

            from walship_airflow.maintenance import cut_of, prune_logs

            return prune_logs(conf.get("logging", "base_log_folder"), cut_of(int(context["params"]["keep_days"])))

        clean_db() >> prune_logs()

    return walship_maintenance()
