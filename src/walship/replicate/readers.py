"""WAL readers kept from one pass to the next.

A compressed WAL (``hbase.regionserver.wal.enablecompression``) can only be read from a
position once its dictionaries are rebuilt from the file's start. A tailer passes over the
same growing WAL many times a second, so the shipper keeps the reader of each compressed WAL
it reads, dictionaries and all, and the next pass goes on from where the last one stopped,
decoding only the new bytes. Plain WALs need nothing kept: their readers are made afresh.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from typing import BinaryIO

from walship.wal.reader import WalReader

__all__ = ["OpenReaders"]

log = logging.getLogger(__name__)

#: Compressed WALs whose readers are kept at most (the least recently read goes first).
DEFAULT_LIMIT = 64


class OpenReaders:
    """The readers of compressed WALs, by path, kept between passes."""

    def __init__(self, limit: int = DEFAULT_LIMIT) -> None:
        self.limit = limit
        self._readers: OrderedDict[str, WalReader] = OrderedDict()

    def __len__(self) -> int:
        return len(self._readers)

    def reader(self, fileobj: BinaryIO, path: str) -> WalReader:
        """A reader of the WAL at ``path`` reading ``fileobj``: the one kept from an earlier
        pass (its dictionaries built up to where it stopped), or a new one."""
        kept = self._readers.get(path)
        if kept is not None:
            kept.reopen(fileobj)
            self._readers.move_to_end(path)
            return kept
        reader = WalReader(fileobj, path)
        if reader.compressed is not None or reader.header is None:
            # compressed, or too new to tell yet: keep it (a header-less reader reads its header later)
            self._readers[path] = reader
            while len(self._readers) > self.limit:
                dropped, _ = self._readers.popitem(last=False)
                log.debug("dropped the kept reader of %s (more than %d kept)", dropped, self.limit)
        return reader

    def forget(self, path: str) -> None:
        """The WAL is finished (out of the queue): its reader need not be kept."""
        self._readers.pop(path, None)
