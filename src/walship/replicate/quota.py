"""The memory a process's batches hold: HBase's ``replication.total.buffer.quota``, the bytes of
read edits a region server keeps before they are shipped (256 MB by default).

A queue's batch is counted from its first entry read until it is applied: while it is read
(an estimate, updated after each run of entries), and in flight. When the process holds more
than the quota, each batch being read is cut at once, and a batch goes in flight (applied in
the background while the next is read) only while :class:`BufferQuota` has room for it;
otherwise the pass applies it before reading on, as HBase's WAL reader waits for its shipper.
So the batches of a process, however many queues and ``--parallel`` groups it ships, hold
about the quota, plus one run of entries for each queue.

A batch counts what its entries hold in memory, not their bytes in the WAL
(:func:`held_bytes`): each cell and entry is Python objects whose headers outweigh a small
value.
"""

from __future__ import annotations

import logging
import threading

from walship.errors import ConfigError
from walship.replicate.batcher import Batch

__all__ = [
    "CELL_OVERHEAD",
    "ENTRY_OVERHEAD",
    "QUOTA_KEY",
    "READING_OVERHEAD",
    "BufferQuota",
    "held_bytes",
    "process_quota",
]

log = logging.getLogger(__name__)

#: The HBase key whose value a process's batches keep under.
QUOTA_KEY = "replication.total.buffer.quota"
#: The objects of a cell beyond its bytes: its tuple and the bytes objects' headers (measured
#: with ``sys.getsizeof`` on decoded cells: 7 slots, a value, shared row and column names).
CELL_OVERHEAD = 200
#: The objects of an entry beyond its cells: its key, its tuples and the filtered entry.
ENTRY_OVERHEAD = 400


#: What an entry being read is counted for beyond its bytes, before its cells are counted
#: (it holds one at least).
READING_OVERHEAD = ENTRY_OVERHEAD + CELL_OVERHEAD


def held_bytes(batch: Batch) -> int:
    """An estimate of the memory ``batch``'s entries hold: the WAL bytes of what is kept, and
    the objects of each entry and cell."""
    cells = sum(len(fe.cells) for fe in batch.entries)
    return batch.kept_bytes + CELL_OVERHEAD * cells + ENTRY_OVERHEAD * len(batch.entries)


class BufferQuota:
    """The bytes a process's batches (being read, in flight, being applied) may hold at once
    (thread-safe).

    :param limit: the quota in bytes (``> 0``).
    """

    def __init__(self, limit: int) -> None:
        self.limit = _checked(limit)
        self._lock = threading.Lock()
        #: bytes held by batches now
        self.used = 0
        #: the most bytes held at once
        self.peak = 0
        #: batches applied in the foreground because the quota was full
        self.refused = 0

    def try_acquire(self, n: int) -> bool:
        """Hold ``n`` more bytes if they fit (a batch alone always fits, as in HBase a batch
        larger than the quota is still read); whether they were taken."""
        with self._lock:
            if self.used and self.used + n > self.limit:
                self.refused += 1
                return False
            self.used += n
            self.peak = max(self.peak, self.used)
            return True

    def add(self, n: int) -> None:
        """Count ``n`` more bytes (less, when negative) whatever the room: a batch being read
        grew (or went)."""
        with self._lock:
            self.used += n
            self.peak = max(self.peak, self.used)

    def release(self, n: int) -> None:
        """The bytes of a batch that was applied."""
        self.add(-n)

    @property
    def full(self) -> bool:
        """More bytes are held than the quota: a batch being read is cut now."""
        return self.used > self.limit


def _checked(limit: int) -> int:
    """:raises ConfigError: a quota of no bytes."""
    if limit <= 0:
        raise ConfigError(f"{QUOTA_KEY} must be > 0 bytes, got {limit}")
    return limit


_process_quota: BufferQuota | None = None
_process_lock = threading.Lock()


def process_quota(limit: int) -> BufferQuota:
    """The quota of this process, made at the first call with ``limit`` (a later call with
    another limit sets it: the process keeps one quota, as a region server keeps one)."""
    global _process_quota
    with _process_lock:
        if _process_quota is None:
            _process_quota = BufferQuota(limit)
        else:
            _process_quota.limit = _checked(limit)
        return _process_quota
