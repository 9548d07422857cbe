"""Deliver a subscription's edits to its listener as SEP events (sink ``sep``).

Each batch of filtered entries becomes :class:`~walship.sep.events.SepEvent`\\ s, one per row
and entry, in WAL order. Entries written before the subscription's start time
(``walship.sep.start-time``) are passed over; the filter hook (``walship.sep.filter``) drops
the events it returns falsy for (:class:`~walship.sep.selection.EventSelector`, which the
Parquet change log shares); the rest go to the listener, rows hashed over
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

from walship.errors import ConfigError, InvalidPeerConfigError, SinkError, SubscriberError
from walship.peer import PeerConfig
from walship.sep.config import LISTENER_KEY, SepSettings
from walship.sep.dispatch import RowDispatcher
from walship.sep.listeners import Listener, load_listener
from walship.sep.selection import EventSelector, load_hook
from walship.sinks.base import ApplyStats, FilteredEntry, Sink, SinkContext

__all__ = ["SepSink"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class _Loaded:
    """A subscription's settings, with its listener class and filter hook imported."""

    selector: EventSelector
    listener_spec: str
    listener: Callable[[], Listener]


def _load(peer: PeerConfig) -> _Loaded:
    settings = SepSettings.of(peer)
    if settings.listener is None:  # a change log's settings under protocol sep: not ours
        raise InvalidPeerConfigError(f"subscription {peer.peer_id}: {LISTENER_KEY}: not set: name the listener")
    try:
        listener = load_listener(settings.listener)
    except ConfigError as exc:
        raise InvalidPeerConfigError(f"subscription {peer.peer_id}: {LISTENER_KEY}: {exc}") from None
    return _Loaded(EventSelector(settings, load_hook(settings)), settings.listener, listener)


class SepSink(Sink):
    """Delivers batches of one subscription to its listener (constructed here, with no
    arguments)."""

    def __init__(self, peer: PeerConfig, context: SinkContext) -> None:
        self.peer = peer
        loaded = _load(peer)
        self.selector = loaded.selector
        self.settings = loaded.selector.settings
        self.listener_spec = loaded.listener_spec
        if context.replaying:
            log.info("subscription %s: replaying: events are delivered again", peer.peer_id)
        try:
            listener = loaded.listener()
        except Exception as exc:  # the listener's own constructor: name it
            raise SinkError(
                f"subscription {peer.peer_id}: listener {self.listener_spec} could not be constructed: "
                f"{type(exc).__name__}: {exc}"
            ) from exc
        self.dispatcher = RowDispatcher(listener, threads=self.settings.threads, name=peer.peer_id)

    @classmethod
    def validate_config(cls, peer: PeerConfig) -> None:
        """:raises InvalidPeerConfigError: no or an unknown listener, threads not in 1..256, a
        payload column that is not ``family:qualifier``, a start time that is not epoch ms, a
        filter hook that does not import (each message names the key and the subscription)."""
        _load(peer)

    def close(self) -> None:
        self.dispatcher.close()

    def apply(self, entries: Sequence[FilteredEntry], wal: str) -> ApplyStats:
        """Deliver the batch's events; return once the listener has taken every one.

        :raises SubscriberError: the listener (or the filter hook) raised; nothing of the
            batch counts as delivered (it is delivered again, with back-off while tailing).
        """
        stats = ApplyStats()
        selection = self.selector.select(entries, wal)
        events = selection.events
        try:
            stats.calls = self.dispatcher.deliver(events)
        except Exception as exc:
            first, last = entries[0].entry.offset, entries[-1].entry.end_offset
            raise SubscriberError(
                f"subscription {self.peer.peer_id}: listener {self.listener_spec} failed on {wal} "
                f"bytes {first}-{last} ({len(events)} events): {type(exc).__name__}: {exc}"
            ) from exc
        stats.cells = selection.cells
        stats.passed_over = selection.passed_over
        if selection.skipped:
            log.debug(
                "subscription %s: %s: %d entries before the start time", self.peer.peer_id, wal, selection.skipped
            )
        return stats
