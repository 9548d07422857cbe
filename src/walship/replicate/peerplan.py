"""What planning works with and hands out: a peer's close grace, the result of a failover, the
plan of a pass, a pending queue; and the small rules the planner, the shipper and the CLI
share (which queues a pattern names, a list of peer ids, a WAL's successor in its group)."""

from __future__ import annotations

import fnmatch
import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from walship.errors import ConfigError
from walship.peer import PeerConfig, validate_peer_id
from walship.replicate.summary import PeerSummary
from walship.wal.names import wal_group
from walship.zk import QueueInfo

__all__ = [
    "CLOSE_GRACE_KEY",
    "DEFAULT_CLOSE_GRACE",
    "FailoverResult",
    "PeerPlan",
    "PendingQueue",
    "close_grace",
    "matches_queue",
    "next_in_group",
    "split_peer_ids",
]


#: Peer configuration key: seconds a rolled WAL without a trailer must not have grown (while a
#: later WAL has entries) before it counts as closed.
CLOSE_GRACE_KEY = "walship.wal.close-grace"
DEFAULT_CLOSE_GRACE = 60.0


def close_grace(peer: PeerConfig) -> float:
    """The peer's ``walship.wal.close-grace`` in seconds (default 60).

    :raises ConfigError: not a number >= 0.
    """
    text = peer.configuration.get(CLOSE_GRACE_KEY)
    if text is None:
        return DEFAULT_CLOSE_GRACE
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not (math.isfinite(value) and value >= 0):  # NaN and infinities too
        shown = text if len(text) <= 60 else f"{text[:60]}... ({len(text):,} characters)"
        raise ConfigError(
            f"peer {peer.peer_id}: {CLOSE_GRACE_KEY} must be a finite number of seconds >= 0, got {shown!r}"
        )
    return value


@dataclass
class FailoverResult:
    """Queues claimed from dead servers, and the claims that failed (each named);
    ``left_to_master`` when the cluster's master claims them (HBase 2.5+) and walship did not."""

    claimed: list[dict[str, str]] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    left_to_master: bool = False


@dataclass
class PeerPlan:
    """What a pass over some peers works from (:meth:`Planner.plan`): the enabled peers, the
    disabled ones, the claims of dead servers' queues, and each enabled peer's queues."""

    enabled: list[PeerConfig] = field(default_factory=list)
    disabled: list[str] = field(default_factory=list)
    failover: FailoverResult | None = None
    queues: dict[str, list[QueueInfo]] = field(default_factory=dict)

    def summaries(self, peer_ids: Sequence[str]) -> dict[str, PeerSummary]:
        """A summary per peer to fill while shipping: disabled ones say so, and each carries
        the pass's claims."""
        out = {pid: PeerSummary(pid) for pid in dict.fromkeys(peer_ids)}
        for pid in self.disabled:
            out[pid].status = "disabled"
        if self.failover is not None:
            for summary in out.values():
                summary.claimed, summary.claim_failures = list(self.failover.claimed), list(self.failover.failures)
        return out


@dataclass(frozen=True)
class PendingQueue:
    server: str
    queue_id: str
    backlog_bytes: int
    wals: int

    @property
    def key(self) -> str:
        return f"{self.server}/{self.queue_id}"


def matches_queue(q: QueueInfo, pattern: str) -> bool:
    """Whether ``pattern`` (a queue id, ``server/id`` or a glob over ``server/id``) names ``q``."""
    qid = str(q.queue_id)
    return pattern in (qid, f"{q.server}/{qid}") or fnmatch.fnmatchcase(f"{q.server}/{qid}", pattern)


def split_peer_ids(text: str) -> list[str]:
    """``1,2,subs``: the peer ids, in order, each once; empty for an empty text (every peer).

    :raises ConfigError: an empty id between commas, or an invalid one.
    """
    if not text.strip():
        return []
    ids = list(dict.fromkeys(p.strip() for p in text.split(",")))
    for peer_id in ids:
        if not peer_id:
            raise ConfigError(f"expected peer ids separated by commas, got {text!r}")
        validate_peer_id(peer_id)
    return ids


def next_in_group(queue: QueueInfo, index: int) -> str | None:
    """The WAL that follows the queue's ``index``-th one in its own WAL group (multiwal), if any."""
    group = wal_group(queue.wals[index].name)
    return next((wp.name for wp in queue.wals[index + 1 :] if wal_group(wp.name) == group), None)
