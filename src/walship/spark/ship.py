"""Ship peers' queues with Spark: the driver plans, one Spark task ships one queue (or the
queues of several peers over the same WALs, reading each WAL once for all of them); where the
job has more queues than Spark has slots, a task ships several at once, a thread each.
The executors' Python workers start while the driver plans (:mod:`walship.spark.warmup`), so
the ship tasks find them started.

Queues run in parallel, each in order: a task ships its queues, holding each queue's
ZooKeeper lock, exactly as ``walship ship --peer 1,2`` does in one process. Only plain data crosses
between driver and executors (the job description out, JSON summaries back), and nothing is
left on a local disk: the driver writes the job's summary into walship's znodes
(:class:`~walship.zk.records.JobStore`), where the ``report`` task reads it, whichever host
the driver ran on (client or cluster deploy mode).
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from typing import Any, ClassVar

from walship import defaults
from walship.errors import ConfigError
from walship.jobdesc import JobDescription
from walship.replicate.batcher.member import group_key
from walship.replicate.peerplan import split_peer_ids
from walship.replicate.shipper import PeerSummary, QueueSummary, Shipper
from walship.replicate.source import SourceSite
from walship.replicate.summary import merge_passes
from walship.security import kept_fresh
from walship.spark.warmup import WorkerWarmUp
from walship.zk import QueueId, ZnodeLayout
from walship.zk.client import validate_hosts
from walship.zk.layout import check_znode_name
from walship.zk.locks import Holder
from walship.zk.records import JobStore

__all__ = ["ShipJob", "gather", "plan_queues", "ship_group", "ship_partition", "ship_with_spark"]

log = logging.getLogger(__name__)

#: At most this many groups of queues a Spark task ships at once (where groups outnumber slots).
GROUPS_A_TASK = 4
#: Seconds a lingering ship task waits between two passes.
LINGER_IDLE = 1.0
#: A lingering ship task ends early once its passes found nothing new for this many seconds:
#: it lingers while edits keep coming, and frees its executor when they stop.
LINGER_QUIET = 10.0


@dataclass(frozen=True)
class ShipJob(JobDescription):
    """Everything a ship job needs, passed as JSON between tasks: where the source is, which
    peer and queues, the batch limits, and the job's id (its summary's znode name)."""

    KIND: ClassVar[str] = "ship job"
    TUPLES: ClassVar[tuple[str, ...]] = ("queues",)

    zk: str
    znode_parent: str
    wal_root: str
    peer_id: str  # one peer, or several: "1,2,subs"
    queues: tuple[str, ...] = ()  # "server/queueId"; empty: every queue of the peers
    queue_filter: str | None = None
    max_batches: int | None = None
    batch_bytes: int = defaults.BATCH_BYTES
    batch_entries: int = defaults.BATCH_ENTRIES
    lock_wait: float = defaults.LOCK_WAIT
    linger: float = 0.0  # seconds a task goes on shipping its queues' new edits (0: one pass)
    job_id: str | None = None
    run_id: str | None = None
    source_thrift2: str = ""  # the source's Thrift2 server(s), for serial peers' barriers

    def __post_init__(self) -> None:
        validate_hosts(self.zk)
        ZnodeLayout(self.znode_parent)
        if not split_peer_ids(self.peer_id):
            raise ConfigError("ship job: 'peer_id' names no peer")
        if not self.wal_root:
            raise ConfigError("ship job: 'wal_root' is empty")
        if self.batch_bytes <= 0 or self.batch_entries <= 0:
            raise ConfigError(f"ship job: batch limits must be > 0, got {self.batch_bytes} / {self.batch_entries}")
        if not 0 <= self.linger <= 86_400:
            raise ConfigError(f"ship job: 'linger' must be seconds between 0 and 86400, got {self.linger}")
        if self.max_batches is not None and self.max_batches <= 0:
            raise ConfigError(f"ship job: 'max_batches' must be > 0 or null, got {self.max_batches}")
        if self.job_id is not None:
            check_znode_name(self.job_id, "ship job id")

    @property
    def peer_ids(self) -> list[str]:
        return split_peer_ids(self.peer_id)

    def site(self) -> SourceSite:
        """The source the job ships from (its ZooKeeper credentials from the environment)."""
        return SourceSite(self.zk, self.znode_parent, self.wal_root)

    def holder(self) -> Holder:
        return Holder.here(f"ship-job-{self.job_id or 'adhoc'}", self.run_id)


def _shipper(job: ShipJob, client: Any) -> Shipper:
    site = job.site()
    return Shipper(
        client,
        site.layout,
        site.walstore(),
        batch_bytes=job.batch_bytes,
        batch_entries=job.batch_entries,
        lock_timeout=job.lock_wait,
        holder=job.holder(),
        source_thrift2=job.source_thrift2 or None,
    )


def plan_queues(job: ShipJob, client: Any) -> tuple[list[PeerSummary], list[list[tuple[str, str]]]]:
    """On the driver: claim dead servers' queues, then list the (server, queue id) to ship,
    in groups: the queues of the job's peers over the same WALs form one group (one task)."""
    shipper = _shipper(job, client)
    plan = shipper.planner.plan(job.peer_ids, job.queue_filter)
    summaries = plan.summaries(job.peer_ids)
    if not plan.enabled:
        return list(summaries.values()), []
    wanted = set(job.queues)
    groups: dict[tuple[str, tuple[str, ...]], list[tuple[str, str]]] = {}
    for queues in plan.queues.values():
        for q in queues:
            if wanted and f"{q.server}/{q.queue_id}" not in wanted:
                continue
            groups.setdefault(group_key(q.server, str(q.queue_id)), []).append((q.server, str(q.queue_id)))
    return list(summaries.values()), [groups[key] for key in sorted(groups)]


