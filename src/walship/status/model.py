"""The status of replication as one model: what ``walship status``, ``wait-drained``, the
metrics endpoint and the Airflow page all show.

The JSON (``ReplicationStatus.to_json()``), keys exactly so::

    {"generated_at": ISO,
     "peers": [{"peer_id", "state", "hbase_peer_state", "cluster_key", "table_cfs", "peer_count",
                "bandwidth", "serial",
                "queues": [{"server", "queue_id", "recovered", "dead_servers", "wals", "current_wal",
                            "position", "bytes_queued", "progress_pct", "last_shipped_write_time",
                            "age_of_last_shipped_op_s", "lag_s", "holder", "last_error",
                            "last_backoff", "state", "bulk_loads", "waiting_serial", "throttled_s",
                            "stalled_s", "stuck", "last_shipped_at"}],
                "totals": {"queues", "wals", "bytes_queued", "lag_s", "drained", "stuck_queues"},
                "throttled_s", "errors", "dead_letters_pending",
                "sink": {"timestamp_started", "last_applied_at", "last_applied_write_time",
                         "age_of_last_applied_op_s"}}]}

Times are ISO 8601 in UTC; ages, lags and ``throttled_s`` (the time batches waited for the
peer's bandwidth, over the queue's life; the peer's: over its queues) are seconds. A queue's
``state`` is one of :data:`QUEUE_STATES`. ``sink`` is the peer as the receiving side (see
:class:`SinkStatus`).

A peer's ``bandwidth`` is its limit in bytes per second (0: unlimited) and ``serial`` its
serial flag. A queue's ``stalled_s`` is the seconds since it last made progress while it has a
backlog (``null`` without one; how it is worked out: :mod:`walship.status.collect`), and
``stuck`` whether that reached the status's threshold (``stuck_after``, seconds; default
:data:`walship.defaults.STUCK_AFTER`) while its peer is enabled; ``totals.stuck_queues`` counts them. The ``stuck`` flag is not the ``stuck``
state: that one says the queue's last attempt failed and nobody ships it now, at once; the
flag says it made no progress for that long, whatever the reason (nobody ships it, its
shipper fails or hangs, it waits for another queue). ``last_shipped_at`` is when a batch of
the queue was last applied and its position committed (``null`` before any).
``last_error`` is ``{"time", "message", "kind"}``, ``kind`` one of
:data:`walship.errors.ERROR_KINDS` (``null`` in records older than kinds). A peer's
``errors`` counts its queues' failed shipping passes by kind (kinds never seen left out), and
``dead_letters_pending`` its dead letters not replayed yet, as ``walship deadletter list``
counts them (``null`` when its dead-letter directory could not be read).
"""

from __future__ import annotations

import datetime as dt
import logging
from dataclasses import dataclass, field
from typing import Any

from walship.defaults import STUCK_AFTER

__all__ = [
    "QUEUE_STATES",
    "PeerCount",
    "PeerStatus",
    "QueueStatus",
    "ReplicationStatus",
    "SinkStatus",
    "format_hbase",
    "iso_ms",
    "sink_line",
]

log = logging.getLogger(__name__)

#: idle: nobody ships it now (drained, or waiting for the next run); shipping: a shipper holds
#: it; disabled: its peer is disabled; waiting-peer: its shipper is backing off because the
#: peer does not take its batches; stuck: nobody ships it and its last attempt failed;
#: waiting-serial: a serial peer's queue waits for another queue to ship a region's earlier
#: edits (``waiting_serial`` says which region and what it waits for).
QUEUE_STATES = ("idle", "shipping", "disabled", "waiting-peer", "stuck", "waiting-serial")


