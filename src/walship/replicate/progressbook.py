"""A shipper's per-queue progress records (:class:`~walship.zk.records.ProgressStore`): what
its passes did since the last write, written at most once a second while a queue ships and at
the end of a pass, and a queue's last error with its kind; each failed pass also counts one
error of that kind for the peer (``walship_ship_errors_total``)."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field

from walship.errors import WalshipError, error_kind
from walship.replicate.summary import QueueSummary
from walship.zk.records import ProgressStore

__all__ = ["PROGRESS_INTERVAL", "PendingProgress", "ProgressBook"]

log = logging.getLogger(__name__)

#: Seconds between two progress writes of one queue while it ships.
PROGRESS_INTERVAL = 1.0


@dataclass
class PendingProgress:
    """Progress of one queue not yet written to its record."""

    counters: dict[str, int] = field(default_factory=dict)
    last_wal: str | None = None
    last_position: int | None = None
    last_write_time: int | None = None
    backoff: tuple[float, str] | None = None
    waiting_serial: dict[str, object] | None = None  # a serial peer's queue waits: why (Blocked.to_json)
    #: the last batch applied (not one its filters left empty, nor one whose every entry the
    #: sink passed over): when the sink returned, and the write time of its last edit, epoch ms
    applied: tuple[int, int] | None = None
    written_at: float = field(default_factory=time.monotonic)
    #: seconds waited for the peer's bandwidth (walship.replicate.throttle), not recorded yet
    throttled_s: float = 0.0
    #: the pass summary last taken in by :meth:`take_throttled`, and its throttled_s then
    summary: QueueSummary | None = field(default=None, repr=False, compare=False)
    summary_throttled_s: float = 0.0

    def add(self, key: str, value: int) -> None:
        self.counters[key] = self.counters.get(key, 0) + value

    def take_throttled(self, qs: QueueSummary) -> None:
        """Take in what the pass's summary waited for the bandwidth since the last call (a
        summary's ``throttled_s`` only grows; each pass has a summary of its own)."""
        if self.summary is not qs:
            self.summary, self.summary_throttled_s = qs, 0.0
        if qs.throttled_s > self.summary_throttled_s:
            self.throttled_s += qs.throttled_s - self.summary_throttled_s
            self.summary_throttled_s = qs.throttled_s


class ProgressBook:
    """The progress of the queues one shipper ships, not yet written to their records."""

    def __init__(self, store: ProgressStore) -> None:
        self.store = store
        self._pending: dict[tuple[str, str, str], PendingProgress] = {}

    def pending(self, peer_id: str, server: str, queue_id: str) -> PendingProgress:
        """The queue's progress not yet written (new, or left by an earlier pass)."""
        return self._pending.setdefault((peer_id, server, queue_id), PendingProgress())

    def failed(
        self, peer_id: str, qs: QueueSummary, exc: WalshipError, progress: PendingProgress | None = None
    ) -> QueueSummary:
        """Record a queue's failure in its summary and (when ZooKeeper answers) its record,
        and count it for the peer by its kind (:func:`walship.errors.error_kind`)."""
        qs.status = "error"
        qs.error = f"queue {qs.server}/{qs.queue_id} of peer {peer_id}: {exc}"
        qs.exception = exc
        log.error("%s", qs.error)
        self._pending.pop((peer_id, qs.server, qs.queue_id), None)
        if progress is not None:
            progress.take_throttled(qs)
        kind = error_kind(exc)
        try:
            self._record(peer_id, qs.server, qs.queue_id, progress or PendingProgress(), error=qs.error, kind=kind)
            self.store.count_error(peer_id, kind)
        except WalshipError as again:
            log.warning(
                "queue %s/%s of peer %s: its record keeps no error (%s): %s",
                qs.server,
                qs.queue_id,
                peer_id,
                kind,
                again,
            )
        return qs

    def flush(self) -> None:
        """Write every queue's progress not written yet."""
        for (peer_id, server, queue_id), progress in list(self._pending.items()):
            if progress.counters or progress.last_wal is not None or progress.waiting_serial is not None:
                try:
                    self._record(peer_id, server, queue_id, progress)
                except WalshipError as exc:  # the positions are committed; only the counters wait
                    log.warning(
                        "queue %s/%s of peer %s: progress record not written: %s", server, queue_id, peer_id, exc
                    )
        self._pending.clear()

    def write(self, peer_id: str, progress: PendingProgress, qs: QueueSummary, *, final: bool) -> None:
        """Write the queue's progress record: at most every PROGRESS_INTERVAL, and at the end;
        a removed queue's record goes with it."""
        progress.take_throttled(qs)
        if qs.queue_removed:
            self._pending.pop((peer_id, qs.server, qs.queue_id), None)
            self.store.remove(peer_id, qs.server, qs.queue_id)
            return
        if not progress.counters and progress.last_wal is None and progress.waiting_serial is None:
            return  # nothing new: the record stays as it is
        if not final and time.monotonic() - progress.written_at < PROGRESS_INTERVAL:
            return
        self._record(peer_id, qs.server, qs.queue_id, progress)

    def _record(
        self,
        peer_id: str,
        server: str,
        queue_id: str,
        progress: PendingProgress,
        *,
        error: str | None = None,
        kind: str | None = None,
    ) -> None:
        """Write what ``progress`` holds into the queue's record, with ``error`` (of ``kind``)
        or clearing it."""
        self.store.record(
            peer_id,
            server,
            queue_id,
            counters=progress.counters,
            last_wal=progress.last_wal,
            last_position=progress.last_position,
            last_write_time=progress.last_write_time,
            backoff=progress.backoff,
            throttled_s=progress.throttled_s,
            waiting_serial=progress.waiting_serial,
            applied=progress.applied,
            error=error,
            error_kind=kind,
            clear_error=error is None,
        )
        progress.counters.clear()
        progress.throttled_s = 0.0
        progress.last_wal = progress.last_position = progress.last_write_time = progress.backoff = None
        progress.waiting_serial = progress.applied = None
        progress.written_at = time.monotonic()
