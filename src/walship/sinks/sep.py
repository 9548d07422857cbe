"""Deliver a subscription's edits to its listener as SEP events (sink ``sep``).

Each batch of filtered entries becomes :class:`~walship.sep.events.SepEvent`\\ s, one per row
and entry, in WAL order. Entries written before the subscription's start time
(``walship.sep.start-time``) are passed over; the filter hook (``walship.sep.filter``) drops
the events it returns falsy for; the rest go to the listener, rows hashed over
``walship.sep.threads`` workers (:class:`~walship.sep.dispatch.RowDispatcher`). :meth:`apply`
returns only after every listener call returned, so the shipper moves the queue's position
only then; a listener that raises makes :meth:`apply` raise :class:`~walship.errors.SinkError`
and the batch is delivered again on the next run (at least once: listeners should be
idempotent). The sink has no endpoints: status probes nothing for it.

See :mod:`walship.sep` for subscriptions and :mod:`walship.sep.config` for the settings.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from walship.errors import ConfigError, InvalidPeerConfigError, SinkError
from walship.sep.config import FILTER_KEY, LISTENER_KEY, SepSettings
from walship.sep.dispatch import RowDispatcher
from walship.sep.events import SepEvent, events_of
from walship.sep.listeners import EventFilter, Listener, load_filter, load_listener
from walship.sinks.base import ApplyStats, FilteredEntry, SinkContext
from walship.zk.peers import PeerConfig

__all__ = ["SepSink"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class _Loaded:
    """A subscription's settings, with its listener class and filter hook imported."""

    settings: SepSettings
    listener: Callable[[], Listener]
    filter: EventFilter | None


def _load(peer: PeerConfig) -> _Loaded:
    settings = SepSettings.of(peer)
    try:
        listener = load_listener(settings.listener)
    except ConfigError as exc:
        raise InvalidPeerConfigError(f"subscription {peer.peer_id}: {LISTENER_KEY}: {exc}") from None
    hook: EventFilter | None = None
    if settings.filter is not None:
        try:
            hook = load_filter(settings.filter)
        except ConfigError as exc:
            raise InvalidPeerConfigError(f"subscription {peer.peer_id}: {FILTER_KEY}: {exc}") from None
    return _Loaded(settings, listener, hook)


class SepSink:
    """Delivers batches of one subscription to its listener (constructed here, with no
    arguments)."""

    def __init__(self, peer: PeerConfig, context: SinkContext) -> None:
        self.peer = peer
        loaded = _load(peer)
        self.settings = loaded.settings
        if context.replaying:
            log.info("subscription %s: replaying: events are delivered again", peer.peer_id)
        try:
            listener = loaded.listener()
        except Exception as exc:  # the listener's own constructor: name it
            raise SinkError(
                f"subscription {peer.peer_id}: listener {self.settings.listener} could not be constructed: "
                f"{type(exc).__name__}: {exc}"
            ) from exc
        self.filter = loaded.filter
        self.dispatcher = RowDispatcher(listener, threads=self.settings.threads, name=peer.peer_id)

    @classmethod
    def validate_config(cls, peer: PeerConfig) -> None:
        """:raises InvalidPeerConfigError: no or an unknown listener, threads not in 1..256, a
        payload column that is not ``family:qualifier``, a start time that is not epoch ms, a
        filter hook that does not import (each message names the key and the subscription)."""
        _load(peer)

    def close(self) -> None:
        self.dispatcher.close()

    def _keep(self, event: SepEvent, wal: str) -> bool:
        assert self.filter is not None
        try:
            return bool(self.filter(event))
        except Exception as exc:
            raise SinkError(
                f"subscription {self.peer.peer_id}: filter {self.settings.filter} raised on {wal} at byte offset "
                f"{event.offset}: {type(exc).__name__}: {exc}"
            ) from exc

    def apply(self, entries: Sequence[FilteredEntry], wal: str) -> ApplyStats:
        """Deliver the batch's events; return once the listener has taken every one.

        :raises SinkError: the listener (or the filter hook) raised; nothing of the batch
            counts as delivered.
        """
        stats = ApplyStats()
        start = self.settings.start_time
        events: list[SepEvent] = []
        skipped = 0
        for fe in entries:
            if start is not None and fe.entry.key.write_time < start:
                skipped += 1
                continue
            for event in events_of(fe.entry, fe.cells, fe.cluster_ids, wal, self.settings.payload_column):
                if self.filter is None or self._keep(event, wal):
                    events.append(event)
        try:
            stats.calls = self.dispatcher.deliver(events)
        except Exception as exc:
            first, last = entries[0].entry.offset, entries[-1].entry.end_offset
            raise SinkError(
                f"subscription {self.peer.peer_id}: listener {self.settings.listener} failed on {wal} "
                f"bytes {first}-{last} ({len(events)} events): {type(exc).__name__}: {exc}"
            ) from exc
        stats.cells = sum(len(e.cells) for e in events)
        if skipped:
            log.debug("subscription %s: %s: %d entries before the start time", self.peer.peer_id, wal, skipped)
        return stats
