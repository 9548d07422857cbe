"""The reader of a shipping pass: each WAL of a group located and opened once, what finishes
it looked at before it is read, and its entries read in runs from the lowest position of the
queues over it (HBase's WAL reader, before ``WALEntryBatch``).

A compressed WAL (``hbase.regionserver.wal.enablecompression``) can only be read from a
position once its dictionaries are rebuilt from the file's start. A tailer passes over the
same growing WAL many times a second, so the shipper keeps the reader of each compressed WAL
it reads, dictionaries and all, and the next pass goes on from where the last one stopped,
decoding only the new bytes. Plain WALs need nothing kept: their readers are made afresh.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass
from typing import BinaryIO

from walship.replicate.batcher import Member
from walship.replicate.planner import Planner
from walship.replicate.walfiles import ReadStats
from walship.replicate.walstore import WalLocation, WalStore
from walship.wal.model import WalEntry
from walship.wal.reader import WalReader

__all__ = ["GroupReader", "OpenReaders", "WalRead"]

log = logging.getLogger(__name__)

#: Compressed WALs whose readers are kept at most (the least recently read goes first).
DEFAULT_LIMIT = 64

#: Seconds a region server's liveness, once read, answers for the WALs read after (a tailer
#: passes many times a second; a server that died meanwhile has its WAL finished a pass later).
LIVE_MAX_AGE = 1.0


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


@dataclass
class WalRead:
    """One WAL being read for the queues of ``part``.

    :param running: whether each live queue's server ran when the read began (looked at before
        the read: what the read sees is then all there is of a WAL its server finished).
    :param read_at: when the read began (Unix time).
    """

    loc: WalLocation
    reader: WalReader
    part: list[Member]
    running: dict[str, bool]
    read_at: float

    def runs(self) -> Iterator[list[WalEntry]]:
        """The WAL's entries in runs, from the lowest position of the queues over it."""
        for m in self.part:
            m.begin(self.loc.name)
        yield from self.reader.batches(min(m.position for m in self.part) or None)


class GroupReader:
    """Reads the WALs of one group of queues, each once (see :mod:`walship.replicate.grouppass`)."""

    def __init__(self, walstore: WalStore, planner: Planner, read_stats: ReadStats, readers: OpenReaders) -> None:
        self.walstore = walstore
        self.planner = planner
        self.read_stats = read_stats
        self.readers = readers

    @contextlib.contextmanager
    def open_wal(self, name: str, part: list[Member]) -> Iterator[WalRead]:
        """The WAL ``name`` opened for the queues of ``part``.

        :raises FileNotFoundError: it moved (archived) between its lookup and the read.
        """
        loc = self.walstore.locate(name)
        # an archived WAL, or a recovered queue's, is finished whatever its server does
        servers = set() if loc.archived else {m.queue.server for m in part if not m.queue.recovered}
        running = {server: self.planner.server_live(server, max_age=LIVE_MAX_AGE) for server in servers}
        read_at = time.time()
        with self.walstore.open(loc, self.read_stats) as f:
            yield WalRead(loc, self.readers.reader(f, loc.path), part, running, read_at)

    def finished(self, loc: WalLocation) -> None:
        """The WAL left its queues: its reader need not be kept."""
        self.readers.forget(loc.path)