def ship_partition(job: ShipJob, groups: Iterator[list[tuple[str, str]]]) -> Iterator[dict[str, Any]]:
    """On an executor: ship the queues of this partition's groups (a group's queues share one
    read of their WALs), each group in a thread of its own, as a region server ships each of
    its queues in a thread of its own: a partition holds several groups when the job has more
    of them than Spark has slots, and shipping mostly waits for the peer, so they still go at
    once. The threads share one ZooKeeper session; each has its own shipper (sinks, readers).
    See :func:`ship_group` for a group's passes."""
    todo = [group for group in groups if group]
    if not todo:
        return
    stop = threading.Event()  # a group failed: the others stop lingering, the task fails soon
    # on a Kerberized cluster the executor logs in where it runs (WALSHIP_PRINCIPAL/KEYTAB) and a
    # lingering task gets new tickets from the keytab as the old ones end
    with kept_fresh(), job.site().state() as (client, _):
        if len(todo) == 1:
            results = [ship_group(job, client, todo[0], stop)]
        else:
            with ThreadPoolExecutor(len(todo), thread_name_prefix="walship-ship-group") as pool:
                futures = [pool.submit(ship_group, job, client, group, stop) for group in todo]
                for future in as_completed(futures):
                    if future.exception() is not None:
                        stop.set()
                results = [future.result() for future in futures]  # the first failed group's error
    for summaries in results:
        yield from summaries


