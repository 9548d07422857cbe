"""The WAL reader and writer against bytes built independently from the format reference.

Every test here runs once per decoder (the compiled ``_walcodec`` and the pure-Python one):
the ``decoder`` fixture makes it the default of every :class:`WalReader` the test builds.
"""

from __future__ import annotations

import io
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from hbase_bytes import TRAILER, RawEntry, header, keyvalue, wal_bytes
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from walship.errors import CorruptWalError, UnsupportedWalError, WalError
from walship.wal import Cell, CellType, Tag, WalEntry, WalKey, WalReader, WalWriter, reader
from walship.wal import entries as wal_entries
from walship.wal.writer import encode_cell


@pytest.fixture(scope="module", params=reader.DECODERS, autouse=True)
def decoder(request: pytest.FixtureRequest) -> Iterator[str]:
    """Run the module's tests with this decoder as every WalReader's default (module scope:
    hypothesis tests take no function-scoped fixture)."""
    name: str = request.param
    if name == "c" and wal_entries.C_UNAVAILABLE is not None:
        pytest.fail(f"{wal_entries.C_UNAVAILABLE}: `make setup` builds it")
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(reader, "default_decoder", lambda: name)
        yield name


def test_the_decoder_under_test_is_used(decoder: str) -> None:
    entries, r = read_all(wal_bytes(sample_raw(2)))
    assert r.decoder == decoder and len(entries) == 2


def read_all(data: bytes, start: int | None = None, chunk_size: int = 4 << 20) -> tuple[list[WalEntry], WalReader]:
    reader = WalReader(io.BytesIO(data), "mem.wal", chunk_size=chunk_size)
    return list(reader.entries(start)), reader


def sample_raw(n: int, *, cells: int = 2) -> list[RawEntry]:
    out = []
    for i in range(n):
        row = b"row%03d" % i
        out.append(
            RawEntry(
                b"0123456789abcdef0123456789abcdef",
                b"ns:t1" if i % 2 else b"t1",
                100 + i,
                1_700_000_000_000 + i,
                [(row, b"f", b"q%d" % j, 1000 + i, 4, b"v" * (i + j), []) for j in range(cells)],
                scopes={b"f": 1},
            )
        )
    return out


# -- the worked example ----------------------------------------------------------------------

WORKED_EXAMPLE = bytes.fromhex("00000019 00000010 00000001 0002 7231 01 66 71 0000000000000001 04 76".replace(" ", ""))


def test_worked_example_bytes_from_the_reference() -> None:
    assert keyvalue(b"r1", b"f", b"q", 1, 4, b"v") == WORKED_EXAMPLE
    assert encode_cell(Cell(b"r1", b"f", b"q", 1, CellType.Put, b"v")) == WORKED_EXAMPLE


def test_worked_example_decodes() -> None:
    entry = RawEntry(b"region", b"t1", 7, 99, [(b"r1", b"f", b"q", 1, 4, b"v", [])])
    data = header() + entry.encode()
    assert data.endswith(WORKED_EXAMPLE)
    entries, reader = read_all(data)
    assert entries == [
        WalEntry(
            WalKey(b"region", b"t1", 7, 99),
            (Cell(b"r1", b"f", b"q", 1, CellType.Put, b"v"),),
            len(header()),
            len(data),
        )
    ]
    assert not reader.incomplete_tail and not reader.has_trailer
    assert reader.stop_offset == len(data)


# -- round trips -------------------------------------------------------------------------------

