"""
### walship_clean

The log cleaner of the source cluster (connection `walship_source`): deletes a WAL under
`oldWALs/` only when it is older than the TTL and no replication queue references it, using one
consistent snapshot of every queue per run. Nothing under `WALs/` is touched, files that are
not WALs are reported, and if ZooKeeper cannot be read nothing is deleted (the run fails).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pendulum
from airflow.sdk import Param, dag, task

from walship import defaults


@dag(
    dag_id="walship_clean",
    schedule=timedelta(minutes=10),
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    max_active_runs=1,
    doc_md=__doc__,
    tags=["walship", "cleaner"],
    default_args={"owner": "walship", "retries": 2, "retry_delay": timedelta(minutes=1)},
    params={
        "ttl": Param(
            defaults.CLEAN_TTL, type="number", minimum=0, description="seconds an archived WAL is kept at least"
        ),
        "dry_run": Param(False, type="boolean", description="report only, delete nothing"),
        "disabled_peer_limit": Param(
            10 * 1024**3, type="integer", minimum=1, description="warn when a disabled peer holds more archived bytes"
        ),
    },
)
def walship_clean() -> None:
    @task
    def clean_archive(**context: Any) -> dict[str, object]:
        from walship_airflow.hooks.source import WalshipHook

        from walship.replicate.cleaner import clean

        params = context["params"]
        with WalshipHook().connected() as (client, layout, walstore):
            report = clean(
                client,
                layout,
                walstore,
                ttl=float(params["ttl"]),
                dry_run=bool(params["dry_run"]),
                disabled_peer_limit=int(params["disabled_peer_limit"]),
            )
        return report.to_json()

    clean_archive()


walship_clean()
