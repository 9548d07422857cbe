"""The compiled encoder of the sinks' calls (Thrift2's putMultiple, Thrift1's mutateRowsTs)
writes, byte for byte, what thriftpy2's client writes for the same call, and refuses what is not
a cell; the sinks' calls from WAL entries encode the same either way."""

from __future__ import annotations

import random
import uuid

import pytest

from walship.sinks.base import ApplyStats, FilteredEntry
from walship.sinks.hbase2 import Thrift2Sink
from walship.thrift import _putencoder
from walship.thrift.encoded import encode_call, encode_mutate_rows_ts, encode_put_multiple, put_encoder
from walship.thrift.hbase1 import Hbase_thrift
from walship.thrift.hbase2 import hbase2
from walship.wal import Cell, CellType, Tag, WalEntry, WalKey


def thriftpy2_bytes(table: bytes, puts: list[tuple[bytes, list[Cell]]], attributes: dict[bytes, bytes]) -> bytes:
    tputs = [
        hbase2.TPut(
            row=row,
            columnValues=[
                hbase2.TColumnValue(family=c.family, qualifier=c.qualifier, value=c.value, timestamp=c.timestamp)
                for c in cells
            ],
            attributes=attributes,
        )
        for row, cells in puts
    ]
    return encode_call(hbase2.THBaseService, "binary", "putMultiple", table=table, tputs=tputs).data


def random_bytes(rng: random.Random, n: int) -> bytes:
    return bytes(rng.randrange(256) for _ in range(n))


def test_the_compiled_encoder_is_built() -> None:
    assert put_encoder() == "c"  # make setup builds it; the tests hold it to thriftpy2's bytes


@pytest.mark.parametrize("seed", range(20))
def test_the_same_bytes_as_thriftpy2(seed: int) -> None:
    rng = random.Random(seed)
    puts = []
    for _ in range(rng.randrange(0, 30)):
        row = random_bytes(rng, rng.randrange(0, 40))
        cells = [
            Cell(
                row,
                random_bytes(rng, rng.randrange(1, 8)),
                random_bytes(rng, rng.randrange(0, 20)),
                rng.choice([0, -1, 1 << 62, -(1 << 63), rng.randrange(1 << 41)]),
                CellType.Put,
                random_bytes(rng, rng.choice([0, 1, 100, 70_000])),
                (Tag(1, b"t"),) if rng.random() < 0.2 else (),
            )
            for _ in range(rng.randrange(1, 6))
        ]
        puts.append((row, cells))
    attributes = {b"_cs.id": random_bytes(rng, 16 * rng.randrange(1, 3))} if seed % 5 else {}
    table = random_bytes(rng, rng.randrange(1, 30))
    assert _putencoder.encode_put_multiple(table, puts, attributes) == thriftpy2_bytes(table, puts, attributes)


def test_what_is_not_a_cell_is_refused_naming_it() -> None:
    with pytest.raises(TypeError, match="a cell's value must be bytes"):
        _putencoder.encode_put_multiple(b"t", [(b"r", [Cell(b"r", b"f", b"q", 1, 4, "text")])], {})  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="a put must be a \\(row, cells\\) tuple"):
        _putencoder.encode_put_multiple(b"t", [b"r"], {})  # type: ignore[list-item]
    with pytest.raises(TypeError, match="a cell must be a Cell"):
        _putencoder.encode_put_multiple(b"t", [(b"r", [(b"r", b"f")])], {})
    with pytest.raises(OverflowError):
        _putencoder.encode_put_multiple(b"t", [(b"r", [Cell(b"r", b"f", b"q", 1 << 64, 4, b"")])], {})


def test_the_sink_s_calls_encode_alike_in_both_ways() -> None:
    """Entries of several rows, puts and deletes mixed, tags: each put call's bytes from the
    compiled encoder equal thriftpy2's; the compact protocol goes through thriftpy2."""
    ids = (uuid.UUID(int=5),)
    entries = []
    for i in range(50):
        cells: tuple[Cell, ...] = (
            Cell(b"r%d" % i, b"f", b"a", 10 + i, CellType.Put, b"v%d" % i, (Tag(1, b"x"),) if i % 7 == 0 else ()),
            Cell(b"r%d" % i, b"f", b"b", 10 + i, CellType.Put, b""),
            Cell(b"s%d" % i, b"f", b"a", 10 + i, CellType.Put, b"w"),
        )
        if i % 10 == 9:
            cells = (*cells, Cell(b"r%d" % i, b"f", b"a", 9, CellType.Delete))
        key = WalKey(b"0" * 32, b"t" if i < 25 else b"ns:u", i + 1, 1)
        entries.append(FilteredEntry(WalEntry(key, cells, i * 100, i * 100 + 100), cells, ids))
    stats = ApplyStats()
    calls = list(Thrift2Sink.calls(entries, stats))
    assert stats.cells == sum(len(e.cells) for e in entries) and stats.tags_dropped == 8
    puts = [c for c in calls if not c.deletes]
    assert len(puts) > 2 and any(c.deletes for c in calls)
    for call in puts:
        fast = encode_put_multiple("binary", call.table, call.mutations, call.attributes)
        assert fast.data == thriftpy2_bytes(call.table, call.mutations, call.attributes)
        compact = encode_put_multiple("compact", call.table, call.mutations, call.attributes)
        assert compact.api == "putMultiple" and compact.data != fast.data


