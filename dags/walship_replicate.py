"""
### walship_replicate

Ships a peer's replication queues of the source cluster (connection `walship_source`) with
Spark (connection `spark_default`):

1. **wait_for_unshipped** — a deferrable sensor: done when a queue of the peer has unshipped
   bytes; the run is skipped when nothing arrives within 50 seconds.
2. **plan** — groups the queues (at most `max_parallel_jobs` groups).
3. **ship** — one `spark_jobs/ship.py` submit per group; inside, one Spark task per queue,
   each holding its queue's ZooKeeper lock: queues in parallel, each in order.
4. **report** — reads the jobs' summaries and records an asset event for the peer.

Every minute, one run at a time, no catch-up. Trigger it from the UI with other Params.
"""

from __future__ import annotations

import os
import sys
from datetime import timedelta
from pathlib import Path

import pendulum
from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.sdk import AssetAlias, Param, dag, task
from walship_airflow.sensors import WalQueueSensor

SHIP_APP = os.environ.get("WALSHIP_SHIP_APP", str(Path(__file__).resolve().parent.parent / "spark_jobs" / "ship.py"))
REPLICATED = AssetAlias("walship_replicated")


@dag(
    dag_id="walship_replicate",
    schedule=timedelta(minutes=1),
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    max_active_runs=1,
    doc_md=__doc__,
    tags=["walship", "replication"],
    default_args={"owner": "walship", "retries": 2, "retry_delay": timedelta(seconds=20)},
    params={
        "peer_id": Param("1", type="string", minLength=1, description="the peer to ship to"),
        "queue": Param("", type="string", description="only this queue: an id, server/id or glob (empty: all)"),
        "max_batches": Param(0, type="integer", minimum=0, description="stop each queue after N batches (0: no limit)"),
        "batch_entries": Param(25_000, type="integer", minimum=1, description="entries per batch"),
        "batch_bytes": Param(64 * 1024 * 1024, type="integer", minimum=1, description="bytes per batch"),
        "max_parallel_jobs": Param(4, type="integer", minimum=1, description="Spark jobs at most, one per group"),
    },
)
def walship_replicate() -> None:
    queues = WalQueueSensor(
        task_id="wait_for_unshipped",
        peer_id="{{ params.peer_id }}",
        queue_filter="{{ params.queue }}",
        timeout=50,
        soft_fail=True,
        poke_interval=5,
        retries=0,
    )

    @task
    def plan(queues: list[str], **context: object) -> list[list[str]]:
        from walship_airflow.hooks import WalshipHook
        from walship_airflow.planning import ship_arguments

        source = WalshipHook().get_source()
        return ship_arguments(source, queues, context)

    groups = plan(queues.output)
    ship = SparkSubmitOperator.partial(
        task_id="ship",
        application=SHIP_APP,
        conn_id="spark_default",
        name="walship-ship",
        conf={"spark.ui.enabled": "false"},
        env_vars={"PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable},
        retries=1,
    ).expand(application_args=groups)

    @task(outlets=[REPLICATED])
    def report(groups: list[list[str]], **context: object) -> dict[str, object]:
        from walship_airflow.planning import read_summaries

        return read_summaries(groups, context, REPLICATED)

    ship >> report(groups)


walship_replicate()
