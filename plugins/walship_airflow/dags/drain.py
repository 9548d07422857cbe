"""
### walship_drain

A failover runbook's "safe to switch" step: succeeds once every edit written to the source
(connection `walship_source`) before the run started is applied on the peer. Writes need not
stop. At its start the task takes a cut (each queued WAL of the peer and the end of its last
complete entry, recovered queues and dead servers' queues included) and waits, deferred to the
triggerer, until every WAL passed it. On timeout it fails, naming each queue still behind and by
how much. The same check as `walship wait-drained --peer ID`.
"""

from __future__ import annotations

from airflow.sdk import DAG, Param, dag

from walship_airflow.dags.common import dag_kwargs
from walship_airflow.sensors.queues import WalDrainedSensor
from walship_airflow.sources import Source


def build(source: Source) -> DAG:
    """``walship_drain`` of a source."""

    @dag(
        **dag_kwargs(source, "walship_drain", __doc__, tags=["failover"], default_args={}, schedule=None),
        params={
            "peer_id": Param("1", type="string", minLength=1, description="the peer that must be drained"),
            "timeout_s": Param(3600, type="integer", minimum=1, description="fail after this many seconds"),
        },
    )
    def walship_drain() -> None:
        WalDrainedSensor(
            task_id="wait_drained",
            peer_id="{{ params.peer_id }}",
            drain_timeout="{{ params.timeout_s }}",
            walship_conn_id=source.conn_id,
            poll_interval=1.0,
        )

    return walship_drain()
