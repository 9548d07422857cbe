"""The compiled entry filter (walship.replicate.batcher._batcher) and the Thrift sinks' rows
(walship.sinks._fastpath) give what the Python code gives, on the same entries: the same
filtered entries, the same calls (rows, cells, sizes, splits) and counts; and they decline what
they leave to Python. Both read walship's tuples by the layout they declare, and are used only
while it matches the tuples' fields."""

from __future__ import annotations

import functools
import random
import uuid
from collections.abc import Iterator
from pathlib import Path
from types import MappingProxyType
from typing import Any

import pytest

import walship.sinks.hbase as thrift1_module
import walship.sinks.hbase2 as hbase2_sink
from walship.errors import IncompatibleEditError
from walship.peer import PeerConfig
from walship.replicate.batcher import _batcher
from walship.replicate.batcher.filters import LIMITS, TALLY, EntryFilter, TableRule
from walship.sinks import _fastpath
from walship.sinks.base import INCOMPATIBLE_KEY, SINK_THRIFT_KEY, ApplyStats, FilteredEntry, SinkContext
from walship.sinks.hbase import ThriftSink
from walship.wal import Cell, CellType, WalEntry, WalKey, layout
from walship.wal.layout import WAL_TUPLES, mismatches
from walship.wal.model import METAFAMILY

SOURCE, PEER, OTHER = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
FAMILIES = (b"r", b"l", b"x", METAFAMILY)
TABLES = (b"t", b"u", b"hbase:meta", b"ns:v")
TYPES = (CellType.Put, CellType.Put, CellType.Put, CellType.Delete, CellType.DeleteColumn, CellType.DeleteFamily)


def random_entries(rng: random.Random, n: int, *, puts_share: float = 0.8) -> Iterator[WalEntry]:
    """Entries of several tables, scopes, origins, rows, families and cell types, some with tags."""
    offset = 100
    for seq in range(n):
        table = rng.choice(TABLES)
        scope_kind = rng.random()
        scopes: Any
        if scope_kind < 0.05:
            scopes = MappingProxyType({})
        elif scope_kind < 0.1:
            scopes = {}
        else:
            raw = {f: rng.choice((0, 1, 1, 1)) for f in FAMILIES[:3] if rng.random() < 0.9}
            scopes = MappingProxyType(raw) if rng.random() < 0.7 else raw
        ids = rng.choice(((), (), (), (OTHER,), (PEER,), (SOURCE,), (OTHER, SOURCE)))
        puts = rng.random() < puts_share
        cells = []
        rows = [b"row-%03d" % rng.randrange(50) for _ in range(rng.randint(1, 3))]
        for _ in range(rng.choice((0, 1, 3, 3, 3, 7)) if seq else 3):
            row = rng.choice(rows)
            kind = CellType.Put if puts else rng.choice(TYPES)
            tags = ((1, b"t"),) if rng.random() < 0.05 else ()
            family = rng.choice(FAMILIES[:3]) if rng.random() < 0.97 else METAFAMILY
            ts = 1000 + seq if rng.random() < 0.8 else 1000 + seq + rng.randrange(3)  # a few timestamps an entry
            cells.append(Cell(row, family, b"q%d" % rng.randrange(4), ts, int(kind), b"v" * rng.randrange(300), tags))
        size = rng.randrange(60, 4000)
        key = WalKey(b"region", table, seq + 1, 1000 + seq, cluster_ids=ids, scopes=scopes)
        if rng.random() < 0.7:  # mostly a row's cells together; now and then a row comes back
            cells.sort(key=lambda c: c.row)
        yield WalEntry(key, tuple(cells), offset, offset + size)
        offset += size


DECLINED = object()  # what the tests' fallback returns: the compiled filter left the entry to Python


def compiled_args(entry_filter: EntryFilter) -> tuple[Any, ...]:
    """The compiled filter's arguments before the entry, as the filter binds them, but with a
    fallback that says the entry was declined."""
    return (entry_filter._table_cache, entry_filter._own_ids, SOURCE, PEER, FilteredEntry, lambda _: DECLINED)


PEERS = [
    PeerConfig("1", "127.0.0.1:2181:/hbase-b"),
    PeerConfig("2", "127.0.0.1:2181:/hbase-b", replicate_all=False, table_cfs={"t": ["r"], "ns:v": []}),
    PeerConfig("3", "127.0.0.1:2181:/hbase-b", exclude_table_cfs={"u": ["l"], "ns:v": []}),
]


