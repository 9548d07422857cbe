"""A deferrable sensor: done when a queue of the peer has unshipped bytes."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from airflow.sdk import BaseSensorOperator, Context
from airflow.sdk.exceptions import AirflowException, AirflowSkipException

from walship_airflow.hooks import WalshipHook
from walship_airflow.triggers import UnshippedQueuesTrigger


class WalQueueSensor(BaseSensorOperator):
    """Waits for work in the replication queues of ``peer_id``; returns the queues
    (``server/queueId``) that have it. Deferred to the triggerer while it waits.

    A manually triggered run does not wait: it returns at once every queue of the peer that
    matches ``queue_filter`` (with or without a backlog), so that a run triggered with Params
    ships what it was asked; with no such queue it is skipped, saying why.

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

    def _pending(self, *, include_drained: bool = False) -> list[str]:
        from walship.errors import WalshipError
        from walship.replicate.planning import pending_queues

        src = WalshipHook(self.walship_conn_id).get_source()
        try:
            found = pending_queues(
                src.zk,
                src.znode_parent,
                src.wal_root,
                self.peer_id,
                self.queue_filter or None,
                include_drained=include_drained,
                auth=src.auth,
            )
        except WalshipError as exc:
            raise AirflowException(f"peer {self.peer_id}: {exc}") from None
        for p in found:
            self.log.info(
                "peer %s: queue %s, %d WAL(s), %d bytes unshipped", self.peer_id, p.key, p.wals, p.backlog_bytes
            )
        return [p.key for p in found]

    def poke(self, context: Context) -> Any:
        return self._pending() or False

    def execute(self, context: Context) -> Any:
        dag_run = context.get("dag_run")
        if str(getattr(dag_run, "run_type", "")) in ("manual", "DagRunType.MANUAL"):
            queues = self._pending(include_drained=True)
            if not queues:
                where = f" matching {self.queue_filter!r}" if self.queue_filter else ""
                raise AirflowSkipException(
                    f"peer {self.peer_id}: nothing to ship: no queue{where} (or the peer is disabled)"
                )
            self.log.info("manual run: shipping %d queue(s) of peer %s now", len(queues), self.peer_id)
            return queues
        if not self.deferrable:
            return super().execute(context)
        pending = self._pending()
        if pending:
            return pending
        self.log.info(
            "peer %s: nothing unshipped yet; waiting up to %s s (the run is skipped if nothing arrives)",
            self.peer_id,
            self.timeout,
        )
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
