"""Fewer garbage collections while a pass ships.

A pass makes a few objects for every cell (the decoder's cells, the sink's mutations) and keeps
a whole batch of them alive at once; with CPython's default threshold (a collection every 700
allocations) the collector walks those batches again and again, which cost more CPU than all
the rest of shipping (measured by ``benchmarks/replicate.py``). Nothing a pass makes lives in a
cycle that needs the collector, so while any pass runs the first generation is collected every
:data:`PASS_THRESHOLD` allocations instead; the process's own thresholds come back when the
last pass ends.
"""

from __future__ import annotations

import contextlib
import gc
import logging
import threading
from collections.abc import Iterator

__all__ = ["PASS_THRESHOLD", "fewer_collections"]

log = logging.getLogger(__name__)

#: Allocations between two collections of the first generation while a pass runs.
PASS_THRESHOLD = 50_000

_lock = threading.Lock()
_active = 0
_saved: tuple[int, int, int] | None = None


@contextlib.contextmanager
def fewer_collections() -> Iterator[None]:
    """Raise the collector's thresholds for the block (passes of several threads share one
    raise; the first sets it, the last restores what was there)."""
    global _active, _saved
    with _lock:
        if _active == 0:
            current = gc.get_threshold()
            if current[0] and current[0] < PASS_THRESHOLD:  # 0: collection is off, leave it so
                _saved = current
                gc.set_threshold(PASS_THRESHOLD, max(current[1], 20), max(current[2], 20))
        _active += 1
    try:
        yield
    finally:
        with _lock:
            _active -= 1
            if _active == 0 and _saved is not None:
                gc.set_threshold(*_saved)
                _saved = None
