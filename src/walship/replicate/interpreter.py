"""The interpreter's settings while a pass ships: fewer garbage collections, quicker hand-overs
of its lock between threads.

A pass makes a few objects for every cell (the decoder's cells, the sink's mutations) and keeps
a whole batch of them alive at once; with CPython's default threshold (a collection every 700
allocations) the collector walks those batches again and again, which cost more CPU than all
the rest of shipping (measured by ``benchmarks/replicate.py``). Nothing a pass makes lives in a
cycle that needs the collector, so while any pass runs the first generation is collected every
:data:`PASS_THRESHOLD` allocations instead.

A pass reads and decodes WALs in one thread while another sends the calls made of them, one at
a time, each waiting for the peer's answer. When an answer comes back, its thread needs the
interpreter's lock to send the next call; by default it waits up to 5 ms for the reading thread
to let go of it, and the peer idles meanwhile. While any pass runs, the lock changes hands
every :data:`PASS_SWITCH_INTERVAL` instead (a backlog drained into HBase's region server 11%
sooner, measured by ``benchmarks/vs_native.py --sink hbase``).

The process's own settings come back when the last pass ends.
"""

from __future__ import annotations

import contextlib
import gc
import logging
import sys
import threading
from collections.abc import Iterator

__all__ = ["PASS_SWITCH_INTERVAL", "PASS_THRESHOLD", "pass_settings"]

log = logging.getLogger(__name__)

#: Allocations between two collections of the first generation while a pass runs.
PASS_THRESHOLD = 50_000
#: Seconds a thread runs before it hands the interpreter's lock to one waiting for it, while a
#: pass runs (CPython's default: 0.005).
PASS_SWITCH_INTERVAL = 0.0005

_lock = threading.Lock()
_active = 0
_saved_threshold: tuple[int, int, int] | None = None
_saved_interval: float | None = None


@contextlib.contextmanager
def pass_settings() -> Iterator[None]:
    """The pass's settings for the block (passes of several threads share them: the first sets
    them, the last restores what was there)."""
    global _active, _saved_threshold, _saved_interval
    with _lock:
        if _active == 0:
            current = gc.get_threshold()
            if current[0] and current[0] < PASS_THRESHOLD:  # 0: collection is off, leave it so
                _saved_threshold = current
                gc.set_threshold(PASS_THRESHOLD, max(current[1], 20), max(current[2], 20))
            interval = sys.getswitchinterval()
            if interval > PASS_SWITCH_INTERVAL:
                _saved_interval = interval
                sys.setswitchinterval(PASS_SWITCH_INTERVAL)
        _active += 1
    try:
        yield
    finally:
        with _lock:
            _active -= 1
            if _active == 0:
                if _saved_threshold is not None:
                    gc.set_threshold(*_saved_threshold)
                    _saved_threshold = None
                if _saved_interval is not None:
                    sys.setswitchinterval(_saved_interval)
                    _saved_interval = None
