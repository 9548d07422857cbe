"""Apply filtered edits straight into a peer HBase cluster's region servers (sink ``hbase``), as
HBase's own replication sink and client write: no Thrift server on the peer.

* The peer is its cluster key (``host[,host...]:port:/parent``): hbase:meta's region server comes
  from the peer's ZooKeeper, each table's regions from hbase:meta (:mod:`walship.rpc.meta`),
  kept until a region server says a region is not there.
* A WAL entry's cells become mutations as HBase's ``ReplicationSink`` makes them: consecutive
  cells of one row and one kind (puts, or deletes) are one mutation. Cells keep their own
  timestamp and type, so every kind of delete reaches the peer as written; tags are dropped
  (``KeyValueCodec``) and counted.
* Mutations go in WAL order, a ``Multi`` call per region (of up to 5,000 mutations or about 4 MiB),
  over ``walship.sink.hbase.streams`` connections to each region server (default 1), a thread
  each sending one call at a time: the first goes as soon as it is full, the next ones made and
  encoded while it is at the server (a batch one call takes is sent from the caller's thread).
  A row always goes by the same connection (its hash picks it), so its mutations are applied
  in WAL order; rows are independent of each other, as in HBase's own replication, which
  ships a batch's regions in parallel.
* A connection's calls stop at its first failure; the mutations of that call and of the calls
  after it go again, in order, once the regions are looked up again (a region that moved or
  split, or one not assigned yet) or after a backoff (a server that is busy), for up to
  ``RETRY_SECONDS``.
* Every mutation carries ``_cs.id`` = the edit's cluster ids plus the source's, so the peer
  writes them into its own WAL and the edit never comes back (no loops).
* Connections authenticate as walship's connections to a master do
  (:func:`walship.rpc.auth.default_auth`: Kerberos when the process logged in).

A mutation the peer refuses for what it is (a family the table does not have, say) fails the
batch with a :class:`~walship.errors.SinkError` naming the table, row and HBase's exception.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Iterable, Iterator, Sequence
from itertools import groupby, repeat

from walship.clusterids import encode_cluster_ids
from walship.errors import (
    InvalidPeerConfigError,
    MasterUnavailableError,
    MetaLocationMissingError,
    SinkError,
    SinkUnavailableError,
    TableNotFoundError,
    ZkError,
)
from walship.peer import PeerConfig, parse_cluster_key
from walship.rpc.auth import Authentication, default_auth
from walship.rpc.locator import BUSY, RELOCATE, RegionLocator
from walship.rpc.meta import RegionLocation
from walship.rpc.multi import RowMutation
from walship.sinks.base import SINK_PROTOCOL_KEY, ApplyStats, FilteredEntry, Sink, SinkContext
from walship.sinks.compiled import FASTPATH
from walship.sinks.regioncalls import IDS, MUTATION, SIZE, TABLE, Call, Outcome, Pending, Sender
from walship.wal.model import Cell, CellType
from walship.zk import ZnodeLayout

__all__ = ["RETRY_SECONDS", "STREAMS_KEY", "RegionServerSink", "cell_runs", "row_mutations"]

log = logging.getLogger(__name__)

#: The most mutations a call carries: HBase's ``hbase.rpc.rows.warning.threshold`` (a region
#: server logs a larger ``Multi`` as a "large batch operation", or refuses it where
#: ``hbase.rpc.rows.size.threshold.reject`` is set). Calls of 5,000 rather than 1,000 cost the
#: peer 13% less CPU a cell (benchmarks/vs_native.py --sink hbase).
ROWS_PER_CALL = 5000
#: The peer key of the calls in flight at each region server at once, each on a connection of
#: its own (a row always by the same one): 1 to 16, default 1 (on a peer short of cores, one
#: call at a time applies a backlog as fast as two: benchmarks/vs_native.py --sink hbase).
STREAMS_KEY = "walship.sink.hbase.streams"
MAX_STREAMS = 16
#: The bytes of WAL (or of a copy's rows) at which a call is cut sooner.
CALL_BYTES = 4 << 20
#: How long a batch keeps going again after regions moved or servers were busy.
RETRY_SECONDS = 120.0
_BACKOFF = (0.05, 2.0)
_PUT = int(CellType.Put)
#: Mutations given to the calls together: of one table, one ``_cs.id`` and one size (an
#: entry's, or a copy's rows').
Run = Sequence[Pending]
#: the (address, stream) of a region no server holds yet
_UNASSIGNED = (":0", 0)


def row_mutations(fe: FilteredEntry) -> list[RowMutation]:
    """The entry's cells as HBase's ``ReplicationSink`` groups them (:func:`cell_runs`)."""
    return cell_runs(fe.cells)


def cell_runs(cells: Sequence[Cell]) -> list[RowMutation]:
    """Consecutive cells of one row and of one kind (puts, or deletes) as one mutation, as
    HBase's ``ReplicationSink`` groups a WAL entry's cells (the compiled ``row_runs`` gives the
    same as plain tuples)."""
    if FASTPATH is not None:
        runs: list[RowMutation] = FASTPATH.row_runs(cells if type(cells) is tuple else tuple(cells))
        return runs
    return list(_runs(cells))


def _pending(fe: FilteredEntry, stats: ApplyStats) -> Run:
    """The entry's mutations as a :data:`Run` (none: no cells), counted in ``stats``."""
    cells = fe.cells
    if not cells:
        return []
    stats.cells += len(cells)
    stats.tags_dropped += _tagged(cells)
    mutations = row_mutations(fe)
    share = (fe.entry.end_offset - fe.entry.offset) / len(mutations)
    return list(zip(repeat(fe.entry.key.table), mutations, repeat(encode_cluster_ids(fe.cluster_ids)), repeat(share)))


