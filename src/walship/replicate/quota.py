"""The memory a process's batches hold while they are applied in the background: HBase's
``replication.total.buffer.quota``, the bytes of read edits a region server keeps before they
are shipped (256 MB by default).

A pipelined pass applies a full batch in the background while it reads the next. Each batch in
flight holds its entries, so a process with many queues (``--parallel`` groups, each queue one
batch in flight) could hold many batches at once. A batch goes in flight only when the
process's :class:`BufferQuota` has room for it; otherwise the pass applies it before reading on,
as without pipelining, and the process holds what it reads plus at most the quota.

A batch counts what its entries hold in memory, not their bytes in the WAL
(:func:`held_bytes`): each cell and entry is Python objects whose headers outweigh a small
value.
"""

from __future__ import annotations

import logging
import threading

from walship.errors import ConfigError
from walship.replicate.batcher import Batch

__all__ = ["CELL_OVERHEAD", "ENTRY_OVERHEAD", "QUOTA_KEY", "BufferQuota", "held_bytes", "process_quota"]

log = logging.getLogger(__name__)

#: The HBase key whose value a process's batches in flight keep under.
QUOTA_KEY = "replication.total.buffer.quota"
#: The objects of a cell beyond its bytes: its tuple and the bytes objects' headers (measured
#: with ``sys.getsizeof`` on decoded cells: 7 slots, a value, shared row and column names).
CELL_OVERHEAD = 200
#: The objects of an entry beyond its cells: its key, its tuples and the filtered entry.
ENTRY_OVERHEAD = 400


def held_bytes(batch: Batch) -> int:
    """An estimate of the memory ``batch``'s entries hold: the WAL bytes of what is kept, and
    the objects of each entry and cell."""
    cells = sum(len(fe.cells) for fe in batch.entries)
    return batch.kept_bytes + CELL_OVERHEAD * cells + ENTRY_OVERHEAD * len(batch.entries)


class BufferQuota:
    """The bytes batches in flight may hold at once, in one process (thread-safe).

    :param limit: the quota in bytes (``> 0``).
    """

    def __init__(self, limit: int) -> None:
        if limit <= 0:
            raise ConfigError(f"{QUOTA_KEY} must be > 0 bytes, got {limit}")
        self.limit = limit
        self._lock = threading.Lock()
        #: bytes held by batches in flight now
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

    def release(self, n: int) -> None:
        """The bytes of a batch that was applied."""
        with self._lock:
            self.used -= n


_process_quota: BufferQuota | None = None
_process_lock = threading.Lock()


def process_quota(limit: int) -> BufferQuota:
    """The quota of this process, made at the first call with ``limit`` (a later call with
    another limit sets it: the process keeps one quota, as a region server keeps one)."""
    global _process_quota
    with _process_lock:
        if _process_quota is None:
            _process_quota = BufferQuota(limit)
        elif _process_quota.limit != limit:
            if limit <= 0:
                raise ConfigError(f"{QUOTA_KEY} must be > 0 bytes, got {limit}")
            _process_quota.limit = limit
        return _process_quota
