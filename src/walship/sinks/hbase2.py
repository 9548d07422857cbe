"""Apply filtered edits to a peer HBase cluster through its Thrift2 servers (sink ``thrift2``).

HBase's second Thrift service (``THBaseService``) expresses every edit a WAL holds, so this
sink applies each one exactly as written:

* Servers come from the peer's ``walship.sink.thrift2`` (``host:port[,...]``); transport,
  protocol and TLS are the ``walship.sink.thrift.*`` keys, failover and backoff
  :class:`~walship.thrift.pool.ServerPool`'s.
* Every cell keeps its own timestamp (``TColumnValue.timestamp``, ``TColumn.timestamp``).
* Deletes keep their type: ``Delete`` -> ``DELETE_COLUMN`` (one version), ``DeleteColumn`` ->
  ``DELETE_COLUMNS``, ``DeleteFamily`` -> ``DELETE_FAMILY``, ``DeleteFamilyVersion`` ->
  ``DELETE_FAMILY_VERSION``; ``walship.incompatible`` never applies.
* Mutations go in WAL order: consecutive puts of one table and origin are ``putMultiple``
  calls, consecutive deletes ``deleteMultiple`` calls (of up to 1,000 mutations or about 2 MiB
  each); a WAL entry's cells of one row are one ``TPut`` (and one ``TDelete`` per delete type).
  A large batch's rows are spread over several connections (:mod:`walship.sinks.pooled`):
  on each, its rows' calls go one at a time, in order, each built while the one before is at
  the peer.
* Every mutation carries ``_cs.id`` = the edit's cluster ids plus the source's, so the peer
  writes them into its own WAL and the edit never comes back (no loops).
* Cell tags are counted as dropped (HBase's Thrift2 server ignores them).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Generator, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from walship.clusterids import encode_cluster_ids
from walship.sinks.base import SINK_THRIFT2_KEY, ApplyStats, FilteredEntry, Sink, SinkContext, thrift2_servers
from walship.sinks.compiled import FASTPATH as _fastpath
from walship.sinks.pooled import PooledSink
from walship.sinks.streams import PeerStreams, StreamCall
from walship.thrift.conn import THRIFT2_REFUSALS, open_thrift2
from walship.thrift.encoded import encode_call, encode_put_multiple
from walship.thrift.hbase2 import hbase2
from walship.wal.model import Cell, CellType

__all__ = ["Thrift2Sink", "delete_column", "joins"]

log = logging.getLogger(__name__)

#: A putMultiple / deleteMultiple call holds at most this many mutations, or about this many
#: bytes of cells: small enough that building the next call overlaps this one at the server.
MUTATIONS_PER_CALL = 1000
CALL_BYTES = 2 << 20
_DELETE_TYPES = {
    int(CellType.Delete): hbase2.TDeleteType.DELETE_COLUMN,
    int(CellType.DeleteColumn): hbase2.TDeleteType.DELETE_COLUMNS,
    int(CellType.DeleteFamily): hbase2.TDeleteType.DELETE_FAMILY,
    int(CellType.DeleteFamilyVersion): hbase2.TDeleteType.DELETE_FAMILY_VERSION,
}
_DELETE_FAMILY = hbase2.TDeleteType.DELETE_FAMILY
_WITH_QUALIFIER = (int(CellType.Delete), int(CellType.DeleteColumn))
#: A call of puts or of deletes: what it holds, its THBaseService call and its list argument.
_APIS = {False: ("puts", "putMultiple", "tputs"), True: ("deletes", "deleteMultiple", "tdeletes")}


@dataclass
class _Call:
    """Consecutive mutations of one kind for one table and origin, up to one call's worth:
    puts as ``(row, cells)`` (encoded straight from the cells), deletes as ``TDelete`` s."""

    table: bytes
    deletes: bool
    attributes: dict[bytes, bytes]
    #: the stream (connection) the call goes over
    stream: int = 0
    mutations: list[Any] = field(default_factory=list)
    size: float = 0

    def full(self) -> bool:
        return len(self.mutations) >= MUTATIONS_PER_CALL or self.size >= CALL_BYTES


def _compiled_puts(
    put_rows: Any,
    entries: Sequence[FilteredEntry],
    i: int,
    open_calls: list[_Call | None],
    table: bytes,
    ids: tuple[uuid.UUID, ...],
    attributes: dict[bytes, bytes],
    stats: ApplyStats,
) -> Generator[_Call, None, int]:
    """:meth:`Thrift2Sink.calls`' way with entries of puts only, over one stream, compiled
    (:func:`walship.sinks._fastpath.put_rows`, the same rows and sizes): from ``entries[i]``,
    while they are of puts only, of ``table`` and from ``ids``; yields each call it fills.
    Returns the index of the first entry it did not take (``i``: not even that one)."""
    call = open_calls[0]
    if call is None:
        call = open_calls[0] = _Call(table, False, attributes)
    ci = 0
    while True:
        i, ci, call.size, cells, tags, full = put_rows(
            entries, i, ci, table, ids, call.mutations, call.size, MUTATIONS_PER_CALL, CALL_BYTES
        )
        stats.cells += cells
        stats.tags_dropped += tags
        if not full:
            return i
        yield call
        call = open_calls[0] = _Call(table, False, attributes)


def joins(tdelete: Any, delete_type: int, column: Any) -> bool:
    """Whether a marker may go into ``tdelete`` (of the same row): one of the same type, except a
    second ``DELETE_FAMILY`` of a family the ``TDelete`` holds, since HBase's
    ``Delete.addFamily`` drops what the Delete held of that family, keeping only the last."""
    if tdelete.deleteType != delete_type:
        return False
    return delete_type != _DELETE_FAMILY or all(c.family != column.family for c in tdelete.columns)


def delete_column(cell: Cell) -> tuple[int, Any]:
    """A delete marker as Thrift2 says it (the sink's mapping, shared with ``walship copy``):
    its ``TDeleteType`` and its ``TColumn`` (the family, the qualifier of a column's delete,
    the marker's own timestamp).

    :raises KeyError: ``cell`` is a put.
    """
    column = hbase2.TColumn(
        family=cell.family,
        qualifier=cell.qualifier if cell.type in _WITH_QUALIFIER else None,
        timestamp=cell.timestamp,
    )
    return _DELETE_TYPES[cell.type], column


def _flush(open_calls: list[_Call | None]) -> Iterator[_Call]:
    """Every stream's open call that holds something; the streams are left without one."""
    for i, call in enumerate(open_calls):
        if call is not None and call.mutations:
            yield call
        open_calls[i] = None


class Thrift2Sink(PooledSink, Sink):
    """Applies batches of filtered entries to one peer over THBaseService.

    :param retries: rounds over all servers before giving up.
    """

    service = "Thrift2"
    servers_key = SINK_THRIFT2_KEY
    refusals = THRIFT2_REFUSALS
    servers_of = staticmethod(thrift2_servers)
    opener = staticmethod(open_thrift2)

    def configure(self, context: SinkContext) -> None:
        self.protocol = self.options.protocol

    @staticmethod
    def calls(entries: Sequence[FilteredEntry], stats: ApplyStats, streams: int = 1) -> Iterator[_Call]:
        """The batch as calls, in WAL order within each of ``streams`` streams (see the
        module's description; a row's mutations are in the calls of its stream,
        :meth:`~walship.sinks.streams.PeerStreams.stream_of`), each yielded once it is complete:
        nothing is added to a call after it was yielded. When the kind of mutation (puts or
        deletes), the table or the origin changes, every stream's open call is yielded first.
        An entry of puts only (most are) takes the short way: its cells, row by row, as they
        are."""
        stream_of = PeerStreams.stream_of
        open_calls: list[_Call | None] = [None] * streams
        key: tuple[bytes, tuple[uuid.UUID, ...], bool] | None = None
        attributes: dict[bytes, bytes] = {}
        put = CellType.Put
        fast = _fastpath.put_rows if _fastpath is not None and streams == 1 else None
        at, n = 0, len(entries)
        while at < n:
            fe = entries[at]
            at += 1
            cells = fe.cells
            if not cells:
                continue
            entry = fe.entry
            table = entry.key.table
            ids = fe.cluster_ids
            if fast is not None and key == (table, ids, False):
                # the compiled way for this entry and the puts of this table and origin after it
                this = at - 1
                at = yield from _compiled_puts(fast, entries, this, open_calls, table, ids, attributes, stats)
                if at > this:
                    continue
                at += 1  # not of puts only: the way below
            if key is None or key[0] != table or key[1] != ids:
                attributes = {b"_cs.id": encode_cluster_ids(ids)}
            stats.cells += len(cells)
            stats.tags_dropped += sum(1 for cell in cells if cell.tags)
            if all(cell.type == put for cell in cells):
                if key != (table, ids, False):
                    key = (table, ids, False)
                    yield from _flush(open_calls)
                # a row's share of the call's bytes: its cells' share of the entry, as the WAL holds it
                unit = (entry.end_offset - entry.offset) / len(cells)
                row: bytes | None = None
                group: list[Any] = []
                call: _Call | None = None
                for cell in cells:
                    if cell.row != row:
                        if call is not None:
                            call.size += unit * len(group)
                        row, group = cell.row, []
                        i = stream_of(row, streams)
                        call = open_calls[i]
                        if call is None or call.full():
                            if call is not None:
                                yield call
                            call = open_calls[i] = _Call(table, False, attributes, stream=i)
                        call.mutations.append((row, group))
                    group.append(cell)
                if call is not None:
                    call.size += unit * len(group)
                continue
            last: Any = None  # the mutation of this entry that the next cell may join
            for cell in cells:
                deletes = cell.type != put
                if key != (table, ids, deletes):
                    key = (table, ids, deletes)
                    yield from _flush(open_calls)
                    last = None
                i = stream_of(cell.row, streams)
                call = open_calls[i]
                if call is None:
                    call = open_calls[i] = _Call(table, deletes, attributes, stream=i)
                call.size += len(cell.row) + len(cell.family) + len(cell.qualifier) + len(cell.value) + 24
                if not deletes:
                    if last is not None and last[0] == cell.row:
                        last[1].append(cell)
                    else:
                        if call.full():
                            yield call
                            call = open_calls[i] = _Call(table, deletes, attributes, stream=i)
                        last = (cell.row, [cell])
                        call.mutations.append(last)
                else:
                    delete_type, column = delete_column(cell)
                    if last is not None and last.row == cell.row and joins(last, delete_type, column):
                        last.columns.append(column)
                    else:
                        if call.full():
                            yield call
                            call = open_calls[i] = _Call(table, deletes, attributes, stream=i)
                        last = hbase2.TDelete(
                            row=cell.row, columns=[column], deleteType=delete_type, attributes=attributes
                        )
                        call.mutations.append(last)
        yield from _flush(open_calls)

    def apply(self, entries: Sequence[FilteredEntry], wal: str) -> ApplyStats:
        """Apply entries exactly, in WAL order; each call is built while the one before is at
        the peer (:mod:`walship.sinks.inorder`).

        :raises SinkError: the peer refused the edits (e.g. an unknown table or family).
        :raises SinkUnavailableError: no server answered.
        """
        stats = ApplyStats()
        cells = sum(len(fe.cells) for fe in entries)
        streams = self.streams.streams_for(cells)
        self.streams.send_calls(stats, self._encoded(entries, stats, streams, wal), streams, cells=cells)
        return stats

    def _encoded(
        self, entries: Sequence[FilteredEntry], stats: ApplyStats, streams: int, wal: str
    ) -> Iterator[StreamCall]:
        for call in self.calls(entries, stats, streams):
            kind, api, argument = _APIS[call.deletes]
            if call.deletes:
                args = {"table": call.table, argument: call.mutations}
                encoded = encode_call(hbase2.THBaseService, self.protocol, api, **args)
            else:
                encoded = encode_put_multiple(self.protocol, call.table, call.mutations, call.attributes)
            yield StreamCall(
                call.stream, encoded, f"{kind} to table {call.table.decode(errors='replace')} (from {wal})"
            )