_bytes = st.binary(max_size=40)
_tags = st.lists(st.builds(Tag, st.integers(0, 255), st.binary(max_size=20)), max_size=3).map(tuple)
_cells = st.builds(
    Cell,
    st.binary(min_size=0, max_size=64),
    st.binary(min_size=0, max_size=12),
    _bytes,
    st.integers(-(2**63), 2**63 - 1),
    st.sampled_from(list(CellType)),
    st.one_of(_bytes, st.binary(min_size=200, max_size=3000)),
    _tags,
)
_keys = st.builds(
    WalKey,
    st.binary(min_size=1, max_size=32),
    st.sampled_from([b"t", b"ns:table", b"default:x", b"a-b_c.d"]),
    st.integers(0, 2**64 - 1),
    st.integers(0, 2**64 - 1),
    st.lists(st.uuids(), max_size=12).map(tuple),
    st.dictionaries(st.binary(max_size=8), st.sampled_from([1, 2]), max_size=4),
    st.integers(0, 2**64 - 1),
    st.integers(0, 2**64 - 1),
    st.integers(0, 2**64 - 1),
    st.lists(st.tuples(st.text(max_size=6), st.binary(max_size=6)), max_size=2).map(tuple),
)
_entries = st.lists(st.tuples(_keys, st.lists(_cells, max_size=6).map(tuple)), max_size=8)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@example(
    [
        (
            WalKey(b"r", b"t", 1, 2, scopes={b"f": 1}),
            (Cell(b"row", b"f", b"q", 3, CellType.Put, bytes(range(256)) * 300),),
        )
    ],
    False,
    "ProtobufLogWriter",
    1000,
)
# an open WAL whose tail looks like a trailer: the int32 before ``LAWP`` gives a size whose
# bytes parse as a WALTrailer, its start falling inside the last entry ...
@example(
    [
        (WalKey(b"\x00", b"t", 0, 0), ()),
        (
            WalKey(b"\x00", b"t", 0, 0),
            (Cell(b"", b"", b"", 0, CellType.Put, b""), Cell(b"", b"", b"", 0, CellType.Put, b"LAWP")),
        ),
    ],
    False,
    "ProtobufLogWriter",
    1,
)
# ... or exactly on an entry boundary (an empty WALTrailer: four zero bytes, then the magic)
@example(
    [
        (WalKey(b"r", b"t", 0, 0), ()),
        (WalKey(b"r", b"t", 0, 0), (Cell(b"", b"f", b"", 0, CellType.Put, b"\x00\x00\x00\x00LAWP"),)),
    ],
    False,
    "ProtobufLogWriter",
    7,
)
@given(_entries, st.booleans(), st.sampled_from(["ProtobufLogWriter", "AsyncProtobufLogWriter"]), st.integers(1, 300))
def test_round_trip(entries: list[tuple[WalKey, tuple[Cell, ...]]], close: bool, writer_class: str, chunk: int) -> None:
    buf = io.BytesIO()
    w = WalWriter(buf, writer_class=writer_class)
    ends = [w.append(k, cs) for k, cs in entries]
    w.close(trailer=close)
    data = buf.getvalue()
    got, reader = read_all(data, chunk_size=chunk)
    assert [(e.key, e.cells) for e in got] == entries
    assert [e.end_offset for e in got] == ends
    assert reader.has_trailer is close
    assert not reader.incomplete_tail
    assert reader.header is not None and reader.header.writer_cls_name == writer_class


@settings(max_examples=60, deadline=None)
@given(st.lists(_cells, min_size=1, max_size=4))
def test_writer_matches_independent_encoder(cells: list[Cell]) -> None:
    for cell in cells:
        expected = keyvalue(
            cell.row,
            cell.family,
            cell.qualifier,
            cell.timestamp,
            int(cell.type),
            cell.value,
            [(t.type, t.value) for t in cell.tags],
        )
        assert encode_cell(cell) == expected


def test_cluster_ids_keep_their_halves() -> None:
    ids = [uuid.UUID("00112233-4455-6677-8899-aabbccddeeff"), uuid.uuid4()]
    raw = RawEntry(b"r", b"t", 1, 2, [(b"a", b"f", b"", 1, 4, b"", [])], cluster_ids=ids)
    entries, _ = read_all(wal_bytes([raw]))
    assert entries[0].key.cluster_ids == tuple(ids)


