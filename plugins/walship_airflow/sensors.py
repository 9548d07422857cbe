"""A deferrable sensor: done when a queue of the peer has unshipped bytes."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from airflow.sdk import BaseSensorOperator, Context
from airflow.sdk.exceptions import AirflowException

from walship_airflow.hooks import WalshipHook
from walship_airflow.triggers import UnshippedQueuesTrigger


class WalQueueSensor(BaseSensorOperator):
    """Waits for work in the replication queues of ``peer_id``; returns the queues
    (``server/queueId``) that have it. Deferred to the triggerer while it waits.

    :param peer_id: the peer (templated).
    :param queue_filter: only queues matching this id, ``server/id`` or glob (templated).
    """

    template_fields: Sequence[str] = ("peer_id", "queue_filter")

    def __init__(
        self,
        *,
        peer_id: str,
        queue_filter: str | None = None,
        walship_conn_id: str = WalshipHook.default_conn_name,
        poll_interval: float = 2.0,
        deferrable: bool = True,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.peer_id = peer_id
        self.queue_filter = queue_filter
        self.walship_conn_id = walship_conn_id
        self.poll_interval = poll_interval
        self.deferrable = deferrable

    def _pending(self) -> list[str]:
        from walship.replicate.pending import pending_queues

        src = WalshipHook(self.walship_conn_id).get_source()
        found = pending_queues(src.zk, src.znode_parent, src.wal_root, self.peer_id, self.queue_filter or None)
        return [p.key for p in found]

    def poke(self, context: Context) -> Any:
        pending = self._pending()
        if pending:
            self.log.info("peer %s: %d queue(s) with work: %s", self.peer_id, len(pending), pending)
        return pending or False

    def execute(self, context: Context) -> Any:
        if not self.deferrable:
            return super().execute(context)
        pending = self._pending()
        if pending:
            self.log.info("peer %s: %d queue(s) with work: %s", self.peer_id, len(pending), pending)
            return pending
        src = WalshipHook(self.walship_conn_id).get_source()
        self.defer(
            trigger=UnshippedQueuesTrigger(
                src.zk, src.znode_parent, src.wal_root, self.peer_id, self.queue_filter or None, self.poll_interval
            ),
            method_name="execute_complete",
            timeout=timedelta(seconds=float(self.timeout)) if self.timeout else None,
        )

    def execute_complete(self, context: Context, event: dict[str, Any] | None = None) -> list[str]:
        if not event or event.get("status") != "pending":
            raise AirflowException(f"peer {self.peer_id}: {event.get('message') if event else 'no event'}")
        self.log.info(
            "peer %s: queues with work: %s (%d bytes)", self.peer_id, event["queues"], event.get("backlog_bytes", 0)
        )
        return list(event["queues"])