def thriftpy2_mutate_rows_ts(
    table: bytes, rows: list[tuple[bytes, list[Cell]]], ts: int, attributes: dict[bytes, bytes]
) -> bytes:
    def mutation(cell: Cell) -> object:
        if cell.type == CellType.Put:
            return Hbase_thrift.Mutation(isDelete=False, column=cell.family + b":" + cell.qualifier, value=cell.value)
        if cell.type == CellType.DeleteColumn:
            return Hbase_thrift.Mutation(isDelete=True, column=cell.family + b":" + cell.qualifier)
        assert cell.type == CellType.DeleteFamily
        return Hbase_thrift.Mutation(isDelete=True, column=cell.family)

    batches = [Hbase_thrift.BatchMutation(row=row, mutations=[mutation(c) for c in cells]) for row, cells in rows]
    return encode_call(Hbase_thrift.Hbase, "binary", "mutateRowsTs", tableName=table, rowBatches=batches,
                       timestamp=ts, attributes=attributes).data  # fmt: skip


@pytest.mark.parametrize("seed", range(20))
def test_mutate_rows_the_same_bytes_as_thriftpy2(seed: int) -> None:
    rng = random.Random(seed)
    rows = []
    for _ in range(rng.randrange(0, 30)):
        row = random_bytes(rng, rng.randrange(0, 40))
        kinds = [CellType.Put, CellType.DeleteColumn, CellType.DeleteFamily]
        cells = [
            Cell(
                row,
                random_bytes(rng, rng.randrange(1, 8)),
                random_bytes(rng, rng.randrange(0, 20)),
                7,
                rng.choice(kinds),
                random_bytes(rng, rng.choice([0, 1, 100, 70_000])),
                (),
            )
            for _ in range(rng.randrange(1, 6))
        ]
        rows.append((row, cells))
    attributes = {b"_cs.id": random_bytes(rng, 16 * rng.randrange(1, 3))} if seed % 5 else {}
    table = random_bytes(rng, rng.randrange(1, 30))
    ts = rng.choice([0, -1, 1 << 62, -(1 << 63), rng.randrange(1 << 41)])
    fast = _putencoder.encode_mutate_rows_ts(table, rows, ts, attributes)
    assert fast == thriftpy2_mutate_rows_ts(table, rows, ts, attributes)
    compact = encode_mutate_rows_ts("compact", table, rows, ts, attributes)
    assert compact.api == "mutateRowsTs" and compact.data != fast


def test_mutate_rows_refuses_what_thrift1_cannot_carry_naming_it() -> None:
    with pytest.raises(ValueError, match="encode_mutate_rows_ts: a cell of type 8 has no Thrift1 mutation"):
        _putencoder.encode_mutate_rows_ts(b"t", [(b"r", [Cell(b"r", b"f", b"q", 1, CellType.Delete, b"")])], 1, {})
    with pytest.raises(TypeError, match="encode_mutate_rows_ts: a cell's value must be bytes"):
        _putencoder.encode_mutate_rows_ts(b"t", [(b"r", [Cell(b"r", b"f", b"q", 1, 4, "text")])], 1, {})  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="encode_mutate_rows_ts: a row must be a \\(row, cells\\) tuple"):
        _putencoder.encode_mutate_rows_ts(b"t", [b"r"], 1, {})  # type: ignore[list-item]
    with pytest.raises(TypeError, match="a cell's family and qualifier must be bytes"):
        _putencoder.encode_mutate_rows_ts(b"t", [(b"r", [Cell(b"r", "f", b"q", 1, 4, b"")])], 1, {})  # type: ignore[arg-type]
    with pytest.raises(OverflowError):
        _putencoder.encode_mutate_rows_ts(b"t", [], 1 << 64, {})


def test_a_row_s_puts_and_deletes_keep_their_order_and_stream_over_several_streams() -> None:
    """Entries of puts, then deletes, then puts again of the same rows, spread over three
    streams: each row's mutations come in WAL order, all in one stream, and no call mixes
    streams or kinds."""
    ids = (uuid.UUID(int=5),)
    rows = [b"r%03d" % i for i in range(60)]
    kinds = [CellType.Put, CellType.DeleteColumn, CellType.Put]
    entries = []
    for n, kind in enumerate(kinds):
        cells = tuple(Cell(row, b"f", b"q", 10 + n, kind, b"v%d" % n if kind == CellType.Put else b"") for row in rows)
        key = WalKey(b"0" * 32, b"t", n + 1, 1)
        entries.append(FilteredEntry(WalEntry(key, cells, n * 100, n * 100 + 100), cells, ids))
    stats = ApplyStats()
    seen: dict[bytes, list[tuple[int, bool]]] = {}
    for call in Thrift2Sink.calls(entries, stats, 3):
        for mutation in call.mutations:
            row = mutation[0] if not call.deletes else mutation.row
            seen.setdefault(row, []).append((call.stream, call.deletes))
    assert stats.cells == 3 * len(rows)
    streams = set()
    for row in rows:
        assert [deletes for _, deletes in seen[row]] == [False, True, False]
        assert len({stream for stream, _ in seen[row]}) == 1
        streams.add(seen[row][0][0])
    assert streams == {0, 1, 2}
