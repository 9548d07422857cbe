"""A tailer's probe of its WAL folders: what they held, and a wait that ends when a WAL grows
or appears (see :mod:`walship.replicate.tailer`).

Example::

    probe = WalProbe(walstore, PROBE_INTERVAL)
    before = probe.listing(servers)
    ...  # a pass that found nothing new
    probe.wait_for_change(before, lambda: servers, end, stop)
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable

from walship.replicate.walstore import WalStore

__all__ = ["PROBE_INTERVAL", "PROBE_MAX_INTERVAL", "Listing", "WalProbe"]

log = logging.getLogger(__name__)

#: Seconds between two listings of the WAL folders while a tailer waits for new entries
#: (the default for WALs on a local disk), doubling while nothing changes up to
#: PROBE_MAX_INTERVAL: a write soon after a pass is seen at once, one after a quiet spell
#: within a few hundredths of a second, and a quiet tailer wakes 25 times a second, not 200.
PROBE_INTERVAL = 0.005
PROBE_MAX_INTERVAL = 0.04

#: What the WAL folders held when a pass began: (path, size) of every file.
Listing = frozenset[tuple[str, int]]


class WalProbe:
    """Lists the WAL folders of region servers every ``interval`` seconds (0: no probe)."""

    def __init__(self, walstore: WalStore, interval: float) -> None:
        self.walstore = walstore
        self.interval = interval

    def listing(self, servers: Iterable[str]) -> Listing | None:
        """(path, size) of every file in the WAL folders of ``servers``; ``None`` without a
        probe, without servers, or when a folder cannot be listed (then the caller's wait is
        its whole sleep)."""
        folders = sorted(f"{self.walstore.base}/WALs/{server}" for server in set(servers))
        if not self.interval or not folders:
            return None
        out: set[tuple[str, int]] = set()
        for folder in folders:
            try:
                out.update(self.walstore.file_sizes(folder))
            except FileNotFoundError:
                out.add((folder, -1))  # not there (yet): its appearance is a change
            except OSError as exc:  # an unreachable file system: no probe, as before
                log.debug("cannot list %s (%s): waiting the idle sleep", folder, exc)
                return None
        return frozenset(out)

    def wait_for_change(
        self, before: Listing | None, servers: Callable[[], Iterable[str]], end: float, stop: threading.Event
    ) -> None:
        """Wait until the listing of ``servers()`` differs from ``before``, ``end`` (monotonic
        seconds) or ``stop``; with no ``before``, until ``end`` or ``stop``."""
        if before is None:
            stop.wait(max(0.0, end - time.monotonic()))
            return
        interval, longest = self.interval, max(self.interval, PROBE_MAX_INTERVAL)
        while not stop.is_set():
            started = time.monotonic()
            if self.listing(servers()) != before:
                return
            now = time.monotonic()
            if now >= end:
                return
            # keep the listing's share of an idle tailer's time small where listing is slow
            stop.wait(min(max(interval, 10 * (now - started)), end - now))
            interval = min(2 * interval, longest)
