"""Two family deletes of one family in one WAL entry reach real HBase 2.6 as the source wrote
them: HBase's ``Delete.addFamily`` drops what a Delete held of that family, so the Thrift2 sink
(and ``walship copy``) never put both into one ``TDelete``; otherwise the peer would show a cell
the newer marker hides on the source."""

from __future__ import annotations

import uuid

import pytest
from real_hbase import table_on_both

from walship.peer import PeerConfig
from walship.sinks.base import ApplyStats, FilteredEntry, SinkContext
from walship.sinks.hbase2 import Thrift2Sink
from walship.sinks.registry import create_sink
from walship.wal import Cell, CellType, WalEntry, WalKey
from walship_testing.harness import HBaseProcess

pytestmark = pytest.mark.integration

ORIGIN = (uuid.UUID(int=7),)


def entry(table: bytes, seq: int, *cells: Cell) -> FilteredEntry:
    key = WalKey(b"0" * 32, table, seq, 1_000)
    return FilteredEntry(WalEntry(key, cells, 0, 40 * len(cells)), cells, ORIGIN)


def test_two_family_deletes_of_one_family_in_one_entry_both_arrive(
    real_hbase: tuple[HBaseProcess, HBaseProcess],
) -> None:
    a, b = table_on_both(*real_hbase, "fdel")
    table = a.table_name
    put = Cell(b"x", b"r", b"q", 200, int(CellType.Put), b"v200")
    newer = Cell(b"x", b"r", b"", 300, int(CellType.DeleteFamily))
    older = Cell(b"x", b"r", b"", 100, int(CellType.DeleteFamily))
    batch = [entry(table, 1, put), entry(table, 2, newer, older)]
    calls = list(Thrift2Sink.calls(batch, ApplyStats()))
    family_deletes = [m for c in calls if c.deletes for m in c.mutations]
    assert [len(d.columns) for d in family_deletes] == [1, 1]  # one TDelete a marker of one family
    peer = PeerConfig(
        "1",
        b.cluster_key,
        configuration={"walship.sink.protocol": "thrift2", "walship.sink.thrift2": b.thrift2_address()},
    )
    sink = create_sink(peer, SinkContext(wal_root=""))
    try:
        sink.apply(batch, "a batch of two entries")
    finally:
        sink.close()
    # the source's view: the put at 200 is hidden by the family delete at 300
    assert b.table().row(b"x") == {}
    assert b.conn().table(table).cells(b"x", b"r:q", versions=5) == []
