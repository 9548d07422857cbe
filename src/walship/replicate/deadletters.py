"""Replaying dead letters: apply a peer's pending dead letters through its sink, exactly.

The sink is built with ``replaying=True``: it applies every cell exactly or fails, and never
skips nor dead-letters again, so a replay either applies a file whole (then moves it to
``replayed/``) or stops at it with the sink's reason and leaves it, and every later file,
pending. Replaying twice is harmless: cells keep their timestamps. A replay keeps to the peer's
bandwidth (``throttled_s``: the seconds it waited), as shipping does.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from kazoo.client import KazooClient

from walship.errors import DeadLetterError, WalshipError
from walship.meter import NO_METER, Meter
from walship.peer import PeerConfig
from walship.replicate.throttle import within_bandwidth
from walship.replicate.walstore import WalStore
from walship.sinks.base import Sink, SinkContext
from walship.sinks.deadletter import DeadLetterStore, group_entries
from walship.sinks.registry import create_sink
from walship.zk import ReplicationPeers, ZnodeLayout

__all__ = ["DeadLetterReplay", "list_dead_letters", "replay_dead_letters"]

log = logging.getLogger(__name__)


@dataclass
class DeadLetterReplay:
    peer_id: str
    files_replayed: list[str] = field(default_factory=list)
    cells_applied: int = 0
    #: seconds the replay waited for the peer's bandwidth budget
    throttled_s: float = 0.0
    files_left: list[str] = field(default_factory=list)
    error: str | None = None

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["throttled_s"] = round(self.throttled_s, 3)
        return out


def _store(
    client: KazooClient, layout: ZnodeLayout, walstore: WalStore, peer_id: str
) -> tuple[PeerConfig, DeadLetterStore]:
    peer = ReplicationPeers(client, layout).get(peer_id)
    return peer, DeadLetterStore.for_peer(peer, walstore.root)


def list_dead_letters(
    client: KazooClient, layout: ZnodeLayout, walstore: WalStore, peer_ids: list[str]
) -> list[dict[str, Any]]:
    """Every pending dead letter of the peers, once each, in WAL order (``to_json`` form)."""
    out: list[dict[str, Any]] = []
    for peer_id in peer_ids:
        _, store = _store(client, layout, walstore, peer_id)
        out.extend(d.to_json() for d in store.records())
    return out


def replay_dead_letters(
    client: KazooClient,
    layout: ZnodeLayout,
    walstore: WalStore,
    peer_id: str,
    *,
    sink_factory: Callable[[PeerConfig, SinkContext], Sink] = create_sink,
    meter: Meter = NO_METER,
) -> DeadLetterReplay:
    """Apply the peer's pending dead letters, file by file, in WAL order (``meter`` counts
    the files).

    :raises DeadLetterError: a file could not be applied (named, with the sink's reason);
        it and the files after it stay pending.
    """
    peer, store = _store(client, layout, walstore, peer_id)
    report = DeadLetterReplay(peer_id)
    files = store.files()
    if not files:
        return report
    sink = within_bandwidth(sink_factory(peer, SinkContext(walstore.root, replaying=True)), peer)
    meter.start(len(files), "files")
    try:
        for i, path in enumerate(files):
            letters = store.read(path)
            try:
                for wal, entries in group_entries(letters):
                    stats = sink.apply(entries, wal)
                    report.cells_applied += stats.cells
                    report.throttled_s += stats.throttled_s
            except WalshipError as exc:
                report.files_left = files[i:]
                report.error = f"dead letters {path} of peer {peer_id} not replayed: {exc}"
                raise DeadLetterError(
                    f"{report.error} ({len(report.files_left)} file(s) left pending; nothing lost)"
                ) from exc
            store.mark_replayed(path)
            report.files_replayed.append(path)
            meter.advance()
            log.info("peer %s: replayed %d dead letters of %s", peer_id, len(letters), path)
    finally:
        sink.close()
    return report
