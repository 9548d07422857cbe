"""Stuck queues: those with a backlog and no progress for the status's ``stuck_after``
seconds (how that is worked out: :mod:`walship.status.collect`), named one per line, for a
check that fails when there is any (the ``walship_status`` DAG's check task).

It takes the status model or its JSON (what :func:`walship.status.read_status` returns)::

    stuck = stuck_queues(read_status(zk, "/hbase", "hdfs://nn/hbase"))
    if stuck:
        raise SomeFailure("; ".join(s.message for s in stuck))
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from walship.status.model import ReplicationStatus

__all__ = ["StuckQueue", "stuck_queues"]


@dataclass(frozen=True)
class StuckQueue:
    """One stuck queue: its peer, server and queue id, its backlog and how long it stalled."""

    peer_id: str
    server: str
    queue_id: str
    bytes_queued: int
    stalled_s: float

    @property
    def message(self) -> str:
        """One line naming it, e.g. ``queue 1 of peer 1 on rs1,16020,1 is stuck: 4096 bytes
        queued, no progress for 612.3 s``."""
        return (
            f"queue {self.queue_id} of peer {self.peer_id} on {self.server} is stuck: {self.bytes_queued} bytes "
            f"queued, no progress for {self.stalled_s:.1f} s"
        )


def stuck_queues(status: ReplicationStatus | Mapping[str, Any]) -> list[StuckQueue]:
    """The stuck queues of a status, in its order (peers, then their queues); ``[]`` when none is.

    :param status: the model, or its JSON (``ReplicationStatus.to_json()``, ``walship status --json``).
    """
    data = status.to_json() if isinstance(status, ReplicationStatus) else status
    return [
        StuckQueue(
            str(peer["peer_id"]), str(q["server"]), str(q["queue_id"]), int(q["bytes_queued"]), float(q["stalled_s"])
        )
        for peer in data["peers"]
        for q in peer["queues"]
        if q["stuck"]
    ]