def iso_ms(ms: int | float | None) -> str | None:
    """Epoch milliseconds as ISO 8601 in UTC (``None`` stays ``None``)."""
    if ms is None:
        return None
    return dt.datetime.fromtimestamp(ms / 1000, dt.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


@dataclass
class QueueStatus:
    """One queue of one peer on one server (recovered ones and dead servers' ones included)."""

    server: str
    queue_id: str
    recovered: bool
    dead_servers: list[str]
    wals: int
    current_wal: str | None
    position: int
    bytes_queued: int
    progress_pct: float
    last_shipped_write_time: int | None  # epoch ms
    age_of_last_shipped_op_s: float | None
    lag_s: float
    holder: dict[str, Any] | None
    last_error: dict[str, Any] | None
    last_backoff: dict[str, Any] | None
    state: str
    #: whether a complete entry lies past the positions (exact, from the WAL itself)
    unshipped: bool = False
    #: counters from walship's progress record (metrics only, not in the JSON)
    cells_shipped: int = 0
    bytes_shipped: int = 0
    #: bulk load markers of what the peer takes, seen while shipping: their HFiles bypassed
    #: the WAL and were not shipped (``walship verify --repair`` copies their rows)
    bulk_loads: int = 0
    #: a serial peer's queue waiting: the region, its entry's sequence id, what it waits for
    waiting_serial: dict[str, Any] | None = None
    #: seconds its batches waited for the peer's bandwidth, from walship's progress record
    throttled_s: float = 0.0
    #: seconds since it last made progress while it has a backlog (``None``: no backlog)
    stalled_s: float | None = None
    #: stalled for the status's ``stuck_after`` or longer, its peer enabled
    stuck: bool = False
    #: epoch ms when a batch's position was last committed, from walship's progress record
    last_shipped_at: int | None = None

    @property
    def drained(self) -> bool:
        return not self.unshipped

    def to_json(self) -> dict[str, Any]:
        return {
            "server": self.server,
            "queue_id": self.queue_id,
            "recovered": self.recovered,
            "dead_servers": list(self.dead_servers),
            "wals": self.wals,
            "current_wal": self.current_wal,
            "position": self.position,
            "bytes_queued": self.bytes_queued,
            "progress_pct": self.progress_pct,
            "last_shipped_write_time": iso_ms(self.last_shipped_write_time),
            "age_of_last_shipped_op_s": self.age_of_last_shipped_op_s,
            "lag_s": self.lag_s,
            "holder": self.holder,
            "last_error": self.last_error,
            "last_backoff": self.last_backoff,
            "state": self.state,
            "bulk_loads": self.bulk_loads,
            "waiting_serial": self.waiting_serial,
            "throttled_s": self.throttled_s,
            "stalled_s": self.stalled_s,
            "stuck": self.stuck,
            "last_shipped_at": iso_ms(self.last_shipped_at),
        }


@dataclass(frozen=True)
class PeerCount:
    """The peer's sink endpoints: how many are configured, how many answered the probe."""

    configured: int
    answered: int
    unanswered: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {"configured": self.configured, "answered": self.answered, "unanswered": list(self.unanswered)}


@dataclass(frozen=True)
class SinkStatus:
    """The peer as the receiving side, HBase's ReplicationLoadSink, from walship's progress
    records: the last batch applied to the peer by any of its queues.

    HBase's sink keeps, per region server, the write time of the last edit it applied
    (TimeStampsOfLastAppliedOp) and its age when applied (AgeOfLastAppliedOp, fixed until the
    next batch); walship's sink is the peer's Thrift servers, so it keeps them per peer. A
    queue's record goes with the queue (a drained recovered queue), so do its figures.

    :param timestamp_started: epoch ms when the peer was added (its znode's ctime), HBase's
        TimeStampStarted; ``None`` when the znode could not be read.
    :param last_applied_at: epoch ms when the peer's sink last returned from applying a batch,
        ``None`` before any was.
    :param last_applied_write_time: epoch ms, the write time of that batch's last edit.

    Example::

        SinkStatus(1767225600000, 1767225660250, 1767225660000).age_of_last_applied_op_ms  # 250
    """

    timestamp_started: int | None = None
    last_applied_at: int | None = None
    last_applied_write_time: int | None = None

    @property
    def applied(self) -> bool:
        """Whether a batch was applied (else HBase's "Waiting for OPs" form)."""
        return self.last_applied_at is not None and self.last_applied_write_time is not None

    @property
    def age_of_last_applied_op_ms(self) -> int | None:
        """When the last batch was applied minus the write time of its last edit (0 at the
        least: clocks of two hosts), as HBase's sink computes it; ``None`` before any."""
        if self.last_applied_at is None or self.last_applied_write_time is None:
            return None
        return max(0, self.last_applied_at - self.last_applied_write_time)

    def to_json(self) -> dict[str, Any]:
        age = self.age_of_last_applied_op_ms
        return {
            "timestamp_started": iso_ms(self.timestamp_started),
            "last_applied_at": iso_ms(self.last_applied_at),
            "last_applied_write_time": iso_ms(self.last_applied_write_time),
            "age_of_last_applied_op_s": None if age is None else age / 1000,
        }


@dataclass
class PeerStatus:
    peer_id: str
    enabled: bool
    hbase_enabled: bool
    cluster_key: str
    table_cfs: dict[str, list[str] | None] | None
    peer_count: PeerCount
    queues: list[QueueStatus] = field(default_factory=list)
    #: the peer's bandwidth limit, bytes/s (0: unlimited)
    bandwidth: int = 0
    #: the peer as the receiving side: the last batch applied to it
    sink: SinkStatus = field(default_factory=SinkStatus)
    #: the peer's serial flag (HBase's serial replication)
    serial: bool = False
    #: its queues' failed shipping passes by kind (:data:`walship.errors.ERROR_KINDS`), over the peer's life
    errors: dict[str, int] = field(default_factory=dict)
    #: its dead letters not replayed yet (``None``: its dead-letter directory could not be read)
    dead_letters_pending: int | None = 0

    @property
    def drained(self) -> bool:
        return all(q.drained for q in self.queues)

    @property
    def stuck_queues(self) -> int:
        return sum(1 for q in self.queues if q.stuck)

    @property
    def bulk_loads(self) -> int:
        """Bulk loads seen in its queues' WALs whose HFiles were not shipped (over the queues' lives)."""
        return sum(q.bulk_loads for q in self.queues)

    @property
    def last_shipped_at(self) -> int | None:
        """Epoch ms when a batch of any of its queues was last committed (``None``: none was)."""
        return max((q.last_shipped_at for q in self.queues if q.last_shipped_at is not None), default=None)

    @property
    def throttled_s(self) -> float:
        """Seconds the peer's batches waited for its bandwidth, over its queues."""
        return round(sum(q.throttled_s for q in self.queues), 3)

    def totals(self) -> dict[str, Any]:
        return {
            "queues": len(self.queues),
            "wals": sum(q.wals for q in self.queues),
            "bytes_queued": sum(q.bytes_queued for q in self.queues),
            "lag_s": max((q.lag_s for q in self.queues), default=0.0),
            "drained": self.drained,
            "stuck_queues": self.stuck_queues,
        }

    def to_json(self) -> dict[str, Any]:
        return {
            "peer_id": self.peer_id,
            "state": "enabled" if self.enabled else "disabled",
            "hbase_peer_state": "enabled" if self.hbase_enabled else "disabled",
            "cluster_key": self.cluster_key,
            "table_cfs": self.table_cfs,
            "peer_count": self.peer_count.to_json(),
            "bandwidth": self.bandwidth,
            "serial": self.serial,
            "queues": [q.to_json() for q in self.queues],
            "totals": self.totals(),
            "throttled_s": self.throttled_s,
            "errors": dict(sorted(self.errors.items())),
            "dead_letters_pending": self.dead_letters_pending,
            "sink": self.sink.to_json(),
        }


@dataclass
class ReplicationStatus:
    generated_at: int  # epoch ms
    peers: list[PeerStatus] = field(default_factory=list)
    #: seconds a queue with a backlog may make no progress before it is stuck (not in the JSON)
    stuck_after: float = STUCK_AFTER

    def to_json(self) -> dict[str, Any]:
        return {"generated_at": iso_ms(self.generated_at), "peers": [p.to_json() for p in self.peers]}


def _hbase_date(ms: int | None) -> str:
    """A time as HBase's shell prints a java.util.Date (``Mon Nov 23 09:00:00 UTC 2026``)."""
    if not ms:
        return "Thu Jan 01 00:00:00 UTC 1970"
    return dt.datetime.fromtimestamp(ms / 1000, dt.UTC).strftime("%a %b %d %H:%M:%S UTC %Y")


def sink_line(sink: SinkStatus) -> str:
    """The SINK line of HBase's ``status 'replication'`` (2.x's wording and field order, from
    hbase-shell's ``admin.rb``), without its indent: ``SINK: TimeStampStarted=<ms>,
    AgeOfLastAppliedOp=<ms>, TimeStampsOfLastAppliedOp=<date>``, or ``SINK:
    TimeStampStarted=<ms>, Waiting for OPs... `` before any batch was applied (trailing space
    included, as HBase prints it)."""
    started = f"SINK: TimeStampStarted={sink.timestamp_started or 0}"
    if not sink.applied:
        return f"{started}, Waiting for OPs... "
    return (
        f"{started}, AgeOfLastAppliedOp={sink.age_of_last_applied_op_ms}, "
        f"TimeStampsOfLastAppliedOp={_hbase_date(sink.last_applied_write_time)}"
    )


def format_hbase(status: ReplicationStatus) -> str:
    """The layout of HBase's ``status 'replication'``: one SOURCE line per queue, grouped by
    server; then one SINK line per peer, under the peer (walship's sink is the peer's Thrift
    servers, not a server of this cluster). Ages and lags in milliseconds as HBase prints
    them. A recovered queue's line names its queue id as ``PeerID``, as HBase 1.x's did.

    Example (one peer, one queue)::

        walship replication status at 2026-11-23T09:00:00.000Z
        1 peers, 1 servers with queues
            rs1,16020,1:
               SOURCE: PeerID=1, AgeOfLastShippedOp=0, SizeOfLogQueue=1, TimeStampsOfLastShippedOp=...
            peer 1 -> zk1:2181:/hbase:
              SINK: TimeStampStarted=1795424400000, AgeOfLastAppliedOp=212, TimeStampsOfLastAppliedOp=...
    """
    by_server: dict[str, list[tuple[PeerStatus, QueueStatus]]] = {}
    for peer in status.peers:
        for q in peer.queues:
            by_server.setdefault(q.server, []).append((peer, q))
    lines = [
        f"walship replication status at {iso_ms(status.generated_at)}",
        f"{len(status.peers)} peers, {len(by_server)} servers with queues",
    ]
    for server in sorted(by_server):
        lines.append(f"    {server}:")
        for peer, q in by_server[server]:
            age_ms = round((q.age_of_last_shipped_op_s or 0.0) * 1000)
            state = "" if peer.enabled else ", PeerState=DISABLED"
            lines.append(
                f"       SOURCE: PeerID={q.queue_id}, AgeOfLastShippedOp={age_ms}, SizeOfLogQueue={q.wals}, "
                f"TimeStampsOfLastShippedOp={_hbase_date(q.last_shipped_write_time)}, "
                f"Replication Lag={round(q.lag_s * 1000)}{state}"
            )
    for peer in status.peers:
        lines.append(f"    peer {peer.peer_id} -> {peer.cluster_key}{'' if peer.queues else ' (no queues)'}:")
        lines.append(f"      {sink_line(peer.sink)}")
    return "\n".join(lines)
