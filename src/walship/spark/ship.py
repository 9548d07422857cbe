"""Ship a peer's queues with Spark: the driver plans, one Spark task ships one queue.

Queues run in parallel, each in order: a task ships its queue alone, holding the queue's
ZooKeeper lock, exactly as ``walship ship`` does in one process. Only plain data crosses
between driver and executors (the job's settings out, JSON summaries back).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from typing import Any

from walship.replicate.shipper import DEFAULT_BATCH_BYTES, DEFAULT_BATCH_ENTRIES, PeerSummary, QueueSummary, Shipper
from walship.replicate.walstore import WalStore
from walship.zk import ZnodeLayout, zk_client

__all__ = ["ShipJob", "plan_queues", "ship_with_spark"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ShipJob:
    """Everything a ship task needs: where the source is, which peer, which queues."""

    zk: str
    znode_parent: str
    wal_root: str
    peer_id: str
    queues: tuple[str, ...] = ()  # "server/queueId"; empty: every queue of the peer
    queue_filter: str | None = None
    max_batches: int | None = None
    batch_bytes: int = DEFAULT_BATCH_BYTES
    batch_entries: int = DEFAULT_BATCH_ENTRIES
    lock_wait: float = 0.0


def _shipper(job: ShipJob, client: Any) -> Shipper:
    return Shipper(
        client,
        ZnodeLayout(job.znode_parent),
        WalStore(job.wal_root),
        batch_bytes=job.batch_bytes,
        batch_entries=job.batch_entries,
        lock_timeout=job.lock_wait,
    )


def plan_queues(job: ShipJob) -> tuple[PeerSummary, list[tuple[str, str]]]:
    """On the driver: claim dead servers' queues, then list the (server, queue id) to ship."""
    with zk_client(job.zk) as client:
        shipper = _shipper(job, client)
        summary = PeerSummary(job.peer_id)
        peer = shipper.peers.get(job.peer_id)
        if not peer.enabled:
            summary.status = "disabled"
            return summary, []
        summary.claimed = shipper.failover()
        wanted = set(job.queues)
        tasks = []
        for q in shipper.peer_queues(job.peer_id, job.queue_filter):
            key = f"{q.server}/{q.queue_id}"
            if wanted and key not in wanted:
                continue
            tasks.append((q.server, str(q.queue_id)))
        return summary, tasks


def ship_partition(job: ShipJob, tasks: Iterator[tuple[str, str]]) -> Iterator[dict[str, Any]]:
    """On an executor: ship the queues of this partition, one after another."""
    todo = list(tasks)
    if not todo:
        return
    with zk_client(job.zk) as client:
        shipper = _shipper(job, client)
        peer = shipper.peers.get(job.peer_id)
        for qs in shipper.ship_queues(peer, todo, job.max_batches):
            out = asdict(qs)
            out.pop("exception", None)  # the message is in "error"; exceptions need not pickle
            yield out


def ship_with_spark(spark: Any, job: ShipJob) -> PeerSummary:
    """Plan on the driver, ship one queue per Spark task, gather the summaries."""
    summary, tasks = plan_queues(job)
    if not tasks:
        return summary
    rdd = spark.sparkContext.parallelize(tasks, numSlices=len(tasks))
    results = rdd.mapPartitions(lambda it: ship_partition(job, it)).collect()
    summary.queues = [QueueSummary(**r) for r in results]
    for q in summary.queues:
        if q.status == "error":
            summary.status = "error"
            summary.error = summary.error or q.error
    return summary