def test_deprecated_single_cluster_id_is_read() -> None:
    """A WALKey with HBase 0.94's single ``cluster_id`` (field 5, deprecated), built by hand from
    HBase's field numbers: encoded_region_name 1, table_name 2, log_sequence_number 3,
    write_time 4, cluster_id 5 as UUID {least_sig_bits 1, most_sig_bits 2},
    following_kv_count 7."""
    from hbase_bytes import _bytes, _uint, varint

    cid = uuid.uuid4()
    uuid_body = _uint(1, cid.int & ((1 << 64) - 1)) + _uint(2, cid.int >> 64)
    body = _bytes(1, b"r") + _bytes(2, b"t") + _uint(3, 1) + _uint(4, 2) + _bytes(5, uuid_body) + _uint(7, 0)
    entries, _ = read_all(header() + varint(len(body)) + body)
    assert entries[0].key.cluster_ids == (cid,)
    assert entries[0].cells == ()


def test_large_value_larger_than_chunk() -> None:
    big = bytes(range(256)) * 4096  # 1 MiB
    raw = RawEntry(b"r", b"t", 1, 2, [(b"row", b"f", b"q", 5, 4, big, [])])
    entries, _ = read_all(wal_bytes([*sample_raw(3), raw, *sample_raw(2)]), chunk_size=1024)
    assert len(entries) == 6
    assert entries[3].cells[0].value == big


def test_key_accessors() -> None:
    assert WalKey(b"r", b"ns:t", 1, 1).namespace == b"ns"
    assert WalKey(b"r", b"ns:t", 1, 1).qualifier == b"t"
    assert WalKey(b"r", b"t", 1, 1).namespace == b"default"
    assert WalKey(b"r", b"t", 1, 1).qualifier == b"t"


# -- open files, tails and trailers --------------------------------------------------------------


def test_incomplete_tail_cut_at_every_byte_of_the_last_entry() -> None:
    raws = sample_raw(4)
    data = wal_bytes(raws, trailer=False)
    last_start = len(data) - len(raws[-1].encode())
    for cut in range(last_start, len(data)):
        entries, reader = read_all(data[:cut], chunk_size=64)
        assert len(entries) == 3, cut
        assert reader.incomplete_tail is (cut > last_start), cut
        assert reader.stop_offset == last_start
    entries, reader = read_all(data)
    assert len(entries) == 4 and not reader.incomplete_tail and reader.stop_offset == len(data)


def test_header_cut_short_is_an_incomplete_file() -> None:
    full = header()
    for cut in range(len(full)):
        entries, reader = read_all(full[:cut])
        assert entries == [] and reader.incomplete_tail and reader.stop_offset == 0
        assert reader.header is None


def test_header_only_file_is_empty_not_incomplete() -> None:
    entries, reader = read_all(header())
    assert entries == [] and not reader.incomplete_tail and reader.stop_offset == len(header())


def test_trailer_ends_the_entries() -> None:
    raws = sample_raw(3)
    data = wal_bytes(raws, trailer=True)
    assert data.endswith(bytes.fromhex("000000004C415750"))
    entries, reader = read_all(data)
    assert len(entries) == 3 and reader.has_trailer and reader.edits_end == len(data) - 8
    assert entries[-1].end_offset == len(data) - 8
    empty, reader = read_all(header() + TRAILER)
    assert empty == [] and reader.has_trailer


def test_closed_wal_with_an_entry_cut_inside_is_corrupt() -> None:
    raws = sample_raw(3)
    body = wal_bytes(raws, trailer=False)
    data = body[:-5] + TRAILER
    with pytest.raises(CorruptWalError) as err:
        read_all(data)
    assert err.value.offset == len(body) - len(raws[-1].encode())