@pytest.mark.parametrize("peer", PEERS, ids=lambda p: p.peer_id)
@pytest.mark.parametrize("seed", range(4))
def test_the_compiled_filter_keeps_what_python_keeps(peer: PeerConfig, seed: int) -> None:
    entry_filter = EntryFilter(peer, SOURCE, PEER)
    assert isinstance(entry_filter.apply, functools.partial)  # the filter applies the compiled code
    compiled = 0
    for entry in random_entries(random.Random(seed), 3000):
        expected = entry_filter.apply_py(entry)  # also fills the table's rule, as apply does
        direct = _batcher.filter_entry(*compiled_args(entry_filter), entry)
        if direct is not DECLINED:
            compiled += 1
            assert direct == expected, entry
            assert direct is None or type(direct) is FilteredEntry
        assert entry_filter.apply(entry) == expected
    assert compiled == 3000  # every entry's table had its rule by then; both scope types are taken


def test_the_compiled_filter_keeps_the_entrys_own_cells_and_ids_where_it_can() -> None:
    entry_filter = EntryFilter(PEERS[0], SOURCE, PEER)
    cells = (Cell(b"a", b"r", b"q", 1, int(CellType.Put), b"v"), Cell(b"a", b"l", b"q", 1, int(CellType.Put), b"v"))
    kept_all = WalEntry(WalKey(b"region", b"t", 1, 1, scopes=MappingProxyType({b"r": 1, b"l": 1})), cells, 0, 10)
    entry_filter.apply_py(kept_all)
    fe = entry_filter.apply(kept_all)
    assert fe is not None and fe.cells is cells and fe.cluster_ids is entry_filter._own_ids
    came = WalEntry(WalKey(b"region", b"t", 1, 1, (OTHER, SOURCE), MappingProxyType({b"r": 1})), cells, 0, 10)
    fe = entry_filter.apply(came)
    assert fe is not None and fe.cells == cells[:1] and fe.cluster_ids is came.key.cluster_ids
    fe = entry_filter.apply(came._replace(key=came.key._replace(cluster_ids=(OTHER,))))
    assert fe is not None and fe.cluster_ids == (OTHER, SOURCE)


def test_the_compiled_filter_declines_a_table_without_its_rule_and_other_scope_types() -> None:
    entry_filter = EntryFilter(PEERS[0], SOURCE, PEER)
    cell = Cell(b"a", b"r", b"q", 1, int(CellType.Put), b"v")
    entry = WalEntry(WalKey(b"region", b"new", 1, 1, scopes={b"r": 1}), (cell,), 0, 10)
    args = compiled_args(entry_filter)
    assert _batcher.filter_entry(*args, entry) is DECLINED
    assert entry_filter.apply(entry) is not None and b"new" in entry_filter._table_cache  # Python decided, cached
    assert _batcher.filter_entry(*args, entry) == entry_filter.apply_py(entry)

    class Scopes(dict):  # type: ignore[type-arg]
        pass

    odd = entry._replace(key=entry.key._replace(scopes=Scopes({b"r": 1})))
    assert _batcher.filter_entry(*args, odd) is DECLINED
    assert entry_filter.apply(odd) == entry_filter.apply_py(odd) != None  # noqa: E711
    with pytest.raises(TypeError, match="filter_entry: an entry must be a tuple"):
        _batcher.filter_entry(*args, object())
    with pytest.raises(TypeError, match="filter_entry takes 7 arguments, not 6"):
        _batcher.filter_entry(*args)


def calls_of(entries: list[FilteredEntry], streams: int = 1) -> tuple[list[Any], ApplyStats]:
    stats = ApplyStats()
    calls = [
        (
            c.table,
            c.deletes,
            c.attributes,
            c.stream,
            [m if c.deletes else (m[0], list(m[1])) for m in c.mutations],
            c.size,
        )
        for c in hbase2_sink.Thrift2Sink.calls(entries, stats, streams)
    ]
    return calls, stats


@pytest.mark.parametrize(("mutations", "call_bytes"), [(1000, 2 << 20), (7, 2 << 20), (1000, 5000), (1, 1)])
@pytest.mark.parametrize("seed", range(3))
def test_compiled_put_rows_make_the_calls_python_makes(
    monkeypatch: pytest.MonkeyPatch, seed: int, mutations: int, call_bytes: int
) -> None:
    monkeypatch.setattr(hbase2_sink, "MUTATIONS_PER_CALL", mutations)
    monkeypatch.setattr(hbase2_sink, "CALL_BYTES", call_bytes)
    rng = random.Random(seed)
    own = (SOURCE,)
    # long runs of puts of table t from this cluster, broken now and then by deletes, another
    # table or origin, and empty entries
    entries = []
    for e in random_entries(rng, 4000, puts_share=0.97):
        table = b"t" if rng.random() < 0.9 else e.key.table
        origin = (OTHER,) if rng.random() < 0.03 else own
        entries.append(FilteredEntry(e._replace(key=e.key._replace(table=table)), e.cells, origin))
    compiled = calls_of(entries)
    monkeypatch.setattr(hbase2_sink, "_fastpath", None)
    python = calls_of(entries)
    assert compiled[1] == python[1]
    assert len(compiled[0]) == len(python[0]) > 1
    for got, want in zip(compiled[0], python[0], strict=True):
        assert got == want


