"""Ship a peer's queues: plan -> read -> filter -> batch -> apply -> commit.

For each queue of the peer, holding the queue's lock: read its WALs in order from the saved
position, filter each entry for the peer, cut batches (bytes and entries, never across a WAL),
apply a batch to the sink, and only then commit the position (a versioned write) — so a crash
between the two re-ships that batch and never skips it. A WAL read to its end is removed from
the queue once it can grow no more (it has a trailer, is archived, a newer WAL follows it, or
the queue is a recovered one); a drained recovered queue is deleted, an empty one too.

Progress (last shipped WAL write time, cells and bytes shipped, last error and back-off) is
recorded per queue in walship's own znodes, at most once a second and at the end of a pass.

Example::

    shipper = Shipper(client, ZnodeLayout("/hbase"), WalStore("/data/hbase"))
    summary = shipper.ship_peer("1")
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from kazoo.client import KazooClient

from walship import defaults
from walship.errors import ConfigError, QueueNotFoundError, WalError, WalshipError
from walship.replicate.filters import EntryFilter
from walship.replicate.planning import Planner, close_grace
from walship.replicate.walstore import WalStore
from walship.sinks.base import ApplyStats, FilteredEntry, Sink, SinkContext, create_sink
from walship.wal.reader import WalReader
from walship.zk import PeerConfig, QueueId, QueueInfo, ReplicationPeers, ReplicationQueues, ZnodeLayout, queue_lock
from walship.zk.client import KAZOO_ERRORS, translate
from walship.zk.locks import Holder
from walship.zk.progress import ProgressStore

__all__ = ["SUMMED_FIELDS", "PeerSummary", "QueueSummary", "Shipper"]

log = logging.getLogger(__name__)

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
)
#: Seconds between two progress writes of one queue while it ships.
PROGRESS_INTERVAL = 1.0


@dataclass
class QueueSummary:
    """What one pass over one queue did."""

    server: str
    queue_id: str
    status: str = "idle"  # shipped | idle | busy | moved | error
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
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> QueueSummary:
        """The summary :meth:`to_json` wrote (unknown keys, from another version, are left out)."""
        return cls(**{k: v for k, v in data.items() if k in cls.__dataclass_fields__})


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
        return out


@dataclass
class _Progress:
    """Progress of one queue not yet written to its record."""

    counters: dict[str, int] = field(default_factory=dict)
    last_wal: str | None = None
    last_position: int | None = None
    last_write_time: int | None = None
    backoff: tuple[float, str] | None = None
    written_at: float = field(default_factory=time.monotonic)

    def add(self, key: str, value: int) -> None:
        self.counters[key] = self.counters.get(key, 0) + value


class Shipper:
    """Ships queues of one source cluster.

    :param sink_factory: builds the sink for a peer (default: the peer's configured sink,
        see :func:`walship.sinks.base.create_sink`).
    :param holder: names this shipper in the queue locks (default: this process).
    :param lock_timeout: seconds to wait for a queue another shipper holds (0: skip it).
    """

    def __init__(
        self,
        client: KazooClient,
        layout: ZnodeLayout,
        walstore: WalStore,
        *,
        batch_bytes: int = defaults.BATCH_BYTES,
        batch_entries: int = defaults.BATCH_ENTRIES,
        holder: Holder | None = None,
        sink_factory: Callable[[PeerConfig], Sink] | None = None,
        lock_timeout: float = defaults.LOCK_WAIT,
    ) -> None:
        if batch_bytes <= 0 or batch_entries <= 0:
            raise ConfigError(f"batch limits must be > 0, got {batch_bytes} bytes / {batch_entries} entries")
        if lock_timeout < 0:
            raise ConfigError(f"lock wait must be >= 0 seconds, got {lock_timeout}")
        self.client = client
        self.layout = layout
        self.walstore = walstore
        self.batch_bytes = batch_bytes
        self.batch_entries = batch_entries
        self.holder = holder or Holder.here("ship")
        self.sink_factory: Callable[[PeerConfig], Sink] = sink_factory or self._default_sink
        self.lock_timeout = lock_timeout
        self.planner = Planner(client, layout, walstore, holder=self.holder)
        self.queues: ReplicationQueues = self.planner.queues
        self.peers: ReplicationPeers = self.planner.peers
        self.progress = ProgressStore(client, layout)
        self._progress: dict[tuple[str, str, str], _Progress] = {}

    def _default_sink(self, peer: PeerConfig) -> Sink:
        return create_sink(peer, SinkContext(self.walstore.root))

    # -- shipping ----------------------------------------------------------------------------------

    def ship_peer(
        self, peer_id: str, queue_filter: str | None = None, max_batches: int | None = None, *, claim: bool = True
    ) -> PeerSummary:
        """One pass over every queue of the peer (optionally only the matching ones)."""
        t0 = time.monotonic()
        summary = PeerSummary(peer_id)
        peer = self.peers.get(peer_id)
        peer.check_ownership()
        if not peer.enabled:
            summary.status = "disabled"
            log.info("peer %s is disabled: nothing shipped", peer_id)
            return summary
        if claim:
            result = self.planner.failover()
            summary.claimed, summary.claim_failures = result.claimed, result.failures
        queues = self.planner.peer_queues(peer_id, queue_filter)
        summary.queues = self.ship_queues(peer, [(q.server, str(q.queue_id)) for q in queues], max_batches)
        summary.settle()
        summary.seconds = time.monotonic() - t0
        return summary

    def ship_queues(
        self, peer: PeerConfig, queues: Sequence[tuple[str, str]], max_batches: int | None = None
    ) -> list[QueueSummary]:
        """Ship the given (server, queue id) of ``peer`` one after another, with one filter
        chain and one sink for all of them."""
        if not queues:
            return []
        entry_filter = self.planner.entry_filter(peer)
        sink = self.sink_factory(peer)
        try:
            return [self.ship_queue(peer, server, qid, entry_filter, sink, max_batches) for server, qid in queues]
        finally:
            sink.close()

    def ship_queue(
        self,
        peer: PeerConfig,
        server: str,
        queue_id: str,
        entry_filter: EntryFilter,
        sink: Sink,
        max_batches: int | None = None,
    ) -> QueueSummary:
        """Ship one queue under its lock; errors are reported in the summary, never skipped."""
        try:
            with queue_lock(
                self.client, self.layout, server, queue_id, holder=self.holder, timeout=self.lock_timeout
            ) as lock:
                if not lock.held:
                    return QueueSummary(
                        server,
                        queue_id,
                        status="busy",
                        holder=lock.holder.to_json() if lock.holder else None,
                        message=f"queue {server}/{queue_id} is busy: being shipped by {lock.describe()}",
                    )
                return self.ship_held_queue(peer, server, queue_id, entry_filter, sink, max_batches)
        except KAZOO_ERRORS as exc:
            return self._failed(peer, QueueSummary(server, queue_id), translate(exc, f"queue {server}/{queue_id}"))

    def ship_held_queue(
        self,
        peer: PeerConfig,
        server: str,
        queue_id: str,
        entry_filter: EntryFilter,
        sink: Sink,
        max_batches: int | None = None,
        *,
        flush_progress: bool = True,
    ) -> QueueSummary:
        """Ship one queue whose lock the caller holds (see :func:`~walship.zk.queue_lock`).

        :param flush_progress: write the queue's progress record now; a tailer, which calls
            this many times a second, passes ``False`` and has it written once a second.
        """
        qs = QueueSummary(server, queue_id, holder=self.holder.to_json())
        progress = self._progress.setdefault((peer.peer_id, server, queue_id), _Progress())
        try:
            self._ship_locked(peer, server, queue_id, entry_filter, sink, max_batches, qs, progress)
            self._write_progress(peer, server, queue_id, progress, qs, final=flush_progress)
        except QueueNotFoundError as exc:
            qs.status = "moved"
            qs.message = str(exc)
            log.info("queue %s/%s moved while shipping: %s", server, queue_id, exc)
        except WalshipError as exc:
            self._failed(peer, qs, exc, progress)
        except KAZOO_ERRORS as exc:
            self._failed(peer, qs, translate(exc, f"queue {server}/{queue_id}"), progress)
        return qs

    def _failed(
        self, peer: PeerConfig, qs: QueueSummary, exc: WalshipError, progress: _Progress | None = None
    ) -> QueueSummary:
        """Record a queue's failure in its summary and (when ZooKeeper answers) its record."""
        qs.status = "error"
        qs.error = f"queue {qs.server}/{qs.queue_id} of peer {peer.peer_id}: {exc}"
        qs.exception = exc
        log.error("%s", qs.error)
        self._progress.pop((peer.peer_id, qs.server, qs.queue_id), None)
        with contextlib.suppress(WalshipError, *KAZOO_ERRORS):
            self._record(peer.peer_id, qs.server, qs.queue_id, progress or _Progress(), error=qs.error)
        return qs

    def flush_progress(self) -> None:
        """Write every queue's progress not written yet (a tailer calls this as it stops)."""
        for (peer_id, server, queue_id), progress in list(self._progress.items()):
            if progress.counters or progress.last_wal is not None:
                with contextlib.suppress(WalshipError, *KAZOO_ERRORS):
                    self._record(peer_id, server, queue_id, progress)
        self._progress.clear()

    def _record(
        self, peer_id: str, server: str, queue_id: str, progress: _Progress, *, error: str | None = None
    ) -> None:
        """Write what ``progress`` holds into the queue's record, with ``error`` or clearing it."""
        self.progress.record(
            peer_id,
            server,
            queue_id,
            counters=progress.counters,
            last_wal=progress.last_wal,
            last_position=progress.last_position,
            last_write_time=progress.last_write_time,
            backoff=progress.backoff,
            error=error,
            clear_error=error is None,
        )
        progress.counters.clear()
        progress.last_wal = progress.last_position = progress.last_write_time = progress.backoff = None
        progress.written_at = time.monotonic()

    def _write_progress(
        self, peer: PeerConfig, server: str, queue_id: str, progress: _Progress, qs: QueueSummary, *, final: bool
    ) -> None:
        """Write the queue's progress record: at most every PROGRESS_INTERVAL, and at the end."""
        if qs.queue_removed:
            self._progress.pop((peer.peer_id, server, queue_id), None)
            self.progress.remove(peer.peer_id, server, queue_id)
            return
        if not progress.counters and progress.last_wal is None:
            return  # nothing new: the record stays as it is
        if not final and time.monotonic() - progress.written_at < PROGRESS_INTERVAL:
            return
        self._record(peer.peer_id, server, queue_id, progress)

    def _ship_locked(
        self,
        peer: PeerConfig,
        server: str,
        queue_id: str,
        entry_filter: EntryFilter,
        sink: Sink,
        max_batches: int | None,
        qs: QueueSummary,
        progress: _Progress,
    ) -> None:
        wals = self.queues.wals(server, queue_id)
        queue = QueueInfo(server, QueueId.parse(queue_id), tuple(wals))
        recovered = queue.recovered
        grace = close_grace(peer)
        for index, wp in enumerate(wals):
            if max_batches is not None and qs.batches >= max_batches:
                return
            loc = self.walstore.locate(wp.name)
            with self.walstore.open(loc) as f:
                reader = WalReader(f, loc.path)
                batch: list[FilteredEntry] = []
                read = 0
                size = 0
                position = wp.position
                last_wt: int | None = None
                start = wp.position or None
                try:
                    for entry in reader.entries(start):
                        read += 1
                        size += entry.end_offset - entry.offset
                        kept = entry_filter.apply(entry)
                        if kept is None:
                            qs.entries_filtered += 1
                        else:
                            batch.append(kept)
                        position = entry.end_offset
                        last_wt = entry.key.write_time
                        if read >= self.batch_entries or size >= self.batch_bytes:
                            self._flush(
                                sink,
                                peer,
                                server,
                                queue_id,
                                wp.name,
                                batch,
                                read,
                                size,
                                position,
                                qs,
                                progress,
                                last_wt,
                            )
                            batch, read, size = [], 0, 0
                            if max_batches is not None and qs.batches >= max_batches:
                                return
                except WalError:
                    # ship what was read before the bad entry, so the position points at it
                    if read:
                        self._flush(
                            sink, peer, server, queue_id, wp.name, batch, read, size, position, qs, progress, last_wt
                        )
                    raise

                # past the header of a WAL with no entries yet, so its unshipped bytes read 0
                position = max(position, reader.stop_offset)
                why = self.planner.wal_finished(queue, index, loc, reader.has_trailer, grace)
                finished = why is not None
                if reader.incomplete_tail and finished:
                    torn = reader.edits_end - reader.stop_offset
                    qs.torn_tail_bytes += torn
                    log.warning(
                        "%s: %d bytes after offset %d are a torn last write of a closed WAL (a crash "
                        "before the write was acknowledged); not shipped",
                        loc.path,
                        torn,
                        reader.stop_offset,
                    )
                if read or position != wp.position:
                    self._flush(
                        sink, peer, server, queue_id, wp.name, batch, read, size, position, qs, progress, last_wt
                    )
            if not finished:
                return  # the current WAL, or a rolled one not closed yet: more may be appended
            log.debug("queue %s/%s: %s finished (%s)", server, queue_id, wp.name, why)
            self.queues.remove_wals(server, queue_id, [wp.name])
            qs.wals_removed.append(wp.name)
        if recovered and len(qs.wals_removed) == len(wals):
            # drained, or empty when claimed: HBase deletes such a recovered queue, so do we
            self.queues.remove_queue(server, queue_id)
            qs.queue_removed = True
            log.info("recovered queue %s/%s drained and removed", server, queue_id)

    def _flush(
        self,
        sink: Sink,
        peer: PeerConfig,
        server: str,
        queue_id: str,
        wal: str,
        batch: list[FilteredEntry],
        read: int,
        size: int,
        position: int,
        qs: QueueSummary,
        progress: _Progress,
        last_write_time: int | None = None,
    ) -> None:
        stats = sink.apply(batch, wal) if batch else ApplyStats()
        # only now, with the batch applied, may the position move past it
        self.queues.set_position(server, queue_id, wal, position)
        if read:  # a move past a header alone is no batch
            qs.batches += 1
            progress.add("batches", 1)
        qs.status = "shipped"
        qs.entries_read += read
        qs.bytes_read += size
        qs.entries_shipped += len(batch)
        qs.cells_shipped += stats.cells
        qs.incompatible_skipped += stats.incompatible_skipped
        qs.deadlettered += stats.deadlettered
        qs.tags_dropped += stats.tags_dropped
        qs.sink_retries += stats.retries
        qs.positions[wal] = position
        if batch:
            qs.age_of_last_shipped_op_ms = max(0, int(time.time() * 1000) - batch[-1].entry.key.write_time)
        progress.add("entries_shipped", len(batch))
        progress.add("cells_shipped", stats.cells)
        progress.add("bytes_shipped", size)
        progress.last_wal, progress.last_position = wal, position
        if last_write_time is not None:
            progress.last_write_time = last_write_time
        if stats.last_backoff is not None:
            progress.backoff = stats.last_backoff
        self._write_progress(peer, server, queue_id, progress, qs, final=False)
        log.info(
            "queue %s/%s: batch of %d entries (%d shipped, %d bytes) applied; %s position %d",
            server,
            queue_id,
            read,
            len(batch),
            size,
            wal,
            position,
        )