def test_growing_file_is_followed(tmp_path: Path) -> None:
    path = tmp_path / "wal"
    raws = sample_raw(5)
    with open(path, "wb") as out:
        out.write(header() + raws[0].encode() + raws[1].encode()[:7])
        out.flush()
        with open(path, "rb") as f:
            reader = WalReader(f, str(path))
            first = list(reader.entries())
            assert len(first) == 1 and reader.incomplete_tail
            out.write(raws[1].encode()[7:] + raws[2].encode())
            out.flush()
            more = list(reader.entries(reader.stop_offset))
            assert [e.key.sequence_id for e in more] == [101, 102]
            assert not reader.incomplete_tail


def test_empty_new_file_then_header(tmp_path: Path) -> None:
    path = tmp_path / "wal"
    path.write_bytes(b"")
    with open(path, "rb") as f:
        reader = WalReader(f, str(path))
        assert list(reader.entries()) == [] and reader.incomplete_tail
        path.write_bytes(wal_bytes(sample_raw(2), trailer=False))
        assert len(list(reader.entries())) == 2


# -- resuming -------------------------------------------------------------------------------------


def test_resume_from_every_end_offset() -> None:
    data = wal_bytes(sample_raw(12), trailer=True)
    entries, _ = read_all(data)
    for i, entry in enumerate(entries):
        rest, reader = read_all(data, start=entry.end_offset, chunk_size=50)
        assert rest == entries[i + 1 :]
        assert reader.stop_offset == len(data) - 8
        again, _ = read_all(data, start=entry.offset)
        assert again == entries[i:]


def test_stop_offset_follows_every_entry_handed_out_across_batches() -> None:
    """``entries()`` hands out each decoded batch through the batch's own iterator: the
    reader's ``stop_offset`` is the end of the last entry the caller got, inside a batch and
    at its edges, and a read from it goes on with the next entry."""
    batch = wal_entries.BATCH
    data = wal_bytes(sample_raw(2 * batch + 5, cells=1), trailer=True)
    reader = WalReader(io.BytesIO(data), "mem.wal")
    entries = []
    for entry in reader.entries():
        assert reader.stop_offset == entry.end_offset, len(entries)
        entries.append(entry)
    assert len(entries) == 2 * batch + 5 and reader.stop_offset == entries[-1].end_offset
    for cut in (1, batch - 1, batch, batch + 1, 2 * batch):
        reader = WalReader(io.BytesIO(data), "mem.wal")
        it = reader.entries()
        got = [next(it) for _ in range(cut)]
        assert reader.stop_offset == got[-1].end_offset, cut
        got += reader.entries(reader.stop_offset)
        assert got == entries, cut


def test_a_decoded_batch_holds_about_batch_bytes_of_the_wal() -> None:
    """The decoder hands out as many entries at a time as fit in about BATCH_BYTES of the WAL
    (at most BATCH): entries of 12 KB come two at a time, small ones BATCH at a time."""
    big = [RawEntry(b"r" * 32, b"t", i + 1, 5, [(b"row", b"f", b"q", 7, 4, b"v" * 12_000, [])]) for i in range(20)]
    small = sample_raw(3 * wal_entries.BATCH, cells=1)
    for raws, sizes in ((big, {1, 2}), (small, {1, wal_entries.BATCH})):
        data = wal_bytes(raws, trailer=True)
        reader = WalReader(io.BytesIO(data), "mem.wal")
        lists = list(reader.batches())
        assert [e for part in lists for e in part] == read_all(data)[0]
        assert {len(part) for part in lists[:-1]} == sizes, [len(part) for part in lists]


def test_start_inside_the_header_or_past_the_end_is_refused() -> None:
    data = wal_bytes(sample_raw(2), trailer=True)
    with pytest.raises(WalError, match="inside the WAL header"):
        read_all(data, start=3)
    with pytest.raises(WalError, match="past the end"):
        read_all(data, start=len(data))


