"""Sink ``hbase`` (walship.sinks.regionservers) against real HBase 2.6: a batch reaches every
region of a table spread over three region servers, in WAL order; a region that moved between
batches is looked up again; a family the table lacks fails the batch by name; a peer without
hbase:meta in its ZooKeeper (the minicluster) is named, not guessed at."""

from __future__ import annotations

import uuid

import pytest
from real_hbase import cluster, create_table, unique
from replication_helpers import Cluster

from walship.errors import InvalidPeerConfigError, SinkError, SinkUnavailableError
from walship.peer import PeerConfig
from walship.sinks import regionservers
from walship.sinks.base import FilteredEntry, SinkContext
from walship.sinks.regionservers import STREAMS_KEY, RegionServerSink, row_mutations
from walship.sinks.registry import create_sink, validate_sink_config
from walship.wal import Cell, CellType, WalEntry, WalKey
from walship_testing.harness import HBaseProcess
from walship_testing.minicluster.process import MiniClusterProcess

pytestmark = pytest.mark.integration

ORIGIN = (uuid.UUID(int=21),)


def entry(table: str, seq: int, *cells: Cell) -> FilteredEntry:
    key = WalKey(b"0" * 32, table.encode(), seq, 1_000)
    return FilteredEntry(WalEntry(key, cells, 0, 40 * len(cells)), cells, ORIGIN)


def put(row: bytes, qualifier: bytes, ts: int, value: bytes) -> Cell:
    return Cell(row, b"r", qualifier, ts, int(CellType.Put), value)


def peer_of(hb: HBaseProcess) -> PeerConfig:
    return PeerConfig("1", hb.cluster_key, configuration={"walship.sink.protocol": "hbase"})


def test_row_mutations_are_hbases_replication_sinks() -> None:
    cells = (
        put(b"a", b"q", 1, b"1"),
        put(b"a", b"p", 1, b"2"),
        Cell(b"a", b"r", b"q", 1, int(CellType.Delete)),
        Cell(b"a", b"r", b"", 1, int(CellType.DeleteFamily)),
        put(b"a", b"q", 2, b"3"),
        put(b"b", b"q", 1, b"4"),
    )
    got = [(row, delete, len(run)) for row, delete, run in row_mutations(entry("t", 1, *cells))]
    assert got == [(b"a", False, 2), (b"a", True, 2), (b"a", False, 1), (b"b", False, 1)]


def test_a_batch_reaches_every_region_in_wal_order(real_hbase: tuple[HBaseProcess, HBaseProcess]) -> None:
    a, _ = real_hbase
    table = unique("hsink")
    create_table(a, table, splits=[b"g", b"p"])
    assert len({r["server"] for r in a.call("regions", table=table)}) > 1  # several servers, a thread each
    rows = [b"a1", b"h1", b"q1", b"a2", b"z9"]
    batch = [entry(table, i + 1, put(row, b"q", 5, b"first")) for i, row in enumerate(rows)]
    # the same cell again at the same timestamp: the later write is the one HBase keeps
    batch += [entry(table, 10 + i, put(row, b"q", 5, b"second")) for i, row in enumerate(rows)]
    batch.append(entry(table, 20, Cell(b"h1", b"r", b"", 9, int(CellType.DeleteFamily))))
    sink = create_sink(peer_of(a), SinkContext(wal_root=""))
    assert isinstance(sink, RegionServerSink)
    try:
        stats = sink.apply(batch, "a batch")
    finally:
        sink.close()
    assert stats.cells == 11 and stats.retries == 0 and stats.calls >= 3
    t = cluster(a, table).table()
    assert dict(t.scan()) == {row: {b"r:q": b"second"} for row in rows if row != b"h1"}


def test_rows_spread_over_two_streams_keep_their_order(real_hbase: tuple[HBaseProcess, HBaseProcess]) -> None:
    """With two connections to the server, each row's mutations still arrive in WAL order: the
    later of two puts of one cell at one timestamp is the one kept, for every row."""
    a, _ = real_hbase
    table = unique("hstreams")
    create_table(a, table)
    peer = PeerConfig("1", a.cluster_key, configuration={"walship.sink.protocol": "hbase", STREAMS_KEY: "2"})
    rows = [b"row%03d" % i for i in range(200)]
    batch = [entry(table, 1, *(put(row, b"q", 5, b"first") for row in rows))]
    batch += [entry(table, 2, *(put(row, b"q", 5, b"second") for row in rows))]
    sink = create_sink(peer, SinkContext(wal_root=""))
    try:
        stats = sink.apply(batch, "a batch")
    finally:
        sink.close()
    assert stats.calls >= 2  # both streams carried calls
    assert dict(cluster(a, table).table().scan()) == {row: {b"r:q": b"second"} for row in rows}
    for bad in ("0", "17", "two"):
        with pytest.raises(InvalidPeerConfigError, match=f"{STREAMS_KEY} must be a whole number from 1 to 16"):
            validate_sink_config(
                PeerConfig("1", a.cluster_key, configuration={"walship.sink.protocol": "hbase", STREAMS_KEY: bad})
            )


