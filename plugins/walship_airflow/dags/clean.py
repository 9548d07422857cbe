"""
### walship_clean

The log cleaner of the source cluster (connection `walship_source`): deletes a WAL under
`oldWALs/` only when it is older than the TTL and no replication queue references it, using one
consistent snapshot of every queue per run. Nothing under `WALs/` is touched, files that are
not WALs are reported, and if ZooKeeper cannot be read nothing is deleted (the run fails).

Its task runs in the executor queue `[walship] cleaner_queue` (default `default`): with Celery,
only the workers consuming it need to write the WAL root.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from airflow.sdk import DAG, Param, dag, task

from walship import defaults
from walship_airflow.dags.common import cleaner_queue, dag_kwargs
from walship_airflow.sources import Source


def build(source: Source) -> DAG:
    """``walship_clean`` of a source."""
    conn_id = source.conn_id

    @dag(
        **dag_kwargs(
            source,
            "walship_clean",
            __doc__,
            tags=["cleaner"],
            default_args={"retries": 2, "retry_delay": timedelta(minutes=1)},
            schedule=timedelta(minutes=10),
            max_active_runs=1,
        ),
        params={
            "ttl": Param(
                defaults.CLEAN_TTL, type="number", minimum=0, description="seconds an archived WAL is kept at least"
            ),
            "dry_run": Param(False, type="boolean", description="report only, delete nothing"),
            "disabled_peer_limit": Param(
                10 * 1024**3,
                type="integer",
                minimum=1,
                description="warn when a disabled peer holds more archived bytes",
            ),
        },
    )
    def walship_clean() -> None:
        @task(queue=cleaner_queue())
        def clean_archive(**context: Any) -> dict[str, object]:
            from walship.replicate.cleaner import clean
            from walship_airflow.hooks.source import WalshipHook

            params = context["params"]
            with WalshipHook(conn_id).connected() as (client, layout, walstore):
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

    return walship_clean()