def test_start_off_an_entry_boundary_is_an_error_not_a_skip() -> None:
    data = wal_bytes(sample_raw(3), trailer=True)
    entries, _ = read_all(data)
    with pytest.raises(CorruptWalError) as err:
        read_all(data, start=entries[1].offset + 3)
    assert err.value.offset is not None and err.value.offset >= entries[1].offset + 3


# -- refused headers ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("head", "match"),
    [
        (
            header(has_compression=True, has_value_compression=True, value_compression_algorithm=0),
            "value compression 'lzo' \\(hbase.regionserver.wal.value.compression.type\\) is not supported",
        ),
        (
            header(has_compression=True, has_value_compression=True, value_compression_algorithm=9),
            "unknown value compression algorithm 9",
        ),
        (header(encryption_key=b"k"), "encrypted"),
        (header(writer="SecureProtobufLogWriter"), "encrypted"),
        (header(writer="FancyLogWriter"), "unknown writer class 'FancyLogWriter'"),
        (header(writer=None), "unknown writer class"),
        (header(codec="org.apache.hadoop.hbase.regionserver.wal.IndexedWALEditCodec"), "unknown cell codec"),
        (header(codec="org.apache.hadoop.hbase.regionserver.wal.SecureWALCellCodec"), "encrypted"),
    ],
)
def test_refused_headers(head: bytes, match: str) -> None:
    with pytest.raises(UnsupportedWalError, match=match) as err:
        read_all(wal_bytes(sample_raw(1), head=head))
    assert "mem.wal" in str(err.value)


@pytest.mark.parametrize(
    "codec",
    [None, "org.apache.hadoop.hbase.codec.KeyValueCodec", "org.apache.hadoop.hbase.codec.KeyValueCodecWithTags"],
)
def test_accepted_codecs(codec: str | None) -> None:
    entries, _ = read_all(wal_bytes(sample_raw(2), head=header(codec=codec)))
    assert len(entries) == 2


def test_not_a_pwal_file() -> None:
    with pytest.raises(CorruptWalError, match="not a PWAL file") as err:
        read_all(b"SEQ\x06" + b"\x00" * 40)
    assert err.value.offset == 0


# -- corruption -----------------------------------------------------------------------------------


def test_corrupt_key_in_the_middle_names_the_offset() -> None:
    raws = sample_raw(5)
    data = bytearray(wal_bytes(raws, trailer=True))
    entries, _ = read_all(bytes(data))
    bad = entries[2]
    data[bad.offset + 1 : bad.offset + 6] = b"\xff\xff\xff\xff\xff"  # inside the WALKey bytes
    reader = WalReader(io.BytesIO(bytes(data)), "/wals/x.wal")
    got = []
    with pytest.raises(CorruptWalError) as err:
        for entry in reader.entries():
            got.append(entry)
    assert got == entries[:2]  # everything before the corruption, nothing after it
    assert err.value.offset == bad.offset
    assert f"/wals/x.wal at byte offset {bad.offset}" in str(err.value)


def test_unknown_cell_type_is_corruption() -> None:
    raw = RawEntry(b"r", b"t", 1, 2, [(b"a", b"f", b"q", 1, 7, b"v", [])])
    data = wal_bytes([*sample_raw(1), raw], trailer=False)
    with pytest.raises(CorruptWalError, match="unknown cell type 7"):
        read_all(data)


def test_inconsistent_cell_lengths_are_corruption() -> None:
    good = RawEntry(b"r", b"t", 1, 2, [(b"a", b"f", b"q", 1, 4, b"v", [])]).encode()
    cell_at = len(good) - len(WORKED_EXAMPLE)
    bad = bytearray(good)
    bad[cell_at + 8 : cell_at + 12] = (200).to_bytes(4, "big")  # value length beyond the cell
    with pytest.raises(CorruptWalError, match="inconsistent lengths"):
        read_all(header() + bytes(bad) + good)