def _as_runs(pending: Sequence[Pending]) -> list[Run]:
    """``pending`` cut into :data:`Run` s, in order."""
    return [list(run) for _, run in groupby(pending, key=lambda p: (p[TABLE], p[IDS], p[SIZE]))]


def _tagged(cells: Sequence[Cell]) -> int:
    """How many of the cells carry tags (the peer gets them without)."""
    if FASTPATH is not None and type(cells) is tuple:
        count: int = FASTPATH.tagged(cells)
        return count
    return sum(1 for c in cells if c.tags)


def _runs(cells: Sequence[Cell]) -> Iterator[RowMutation]:
    start = 0
    for i in range(1, len(cells) + 1):
        if (
            i == len(cells)
            or cells[i].row != cells[start].row
            or (cells[i].type == _PUT) != (cells[start].type == _PUT)
        ):
            yield RowMutation(cells[start].row, cells[start].type != _PUT, cells[start:i])
            start = i


class RegionServerSink(Sink):
    """Sink ``hbase``: the peer's region servers, found through its ZooKeeper and hbase:meta."""

    def __init__(self, peer: PeerConfig, context: SinkContext, *, auth: Authentication | None = None) -> None:
        hosts, port, parent = parse_cluster_key(peer.cluster_key)
        self.peer = peer
        self._where = RegionLocator(
            ",".join(f"{h}:{port}" for h in hosts), ZnodeLayout(parent), auth or default_auth(), f"peer {peer.peer_id}"
        )
        self._streams = self.streams_of(peer)

    @staticmethod
    def streams_of(peer: PeerConfig) -> int:
        """The peer's ``walship.sink.hbase.streams``.

        :raises InvalidPeerConfigError: not a whole number from 1 to 16.
        """
        text = peer.configuration.get(STREAMS_KEY, "1").strip()
        if not text.isdigit() or not 1 <= int(text) <= MAX_STREAMS:
            raise InvalidPeerConfigError(
                f"peer {peer.peer_id}: {STREAMS_KEY} must be a whole number from 1 to {MAX_STREAMS}, got {text!r}"
            )
        return int(text)

    @classmethod
    def validate_config(cls, peer: PeerConfig) -> None:
        """:raises InvalidPeerConfigError: the cluster key or the streams setting does not parse."""
        parse_cluster_key(peer.cluster_key)
        cls.streams_of(peer)

    # -- where rows go ---------------------------------------------------------------------

    def _table(self, table: bytes) -> list[RegionLocation]:
        try:
            return self._where.regions(table)
        except TableNotFoundError as exc:
            raise SinkError(str(exc)) from None
        except ZkError as exc:  # the peer's ZooKeeper does not answer, refuses us, or holds something else
            raise SinkUnavailableError(f"peer {self.peer.peer_id}: ZooKeeper {self._where.zk_hosts}: {exc}") from None
        except MetaLocationMissingError as exc:
            raise SinkUnavailableError(
                f"{exc}; sink hbase writes into the peer's region servers: {SINK_PROTOCOL_KEY}=thrift2 "
                "(or thrift1) writes through its Thrift servers instead"
            ) from None
        except MasterUnavailableError as exc:
            raise SinkUnavailableError(str(exc)) from None

    def has_table(self, table: bytes) -> bool:
        """Whether the peer has ``table`` (regions of it in hbase:meta).

        :raises SinkUnavailableError: the peer's ZooKeeper or hbase:meta does not answer.
        """
        try:
            self._table(table)
        except SinkUnavailableError:
            raise
        except SinkError:
            return False
        return True

    # -- applying ---------------------------------------------------------------------------

    def apply(self, entries: Sequence[FilteredEntry], wal: str) -> ApplyStats:
        stats = ApplyStats()
        # made as the calls take them: the first call goes out before the batch's last row is made
        return self._write((run for fe in entries if (run := _pending(fe, stats))), wal, stats)

    def write(self, pending: Sequence[Pending], what: str, stats: ApplyStats | None = None) -> ApplyStats:
        """Apply ``pending`` (each row's mutations in the order given), going again after
        regions moved or servers were busy for up to ``RETRY_SECONDS``; ``what`` names them in
        messages (a WAL, a copy's split). ``walship copy`` writes its rows through this too.

        :raises SinkError: a mutation refused for what it is (names the table and row).
        :raises SinkUnavailableError: not all applied within ``RETRY_SECONDS``.
        """
        return self._write(_as_runs(pending), what, stats or ApplyStats())

    def _write(self, runs: Iterable[Run], what: str, stats: ApplyStats) -> ApplyStats:
        deadline = time.monotonic() + RETRY_SECONDS
        backoff = _BACKOFF[0]
        again, why = self._send(runs, stats)  # the first round takes them as they come
        while again:
            if time.monotonic() + backoff > deadline:
                raise SinkUnavailableError(
                    f"peer {self.peer.peer_id}: {len(again)} mutations of {what} not applied after "
                    f"{RETRY_SECONDS:g} s: {why}"
                )
            stats.retries += 1
            stats.last_backoff = (backoff, why)
            log.info("peer %s: %d mutations go again in %.2f s: %s", self.peer.peer_id, len(again), backoff, why)
            time.sleep(backoff)
            backoff = min(backoff * 2, _BACKOFF[1])
            again, why = self._send(_as_runs(again), stats)
        return stats

    def _calls(self, runs: Iterable[Run], seen: list[Pending]) -> Iterator[tuple[tuple[str, int], Call, bool]]:
        """The mutations as calls, each with its (server address, stream) and whether more
        follow, given as each is full (the rest at the end), so the first is sent while the
        others are made; each stream's in WAL order. A row always goes by the same stream of its
        server (its hash picks it), so its mutations stay in order; rows of other streams may be
        applied before or after it, as HBase's own sink applies rows of other regions. A run of
        a table that one stream of one region takes whole goes into calls a slice at a time.
        Each mutation taken is appended to ``seen`` (the order to send again in)."""
        open_calls: dict[tuple[bytes, int], Call] = {}  # (region, stream) -> the call taking its mutations
        streams = self._streams
        region_of = self._where.region_of
        known = b""
        only: RegionLocation | None = None  # the table's one region, when one stream takes it all
        call: Call | None = None
        for run in runs:
            first = run[0]
            table, ids = first[TABLE], first[IDS]
            if table != known:  # its regions read once, or an error naming the peer
                regions = self._table(table)
                only = regions[0] if len(regions) == 1 and (streams == 1 or not regions[0].host) else None
                known = table
            if only is not None:
                at, n, share = 0, len(run), first[SIZE]
                while at < n:
                    if call is None or call.region is not only:
                        call = open_calls.get((only.name, 0))
                        if call is None:
                            call = open_calls[only.name, 0] = Call(only, ids)
                    if len(call.items) >= ROWS_PER_CALL or call.size >= CALL_BYTES or call.cluster_ids != ids:
                        yield (only.address, 0), call, True
                        call = open_calls[only.name, 0] = Call(only, ids)
                    take = min(n - at, ROWS_PER_CALL - len(call.items))
                    if share > 0:
                        take = min(take, max(1, math.ceil((CALL_BYTES - call.size) / share)))
                    part = run if take == n else run[at : at + take]
                    call.items.extend(part)
                    seen.extend(part)
                    call.size += share * take
                    at += take
                continue
            for item in run:
                row = item[MUTATION][0]
                region = region_of(table, row)
                stream = hash(row) % streams if streams > 1 and region.host else 0
                call = open_calls.get((region.name, stream))
                if call is None:
                    call = open_calls[region.name, stream] = Call(region, ids, stream=stream)
                if len(call.items) >= ROWS_PER_CALL or call.size >= CALL_BYTES or call.cluster_ids != ids:
                    yield (region.address, stream), call, True
                    call = open_calls[region.name, stream] = Call(region, ids, stream=stream)
                call.items.append(item)
                seen.append(item)
                call.size += item[SIZE]
        last = len(open_calls) - 1
        for i, rest in enumerate(open_calls.values()):
            yield (rest.region.address, rest.stream), rest, i < last

    def _send(self, runs: Iterable[Run], stats: ApplyStats) -> tuple[list[Pending], str]:
        """Send the mutations; the ones to send again (in WAL order) and why."""
        outcomes: dict[tuple[str, int], Outcome] = {}
        senders: dict[tuple[str, int], Sender] = {}
        unassigned: list[Call] = []  # no server to send to yet: after a backoff, with the regions read again
        inline: bool | None = None  # one call in all (a tailer's small batches): sent from this thread
        seen: list[Pending] = []  # the mutations in the order given, as the calls took them
        try:
            for key, call, more in self._calls(runs, seen):
                if key == _UNASSIGNED:
                    unassigned.append(call)
                    continue
                if inline is None:
                    inline = not more
                sender = senders.get(key)
                if sender is None:
                    server = self._where.server(call.region.host, call.region.port, key[1])
                    sender = senders[key] = Sender(server, outcomes.setdefault(key, Outcome()), inline=inline)
                sender.put(call)
        finally:
            for sender in senders.values():
                sender.finish()
        if unassigned:
            outcomes[_UNASSIGNED] = Outcome(unassigned[0], error="a region is not assigned", unsent=unassigned[1:])
        again: list[Pending] = []
        reasons = []
        for (address, stream), outcome in outcomes.items():
            stats.calls += outcome.calls
            if outcome.failed is None:
                continue
            call = outcome.failed
            kinds = {f.short_class for f in outcome.failures}
            for f in outcome.failures:
                if f.short_class not in RELOCATE | BUSY and f.exception_class:
                    table, mutation, _, _ = call.items[f.index]
                    raise SinkError(
                        f"peer {self.peer.peer_id}: table {table.decode(errors='replace')} row "
                        f"{mutation[0]!r}: {f.short_class}: {f.message}"
                    )
            if outcome.error or kinds & RELOCATE or "" in kinds:
                for c in (call, *outcome.unsent):
                    self._where.forget(c.items[0][TABLE])
                if outcome.error:
                    self._where.drop_server(address, stream)
            reasons.append(f"{address}: {outcome.error or ', '.join(sorted(kinds))}")
            again += [item for c in (call, *outcome.unsent) for item in c.items]
        if not again:
            return [], ""
        order = {id(item): i for i, item in enumerate(seen)}
        again.sort(key=lambda item: order[id(item)])
        return again, "; ".join(reasons)

    def close(self) -> None:
        self._where.close()
