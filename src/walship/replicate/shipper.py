"""Ship a peer's queues: plan -> read -> filter -> batch -> apply -> commit.

For each queue of the peer, holding the queue's lock: read its WALs in order from the saved
position, filter each entry for the peer, cut batches (bytes and entries, never across a WAL),
apply a batch to the sink, and only then commit the position (a versioned write) — so a crash
between the two re-ships that batch and never skips it. A WAL read to its end is removed from
the queue once it can grow no more (it has a trailer, is archived, a newer WAL follows it, or
the queue is a recovered one); a drained recovered queue is deleted.

Example::

    shipper = Shipper(client, ZnodeLayout("/hbase"), WalStore("/data/hbase"))
    summary = shipper.ship_peer("1")
"""

from __future__ import annotations

import fnmatch
import logging
import random
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

from kazoo.client import KazooClient

from walship.errors import (
    QueueNotFoundError,
    ReplicationError,
    WalError,
    WalshipError,
    ZkError,
)
from walship.replicate.filters import EntryFilter, FilteredEntry
from walship.replicate.walstore import WalStore
from walship.sinks.hbase import ApplyStats, ThriftSink
from walship.wal.reader import WalReader
from walship.zk import (
    PeerConfig,
    QueueId,
    QueueInfo,
    ReplicationPeers,
    ReplicationQueues,
    ZnodeLayout,
    connect,
    live_servers,
    queue_lock,
    read_cluster_id,
)
from walship.zk.peers import parse_cluster_key

__all__ = ["DEFAULT_BATCH_BYTES", "DEFAULT_BATCH_ENTRIES", "PeerSummary", "QueueSummary", "Shipper", "Sink"]

log = logging.getLogger(__name__)

DEFAULT_BATCH_BYTES = 64 * 1024 * 1024
DEFAULT_BATCH_ENTRIES = 25_000
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


class Sink(Protocol):
    """What the shipper needs of a sink (:class:`~walship.sinks.hbase.ThriftSink` is one)."""

    def apply(self, entries: Sequence[FilteredEntry], wal: str) -> ApplyStats: ...

    def close(self) -> None: ...


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
    error: str | None = None
    exception: Exception | None = field(default=None, repr=False, compare=False)


@dataclass
class PeerSummary:
    peer_id: str
    status: str = "ok"  # ok | disabled | error
    claimed: list[dict[str, str]] = field(default_factory=list)
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

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        for q in out["queues"]:
            q.pop("exception", None)
        out["totals"] = self.totals()
        out["queue_states"] = self.queue_states()
        return out


