"""Write a subscription's edits to a Parquet change log (sink ``changelog``).

Each batch of filtered entries becomes the same events a listener would get
(:class:`~walship.sep.selection.EventSelector`: from the start time on, through the filter
hook), then one Parquet row per cell of them, written as one file per ``table``/``date``
partition the batch touches (:class:`~walship.sep.parquetlog.ChangeLogWriter`). :meth:`apply`
returns only once every file of the batch is in place, so the shipper moves the queue's
position only then; a batch shipped again after a crash rewrites the same files. The sink has
no endpoints: status probes nothing for it.

Settings: ``walship.changelog.url`` (any fsspec URL), ``walship.sep.start-time``,
``walship.sep.filter`` (see :mod:`walship.sep.config`); the layout is in
:mod:`walship.sep.parquetlog`.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from walship.errors import ChangeLogError, InvalidPeerConfigError, SinkError, SubscriberError
from walship.peer import PeerConfig
from walship.sep.config import CHANGELOG_URL_KEY
from walship.sep.parquetlog import ChangeLogWriter, check_url
from walship.sep.selection import EventSelector
from walship.sinks.base import ApplyStats, FilteredEntry, Sink, SinkContext

__all__ = ["ChangeLogSink"]

log = logging.getLogger(__name__)


def _selector(peer: PeerConfig) -> tuple[EventSelector, str]:
    selector = EventSelector.of(peer)
    url = selector.settings.changelog_url
    if url is None:  # a listener's settings under protocol changelog
        raise InvalidPeerConfigError(f"subscription {peer.peer_id}: {CHANGELOG_URL_KEY}: not set")
    try:
        check_url(url)
    except ChangeLogError as exc:
        raise InvalidPeerConfigError(f"subscription {peer.peer_id}: {CHANGELOG_URL_KEY}: {exc}") from None
    return selector, url


class ChangeLogSink(Sink):
    """Writes batches of one subscription into its change log."""

    def __init__(self, peer: PeerConfig, context: SinkContext) -> None:
        self.peer = peer
        self.selector, self.url = _selector(peer)
        if context.replaying:
            log.info("subscription %s: replaying into the change log %s", peer.peer_id, self.url)
        # the queue in the file names is the subscription, never a recovered queue's id: a
        # batch shipped again from a claimed queue after a failover rewrites the same file
        try:
            self.writer = ChangeLogWriter(self.url, peer.peer_id)
        except ChangeLogError as exc:
            raise SinkError(f"subscription {peer.peer_id}: {exc}") from exc

    @classmethod
    def validate_config(cls, peer: PeerConfig) -> None:
        """:raises InvalidPeerConfigError: no URL or one fsspec cannot resolve, listener
        settings, a start time that is not epoch ms, a filter hook that does not import (each
        message names the key and the subscription)."""
        _selector(peer)

    def close(self) -> None:
        pass

    def apply(self, entries: Sequence[FilteredEntry], wal: str) -> ApplyStats:
        """Write the batch's rows; return once every file of it is in place.

        :raises SubscriberError: a file cannot be written (or the filter hook raised); the
            batch is shipped again (with back-off while tailing) and rewrites the same files.
        """
        stats = ApplyStats()
        if not entries:
            return stats
        selection = self.selector.select(entries, wal)
        first, last = entries[0].entry.offset, entries[-1].entry.end_offset
        try:
            paths = self.writer.write_batch(wal, first, last, selection.events)
        except ChangeLogError as exc:
            raise SubscriberError(
                f"subscription {self.peer.peer_id}: change log {self.url}: {wal} bytes {first}-{last}: {exc}"
            ) from exc
        stats.cells = selection.cells
        stats.passed_over = selection.passed_over
        stats.calls = len(paths)
        return stats
