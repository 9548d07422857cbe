"""
### walship_tail

Low-latency replication: one long-lived task follows the current WAL of every queue of every
enabled peer walship manages (subscriptions among them; re-read every few seconds, so a peer
added meanwhile is picked up), or of the peers the Param `peer_id` names, and ships new
entries within a second or two, reading each WAL once for all of them. It holds the queues' ZooKeeper locks for
its run, so `walship_replicate` skips those queues (and says so); it rides out a peer outage
by backing off and resuming from the committed positions; it ends after `duration` seconds
so that the next continuous run takes over. After a pass that read few entries it lets new
edits gather for `gather` seconds (0.1 by default): fewer passes, less CPU, for at most that
much more lag.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from airflow.sdk import DAG, dag, task

from walship_airflow.dags.common import dag_kwargs, duration_param, gather_param, peer_ids_param
from walship_airflow.sources import Source


def build(source: Source) -> DAG:
    """``walship_tail`` of a source."""
    conn_id = source.conn_id

    @dag(
        **dag_kwargs(
            source,
            "walship_tail",
            __doc__,
            tags=["replication", "tail"],
            default_args={"retries": 3, "retry_delay": timedelta(seconds=10)},
            schedule="@continuous",
            max_active_runs=1,
        ),
        params={
            "peer_id": peer_ids_param(),
            "duration": duration_param(),
            "gather": gather_param(),
        },
    )
    def walship_tail() -> None:
        @task(execution_timeout=timedelta(hours=2))
        def tail(**context: Any) -> dict[str, object]:
            from walship.errors import TailError
            from walship.replicate.tailer import Tailer
            from walship_airflow.hooks.source import WalshipHook

            params = context["params"]
            hook = WalshipHook(conn_id)
            with hook.connected() as (client, layout, walstore):
                summary = Tailer(
                    client,
                    layout,
                    walstore,
                    str(params["peer_id"]),
                    duration=float(params["duration"]),
                    gather=float(params["gather"]),
                    run_id=str(context["run_id"]),
                    source_thrift2=hook.get_source().thrift2,
                ).run()
            if summary.status == "error":
                raise TailError(f"tailing peer(s) {summary.peer_id}: " + "; ".join(summary.errors))
            return summary.to_json()

        tail()

    return walship_tail()
