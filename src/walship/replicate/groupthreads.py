"""A pass's groups of queues shipped at once, a thread each, as a region server ships each of
its queues in a thread of its own.

Each thread ships with a sibling shipper (:meth:`walship.replicate.shipper.Shipper.sibling`):
its own sinks, WAL readers and background applier, its parent's settings, planner, progress
book and peers' throttlers. A group's compressed WALs' readers are kept here from pass to pass,
whichever sibling ships it next. When a group fails, or the pass is interrupted, the others
stop after their batch under way and the groups not started yet wait for the next pass.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Protocol

from walship.peer import PeerConfig
from walship.replicate.batcher.filters import EntryFilter
from walship.replicate.batcher.member import group_key
from walship.replicate.reader import OpenReaders
from walship.replicate.summary import QueueSummary
from walship.replicate.walfiles import ReadStats

__all__ = ["GroupKey", "GroupShipper", "GroupThreads", "Members", "groups_of"]

log = logging.getLogger(__name__)

#: a group's key (:func:`walship.replicate.batcher.member.group_key`)
GroupKey = tuple[str, tuple[str, ...]]
#: a group's queues: (peer, server, queue id) each
Members = list[tuple[PeerConfig, str, str]]


def groups_of(peers: Sequence[PeerConfig], queues: dict[str, list[tuple[str, str]]]) -> dict[GroupKey, Members]:
    """The peers' (server, queue id)s in groups of queues over the same WALs
    (:func:`~walship.replicate.batcher.member.group_key`), each peer's in its order."""
    groups: dict[GroupKey, Members] = {}
    for peer in peers:
        for server, qid in queues.get(peer.peer_id) or ():
            groups.setdefault(group_key(server, qid), []).append((peer, server, qid))
    return groups


class GroupShipper(Protocol):
    """What ships one group in a thread (a sibling shipper)."""

    read_stats: ReadStats
    readers: OpenReaders

    def ship_groups(
        self, groups: list[Members], filters: dict[str, EntryFilter], max_batches: int | None
    ) -> list[list[QueueSummary]]: ...

    def __exit__(self, *exc: object) -> None: ...


class GroupThreads:
    """The threads of one shipper's passes (one pass at a time)."""

    def __init__(self) -> None:
        #: the pass under way's event (``None`` between passes; in a sibling, its parent's):
        #: set, every group of the pass stops after its batch under way
        self.halt: threading.Event | None = None
        self._readers: dict[GroupKey, OpenReaders] = {}
        self._siblings: list[GroupShipper] = []

    def bytes_read(self) -> int:
        """WAL bytes the pass under way's threads have read so far."""
        return sum(s.read_stats.bytes for s in list(self._siblings))

    def run(
        self,
        threads: int,
        sibling: Callable[[threading.Event], GroupShipper],
        groups: dict[GroupKey, Members],
        filters: dict[str, EntryFilter],
        max_batches: int | None,
        here: Callable[[], dict[GroupKey, list[QueueSummary]]],
        stats: ReadStats,
    ) -> dict[GroupKey, list[QueueSummary]]:
        """Ship ``groups`` in up to ``threads`` threads while ``here`` ships the caller's own
        groups in this thread; every group's summaries. The siblings' reads are added to
        ``stats`` once they are done.

        :raises: once every thread ended, ``here``'s error, else the error of the first failed
            group in key order.
        """
        kept = self._readers
        self._readers = {k: kept[k] if k in kept else OpenReaders() for k in groups}
        halt = threading.Event()
        free = [sibling(halt) for _ in range(min(threads, len(groups)))]
        self._siblings = list(free)
        free_lock = threading.Lock()

        def ship(key: GroupKey) -> list[QueueSummary]:
            with free_lock:
                shipper = free.pop()
            shipper.readers = self._readers[key]
            try:
                return shipper.ship_groups([groups[key]], filters, max_batches)[0]
            except BaseException as exc:
                halt.set()
                log.warning("queues %s: %s", ", ".join(f"{s}/{q}" for _, s, q in groups[key]), exc)
                raise
            finally:
                with free_lock:
                    free.append(shipper)

        done: dict[GroupKey, list[QueueSummary]] = {}
        self.halt = halt
        try:
            with ThreadPoolExecutor(len(free), thread_name_prefix="walship-ship-group") as pool:
                futures = {k: pool.submit(ship, k) for k in sorted(groups)}
                try:
                    done.update(here())
                    for k, future in futures.items():
                        done[k] = future.result()
                except BaseException:
                    halt.set()  # the groups under way stop after their batch under way
                    for future in futures.values():
                        future.cancel()  # the groups not started wait for the next pass
                    raise
        finally:
            self.halt = None
            siblings, self._siblings = self._siblings, []  # counted once: in stats from here on
            with contextlib.ExitStack() as closing:
                for shipper in siblings:
                    closing.callback(shipper.__exit__)
                    stats.opens += shipper.read_stats.opens
                    stats.bytes += shipper.read_stats.bytes
        return done