def test_compiled_put_rows_stop_at_the_first_entry_they_do_not_take() -> None:
    put = Cell(b"a", b"r", b"q", 1, int(CellType.Put), b"v")
    tagged = put._replace(row=b"b", tags=((1, b"x"),))
    delete = put._replace(type=int(CellType.DeleteColumn))
    ids = (SOURCE,)
    key = WalKey(b"region", b"t", 1, 1)

    def fe(*cells: Cell, table: bytes = b"t", origin: tuple[uuid.UUID, ...] = ids) -> FilteredEntry:
        return FilteredEntry(WalEntry(key._replace(table=table), cells, 0, 30 * len(cells)), cells, origin)

    entries = [fe(put, tagged), fe(), fe(put), fe(put, delete), fe(put)]
    mutations: list[Any] = []
    i, ci, size, cells, tags, full = _fastpath.put_rows(entries, 0, 0, b"t", ids, mutations, 0.0, 1000, 1e9)
    assert (i, ci, cells, tags, full) == (3, 0, 3, 1, False) and size == 90.0
    assert [(row, list(group)) for row, group in mutations] == [(b"a", [put]), (b"b", [tagged]), (b"a", [put])]
    assert _fastpath.put_rows(entries, 4, 0, b"u", ids, [], 0.0, 1000, 1e9)[:2] == (4, 0)  # another table
    assert _fastpath.put_rows(entries, 4, 0, b"t", (OTHER,), [], 0.0, 1000, 1e9)[:2] == (4, 0)  # another origin
    # full before a row: where to go on, the cells counted once
    mutations = []
    i, ci, size, cells, tags, full = _fastpath.put_rows(entries, 0, 0, b"t", ids, mutations, 0.0, 1, 1e9)
    assert (i, ci, cells, full) == (0, 1, 2, True) and len(mutations) == 1
    i, ci, size, cells, tags, full = _fastpath.put_rows(entries, i, ci, b"t", ids, [], 0.0, 1, 1e9)
    assert (i, ci, cells, full) == (2, 0, 0, True)


def thrift1_sink(tmp_path: Path, mode: str) -> ThriftSink:
    """A Thrift1 sink that never connects (its grouping is all these tests use)."""
    config = {SINK_THRIFT_KEY: "127.0.0.1:9", INCOMPATIBLE_KEY: mode}
    sink = ThriftSink(PeerConfig("1", "127.0.0.1:2181:/hbase-b", configuration=config), SinkContext(str(tmp_path)))
    sink.configure(SinkContext(str(tmp_path)))
    return sink


def grouped(sink: ThriftSink, entries: list[FilteredEntry]) -> tuple[Any, ...]:
    stats = ApplyStats()
    groups, letters, applied = sink.group(entries, "wal.1", stats)
    # the groups, their rows and cells in the order they were made
    flat = [(key, list(rows.items())) for key, rows in groups.items()]
    return flat, [(d.wal, d.offset, d.cell_index) for d in letters], applied, stats


@pytest.mark.parametrize("mode", ["skip", "deadletter"])
@pytest.mark.parametrize("seed", range(3))
def test_compiled_thrift1_grouping_groups_what_python_groups(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, seed: int, mode: str
) -> None:
    rng = random.Random(seed)
    origins = ((SOURCE,), (OTHER, SOURCE))
    entries = [FilteredEntry(e, e.cells, rng.choice(origins)) for e in random_entries(rng, 3000, puts_share=0.9)]
    assert any(c.type in (CellType.Delete, CellType.DeleteFamilyVersion) for fe in entries for c in fe.cells)
    sink = thrift1_sink(tmp_path, mode)
    compiled = grouped(sink, entries)
    monkeypatch.setattr(thrift1_module, "_fastpath", None)
    python = grouped(sink, entries)
    assert compiled == python
    assert compiled[2] > 0 and len(compiled[0]) > 1


