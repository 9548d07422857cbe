"""Where a copy's rows go: the peer's Thrift2 servers (``deleteMultiple`` then ``putMultiple``,
:func:`walship.copy.raw.write_rows`), or, for a peer of sink ``hbase``, its region servers,
through the sink's own calls (:meth:`walship.sinks.regionservers.RegionServerSink.write`).

Into the region servers, a row's cells (in HBase's cell order, as the scan returns them) become
mutations as HBase's ``ReplicationSink`` makes them of a WAL entry's: each run of consecutive
cells of one kind (puts, or delete markers) is one, every cell with its own type and timestamp
(:func:`~walship.sinks.regionservers.cell_runs`). A marker sorts before every cell it masks (a
family's markers first; in a column, timestamps descending), so it is written first, even when
a copy stops halfway. Every mutation carries the source's cluster id (``_cs.id``), so the peer
writes it into its own WAL and a peer that replicates back to the source never returns the copy.
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
from walship.sinks.regioncalls import MUTATION, Pending
from walship.sinks.regionservers import RegionServerSink, cell_runs
from walship.verify import VerifyJob
from walship.verify.scan import Side
from walship.wal.model import Cell

__all__ = ["PeerWriter", "RegionServerWriter", "Thrift2Writer", "peer_writer"]

log = logging.getLogger(__name__)


class PeerWriter(Protocol):
    """Writes a copy's rows into the peer, each cell with its own type and timestamp."""

    def write(self, table: str, rows: Sequence[tuple[bytes, Sequence[Cell]]], size: int) -> int:
        """Write ``rows`` (about ``size`` bytes); the put cells among them.

        :raises VerifyError: the peer refused (names the table).
        :raises VerifyUnavailableError: the peer did not answer."""
        ...


class Thrift2Writer:
    """The peer's Thrift2 servers."""

    def __init__(self, side: Side) -> None:
        self.side = side

    def write(self, table: str, rows: Sequence[tuple[bytes, Sequence[Cell]]], size: int) -> int:
        return write_rows(self.side, table, rows)


class RegionServerWriter:
    """The peer's region servers, as sink ``hbase`` writes into them."""

    def __init__(self, sink: RegionServerSink, source_id: uuid.UUID, what: str) -> None:
        self.sink = sink
        self.what = what
        self._ids = encode_cluster_ids([source_id])

    def write(self, table: str, rows: Sequence[tuple[bytes, Sequence[Cell]]], size: int) -> int:
        name, ids = table.encode(), self._ids
        share = size / max(1, len(rows))
        pending: list[Pending] = [(name, m, ids, share) for _, cells in rows for m in cell_runs(cells)]
        try:
            self.sink.write(pending, self.what)
            return sum(len(p[MUTATION][2]) for p in pending if not p[MUTATION][1])
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
