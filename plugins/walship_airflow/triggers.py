"""A trigger that fires when a peer's replication queues have work."""

from __future__ import annotations

import asyncio
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
            "walship_airflow.triggers.UnshippedQueuesTrigger",
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
        from walship.replicate.planning import pending_queues

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
