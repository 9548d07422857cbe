"""
### walship_replicate

Ships the replication queues of the source cluster (connection `walship_source`) with Spark
(connection `spark_default`): of every enabled peer walship manages, subscriptions among them,
as they are at each run (a peer added or removed between runs needs no change here), or of
the peers the Param `peer_id` names (`1,2`). Queues of several peers over the same WALs are
shipped by one Spark task that reads each WAL once for all of them.

1. **wait_for_unshipped** — a deferrable sensor: done when a queue of the peers has unshipped
   bytes; a scheduled run is skipped when nothing arrives within 50 seconds. A run triggered
   by hand does not wait: it ships every queue matching `queue` at once (or is skipped, with
   the reason in the task log, when there is none).
2. **plan** — groups the queues (at most `max_parallel_jobs` groups) into job descriptions.
3. **ship** — one `spark_jobs/ship.py --job <JSON>` submit per group; inside, one Spark task
   per queue, each holding its queue's ZooKeeper lock: queues in parallel, each in order. The
   Spark connection is the Param `spark_conn_id` (default `spark_default`); the Python
   interpreter on the Spark hosts comes from its extra `pyspark_python`.
4. **report** — reads the jobs' summaries from ZooKeeper and records an asset event for each
   peer shipped.

Each Spark job lingers (Param `linger`, default 30 s): after its first pass it goes on shipping
new edits, so that its start-up is paid once for more of them, and ends early once no new edit
came for 10 s. `linger` 0 makes one pass.

Every minute, one run at a time, no catch-up. Trigger it from the UI with other Params.
"""

from __future__ import annotations

import os
from datetime import timedelta
from pathlib import Path
from typing import Any

import pendulum
from airflow.sdk import AssetAlias, Param, dag, task
from walship_airflow.operators.ship import WalshipShipOperator, spark_pool
from walship_airflow.sensors.queues import WalQueueSensor

from walship import defaults

SPARK_JOBS = Path(__file__).resolve().parent.parent / "spark_jobs"
SHIP_APP = os.environ.get("WALSHIP_SHIP_APP", str(SPARK_JOBS / "ship.py"))
PYRUNNER_JAR = os.environ.get("WALSHIP_PYRUNNER_JAR", str(SPARK_JOBS / "pyrunner.jar"))
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
        "peer_id": Param(
            "",
            type="string",
            description="the peer(s) to ship to, comma-separated (empty: every enabled walship peer and subscription)",
        ),
        "queue": Param("", type="string", description="only this queue: an id, server/id or glob (empty: all)"),
        "max_batches": Param(0, type="integer", minimum=0, description="stop each queue after N batches (0: no limit)"),
        "batch_entries": Param(defaults.BATCH_ENTRIES, type="integer", minimum=1, description="entries per batch"),
        "batch_bytes": Param(defaults.BATCH_BYTES, type="integer", minimum=1, description="bytes per batch"),
        "spark_conn_id": Param("spark_default", type="string", minLength=1, description="the Spark connection"),
        "linger": Param(
            defaults.LINGER,
            type="number",
            minimum=0,
            maximum=3600,
            description="seconds each Spark job goes on shipping new edits after its first pass, ending "
            "early after 10 s without any (0: one pass); pays its start-up once for more edits",
        ),
        "max_parallel_jobs": Param(
            defaults.MAX_PARALLEL_JOBS, type="integer", minimum=1, description="Spark jobs at most, one per group"
        ),
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
    def plan(queues: list[str], **context: Any) -> list[dict[str, Any]]:
        from walship_airflow.hooks.source import WalshipHook
        from walship_airflow.planning import ship_jobs

        return ship_jobs(WalshipHook().get_source(), queues, context, SHIP_APP, PYRUNNER_JAR)

    jobs = plan(queues.output)
    ship = WalshipShipOperator.partial(
        task_id="ship",
        name="walship-ship",
        retries=1,
        pool=spark_pool(),  # $WALSHIP_SPARK_POOL: one slot per Spark worker core
    ).expand_kwargs(jobs)

    @task(outlets=[REPLICATED])
    def report(jobs: list[dict[str, Any]], **context: Any) -> dict[str, object]:
        from walship_airflow.hooks.source import WalshipHook
        from walship_airflow.planning import read_summaries

        return read_summaries(WalshipHook().get_source(), jobs, context, REPLICATED)

    ship >> report(jobs)


walship_replicate()
