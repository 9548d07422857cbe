"""
### walship_sep

Runs the SEP subscriptions' listeners: one long-lived task tails every chosen subscription
(Param `subscriptions`, comma-separated; empty: every enabled subscription) with one read of
the WALs feeding them all, and hands each new edit to the listeners within a second or two.
It holds the subscriptions' queue locks for its run, so `walship ship` and `walship_replicate`
skip those queues (and say so); it ends after `duration` seconds so that the next continuous
run takes over, and fails naming the errors if a listener or a queue failed.

With no enabled subscription (and `subscriptions` empty), the run waits for one to be added
or enabled, looking every 2 s, for up to `duration` seconds: one that appears is tailed for
the rest of the run; if none does, the task ends **skipped** ("no enabled subscription") and
the next run waits again, so an idle DAG starts a run every `duration` seconds, not every
second. A name in `subscriptions` that is not a subscription fails the run at once, without
retry.

Backfill a subscription (deliver a past window again) with `walship_replay`, Param `peer_id`
the subscription's name.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from airflow.sdk import DAG, Param, dag, task

from walship_airflow.dags.common import dag_kwargs, duration_param
from walship_airflow.sources import Source


def build(source: Source) -> DAG:
    """``walship_sep`` of a source."""
    conn_id = source.conn_id

    @dag(
        **dag_kwargs(
            source,
            "walship_sep",
            __doc__,
            tags=["sep", "tail"],
            default_args={"retries": 3, "retry_delay": timedelta(seconds=10)},
            schedule="@continuous",
            max_active_runs=1,
        ),
        params={
            "subscriptions": Param(
                "",
                type="string",
                description="the subscriptions to run, comma-separated (empty: every enabled subscription)",
            ),
            "duration": duration_param(),
        },
    )
    def walship_sep() -> None:
        @task(execution_timeout=timedelta(hours=2))
        def tail(**context: Any) -> dict[str, object]:
            import time

            from airflow.sdk.exceptions import AirflowSkipException

            from walship.errors import TailError
            from walship.replicate.tailer import Tailer
            from walship.sep.subscriptions import Subscriptions
            from walship_airflow.hooks.source import WalshipHook
            from walship_airflow.sep import await_subscriptions

            params = context["params"]
            duration = float(params["duration"])
            started = time.monotonic()
            hook = WalshipHook(conn_id)
            with hook.connected() as (client, layout, walstore):
                subscriptions = Subscriptions(client, layout, hook.get_source().zk)
                names = await_subscriptions(subscriptions, str(params["subscriptions"] or ""), wait=duration)
                if not names:
                    raise AirflowSkipException(f"no enabled subscription: waited {duration:g} s for one")
                summary = Tailer(
                    client,
                    layout,
                    walstore,
                    names,
                    duration=max(1.0, duration - (time.monotonic() - started)),
                    run_id=str(context["run_id"]),
                    source_thrift2=hook.get_source().thrift2,
                ).run()
            if summary.status == "error":
                raise TailError(f"tailing subscriptions {', '.join(names)}: " + "; ".join(summary.errors))
            return summary.to_json()

        tail()

    return walship_sep()
