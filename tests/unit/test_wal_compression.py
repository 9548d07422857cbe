"""Compressed WALs (``hbase.regionserver.wal.enablecompression``): the LRU dictionaries, the
writer and both decoders, reads from any position, tailing, and value compression.

Real HBase's bytes are checked in tests/integration/test_real_wal_compression.py; here the
writer and the readers are checked against each other and against an independent model of
HBase's ``LRUDictionary``, with dictionaries made small so that every one of them evicts.
"""

from __future__ import annotations

import io
import itertools
import struct
import uuid
import zlib
from collections.abc import Iterator
from typing import Any

import pytest
from hbase_bytes import header, varint
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from walship.errors import CorruptWalError, UnsupportedWalError, WalError
from walship.wal import Cell, CellType, Tag, WalKey, WalReader, WalWriter
from walship.wal import compressed as wal_compressed
from walship.wal import dictionaries as wal_compression
from walship.wal import entries as wal_entries
from walship.wal.dictionaries import CompressionContext, LruDictionary
from walship.wal.valuecodecs import ALGORITHMS, SUPPORTED, value_codec

needs_c = pytest.mark.usefixtures("compiled_decoder")  # fails, never skips, where it is not built
DECODERS = ["python", "c"]  # "c" fails where the decoder is not built
#: small enough that every dictionary evicts in a few entries
SMALL = (2, 2, 3, 3, 4, 2)
Entries = list[tuple[WalKey, list[Cell]]]


@pytest.fixture(autouse=True)
def _default_capacities() -> Iterator[None]:
    saved = wal_compression.DEFAULT_CAPACITIES
    yield
    wal_compression.DEFAULT_CAPACITIES = saved


def small_dictionaries() -> None:
    wal_compression.DEFAULT_CAPACITIES = SMALL


def write(entries: Entries, *, close: bool = True, **options: Any) -> bytes:
    buf = io.BytesIO()
    w = WalWriter(buf, compression=True, **options)
    for key, cells in entries:
        w.append(key, cells)
    w.close(trailer=close)
    return buf.getvalue()


def read(data: bytes, decoder: str, start: int | None = None, chunk: int = 1 << 20) -> list[tuple[WalKey, list[Cell]]]:
    reader = WalReader(io.BytesIO(data), "mem.wal", decoder=decoder, chunk_size=chunk)
    return [(e.key, list(e.cells)) for e in reader.entries(start)]


def workload(n: int) -> Entries:
    """Entries over more regions, tables, families, qualifiers, rows and tags than SMALL holds."""
    out: Entries = []
    for i in range(n):
        fam = b"f%d" % (i % 5)
        key = WalKey(
            b"region-%d" % (i % 4),
            b"ns:t%d" % (i % 3),
            i + 1,
            1_000 + i,
            (uuid.UUID(int=i % 2 + 1),) if i % 3 == 0 else (),
            {fam: 1, b"g": 2} if i % 2 else {fam: 1},
            extended_attributes=(("origin", b"attr-%d" % (i % 5)),) if i % 4 == 0 else (),
        )
        cells = [
            Cell(b"row-%d" % (i % 7), fam, b"q%d" % ((i + j) % 6), 5 + i, CellType.Put, b"v%d" % i * j)
            for j in range(3)
        ]
        cells.append(
            Cell(b"row-%d" % (i % 7), fam, b"", 5 + i, CellType.DeleteFamily, b"", (Tag(8, b"t%d" % (i % 5)),))
        )
        out.append((key, cells))
    return out


# -- the dictionary against an independent model of LRUDictionary ------------------------------------


