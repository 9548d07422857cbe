"""Where a copy's rows go: the peer's Thrift2 servers (``deleteMultiple`` then ``putMultiple``,
:func:`walship.copy.raw.write_rows`), or, for a peer of sink ``hbase``, its region servers,
through the sink's own calls (:meth:`walship.sinks.regionservers.RegionServerSink.write`).

Into the region servers, a row becomes two mutations as HBase's ``ReplicationSink`` makes them
of a WAL entry's cells: its delete markers (one ``Delete``, every cell with its own type and
timestamp), then its puts. Both carry the source's cluster id (``_cs.id``), so the peer writes
it into its own WAL and a peer that replicates back to the source never returns the copy.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Protocol

from walship.clusterids import encode_cluster_ids
from walship.copy.raw import write_rows
from walship.errors import SinkError, SinkUnavailableError, VerifyError, VerifyUnavailableError
from walship.rpc.multi import RowMutation
from walship.sinks.regioncalls import Pending
from walship.sinks.regionservers import RegionServerSink
from walship.verify import VerifyJob
from walship.verify.scan import Side
from walship.wal.model import Cell, CellType

__all__ = ["PeerWriter", "RegionServerWriter", "Thrift2Writer", "peer_writer"]

log = logging.getLogger(__name__)

_PUT = int(CellType.Put)


class PeerWriter(Protocol):
    """Writes a copy's rows into the peer, each cell with its own type and timestamp."""

    def write(self, table: str, rows: Sequence[tuple[bytes, Sequence[Cell]]]) -> None:
        """:raises VerifyError: the peer refused (names the table).
        :raises VerifyUnavailableError: the peer did not answer."""
        ...


class Thrift2Writer:
    """The peer's Thrift2 servers."""

    def __init__(self, side: Side) -> None:
        self.side = side

    def write(self, table: str, rows: Sequence[tuple[bytes, Sequence[Cell]]]) -> None:
        write_rows(self.side, table, rows)


class RegionServerWriter:
    """The peer's region servers, as sink ``hbase`` writes into them."""

    def __init__(self, sink: RegionServerSink, source_id: uuid.UUID, what: str) -> None:
        self.sink = sink
        self.what = what
        self._ids = encode_cluster_ids([source_id])

    def write(self, table: str, rows: Sequence[tuple[bytes, Sequence[Cell]]]) -> None:
        name, ids = table.encode(), self._ids
        pending: list[Pending] = []
        for row, cells in rows:
            puts = tuple(c for c in cells if c.type == _PUT)
            size = float(sum(len(c.qualifier) + len(c.value) + 24 for c in cells))
            if len(puts) != len(cells):
                pending.append((name, RowMutation(row, True, tuple(c for c in cells if c.type != _PUT)), ids, size))
            if puts:
                pending.append((name, RowMutation(row, False, puts), ids, size))
        try:
            self.sink.write(pending, self.what)
        except SinkUnavailableError as exc:
            raise VerifyUnavailableError(str(exc)) from None
        except SinkError as exc:
            raise VerifyError(f"{exc} (table {table})" if table not in str(exc) else str(exc)) from None


@contextmanager
def peer_writer(job: VerifyJob, what: str) -> Iterator[PeerWriter]:
    """The job's peer as a :class:`PeerWriter`: its region servers when the job has the peer's
    cluster key (a peer of sink ``hbase``), else its Thrift2 servers.

    :raises VerifyUnavailableError: no Thrift2 server of the peer answered.
    """
    if job.peer_cluster_key:
        sink = job.peer_region_servers()
        try:
            yield RegionServerWriter(sink, uuid.UUID(job.source_cluster_id), what)
        finally:
            sink.close()
        return
    with job.peer_side() as side:
        yield Thrift2Writer(side)