def test_bad_tags_length_is_corruption() -> None:
    raw = RawEntry(b"r", b"t", 1, 2, [(b"a", b"f", b"q", 1, 4, b"v", [(1, b"xy")])]).encode()
    bad = bytearray(raw)
    bad[-5] = 0x09  # the first tag's length now overruns the tags area
    with pytest.raises(CorruptWalError, match="tag"):
        read_all(header() + bytes(bad) + raw)


def test_header_string_that_is_not_utf8_is_corruption() -> None:
    head = header(writer="ProtobufLogWriter").replace(b"Protobuf", b"Proto\xffuf")
    with pytest.raises(CorruptWalError, match="writer_cls_name .* is not UTF-8") as err:
        read_all(head)
    assert err.value.offset == 4


def test_attribute_name_that_is_not_utf8_is_corruption() -> None:
    from hbase_bytes import varint

    from walship.protos import WAL_pb2

    k = WAL_pb2.WALKey(encoded_region_name=b"r", table_name=b"t", log_sequence_number=1, write_time=2)
    k.extended_attributes.add(key="k\u00e9", value=b"v")
    body = k.SerializeToString().replace("\u00e9".encode(), b"\xff\xfe")
    data = wal_bytes(sample_raw(1), trailer=False) + varint(len(body)) + body
    entries = []
    with pytest.raises(CorruptWalError, match="WALKey does not parse: extended attribute name") as err:
        entries.extend(WalReader(io.BytesIO(data), "mem.wal").entries())
    assert len(entries) == 1 and err.value.offset == entries[0].end_offset


def test_unseekable_file_is_refused() -> None:
    class Pipe(io.RawIOBase):
        def seekable(self) -> bool:
            return False

    with pytest.raises(WalError, match="seekable"):
        WalReader(Pipe(), "pipe")  # type: ignore[arg-type]


def test_writer_refuses_oversized_fields() -> None:
    with pytest.raises(ValueError, match="row is 32768 bytes"):
        encode_cell(Cell(b"x" * 32768, b"f", b"q", 1, CellType.Put))
    with pytest.raises(ValueError, match="family is 128 bytes"):
        encode_cell(Cell(b"x", b"f" * 128, b"q", 1, CellType.Put))
    with pytest.raises(ValueError, match="writer_class"):
        WalWriter(io.BytesIO(), writer_class="Other")


def test_a_whole_wal_file_is_byte_for_byte_what_hbases_format_says() -> None:
    """Header, keys (scopes, cluster ids), cells (every type, tags) and trailer: WalWriter's file
    equals the one encoded by hand from HBase's field numbers (tests/hbase_bytes.py)."""
    ids = [uuid.UUID("00112233-4455-6677-8899-aabbccddeeff"), uuid.UUID(int=(1 << 127) | 5)]
    raws = [
        RawEntry(b"%032x" % 7, b"ns:t", 1, 1_700_000_000_000, [(b"r1", b"f", b"q", 5, 4, b"v", [])], scopes={b"f": 1}),
        RawEntry(
            b"%032x" % 8,
            b"t",
            2**40,
            1_700_000_000_001,
            [(b"\x00\xff", b"f", b"", 6, t, b"", [(8, b"tag")]) for t in (8, 12, 14)]
            + [(b"r", b"g", b"q", 7, 4, b"x" * 300, [])],
            cluster_ids=ids,
            scopes={b"f": 1, b"g": 0},
        ),
    ]
    buf = io.BytesIO()
    with WalWriter(buf, writer_class="ProtobufLogWriter") as w:
        for r in raws:
            key = WalKey(r.region, r.table, r.seq, r.write_time, tuple(r.cluster_ids), r.scopes)
            w.append(
                key,
                [
                    Cell(row, fam, q, ts, CellType(t), v, tuple(Tag(a, b) for a, b in tags))
                    for row, fam, q, ts, t, v, tags in r.cells
                ],
            )
    expected = wal_bytes(raws, head=header("ProtobufLogWriter", has_value_compression=False))
    assert buf.getvalue() == expected