class ModelLru:
    """HBase's BidirectionalLRUMap, restated: a list of indexes from most to least recent."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.entries: list[bytes] = []
        self.order: list[int] = []

    def get(self, i: int) -> bytes | None:
        if not 0 <= i < len(self.entries):
            return None
        self.order.remove(i)
        self.order.insert(0, i)
        return self.entries[i]

    def add(self, data: bytes) -> None:
        if not data:
            return
        if len(self.entries) < self.capacity:
            self.entries.append(data)
            self.order.insert(0, len(self.entries) - 1)
        else:
            victim = self.order.pop()
            self.entries[victim] = data
            self.order.insert(0, victim)


_ops = st.lists(
    st.one_of(st.tuples(st.just("get"), st.integers(-1, 6)), st.tuples(st.just("add"), st.binary(max_size=2)))
)


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 5), _ops, _ops)
def test_dictionary_is_hbase_lru_and_rolls_back(capacity: int, ops: list[Any], undone: list[Any]) -> None:
    journal: list[Any] = []
    ctx = CompressionContext(tag_compression=False, capacities=(capacity,) * 6)
    d, model = ctx.row, ModelLru(capacity)
    for op, arg in ops:
        assert getattr(d, op)(arg) == getattr(model, op)(arg)
        ctx.commit()
    assert d.export() == (model.entries, model.order)
    before = d.export()
    for op, arg in undone:
        getattr(d, op)(arg)
    ctx.rollback()
    assert d.export() == before
    assert not journal


def test_writer_tokens_are_hbase_tokens() -> None:
    """Dictionary.write: 0xFF + varint length + bytes on a miss (then added), the big-endian
    index on a hit; a full dictionary overwrites its least recently used index in place."""
    d = LruDictionary("row", 2)
    assert d.encode(b"a") == b"\xffa"[:1] + varint(1) + b"a"
    assert d.encode(b"b") == b"\xff\x01b"
    assert d.encode(b"a") == b"\x00\x00"  # hit: a is now the most recent, b the least
    assert d.encode(b"c") == b"\xff\x01c"  # evicts b, whose index 1 c takes
    assert d.encode(b"c") == b"\x00\x01"
    assert d.encode(b"b") == b"\xff\x01b"  # b is gone; it evicts a (index 0)
    assert d.export() == ([b"b", b"c"], [0, 1])
    assert d.encode(b"") == b"\xff\x00" and len(d) == 2  # never added
    assert LruDictionary("row", 2).encode(b"x" * 200) == b"\xff" + varint(200) + b"x" * 200


# -- round trips --------------------------------------------------------------------------------------

_names = st.sampled_from([b"a", b"bb", b"c", b"d", b"\x00\xff", b"e" * 130])
_tags = st.lists(st.builds(Tag, st.integers(0, 255), st.sampled_from([b"", b"x", b"yy", b"z" * 300])), max_size=3)
_cells = st.lists(
    st.builds(
        Cell,
        _names,
        st.sampled_from([b"f", b"g", b"h", b"i", b"METAFAMILY"]),
        st.sampled_from([b"", b"q", b"r", b"s", b"t", b"u"]),
        st.integers(-(2**63), 2**63 - 1),
        st.sampled_from(list(CellType)),
        st.sampled_from([b"", b"v", bytes(range(256)) * 3]),
        _tags.map(tuple),
    ),
    max_size=5,
)
_keys = st.builds(
    WalKey,
    st.sampled_from([b"r1", b"r2", b"r3", b"5f2c1a8e9b7d4c3a2b1e0f9d8c7b6a59"]),
    st.sampled_from([b"t", b"ns:t", b"hbase:meta", b"u"]),
    st.integers(0, 2**64 - 1),
    st.integers(0, 2**64 - 1),
    st.lists(st.builds(uuid.UUID, int=st.integers(0, 2**128 - 1)), max_size=2).map(tuple),
    st.dictionaries(st.sampled_from([b"f", b"g", b"h", b"i"]), st.sampled_from([1, 2]), max_size=3),
    st.integers(0, 2**64 - 1),
    st.integers(0, 2**64 - 1),
    st.integers(0, 2**63),
    st.lists(st.tuples(st.sampled_from(["a", "b"]), st.sampled_from([b"", b"x", b"y", b"t"])), max_size=2).map(tuple),
)
_entries = st.lists(st.tuples(_keys, _cells), min_size=1, max_size=25)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(_entries, st.booleans(), st.sampled_from([None, "gz", "none"]), st.booleans())
def test_round_trip_with_evictions_both_decoders(entries: Entries, tags: bool, values: str | None, close: bool) -> None:
    small_dictionaries()
    data = write(entries, close=close, tag_compression=tags, value_compression=values)
    expected = [(k, list(c)) for k, c in entries]
    got = read(data, "python")
    assert got == expected
    if wal_compressed.c_parse_compressed is not None:
        assert read(data, "c") == got
        assert read(data, "c", chunk=7) == got  # entries cut by every chunk boundary


@pytest.mark.parametrize("decoder", DECODERS)
def test_every_dictionary_evicts_and_decodes(decoder: str) -> None:
    small_dictionaries()
    entries = workload(40)
    data = write(entries, tag_compression=True)
    # the writer's own dictionaries are full: every later miss overwrote an entry
    w = WalWriter(io.BytesIO(), compression=True, tag_compression=True)
    w.append_many(entries)
    assert w._encoder is not None
    ctx = w._encoder.ctx
    assert [len(d) for d in ctx.dictionaries] == list(SMALL)
    assert read(data, decoder) == entries


@needs_c
def test_compiled_decoder_does_the_work_itself(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    real = wal_compressed.parse_compressed_py
    monkeypatch.setattr(wal_compressed, "parse_compressed_py", lambda *a: calls.append(1) or real(*a))
    small_dictionaries()
    data = write(workload(60), close=False, tag_compression=True, value_compression="gz")
    assert read(data, "c", chunk=50) == workload(60)
    assert calls == []


@needs_c
def test_entries_the_compiled_decoder_leaves_to_python_share_the_dictionaries(monkeypatch: pytest.MonkeyPatch) -> None:
    """A key with more scopes than the compiled decoder takes (32) goes to the Python parser
    with a copy of the dictionaries, and its changes come back for the entries after it."""
    calls: list[int] = []
    real = wal_compressed.parse_compressed_py
    monkeypatch.setattr(wal_compressed, "parse_compressed_py", lambda *a: calls.append(1) or real(*a))
    small_dictionaries()
    entries = workload(30)
    for i in (4, 5, 17):
        key, cells = entries[i]
        entries[i] = (key._replace(scopes={b"s%d" % j: 1 for j in range(40)}), cells)
    data = write(entries, close=False, tag_compression=True)
    assert read(data, "c") == read(data, "python") == entries
    assert len(calls) == 3


# -- positions, tailing, entries cut short ------------------------------------------------------------


@pytest.mark.parametrize("decoder", DECODERS)
def test_reads_from_every_entry_boundary(decoder: str) -> None:
    small_dictionaries()
    entries = workload(30)
    data = write(entries, tag_compression=True)
    offsets = [e.offset for e in WalReader(io.BytesIO(data), "mem.wal", decoder=decoder).entries()]
    reader = WalReader(io.BytesIO(data), "mem.wal", decoder=decoder)
    for k in [17, 3, 29, 0, 12, 12, 25]:  # forwards, backwards (rebuilt from the start) and again
        assert [(e.key, list(e.cells)) for e in reader.entries(offsets[k])] == entries[k:]
        assert read(data, decoder, start=offsets[k]) == entries[k:]  # a fresh reader
    with pytest.raises(WalError, match="not the start of an entry") as err:
        list(reader.entries(offsets[5] + 1))
    assert err.value.path == "mem.wal" and err.value.offset == offsets[5] + 1


@pytest.mark.parametrize("decoder", DECODERS)
def test_a_consumer_that_stops_early_goes_on_without_rebuilding(decoder: str, monkeypatch: pytest.MonkeyPatch) -> None:
    small_dictionaries()
    entries = workload(50)
    data = write(entries, tag_compression=True, value_compression="gz")
    reader = WalReader(io.BytesIO(data), "mem.wal", decoder=decoder)
    resets: list[int] = []
    monkeypatch.setattr(wal_compressed.CompressedState, "reset", lambda self: resets.append(1))
    got = []
    for _ in range(10):  # five entries at a time, each pass from where the last stopped
        for n, e in enumerate(reader.entries(reader.stop_offset if got else None)):
            got.append((e.key, list(e.cells)))
            if n == 4:
                break
    assert got == entries and resets == []


@pytest.mark.parametrize("decoder", DECODERS)
def test_a_consumer_that_stops_at_a_batch_edge_goes_on_from_its_stop_offset(
    decoder: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A consumer that stops just before, at or just after the end of a decoded batch reads on
    from ``stop_offset`` with the next entry, and the dictionaries are never rebuilt."""
    small_dictionaries()
    batch = wal_entries.BATCH
    entries = workload(2 * batch + 3)
    data = write(entries, tag_compression=True)
    cuts = (batch - 1, batch, batch + 1)
    readers = [WalReader(io.BytesIO(data), "mem.wal", decoder=decoder) for _ in cuts]
    resets: list[int] = []
    monkeypatch.setattr(wal_compressed.CompressedState, "reset", lambda self: resets.append(1))
    for cut, reader in zip(cuts, readers, strict=True):
        it = reader.entries()
        got = [(e.key, list(e.cells)) for e in itertools.islice(it, cut)]
        got += [(e.key, list(e.cells)) for e in reader.entries(reader.stop_offset)]
        assert got == entries, cut
    assert resets == []


