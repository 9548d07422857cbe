"""Deferrable sensors: one done when a queue of the peer has unshipped bytes, one when the
peer has applied every edit written before it started (drained)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from airflow.sdk import BaseSensorOperator, Context, PokeReturnValue
from airflow.sdk.exceptions import AirflowException, AirflowSensorTimeout, AirflowSkipException

from walship_airflow.hooks.source import WalshipHook
from walship_airflow.triggers.queues import UnshippedQueuesTrigger, WalDrainedTrigger


class WalQueueSensor(BaseSensorOperator):
    """Waits for work in the replication queues of ``peer_id``; returns the queues
    (``server/queueId``) that have it. Deferred to the triggerer while it waits.
    ``peer_id`` may name several peers (``1,2,subs``) or none: then every enabled peer
    walship manages, subscriptions among them, as they are when the sensor looks.

    A manually triggered run does not wait: it returns at once every queue of the peer that
    matches ``queue_filter`` (with or without a backlog), so that a run triggered with Params
    ships what it was asked; with no such queue it is skipped, saying why.

    :param peer_id: the peer(s) (templated; empty: every peer).
    :param queue_filter: only queues matching this id, ``server/id`` or glob (templated).
    """

    template_fields: Sequence[str] = ("peer_id", "queue_filter")

    @property
    def peers_shown(self) -> str:
        """The peers, as the log names them."""
        return f"peer {self.peer_id}" if self.peer_id else "every peer"

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
        from walship.replicate.planner import pending_queues

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
            raise AirflowException(f"{self.peers_shown}: {exc}") from None
        for p in found:
            self.log.info(
                "%s: queue %s, %d WAL(s), %d bytes unshipped", self.peers_shown, p.key, p.wals, p.backlog_bytes
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
                    f"{self.peers_shown}: nothing to ship: no queue{where} (or the peer is disabled)"
                )
            self.log.info("manual run: shipping %d queue(s) of %s now", len(queues), self.peers_shown)
            return queues
        if not self.deferrable:
            return super().execute(context)
        pending = self._pending()
        if pending:
            return pending
        self.log.info(
            "%s: nothing unshipped yet; waiting up to %s s (the run is skipped if nothing arrives)",
            self.peers_shown,
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
            raise AirflowException(f"{self.peers_shown}: {event.get('message') if event else 'no event'}")
        self.log.info(
            "%s: queues with work: %s (%d bytes)", self.peers_shown, event["queues"], event.get("backlog_bytes", 0)
        )
        return list(event["queues"])


class WalDrainedSensor(BaseSensorOperator):
    """Done when every edit written to the source before the task started is applied on the
    peer: a failover runbook's "safe to switch" step (``walship wait-drained`` as a task).

    At its start it takes the drain cut (each queued WAL of the peer and the end of its last
    complete entry, recovered queues and dead servers' queues included), then waits, deferred
    to the triggerer, until every WAL passed its cut. Writes need not stop. It returns the
    result (the cut and the time it took); on ``timeout`` it fails naming each queue still
    behind and by how much.

    :param peer_id: the peer (templated).
    :param drain_timeout: seconds to wait before failing (templated; default: the sensor's
        ``timeout``).
    """

    template_fields: Sequence[str] = ("peer_id", "drain_timeout")

    def __init__(
        self,
        *,
        peer_id: str,
        drain_timeout: float | str | None = None,
        walship_conn_id: str = WalshipHook.default_conn_name,
        poll_interval: float = 2.0,
        deferrable: bool = True,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        if self.mode == "reschedule":
            raise ValueError(
                f"{self.task_id}: WalDrainedSensor cannot run in reschedule mode (its cut is taken once, "
                "at the start); use deferrable=True"
            )
        self.peer_id = peer_id
        self.drain_timeout = drain_timeout
        self.walship_conn_id = walship_conn_id
        self.poll_interval = poll_interval
        self.deferrable = deferrable
        self._cut: Any = None
        self._started = 0.0

    def _behind(self) -> list[Any]:
        from walship.errors import WalshipError
        from walship.status.drain import behind_at

        src = WalshipHook(self.walship_conn_id).get_source()
        try:
            late = behind_at(src.zk, src.znode_parent, self._cut, auth=src.auth)
        except WalshipError as exc:
            raise AirflowException(f"peer {self.peer_id}: {exc}") from None
        for b in late:
            self.log.info("queue %s/%s: %s is %d bytes behind the cut", b.server, b.queue_id, b.wal, b.bytes_behind)
        return late

    def _result(self) -> dict[str, Any]:
        from walship.status.drain import DrainResult

        result = DrainResult(self._cut, True, time.time() - self._started)
        self.log.info("%s", result.message())
        return result.to_json()

    def _timeout(self) -> float | None:
        if self.drain_timeout in (None, ""):
            return float(self.timeout) if self.timeout else None
        try:
            return float(self.drain_timeout)
        except ValueError:
            raise AirflowException(f"drain_timeout must be seconds, got {self.drain_timeout!r}") from None

    def poke(self, context: Context) -> Any:
        late = self._behind()
        if not late:
            return PokeReturnValue(True, self._result())
        timeout = self._timeout()
        if timeout is not None and time.time() - self._started >= timeout:
            from walship.status.drain import DrainResult

            raise AirflowSensorTimeout(DrainResult(self._cut, False, time.time() - self._started, late).message())
        return False

    def execute(self, context: Context) -> Any:
        from walship.errors import WalshipError
        from walship.status.drain import take_cut_at

        src = WalshipHook(self.walship_conn_id).get_source()
        self._started = time.time()
        try:
            self._cut = take_cut_at(src.zk, src.znode_parent, src.wal_root, self.peer_id, auth=src.auth)
        except WalshipError as exc:
            raise AirflowException(f"peer {self.peer_id}: {exc}") from None
        self.log.info("peer %s: drain cut of %d WAL(s) taken", self.peer_id, len(self._cut.points))
        if not self._behind():
            return self._result()
        if not self.deferrable:
            return super().execute(context)
        timeout = self._timeout()
        self.defer(
            trigger=WalDrainedTrigger(
                src.zk, src.znode_parent, self._cut.to_json(), self.poll_interval, timeout, self._started
            ),
            method_name="execute_complete",
            # the trigger reports its own timeout with what is behind; this is a backstop
            timeout=timedelta(seconds=timeout + 60) if timeout else None,
        )

    def execute_complete(self, context: Context, event: dict[str, Any] | None = None) -> dict[str, Any]:
        status = event.get("status") if event else None
        if status == "drained" and event:
            self.log.info("%s", event["message"])
            return {k: v for k, v in event.items() if k not in ("status", "message")}
        if status == "timeout" and event:
            raise AirflowSensorTimeout(event["message"])
        raise AirflowException(f"peer {self.peer_id}: {event.get('message') if event else 'no event'}")
