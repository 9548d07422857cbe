"""What shipping did: per-queue and per-peer summaries of a pass, and of a tail run."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = ["SUMMED_FIELDS", "PeerSummary", "QueueSummary", "TailSummary", "merge_passes"]

#: The counters of a queue summary that add up across batches, passes and queues.
SUMMED_FIELDS = (
    "batches",
    "entries_read",
    "entries_filtered",
    "entries_shipped",
    "cells_shipped",
    "bytes_read",
    "incompatible_skipped",
    "deadlettered",
    "tags_dropped",
    "sink_retries",
    "torn_tail_bytes",
    "bulk_loads",
)


@dataclass
class QueueSummary:
    """What one pass over one queue did."""

    server: str
    queue_id: str
    status: str = "idle"  # shipped | idle | busy | moved | error | waiting-serial
    batches: int = 0
    entries_read: int = 0
    entries_filtered: int = 0
    entries_shipped: int = 0
    cells_shipped: int = 0
    bytes_read: int = 0
    incompatible_skipped: int = 0
    deadlettered: int = 0
    tags_dropped: int = 0
    sink_retries: int = 0
    torn_tail_bytes: int = 0
    bulk_loads: int = 0  # bulk load markers of what the peer takes: HFiles not in the WAL, not shipped
    #: seconds its batches waited for the peer's bandwidth (walship.replicate.throttle); a
    #: float, so not among the SUMMED_FIELDS (integer counters), but it adds up all the same
    throttled_s: float = 0.0
    age_of_last_shipped_op_ms: int | None = None
    positions: dict[str, int] = field(default_factory=dict)
    wals_removed: list[str] = field(default_factory=list)
    queue_removed: bool = False
    holder: dict[str, Any] | None = None  # who ships it (when busy: who else)
    message: str | None = None
    error: str | None = None
    exception: Exception | None = field(default=None, repr=False, compare=False)

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out.pop("exception", None)  # the message is in "error"; exceptions need not pickle
        out["throttled_s"] = round(self.throttled_s, 3)
        return out

    def merge(self, later: QueueSummary) -> None:
        """Add a later pass over the same queue: counters add up, the rest is the later pass's
        (a pass that found nothing new leaves the status as it was)."""
        for k in SUMMED_FIELDS:
            setattr(self, k, int(getattr(self, k)) + int(getattr(later, k)))
        self.throttled_s += later.throttled_s
        self.positions.update(later.positions)
        self.wals_removed.extend(later.wals_removed)
        self.queue_removed = self.queue_removed or later.queue_removed
        if later.age_of_last_shipped_op_ms is not None:
            self.age_of_last_shipped_op_ms = later.age_of_last_shipped_op_ms
        if later.status != "idle" or self.status == "idle":
            self.status, self.holder, self.message = later.status, later.holder, later.message
            self.error, self.exception = later.error, later.exception

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> QueueSummary:
        """The summary :meth:`to_json` wrote (unknown keys, from another version, are left out)."""
        return cls(**{k: v for k, v in data.items() if k in cls.__dataclass_fields__})


def merge_passes(done: dict[tuple[str, str], QueueSummary], passed: list[QueueSummary]) -> None:
    """Add a pass's summaries to ``done``, by (server, queue id): merged into the queue's
    earlier one (:meth:`QueueSummary.merge`), or the first."""
    for qs in passed:
        key = (qs.server, qs.queue_id)
        if key in done:
            done[key].merge(qs)
        else:
            done[key] = qs


@dataclass
class PeerSummary:
    peer_id: str
    status: str = "ok"  # ok | disabled | error
    claimed: list[dict[str, str]] = field(default_factory=list)
    claim_failures: list[str] = field(default_factory=list)
    queues: list[QueueSummary] = field(default_factory=list)
    seconds: float = 0.0
    error: str | None = None

    def totals(self) -> dict[str, int]:
        return {k: sum(int(getattr(q, k)) for q in self.queues) for k in SUMMED_FIELDS}

    @property
    def throttled_s(self) -> float:
        """Seconds the peer's batches waited for its bandwidth, over its queues."""
        return sum(q.throttled_s for q in self.queues)

    def queue_states(self) -> dict[str, int]:
        """How many queues ended in each state (shipped, idle, busy, moved, error)."""
        out: dict[str, int] = {}
        for q in self.queues:
            out[q.status] = out.get(q.status, 0) + 1
        return out

    def settle(self) -> None:
        """The peer's status from its queues': error when any queue failed."""
        for qs in self.queues:
            if qs.status == "error":
                self.status = "error"
                self.error = self.error or qs.error

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["queues"] = [q.to_json() for q in self.queues]
        out["totals"] = self.totals()
        out["queue_states"] = self.queue_states()
        out["throttled_s"] = round(self.throttled_s, 3)
        return out


@dataclass
class TailSummary:
    peer_id: str
    status: str = "ok"  # ok | disabled | error
    seconds: float = 0.0
    passes: int = 0
    queues: dict[str, dict[str, int]] = field(default_factory=dict)
    skipped_busy: list[str] = field(default_factory=list)
    outages: int = 0
    claimed: list[dict[str, str]] = field(default_factory=list)
    claim_failures: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    max_age_of_last_shipped_op_ms: int | None = None
    wal_reads: dict[str, int] = field(default_factory=dict)
    #: seconds the peer's batches waited for its bandwidth, all queues and passes together
    throttled_s: float = 0.0

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["throttled_s"] = round(self.throttled_s, 3)
        return out

    def add(self, qs: QueueSummary) -> None:
        key = f"{qs.server}/{qs.queue_id}"
        agg = self.queues.setdefault(key, dict.fromkeys(SUMMED_FIELDS, 0))
        for k in SUMMED_FIELDS:
            agg[k] += int(getattr(qs, k))
        self.throttled_s += qs.throttled_s
        if qs.age_of_last_shipped_op_ms is not None:
            self.max_age_of_last_shipped_op_ms = max(
                self.max_age_of_last_shipped_op_ms or 0, qs.age_of_last_shipped_op_ms
            )
