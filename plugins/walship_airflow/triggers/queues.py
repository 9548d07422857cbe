"""Triggers: one fires when a peer's replication queues have work, one when a peer is drained."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

from airflow.triggers.base import BaseTrigger, TriggerEvent


class UnshippedQueuesTrigger(BaseTrigger):
    """Polls ZooKeeper (in a thread: kazoo blocks) until a queue of ``peer_id`` has unshipped
    bytes, then fires with those queues. It keeps no state and has no side effects."""

    def __init__(
        self,
        zk: str,
        znode_parent: str,
        wal_root: str,
        peer_id: str,
        queue_filter: str | None = None,
        poll_interval: float = 2.0,
    ) -> None:
        super().__init__()
        self.zk = zk
        self.znode_parent = znode_parent
        self.wal_root = wal_root
        self.peer_id = peer_id
        self.queue_filter = queue_filter
        self.poll_interval = poll_interval

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            "walship_airflow.triggers.queues.UnshippedQueuesTrigger",
            {
                "zk": self.zk,
                "znode_parent": self.znode_parent,
                "wal_root": self.wal_root,
                "peer_id": self.peer_id,
                "queue_filter": self.queue_filter,
                "poll_interval": self.poll_interval,
            },
        )

    async def run(self) -> AsyncIterator[TriggerEvent]:
        from walship.replicate.planner import pending_queues

        while True:
            try:
                pending = await asyncio.to_thread(
                    pending_queues, self.zk, self.znode_parent, self.wal_root, self.peer_id, self.queue_filter
                )
            except Exception as exc:
                yield TriggerEvent({"status": "error", "message": f"{type(exc).__name__}: {exc}"})
                return
            if pending:
                yield TriggerEvent(
                    {
                        "status": "pending",
                        "queues": [p.key for p in pending],
                        "backlog_bytes": sum(p.backlog_bytes for p in pending),
                    }
                )
                return
            await asyncio.sleep(self.poll_interval)


class WalDrainedTrigger(BaseTrigger):
    """Polls ZooKeeper until every WAL of a drain cut (``walship.status.drain.Cut`` as JSON)
    has been shipped past its offset, or ``timeout`` seconds passed; fires with the result
    (on timeout, with each queue still behind). No state, no side effects."""

    def __init__(
        self,
        zk: str,
        znode_parent: str,
        cut: dict[str, Any],
        poll_interval: float = 2.0,
        timeout: float | None = None,
        started: float | None = None,
    ) -> None:
        super().__init__()
        self.zk = zk
        self.znode_parent = znode_parent
        self.cut = cut
        self.poll_interval = poll_interval
        self.timeout = timeout
        self.started = started if started is not None else time.time()

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            "walship_airflow.triggers.queues.WalDrainedTrigger",
            {
                "zk": self.zk,
                "znode_parent": self.znode_parent,
                "cut": self.cut,
                "poll_interval": self.poll_interval,
                "timeout": self.timeout,
                "started": self.started,
            },
        )

    async def run(self) -> AsyncIterator[TriggerEvent]:
        from walship.status.drain import Cut, DrainResult, behind_at

        cut = Cut.from_json(self.cut)
        while True:
            try:
                late = await asyncio.to_thread(behind_at, self.zk, self.znode_parent, cut)
            except Exception as exc:
                yield TriggerEvent({"status": "error", "message": f"{type(exc).__name__}: {exc}"})
                return
            elapsed = time.time() - self.started
            if not late or (self.timeout is not None and elapsed >= self.timeout):
                result = DrainResult(cut, not late, elapsed, late)
                yield TriggerEvent(
                    {"status": "drained" if not late else "timeout", "message": result.message(), **result.to_json()}
                )
                return
            await asyncio.sleep(self.poll_interval)