class Shipper:
    """Ships queues of one source cluster.

    :param sink_factory: builds the sink for a peer (default: :class:`ThriftSink`).
    :param owner: names this shipper in the queue locks.
    """

    def __init__(
        self,
        client: KazooClient,
        layout: ZnodeLayout,
        walstore: WalStore,
        *,
        batch_bytes: int = DEFAULT_BATCH_BYTES,
        batch_entries: int = DEFAULT_BATCH_ENTRIES,
        owner: str = "",
        sink_factory: Callable[[PeerConfig], Sink] | None = None,
        lock_timeout: float = 0.0,
    ) -> None:
        if batch_bytes <= 0 or batch_entries <= 0:
            raise ValueError(f"batch limits must be > 0, got {batch_bytes} bytes / {batch_entries} entries")
        self.client = client
        self.layout = layout
        self.walstore = walstore
        self.batch_bytes = batch_bytes
        self.batch_entries = batch_entries
        self.owner = owner or f"walship-{uuid.uuid4().hex[:8]}"
        self.sink_factory: Callable[[PeerConfig], Sink] = sink_factory or ThriftSink
        self.lock_timeout = lock_timeout
        self.queues = ReplicationQueues(client, layout)
        self.peers = ReplicationPeers(client, layout)
        self._peer_ids: dict[str, uuid.UUID] = {}

    # -- cluster ids -----------------------------------------------------------------------------

    def source_cluster_id(self) -> uuid.UUID:
        return read_cluster_id(self.client, self.layout)

    def peer_cluster_id(self, peer: PeerConfig) -> uuid.UUID:
        """The peer cluster's id, read from its own ZooKeeper (its cluster key)."""
        cached = self._peer_ids.get(peer.cluster_key)
        if cached is not None:
            return cached
        hosts, port, parent = parse_cluster_key(peer.cluster_key)
        other = connect(",".join(f"{h}:{port}" for h in hosts))
        try:
            cid = read_cluster_id(other, ZnodeLayout(parent))
        except ZkError as exc:
            raise ReplicationError(
                f"peer {peer.peer_id}: cannot read its cluster id at {peer.cluster_key}: {exc}"
            ) from exc
        finally:
            other.stop()
            other.close()
        if cid == self.source_cluster_id():
            raise ReplicationError(f"peer {peer.peer_id} is this cluster itself ({cid}): refusing to replicate to it")
        self._peer_ids[peer.cluster_key] = cid
        return cid

    # -- failover ----------------------------------------------------------------------------------

    def failover(self) -> list[dict[str, str]]:
        """Claim the queues of region servers that are no longer live into a live one, as
        recovered queues; without any live server the queues stay where they are (they are
        shipped just the same)."""
        live = live_servers(self.client, self.layout)
        if not live:
            return []
        claimed = []
        for server in self.queues.replicators():
            if server in live:
                continue
            for qid in self.queues.queue_ids(server):
                with queue_lock(self.client, self.layout, server, qid, owner=self.owner) as held:
                    if not held:
                        continue  # being shipped right now; claim it next time
                    dest = random.choice(live)
                    new_id = self.queues.claim_queue(server, qid, dest)
                    if new_id:
                        claimed.append({"dead_server": server, "queue_id": qid, "server": dest, "new_queue_id": new_id})
            try:
                if not self.queues.queue_ids(server):
                    self.client.delete(self.layout.replicator(server))
            except Exception:
                pass
        return claimed

    # -- planning ----------------------------------------------------------------------------------

    def peer_queues(self, peer_id: str, queue_filter: str | None = None) -> list[QueueInfo]:
        out = []
        for q in self.queues.list_queues(peer_id):
            if queue_filter and not _matches(q, queue_filter):
                continue
            out.append(q)
        return out

    def backlog(self, queue: QueueInfo) -> int:
        """Bytes of the queue's WALs not yet shipped (1 for a drained queue that still has a
        finished WAL or a recovered queue to remove: there is work, if no bytes)."""
        total = 0
        for i, wp in enumerate(queue.wals):
            loc = self.walstore.locate(wp.name)
            with self.walstore.open(loc) as f:
                reader = WalReader(f, loc.path)
                reader.refresh()
                start = max(wp.position, reader.header_end)
                total += max(0, reader.edits_end - start)
            if i < len(queue.wals) - 1 or queue.recovered or loc.archived:
                total = max(total, 1)
        if queue.recovered and not queue.wals:
            total = max(total, 1)
        return total

    # -- shipping ----------------------------------------------------------------------------------

    def ship_peer(
        self, peer_id: str, queue_filter: str | None = None, max_batches: int | None = None, *, claim: bool = True
    ) -> PeerSummary:
        """One pass over every queue of the peer (optionally only the matching ones)."""
        t0 = time.monotonic()
        summary = PeerSummary(peer_id)
        peer = self.peers.get(peer_id)
        if not peer.enabled:
            summary.status = "disabled"
            log.info("peer %s is disabled: nothing shipped", peer_id)
            return summary
        if claim:
            summary.claimed = self.failover()
        queues = self.peer_queues(peer_id, queue_filter)
        summary.queues = self.ship_queues(peer, [(q.server, str(q.queue_id)) for q in queues], max_batches)
        for qs in summary.queues:
            if qs.status == "error":
                summary.status = "error"
                summary.error = summary.error or qs.error
        summary.seconds = time.monotonic() - t0
        return summary

    def ship_queues(
        self, peer: PeerConfig, queues: Sequence[tuple[str, str]], max_batches: int | None = None
    ) -> list[QueueSummary]:
        """Ship the given (server, queue id) of ``peer`` one after another, with one filter
        chain and one sink for all of them."""
        if not queues:
            return []
        entry_filter = EntryFilter(peer, self.source_cluster_id(), self.peer_cluster_id(peer))
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
        with queue_lock(
            self.client, self.layout, server, queue_id, owner=self.owner, timeout=self.lock_timeout
        ) as held:
            if not held:
                return QueueSummary(server, queue_id, status="busy")
            return self.ship_held_queue(peer, server, queue_id, entry_filter, sink, max_batches)

    def ship_held_queue(
        self,
        peer: PeerConfig,
        server: str,
        queue_id: str,
        entry_filter: EntryFilter,
        sink: Sink,
        max_batches: int | None = None,
    ) -> QueueSummary:
        """Ship one queue whose lock the caller holds (see :func:`~walship.zk.queue_lock`)."""
        qs = QueueSummary(server, queue_id)
        try:
            self._ship_locked(peer, server, queue_id, entry_filter, sink, max_batches, qs)
        except QueueNotFoundError as exc:
            qs.status = "moved"
            qs.error = str(exc)
            log.info("queue %s/%s moved while shipping: %s", server, queue_id, exc)
        except (WalshipError, WalError) as exc:
            qs.status = "error"
            qs.error = f"queue {server}/{queue_id} of peer {peer.peer_id}: {exc}"
            qs.exception = exc
            log.error("%s", qs.error)
        return qs

    def _ship_locked(
        self,
        peer: PeerConfig,
        server: str,
        queue_id: str,
        entry_filter: EntryFilter,
        sink: Sink,
        max_batches: int | None,
        qs: QueueSummary,
    ) -> None:
        wals = self.queues.wals(server, queue_id)
        recovered = QueueId.parse(queue_id).recovered
        for index, wp in enumerate(wals):
            if max_batches is not None and qs.batches >= max_batches:
                return
            last = index == len(wals) - 1
            loc = self.walstore.locate(wp.name)
            with self.walstore.open(loc) as f:
                reader = WalReader(f, loc.path)
                batch: list[FilteredEntry] = []
                read = 0
                size = 0
                position = wp.position
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
                        if read >= self.batch_entries or size >= self.batch_bytes:
                            self._flush(sink, server, queue_id, wp.name, batch, read, size, position, qs)
                            batch, read, size = [], 0, 0
                            if max_batches is not None and qs.batches >= max_batches:
                                return
                except WalError:
                    # ship what was read before the bad entry, so the position points at it
                    if read:
                        self._flush(sink, server, queue_id, wp.name, batch, read, size, position, qs)
                    raise

                finished = reader.has_trailer or not last or recovered or loc.archived
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
                    self._flush(sink, server, queue_id, wp.name, batch, read, size, position, qs)
            if not finished:
                return  # the current WAL: more will be appended
            self.queues.remove_wals(server, queue_id, [wp.name])
            qs.wals_removed.append(wp.name)
        if recovered and wals and len(qs.wals_removed) == len(wals):
            self.queues.remove_queue(server, queue_id)
            qs.queue_removed = True

    def _flush(
        self,
        sink: Sink,
        server: str,
        queue_id: str,
        wal: str,
        batch: list[FilteredEntry],
        read: int,
        size: int,
        position: int,
        qs: QueueSummary,
    ) -> None:
        stats = sink.apply(batch, wal) if batch else ApplyStats()
        # only now, with the batch applied, may the position move past it
        self.queues.set_position(server, queue_id, wal, position)
        qs.batches += 1
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


def _matches(q: QueueInfo, pattern: str) -> bool:
    qid = str(q.queue_id)
    return pattern in (qid, f"{q.server}/{qid}") or fnmatch.fnmatchcase(f"{q.server}/{qid}", pattern)