@pytest.mark.parametrize("decoder", DECODERS)
def test_tailing_a_growing_wal_keeps_the_dictionaries(decoder: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The writer appends while the reader reads: every cut (inside a token, a value, a tag)
    is an incomplete tail, undone and decoded again once the rest is there."""
    small_dictionaries()
    entries = workload(12)
    data = write(entries, tag_compression=True, value_compression="gz")
    reader_file = io.BytesIO(data[:40])  # not even the whole header yet
    reader = WalReader(reader_file, "grow.wal", decoder=decoder, chunk_size=16)
    resets: list[int] = []
    real = wal_compressed.CompressedState.reset
    monkeypatch.setattr(wal_compressed.CompressedState, "reset", lambda self: resets.append(1) or real(self))
    got: list[Any] = []
    for cut in range(40, len(data) - 8, 9):  # up to the trailer
        reader_file.seek(0, io.SEEK_END)
        reader_file.write(data[reader_file.tell() : cut])
        got += [(e.key, list(e.cells)) for e in reader.entries(reader.stop_offset if got else None)]
        assert reader.incomplete_tail == (reader.stop_offset < cut)
    assert len(got) > 0 and reader.context_offset == reader.stop_offset
    reader_file.write(data[reader_file.tell() :])
    got += [(e.key, list(e.cells)) for e in reader.entries(reader.stop_offset)]
    assert got == entries and reader.has_trailer and resets == [1]  # once, when the header arrived


# -- value compression ------------------------------------------------------------------------------

BIG = bytes(range(256)) * 1200  # 300 KiB: more than one Hadoop block of snappy and lz4


@pytest.mark.parametrize("codec", SUPPORTED)
@pytest.mark.parametrize("decoder", DECODERS)
def test_value_compression_round_trip(codec: str, decoder: str) -> None:
    values = [b"", b"a", b"hello " * 50, BIG, b"", BIG[:1000]]
    entries = [
        (WalKey(b"r", b"t", i + 1, i), [Cell(b"row", b"f", b"q", i, CellType.Put, v)]) for i, v in enumerate(values)
    ]
    data = write(entries, tag_compression=True, value_compression=codec)
    assert WalReader(io.BytesIO(data), "mem.wal").header.value_compression_algorithm == ALGORITHMS.index(codec)  # type: ignore[union-attr]
    assert read(data, decoder) == entries


def test_value_framing_is_hadoops() -> None:
    """gz: one gzip member with Java's header; snappy and lz4: Hadoop's block framing, a
    split value followed by an empty block (HBASE-28390), an empty value an empty block."""
    gz = value_codec("gz").compress(b"abc")
    assert gz[:10] == bytes.fromhex("1f8b08000000000000ff")  # as in the WALs of the harness (JDK 17)
    assert zlib.decompress(gz, 31) == b"abc"
    for name in ("snappy", "lz4"):
        codec = value_codec(name)
        assert codec.compress(b"") == b"\x00\x00\x00\x00"
        small = codec.compress(b"abc" * 10)
        assert struct.unpack_from(">ii", small) == (30, len(small) - 8)
        big = codec.compress(BIG)
        assert big[:4] == struct.pack(">i", len(BIG)) and big[-4:] == b"\x00\x00\x00\x00"
        assert codec.decompress(big, len(BIG)) == BIG
    assert value_codec("zstd").compress(b"abc")[:4] == b"\x28\xb5\x2f\xfd"


def test_zstd_reads_hbase_zstdcodec_block_framing() -> None:
    """HBase's own ZstdCodec (hbase.io.compress.zstd.codec) frames zstd frames in blocks."""
    import zstandard

    frames = [zstandard.ZstdCompressor().compress(BIG[i : i + 1000]) for i in (0, 1000)]
    data = struct.pack(">i", 2000) + b"".join(struct.pack(">i", len(f)) + f for f in frames)
    assert value_codec("zstd").decompress(data, 2000) == BIG[:2000]
    with pytest.raises(ValueError, match="zstd"):
        value_codec("zstd").decompress(data, 1999)


@pytest.mark.parametrize("decoder", DECODERS)
@pytest.mark.parametrize("ordinal", [0, 5, 7, 8, 42])
def test_an_unsupported_value_codec_is_refused_by_name(decoder: str, ordinal: int) -> None:
    head = header(has_compression=True, has_value_compression=True, value_compression_algorithm=ordinal)
    with pytest.raises(UnsupportedWalError) as err:
        WalReader(io.BytesIO(head), "/wals/rs1.123", decoder=decoder)
    message = str(err.value)
    assert "/wals/rs1.123" in message and "hbase.regionserver.wal.value.compression.type" in message
    assert (ALGORITHMS[ordinal] if ordinal < len(ALGORITHMS) else "42") in message


def test_value_compression_without_compression_is_ignored_as_hbase_does() -> None:
    plain = io.BytesIO()
    WalWriter(plain).append(WalKey(b"r", b"t", 1, 1), [Cell(b"row", b"f", b"q", 1, CellType.Put, b"v")])
    data = plain.getvalue()
    body = header(has_value_compression=True, value_compression_algorithm=1)
    head_len = WalReader(io.BytesIO(data), "mem.wal").header_end
    assert read(body + data[head_len:], "python") == read(data, "python") != []


def test_writer_options_are_checked() -> None:
    with pytest.raises(ValueError, match="compression=True"):
        WalWriter(io.BytesIO(), tag_compression=True)
    with pytest.raises(ValueError, match="must be one of"):
        WalWriter(io.BytesIO(), compression=True, value_compression="lzo")
    w = WalWriter(io.BytesIO(), compression=True)
    with pytest.raises(ValueError, match="row is"):
        w.append(WalKey(b"r", b"t", 1, 1), [Cell(b"a", b"f", b"q", 1, 4), Cell(b"x" * 40000, b"f", b"q", 1, 4)])
    assert w._encoder is not None and len(w._encoder.ctx.row) == 0  # refused before any token


# -- corruption ---------------------------------------------------------------------------------------


def _both(data: bytes) -> list[tuple[Any, ...]]:
    out = []
    for decoder in ("python", "c") if wal_compressed.c_parse_compressed is not None else ("python",):
        reader = WalReader(io.BytesIO(data), "bad.wal", decoder=decoder)
        got: list[Any] = []
        with pytest.raises(CorruptWalError) as err:
            got.extend(reader.entries())
        out.append((got, err.value.offset, str(err.value)))
    return out


def test_an_index_past_the_dictionary_is_corruption_named_by_both() -> None:
    entries = [(WalKey(b"r", b"t", i, i), [Cell(b"row%d" % i, b"f", b"q", i, CellType.Put, b"v")]) for i in (1, 2)]
    data = bytearray(write(entries))
    second = WalReader(io.BytesIO(bytes(data)), "x").header_end
    second = list(WalReader(io.BytesIO(bytes(data)), "x").entries())[1]
    row_token = data.index(b"\xff\x04row2")
    data[row_token : row_token + 6] = b"\x00\x07" + b"\x00" * 4  # index 7 of a one-entry dictionary...
    outcomes = _both(bytes(data))
    assert all(o == outcomes[0] for o in outcomes)
    got, offset, message = outcomes[0]
    assert len(got) == 1 and "bad.wal at byte offset" in message and "row dictionary has no index 7" in message
    assert offset is not None and offset >= second.offset


def test_wal_dump_reads_a_compressed_wal(tmp_path: Any, capsys: pytest.CaptureFixture[str]) -> None:
    import json

    from walship.cli import main

    small_dictionaries()
    path = tmp_path / "rs%2C16020%2C1.1700000000000"
    path.write_bytes(write(workload(9), tag_compression=True, value_compression="gz"))
    assert main(["wal", "dump", "--json", str(path)]) == 0
    out, err = capsys.readouterr()
    lines = [json.loads(line) for line in out.splitlines()]
    assert [e["sequence_id"] for e in lines] == list(range(1, 10))
    assert lines[8]["cells"][3]["tags"] == [{"type": 8, "value": "t3"}] and lines[8]["region"] == "region-0"
    assert "9 entries" in err and "compressed (tag compression, gz values)" in err
    assert main(["wal", "dump", "--start-offset", str(lines[4]["offset"]), str(path)]) == 0
    assert capsys.readouterr().out.count("Sequence=") == 5


def _outcome(data: bytes, decoder: str, chunk: int) -> tuple[Any, ...]:
    got: list[Any] = []
    try:
        r = WalReader(io.BytesIO(data), "fuzz.wal", chunk_size=chunk, decoder=decoder)
        got.extend(r.entries())
    except WalError as exc:
        return got, (type(exc).__name__, exc.offset, str(exc))
    return got, None, r.stop_offset, r.incomplete_tail, r.has_trailer


@needs_c
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.sampled_from([None, "gz", "snappy"]),
    st.booleans(),
    st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 255)), min_size=1, max_size=4),
    st.integers(0, 10**6),
    st.sampled_from([5, 64, 1 << 20]),
)
def test_decoders_agree_on_corrupted_and_cut_compressed_wals(
    codec: str | None, tags: bool, flips: list[tuple[int, int]], cut: int, chunk: int
) -> None:
    small_dictionaries()
    data = bytearray(write(workload(8), close=cut % 2 == 0, tag_compression=tags, value_compression=codec))
    floor = WalReader(io.BytesIO(bytes(data)), "x").header_end
    for at, byte in flips:
        data[floor + at % (len(data) - floor)] = byte
    data = data[: max(floor, len(data) - cut % 50)]
    assert _outcome(bytes(data), "c", chunk) == _outcome(bytes(data), "python", chunk)
