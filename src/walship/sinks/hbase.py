"""Apply filtered edits to a peer HBase cluster through its Thrift1 servers (sink ``thrift1``).

* Servers come from the peer's ``walship.sink.thrift``; the transport, protocol and TLS they
  speak are :mod:`walship.thrift.conn`'s, failover and backoff
  :mod:`walship.thrift.pool`'s.
* Cells keep their timestamps: Thrift1 takes one timestamp per call, so edits are grouped by
  (table, cluster ids, timestamp) and each group is ``mutateRowsTs`` calls of up to 1,000
  rows; a large batch's rows are spread over several connections (:mod:`walship.sinks.pooled`),
  each row's calls in order on one, each call built while the one before is at the peer.
  Visibility in HBase depends on timestamps, not on the order of calls, so the regrouping
  changes nothing; within a group the order of the WAL is kept (the last put of a cell wins, as
  on HBase).
* Every call carries ``_cs.id`` = the edit's cluster ids plus the source's, so the peer writes
  them into its own WAL and the edit never comes back (no loops).
* Put, DeleteColumn and DeleteFamily are exact over Thrift1. A single-version Delete and a
  DeleteFamilyVersion cannot be expressed: ``walship.incompatible`` says what happens —
  ``fail`` (default), ``skip`` (counted) or ``deadletter`` (written durably, see
  :mod:`walship.sinks.deadletter`, before the batch counts as applied). Cell tags cannot be
  sent either; they are counted as dropped. The Thrift2 sink (:mod:`walship.sinks.hbase2`)
  expresses every edit exactly.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator, Sequence

from walship.clusterids import encode_cluster_ids
from walship.errors import IncompatibleEditError
from walship.sinks.base import (
    INCOMPATIBLE_KEY,
    SINK_THRIFT_KEY,
    ApplyStats,
    FilteredEntry,
    Sink,
    SinkContext,
    thrift_servers,
)
from walship.sinks.compiled import FASTPATH as _fastpath
from walship.sinks.deadletter import DeadLetter, DeadLetterStore
from walship.sinks.pooled import PooledSink
from walship.sinks.streams import PeerStreams, StreamCall
from walship.thrift.conn1 import THRIFT1_REFUSALS, open_connection
from walship.thrift.encoded import encode_mutate_rows_ts
from walship.wal.model import Cell, CellType

__all__ = ["ThriftSink"]

log = logging.getLogger(__name__)

#: Peer configuration key naming the peer's Thrift servers: ``host:port[,host:port...]``.
SINK_KEY_HINT = f"{SINK_THRIFT_KEY}=host:port[,host:port...] configuration"
_INCOMPATIBLE = (int(CellType.Delete), int(CellType.DeleteFamilyVersion))
#: a batch's cells by (table, cluster ids, timestamp), then row
_Groups = dict[tuple[bytes, tuple[uuid.UUID, ...], int], dict[bytes, list[Cell]]]
#: rows per mutateRowsTs call: small enough that building the next call overlaps this one
_ROWS_PER_CALL = 1000


class ThriftSink(PooledSink, Sink):
    """Applies batches of filtered entries to one peer.

    :param retries: rounds over all servers before giving up.
    """

    service = "Thrift"
    servers_key = SINK_THRIFT_KEY
    refusals = THRIFT1_REFUSALS
    servers_of = staticmethod(thrift_servers)
    opener = staticmethod(open_connection)

    def configure(self, context: SinkContext) -> None:
        # replaying dead letters: every cell exactly, or fail; never skip nor dead-letter again
        self.mode = "fail" if context.replaying else self.peer.configuration.get(INCOMPATIBLE_KEY, "fail")
        self.deadletters = DeadLetterStore.for_peer(self.peer, context.wal_root)

    # -- applying --------------------------------------------------------------------------------

    def apply(self, entries: Sequence[FilteredEntry], wal: str) -> ApplyStats:
        """Apply entries in order (grouped for Thrift1 as described above).

        :raises IncompatibleEditError: an inexpressible cell under ``walship.incompatible=fail``
            (checked before anything of the batch is applied).
        :raises SinkError: the peer refused the edits (e.g. an unknown table).
        :raises SinkUnavailableError: no server answered.
        """
        stats = ApplyStats()
        groups, letters, applied = self.group(entries, wal, stats)
        # durable before the batch counts as applied (and so before the position moves)
        written = self.deadletters.write(wal, letters)
        streams = self.streams.streams_for(applied)
        self.streams.send_calls(stats, self._calls(groups, streams), streams, cells=applied)
        if stats.incompatible_skipped or stats.deadlettered:
            log.warning(
                "peer %s: %s: %d incompatible cells skipped, %d dead-lettered to %s",
                self.peer.peer_id,
                wal,
                stats.incompatible_skipped,
                stats.deadlettered,
                written or "-",
            )
        return stats

    def group(
        self, entries: Sequence[FilteredEntry], wal: str, stats: ApplyStats
    ) -> tuple[_Groups, list[DeadLetter], int]:
        """The entries' cells by (table, cluster ids, timestamp), then row, in WAL order (compiled
        up to an entry with a cell Thrift1 cannot carry, which takes the Python way), the dead
        letters of the batch and the number of cells grouped; ``stats`` counts the cells, tags,
        skipped and dead-lettered cells and entries passed over.

        :raises IncompatibleEditError: the first inexpressible cell under ``walship.incompatible=fail``.
        """
        groups: _Groups = {}
        letters: list[DeadLetter] = []
        applied = tags = 0
        group_rows = _fastpath.group_rows if _fastpath is not None else None
        at, n = 0, len(entries)
        while at < n:
            if group_rows is not None:  # compiled, up to an entry with a cell Thrift1 cannot carry
                at, cells, with_tags = group_rows(entries, at, groups)
                applied += cells
                tags += with_tags
                if at >= n:
                    break
            fe = entries[at]
            at += 1
            table, cluster_ids = fe.entry.key.table, fe.cluster_ids
            before = applied
            for i, cell in enumerate(fe.cells):
                if cell.type in _INCOMPATIBLE:
                    if self.mode == "fail":  # nothing of the batch was sent yet
                        raise IncompatibleEditError(
                            f"{wal} at byte offset {fe.entry.offset}: a {CellType(cell.type).name} cell of table "
                            f"{table.decode(errors='replace')} cannot be applied over Thrift1 "
                            f"(peer {self.peer.peer_id}, {INCOMPATIBLE_KEY}=fail; set skip or deadletter to go on)"
                        )
                    if self.mode == "deadletter":
                        reason = f"Thrift1 cannot express a {CellType(cell.type).name} cell"
                        letters.append(DeadLetter.of(self.peer.peer_id, wal, fe, i, reason))
                        stats.deadlettered += 1
                    else:
                        stats.incompatible_skipped += 1
                    continue
                if cell.tags:
                    tags += 1
                group = (table, cluster_ids, cell.timestamp)
                rows = groups.get(group)
                if rows is None:
                    rows = groups[group] = {}
                row = rows.get(cell.row)
                if row is None:
                    rows[cell.row] = [cell]
                else:
                    row.append(cell)
                applied += 1
            if applied == before and fe.cells:  # every cell skipped or dead-lettered: not shipped
                stats.passed_over += 1
        stats.cells += applied
        stats.tags_dropped += tags
        return groups, letters, applied

    def _calls(self, groups: _Groups, streams: int) -> Iterator[StreamCall]:
        """Each group's rows as ``mutateRowsTs`` calls of up to :data:`_ROWS_PER_CALL` rows, a
        row's cells in its stream's calls; the streams' calls alternate."""
        protocol = self.options.protocol
        for (table, cluster_ids, ts), rows in groups.items():
            attributes = {b"_cs.id": encode_cluster_ids(cluster_ids)}
            what = f"edits to table {table.decode(errors='replace')}"
            parts: list[list[tuple[bytes, list[Cell]]]] = [[] for _ in range(streams)]
            for item in rows.items():
                parts[PeerStreams.stream_of(item[0], streams)].append(item)
            for start in range(0, max(len(part) for part in parts), _ROWS_PER_CALL):
                for i, part in enumerate(parts):
                    if start < len(part):
                        chunk = part[start : start + _ROWS_PER_CALL]
                        yield StreamCall(i, encode_mutate_rows_ts(protocol, table, chunk, ts, attributes), what)
