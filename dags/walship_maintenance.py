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

import pendulum
from airflow.sdk import Param, dag, task
from walship_airflow.maintenance import keep_days_default


@dag(
    dag_id="walship_maintenance",
    schedule="@daily",
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    max_active_runs=1,
    doc_md=__doc__,
    tags=["walship", "maintenance"],
    default_args={"owner": "walship", "retries": 1, "retry_delay": timedelta(minutes=10)},
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


walship_maintenance()
