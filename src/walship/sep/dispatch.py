"""Deliver events to a listener over N workers, one row always on the same worker.

As hbase-indexer's SepEventExecutor: a row's slot is a stable hash of its table and key
(CRC-32) modulo the number of workers, and each slot is one single-thread executor, so one
row's events reach the listener in order and from one thread. :meth:`RowDispatcher.deliver`
returns only once every listener call for the events returned, so the caller may then move
the queue's position past them; if any call raised, it raises (after the others ended).
"""

from __future__ import annotations

import logging
import zlib
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor, wait

from walship.errors import ConfigError
from walship.sep.events import SepEvent
from walship.sep.listeners import Listener

__all__ = ["RowDispatcher", "row_slot"]

log = logging.getLogger(__name__)


def row_slot(table: bytes, row: bytes, slots: int) -> int:
    """The worker of a row: stable across processes and runs (not Python's salted hash)."""
    return zlib.crc32(row, zlib.crc32(table + b"\x00")) % slots


class RowDispatcher:
    """Calls ``listener.process_events`` for batches of events, rows hashed over ``threads``.

    Example::

        dispatcher = RowDispatcher(listener, threads=4, name="indexer")
        try:
            dispatcher.deliver(events)
        finally:
            dispatcher.close()
    """

    def __init__(self, listener: Listener, *, threads: int = 1, name: str = "sep") -> None:
        if threads < 1:
            raise ConfigError(f"threads must be >= 1, got {threads}")
        self.listener = listener
        self.threads = threads
        self._workers = (
            [ThreadPoolExecutor(1, thread_name_prefix=f"walship-sep-{name}-{i}") for i in range(threads)]
            if threads > 1
            else []
        )

    def deliver(self, events: Sequence[SepEvent]) -> int:
        """Deliver ``events`` (in WAL order); return the number of listener calls.

        :raises Exception: the first exception a listener call raised, once every call ended.
        """
        if not events:
            return 0
        if not self._workers:
            self.listener.process_events(list(events))
            return 1
        slots: dict[int, list[SepEvent]] = {}
        for event in events:
            slots.setdefault(row_slot(event.table, event.row, self.threads), []).append(event)
        futures: list[Future[None]] = [
            self._workers[slot].submit(self.listener.process_events, slot_events) for slot, slot_events in slots.items()
        ]
        wait(futures)
        for future in futures:
            exc = future.exception()
            if exc is not None:
                raise exc
        return len(futures)

    def close(self) -> None:
        for worker in self._workers:
            worker.shutdown(wait=True)
        self._workers = []
