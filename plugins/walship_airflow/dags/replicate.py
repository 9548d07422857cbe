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

from datetime import timedelta
from typing import Any

from airflow.sdk import DAG, AssetAlias, Param, dag, task

from walship import defaults
from walship_airflow.dags.common import dag_kwargs, peer_ids_param, pyrunner_jar, spark_conn_param, spark_job
from walship_airflow.operators.ship import WalshipShipOperator, spark_pool
from walship_airflow.sensors.queues import WalQueueSensor
from walship_airflow.sources import Source


def build(source: Source) -> DAG:
    """``walship_replicate`` of a source."""
    replicated = AssetAlias(source.asset_name("walship_replicated"))
    conn_id = source.conn_id

    @dag(
        **dag_kwargs(
            source,
            "walship_replicate",
            __doc__,
            tags=["replication"],
            default_args={"retries": 2, "retry_delay": timedelta(seconds=20)},
            schedule=timedelta(minutes=1),
            max_active_runs=1,
        ),
        params={
            "peer_id": peer_ids_param(),
            "queue": Param("", type="string", description="only this queue: an id, server/id or glob (empty: all)"),
            "max_batches": Param(
                0, type="integer", minimum=0, description="stop each queue after N batches (0: no limit)"
            ),
            "batch_entries": Param(defaults.BATCH_ENTRIES, type="integer", minimum=1, description="entries per batch"),
            "batch_bytes": Param(defaults.BATCH_BYTES, type="integer", minimum=1, description="bytes per batch"),
            "spark_conn_id": spark_conn_param(),
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
            walship_conn_id=conn_id,
            timeout=50,
            soft_fail=True,
            poke_interval=5,
            retries=0,
        )

        @task
        def plan(queues: list[str], **context: Any) -> list[dict[str, Any]]:
            from walship_airflow.hooks.source import WalshipHook
            from walship_airflow.planning import ship_jobs

            app = spark_job("ship.py", "WALSHIP_SHIP_APP")
            return ship_jobs(WalshipHook(conn_id).get_source(), queues, context, app, pyrunner_jar())

        jobs: Any = plan(queues.output)  # an XComArg: the tasks below take what it resolves to
        ship = WalshipShipOperator.partial(
            task_id="ship",
            name="walship-ship",
            walship_conn_id=conn_id,
            retries=1,
            pool=spark_pool(),  # $WALSHIP_SPARK_POOL: one slot per Spark worker core
        ).expand_kwargs(jobs)

        @task(outlets=[replicated])
        def report(jobs: list[dict[str, Any]], **context: Any) -> dict[str, object]:
            from walship_airflow.hooks.source import WalshipHook
            from walship_airflow.planning import read_summaries

            return read_summaries(WalshipHook(conn_id).get_source(), jobs, context, replicated, source)

        ship >> report(jobs)

    return walship_replicate()
