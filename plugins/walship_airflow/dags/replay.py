"""
### walship_replay

Backlog replay, one hour a run: ships every edit whose write time lies in the run's data
interval, from all WALs still present (`WALs/` and `oldWALs/`) of the source cluster
(connection `walship_source`), to the peer of Param `peer_id`, filtered as for that peer. No
queue position moves. Runs are idempotent: overlapping or repeated runs leave the peer as one
run would. If WALs that covered part of the interval are gone, the run fails naming the
missing span, unless Param `allow_gaps` is true.

`peer_id` may name an SEP subscription (a backfill of its listener): the window's events go
to its listener as shipping delivers them, from the subscription's start time on and through
its filter. Every run delivers its window again, so repeated runs are idempotent only as far
as the listener is.

Replay a backlog with
`airflow backfill create --dag-id walship_replay --from-date 2026-11-01T00:00:00 --to-date 2026-11-02T00:00:00`.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from airflow.sdk import DAG, CronDataIntervalTimetable, Param, dag, task

from walship_airflow.dags.common import dag_kwargs
from walship_airflow.sources import Source


def build(source: Source) -> DAG:
    """``walship_replay`` of a source."""
    conn_id = source.conn_id

    @dag(
        **dag_kwargs(
            source,
            "walship_replay",
            __doc__,
            tags=["replay", "backfill"],
            default_args={"retries": 2, "retry_delay": timedelta(minutes=1)},
            schedule=CronDataIntervalTimetable("0 * * * *", timezone="UTC"),
            max_active_runs=4,
        ),
        params={
            "peer_id": Param(
                "1", type="string", minLength=1, description="the peer (or SEP subscription) to replay into"
            ),
            "allow_gaps": Param(False, type="boolean", description="replay what is there when WALs are gone"),
        },
    )
    def walship_replay() -> None:
        @task
        def replay_interval(**context: Any) -> dict[str, object]:
            from airflow.sdk.exceptions import AirflowFailException

            from walship.errors import ReplayGapError
            from walship.replicate.replay import replay
            from walship_airflow.hooks.source import WalshipHook

            params = context["params"]
            with WalshipHook(conn_id).connected() as (client, layout, walstore):
                try:
                    report = replay(
                        client,
                        layout,
                        walstore,
                        str(params["peer_id"]),
                        context["data_interval_start"],
                        context["data_interval_end"],
                        allow_gaps=bool(params["allow_gaps"]),
                    )
                except ReplayGapError as exc:
                    raise AirflowFailException(str(exc)) from exc  # no retry brings deleted WALs back
            return report.to_json()

        replay_interval()

    return walship_replay()
