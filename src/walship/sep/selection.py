"""The events a subscription takes from a batch, whatever it hands them to.

Both kinds of subscription, a listener (:mod:`walship.sinks.sep`) and a Parquet change log
(:mod:`walship.sinks.parquet`), see the same events: entries written before the start time
(``walship.sep.start-time``) are passed over, the rest become :class:`SepEvent`\\ s, one per
row and entry in WAL order, and the filter hook (``walship.sep.filter``) drops the events it
returns falsy for.

Example::

    selector = EventSelector.of(peer)
    events = selector.select(batch, wal).events
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from walship.errors import ConfigError, InvalidPeerConfigError, SubscriberError
from walship.peer import PeerConfig
from walship.sep.config import FILTER_KEY, SepSettings
from walship.sep.events import SepEvent, events_of
from walship.sep.listeners import EventFilter, load_filter
from walship.wal.model import Cell, WalEntry

__all__ = ["EventSelector", "KeptEntry", "Selection", "load_hook"]


class KeptEntry(Protocol):
    """What is left of a WAL entry for a subscription (a sink's ``FilteredEntry``)."""

    @property
    def entry(self) -> WalEntry: ...

    @property
    def cells(self) -> tuple[Cell, ...]: ...

    @property
    def cluster_ids(self) -> tuple[uuid.UUID, ...]: ...


def load_hook(settings: SepSettings) -> EventFilter | None:
    """The subscription's filter hook, imported; ``None`` without one.

    :raises InvalidPeerConfigError: it does not import or is not callable (names the key and
        the subscription).
    """
    if settings.filter is None:
        return None
    try:
        return load_filter(settings.filter)
    except ConfigError as exc:
        raise InvalidPeerConfigError(f"subscription {settings.name}: {FILTER_KEY}: {exc}") from None


@dataclass
class Selection:
    """The events taken from a batch, how many entries were before the start time, and how
    many gave no event (before the start time, or every event filtered out)."""

    events: list[SepEvent] = field(default_factory=list)
    skipped: int = 0
    passed_over: int = 0

    @property
    def cells(self) -> int:
        return sum(len(e.cells) for e in self.events)


class EventSelector:
    """Turns batches of kept entries into a subscription's events.

    :param hook: the filter hook (:func:`load_hook`), or ``None``.
    """

    def __init__(self, settings: SepSettings, hook: EventFilter | None = None) -> None:
        self.settings = settings
        self.hook = hook

    @classmethod
    def of(cls, peer: PeerConfig) -> EventSelector:
        """:raises InvalidPeerConfigError: the subscription's settings or filter hook."""
        settings = SepSettings.of(peer)
        return cls(settings, load_hook(settings))

    def _keep(self, event: SepEvent, wal: str) -> bool:
        assert self.hook is not None
        try:
            return bool(self.hook(event))
        except Exception as exc:  # the hook is user code: name it and where
            raise SubscriberError(
                f"subscription {self.settings.name}: filter {self.settings.filter} raised on {wal} at byte offset "
                f"{event.offset}: {type(exc).__name__}: {exc}"
            ) from exc

    def select(self, entries: Sequence[KeptEntry], wal: str) -> Selection:
        """The events of ``entries`` (from ``wal``, in WAL order) the subscription takes.

        :raises SubscriberError: the filter hook raised (the message names the WAL and offset).
        """
        out = Selection()
        start = self.settings.start_time
        for kept in entries:
            if start is not None and kept.entry.key.write_time < start:
                out.skipped += 1
                out.passed_over += 1
                continue
            before = len(out.events)
            for event in events_of(kept.entry, kept.cells, kept.cluster_ids, wal, self.settings.payload_column):
                if self.hook is None or self._keep(event, wal):
                    out.events.append(event)
            if len(out.events) == before:
                out.passed_over += 1
        return out