def test_compiled_thrift1_grouping_leaves_an_incompatible_cell_to_fail_as_python_does(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    put = Cell(b"a", b"r", b"q", 5, int(CellType.Put), b"v")
    delete = Cell(b"b", b"r", b"q", 6, int(CellType.Delete))
    key = WalKey(b"region", b"t", 1, 1)
    entries = [
        FilteredEntry(WalEntry(key, cells, offset, offset + 50), cells, (SOURCE,))
        for offset, cells in ((0, (put,)), (50, (put, delete)), (100, (delete,)))
    ]
    sink = thrift1_sink(tmp_path, "fail")
    with pytest.raises(IncompatibleEditError) as compiled:
        sink.group(entries, "wal.1", ApplyStats())
    monkeypatch.setattr(thrift1_module, "_fastpath", None)
    with pytest.raises(IncompatibleEditError) as python:
        sink.group(entries, "wal.1", ApplyStats())
    assert str(compiled.value) == str(python.value)
    assert "wal.1 at byte offset 50: a Delete cell of table t" in str(compiled.value)
    assert _fastpath.group_rows(entries, 0, {}) == (1, 1, 0)  # it stops at the entry with the Delete


def test_the_compiled_filter_reads_a_read_only_view_of_scopes_as_python_does() -> None:
    """Through the view's get(), as Python: a mapping that makes missing keys (a defaultdict)
    neither keeps a cell Python drops nor grows."""
    from collections import defaultdict

    entry_filter = EntryFilter(PEERS[0], SOURCE, PEER)
    raw: defaultdict[bytes, int] = defaultdict(lambda: 1, {b"r": 1})
    cells = (Cell(b"a", b"r", b"q", 1, int(CellType.Put), b"v"), Cell(b"a", b"l", b"q", 1, int(CellType.Put), b"v"))
    entry = WalEntry(WalKey(b"region", b"t", 1, 1, scopes=MappingProxyType(raw)), cells, 0, 10)
    expected = entry_filter.apply_py(entry)
    assert expected is not None and expected.cells == cells[:1]
    assert _batcher.filter_entry(*compiled_args(entry_filter), entry) == expected
    assert dict(raw) == {b"r": 1}


def test_compiled_put_rows_refuse_bad_places_and_never_yield_an_empty_call(monkeypatch: pytest.MonkeyPatch) -> None:
    put = Cell(b"a", b"r", b"q", 1, int(CellType.Put), b"v")
    entries = [
        FilteredEntry(
            WalEntry(WalKey(b"region", b"t", 1, 1), (put, put._replace(row=b"b")), 0, 20),
            (put, put._replace(row=b"b")),
            (SOURCE,),
        )
    ]
    with pytest.raises(ValueError, match="i and ci must be >= 0"):
        _fastpath.put_rows(entries, -1, 0, b"t", (SOURCE,), [], 0.0, 10, 1e9)
    with pytest.raises(ValueError, match="entry 0 has 2 cells, none at 2"):
        _fastpath.put_rows(entries, 0, 2, b"t", (SOURCE,), [], 0.0, 10, 1e9)
    with pytest.raises(ValueError, match="i must be >= 0"):
        _fastpath.group_rows(entries, -1, {})
    # limits of nothing: every call holds one row, as in Python, and the calls end
    monkeypatch.setattr(hbase2_sink, "MUTATIONS_PER_CALL", 0)
    compiled = calls_of(entries * 3)
    monkeypatch.setattr(hbase2_sink, "_fastpath", None)
    assert compiled == calls_of(entries * 3)
    assert [len(call[4]) for call in compiled[0]] == [1] * 6


def test_the_compiled_filter_refuses_a_filtered_type_with_fields_of_its_own() -> None:
    entry_filter = EntryFilter(PEERS[0], SOURCE, PEER)
    entry = WalEntry(WalKey(b"region", b"t", 1, 1, scopes={b"r": 1}), (Cell(b"a", b"r", b"q", 1, 4, b"v"),), 0, 10)
    entry_filter.apply_py(entry)

    class WithDict(tuple):  # type: ignore[type-arg]  # a tuple subclass with a __dict__: not built in C
        pass

    args = list(compiled_args(entry_filter))
    args[4] = WithDict
    with pytest.raises(TypeError, match="no fields of its own"):
        _batcher.filter_entry(*args, entry)
    fe = entry_filter.apply(entry)
    assert type(fe) is FilteredEntry and fe == (entry, entry.cells, (SOURCE,))


def test_each_compiled_module_reads_the_tuples_at_the_positions_of_their_fields() -> None:
    """The positions each module was built with are the tuples' own: renaming or moving a field
    shows here (and the module is then left unused), never as a wrong item read."""
    tuples = {**WAL_TUPLES, "FilteredEntry": FilteredEntry._fields, "TableRule": TableRule._fields}
    tuples |= {"Tally": TALLY, "Limits": LIMITS}
    for module in (_batcher, _fastpath):
        assert module.LAYOUT, module.__name__
        assert mismatches(module.LAYOUT, tuples) == [], module.__name__
    assert {"TableRule.include", "Tally.last_write_time", "Limits.size"} <= set(_batcher.LAYOUT)
    assert layout.load("walship.replicate.batcher._batcher", tuples) is _batcher


def test_a_compiled_module_built_for_other_fields_is_left_for_the_python_code(caplog: pytest.LogCaptureFixture) -> None:
    renamed = {
        **WAL_TUPLES,
        "FilteredEntry": FilteredEntry._fields,
        "WalEntry": ("key", "cells", "start", "end_offset"),
    }
    assert mismatches(_fastpath.LAYOUT, renamed) == ["WalEntry.offset at 2"]  # WalEntry.offset renamed
    moved = {"TableRule": ("include", "replicate", "exclude")}
    with caplog.at_level("WARNING", logger="walship.wal.layout"):
        assert layout.load("walship.replicate.batcher._batcher", moved) is None
    assert "TableRule.include at 1, TableRule.replicate at 0" in caplog.text


def test_a_compiled_run_counts_into_its_tally_and_refuses_another_shape() -> None:
    entry_filter = EntryFilter(PEERS[0], SOURCE, PEER)
    cell = Cell(b"a", b"r", b"q", 1, 4, b"v")
    run = [
        WalEntry(WalKey(b"region", b"t", i, 500 + i, scopes={b"r": 1}), (cell,), 10 * i, 10 * i + 10) for i in range(5)
    ]
    for entry in run:
        entry_filter.apply_py(entry)  # the table's rule known: the run is the compiled code's
    args = compiled_args(entry_filter)
    batch: list[FilteredEntry] = []
    tally = [20, 0, 0, 0, 0, None]  # from position 20: entries 0 and 1 are shipped already
    assert _batcher.take_run(run, 0, args, batch, tally, (2, 1 << 20, 1 << 22)) == (4, False)
    assert [fe.entry for fe in batch] == run[2:4]  # full at 2 entries
    assert tally == [40, 2, 20, 20, 0, 503]
    with pytest.raises(TypeError, match="a list of 6 items"):
        _batcher.take_run(run, 0, args, [], [0, 0, 0], (2, 1, 1))
    with pytest.raises(TypeError, match="Tally.read must be an int"):
        _batcher.take_run(run, 0, args, [], [0, "0", 0, 0, 0, None], (2, 1, 1))


@pytest.mark.parametrize("seed", range(4))
def test_multi_calls_are_the_protobuf_runtimes_bytes(seed: int) -> None:
    """Sink hbase's compiled Multi call is, byte for byte, what walship.rpc.multi.multi_call
    builds with Google's protobuf runtime: the request serialized, and the cell block."""
    from walship.clusterids import encode_cluster_ids
    from walship.rpc.multi import RowMutation, multi_call

    rng = random.Random(seed)
    mutations = []
    for entry in random_entries(rng, 200):  # more than 127 mutations: two-byte indexes
        cells = entry.cells
        if cells:
            mutations.append(RowMutation(cells[0].row, rng.random() < 0.3, cells))
    mutations.append(
        RowMutation(b"r" * 300, False, (Cell(b"r" * 300, b"f", b"", -5, int(CellType.Put), b"v" * 70_000),))
    )
    for ids in (None, encode_cluster_ids((SOURCE, PEER))):
        request, block = multi_call(b"t,,1700000000000.0123456789abcdef.", mutations, ids)
        assert _fastpath.multi_call(b"t,,1700000000000.0123456789abcdef.", mutations, ids) == (
            request.SerializeToString(),
            block,
        )
    with pytest.raises(TypeError, match="multi_call: a mutation must be"):
        _fastpath.multi_call(b"r", [RowMutation(b"r", False, list(mutations[0].cells))], None)


@pytest.mark.parametrize("seed", range(4))
def test_row_runs_are_the_sinks_row_mutations(seed: int) -> None:
    """Sink hbase's compiled grouping of an entry's cells into mutations gives the Python one's
    rows, kinds and cells."""
    from walship.sinks import regionservers

    rng = random.Random(seed)
    for entry in random_entries(rng, 100, puts_share=0.5):
        fe = FilteredEntry(entry, entry.cells, ())
        python = [tuple(m) for m in regionservers._runs(fe.cells)]
        assert _fastpath.row_runs(entry.cells) == python