@pytest.mark.parametrize(("call_bytes", "calls"), [(4 << 20, 3), (40 * 1000, 14)])
def test_a_one_region_batch_goes_in_calls_cut_at_the_limits_in_wal_order(
    real_hbase: tuple[HBaseProcess, HBaseProcess], monkeypatch: pytest.MonkeyPatch, call_bytes: int, calls: int
) -> None:
    """Entries of a one-region table go whole into calls, cut at 5,000 mutations or at the
    call's bytes of WAL (a mutation here stands for 40), across entries: every row arrives,
    and of two puts of one cell at one timestamp the later is kept."""
    a, _ = real_hbase
    table = unique("hruns")
    create_table(a, table)
    monkeypatch.setattr(regionservers, "CALL_BYTES", call_bytes)
    rows = [b"row%05d" % i for i in range(7000)]
    batch = [entry(table, 1, *(put(row, b"q", 5, b"first") for row in rows))]
    batch += [entry(table, 2, *(put(row, b"q", 5, b"second") for row in rows[:3000]))]
    batch += [entry(table, 3 + i, put(row, b"q", 5, b"second")) for i, row in enumerate(rows[3000:])]
    sink = create_sink(peer_of(a), SinkContext(wal_root=""))
    try:
        stats = sink.apply(batch, "a batch")
    finally:
        sink.close()
    assert (stats.cells, stats.calls, stats.retries) == (14000, calls, 0)
    assert dict(cluster(a, table).table().scan()) == {row: {b"r:q": b"second"} for row in rows}


def test_a_region_that_moved_is_looked_up_again(real_hbase: tuple[HBaseProcess, HBaseProcess]) -> None:
    a, _ = real_hbase
    table = unique("hmove")
    create_table(a, table)
    sink = create_sink(peer_of(a), SinkContext(wal_root=""))
    try:
        assert sink.apply([entry(table, 1, put(b"k", b"q", 1, b"before"))], "one").retries == 0
        (region,) = a.call("regions", table=table)
        target = next(s for s in a.servers() if s != region["server"])
        a.call("move_region", region=region["region"], server=target)
        stats = sink.apply([entry(table, 2, put(b"k", b"q", 2, b"after"))], "two")
    finally:
        sink.close()
    assert stats.retries >= 1 and stats.last_backoff is not None
    assert cluster(a, table).table().row(b"k") == {b"r:q": b"after"}


def test_a_region_that_split_is_looked_up_again(real_hbase: tuple[HBaseProcess, HBaseProcess]) -> None:
    """The sink's regions were read before the split: its calls to the parent fail, and the
    daughters, found in hbase:meta, take the rows on each side of the split key."""
    a, _ = real_hbase
    table = unique("hsplit")
    create_table(a, table)
    sink = create_sink(peer_of(a), SinkContext(wal_root=""))
    try:
        sink.apply([entry(table, 1, put(b"a", b"q", 1, b"1"), put(b"z", b"q", 1, b"1"))], "one")
        (region,) = a.call("regions", table=table)
        a.call("split_region", region=region["region"], split_key=b"m".hex())
        stats = sink.apply([entry(table, 2, put(b"a", b"q", 2, b"2"), put(b"z", b"q", 2, b"2"))], "two")
    finally:
        sink.close()
    assert [r["start"] for r in a.call("regions", table=table)] == ["", b"m".hex()]
    assert stats.retries >= 1
    assert dict(cluster(a, table).table().scan()) == {b"a": {b"r:q": b"2"}, b"z": {b"r:q": b"2"}}


def test_a_family_the_table_lacks_fails_the_batch_by_name(real_hbase: tuple[HBaseProcess, HBaseProcess]) -> None:
    a, _ = real_hbase
    table = unique("hfam")
    create_table(a, table)
    sink = create_sink(peer_of(a), SinkContext(wal_root=""))
    try:
        with pytest.raises(SinkError, match=rf"table {table} row b'k': NoSuchColumnFamilyException"):
            sink.apply([entry(table, 1, Cell(b"k", b"nosuch", b"q", 1, int(CellType.Put), b"v"))], "one")
    finally:
        sink.close()


def test_a_peer_without_hbase_meta_in_zookeeper_is_named(minicluster: MiniClusterProcess, zk_hosts: str) -> None:
    key = Cluster(minicluster, zk_hosts).cluster_key
    peer = PeerConfig("1", key, configuration={"walship.sink.protocol": "hbase"})
    sink = create_sink(peer, SinkContext(wal_root=""))
    try:
        with pytest.raises(SinkUnavailableError, match="no hbase:meta location at .*/meta-region-server") as refused:
            sink.apply([entry("t", 1, put(b"k", b"q", 1, b"v"))], "one")
        assert "walship.sink.protocol=thrift2" in str(refused.value)
    finally:
        sink.close()
