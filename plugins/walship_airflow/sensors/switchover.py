"""The ``walship_switchover`` DAG's drain step as a deferrable sensor: the cut taken after the
fence (kept in the switchover's record, so a retry waits for the same one), then waited for in
the triggerer by :class:`~walship_airflow.triggers.queues.WalDrainedTrigger`, holding no
worker slot meanwhile."""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Any

from airflow.sdk import BaseSensorOperator, Context

from walship_airflow.triggers.queues import WalDrainedTrigger


class SwitchoverDrainSensor(BaseSensorOperator):
    """Done once every edit the source accepted before the fence is on the peer; fails after
    the run's ``drain_timeout`` naming each queue behind (see :mod:`walship_airflow.switchover`)."""

    def __init__(self, *, poll_interval: float = 2.0, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.poll_interval = poll_interval

    def execute(self, context: Context) -> Any:
        from walship_airflow.switchover import begin_drain

        begun = begin_drain(context["params"], context)
        if begun is None:
            return None
        timeout = float(begun["timeout"])
        self.defer(
            trigger=WalDrainedTrigger(
                begun["zk"], begun["znode_parent"], begun["cut"], self.poll_interval, timeout, time.time()
            ),
            method_name="execute_complete",
            # the trigger reports its own timeout with what is behind; this is a backstop
            timeout=timedelta(seconds=timeout + 60),
        )

    def execute_complete(self, context: Context, event: dict[str, Any] | None = None) -> str:
        from walship_airflow.switchover import end_drain

        return end_drain(context["params"], context, event)