def ship_group(
    job: ShipJob, client: Any, group: list[tuple[str, str]], stop: threading.Event | None = None
) -> list[dict[str, Any]]:
    """Ship one group's queues with a shipper of its own: one pass, or with ``job.linger``,
    pass after pass until that many seconds from the first pass have gone (a pass that finds
    nothing new waits a second), so that a job's start-up is paid once for more edits, or until
    passes found nothing new for :data:`LINGER_QUIET` seconds. A queue that fails, moves or is
    busy leaves the passes; ``stop`` set stops each queue after its batch under way and ends
    the lingering. Its queues' summaries, as JSON."""
    todo = list(group)
    deadline = time.monotonic() + job.linger
    with _shipper(job, client) as shipper:
        if stop is not None:
            shipper.halt = stop  # another group failed: this one's pass under way stops too
        wanted = {_peer_of(t) for t in todo}
        peers = {pid: shipper.peers.get(pid) for pid in job.peer_ids if pid in wanted}
        done: dict[tuple[str, str], QueueSummary] = {}
        quiet_since: float | None = None
        while todo:
            by_peer: dict[str, list[tuple[str, str]]] = {}
            for task in todo:
                by_peer.setdefault(_peer_of(task), []).append(task)
            passed = shipper.ship_queues_of([peers[pid] for pid in by_peer], by_peer, job.max_batches)
            read = sum(qs.entries_read for qs in passed)
            merge_passes(done, passed)
            todo = [
                k for k in todo if done[k].status in ("shipped", "idle", "waiting-serial") and not done[k].queue_removed
            ]
            now = time.monotonic()
            left = deadline - now
            if left <= 0 or (stop is not None and stop.is_set()):
                break
            if read:
                quiet_since = None
                continue
            if quiet_since is None:
                quiet_since = now
            elif now - quiet_since >= LINGER_QUIET:
                log.info("no new edits for %.0f s: the ship task stops lingering", now - quiet_since)
                break
            if stop is not None:
                stop.wait(min(LINGER_IDLE, left))
            else:
                time.sleep(min(LINGER_IDLE, left))
    return [qs.to_json() for qs in done.values()]


def _peer_of(task: tuple[str, str]) -> str:
    return QueueId.parse(task[1]).peer_id


def record_summaries(job: ShipJob, summaries: list[PeerSummary], client: Any) -> None:
    """Write the job's summary of each peer into walship's znodes, for the report task and status."""
    if not job.job_id:
        return
    store = JobStore(client, job.site().layout)
    for summary in summaries:
        store.put(summary.peer_id, job.job_id, summary.to_json())


def ship_with_spark(spark: Any, job: ShipJob, timings: dict[str, float] | None = None) -> list[PeerSummary]:
    """Plan on the driver while the executors' Python workers start (:class:`WorkerWarmUp`),
    ship one group of queues per Spark task (several groups a task beyond Spark's slots, at
    most :data:`GROUPS_A_TASK`: each holds up to two batches in memory), gather and record the
    summaries (one per peer of the job, in its order), over one ZooKeeper session of the
    driver's. ``timings`` gets the seconds of each step (``plan``; ``workers``, the wait for the
    workers after the plan; ``tasks``; ``record``)."""
    clock = timings if timings is not None else {}
    t0 = time.perf_counter()
    warm_up = WorkerWarmUp(spark)
    try:
        with job.site().state() as (client, _):
            summaries, groups = plan_queues(job, client)
            t1 = time.perf_counter()
            clock["plan"] = t1 - t0
            t2 = t1
            if groups:
                warm_up.wait()
                t2 = time.perf_counter()
                slots = spark.sparkContext.defaultParallelism
                slices = max(1, min(len(groups), max(slots, math.ceil(len(groups) / GROUPS_A_TASK))))
                rdd = spark.sparkContext.parallelize(groups, numSlices=slices)
                gather(summaries, rdd.mapPartitions(lambda it: ship_partition(job, it)).collect())
            t3 = time.perf_counter()
            clock["workers"], clock["tasks"] = t2 - t1, t3 - t2
            record_summaries(job, summaries, client)
            clock["record"] = time.perf_counter() - t3
    finally:
        warm_up.stop()  # nothing to ship, or a failed plan: no worker is waited for
    return summaries


def gather(summaries: list[PeerSummary], results: list[dict[str, Any]]) -> None:
    """Put the tasks' queue summaries (JSON) into their peers' summaries, and settle those."""
    by_peer = {s.peer_id: s for s in summaries}
    for result in results:
        qs = QueueSummary.from_json(result)
        by_peer[QueueId.parse(qs.queue_id).peer_id].queues.append(qs)
    for summary in summaries:
        summary.settle()
