"""The compiled WAL decoder against the pure-Python one: the same entries, stop offsets and
errors (type, byte offset and message) on valid, odd, corrupt and cut-short bytes.

The compiled decoder (``walship.wal._walcodec``) decodes the plainly valid entries itself
and hands every other entry to the Python parser; these tests check both that it agrees and
that it really does the common work itself (a decoder deferring everything would agree too).
"""

from __future__ import annotations

import io
import logging
import struct
import subprocess
import sys
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hbase_bytes import header, keyvalue, varint
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from walship.errors import WalError
from walship.protos import HBase_pb2, WAL_pb2
from walship.wal import Cell, CellType, Tag, WalKey, WalReader, WalWriter
from walship.wal import entries as wal_entries

needs_c = pytest.mark.usefixtures("compiled_decoder")  # fails, never skips, where it is not built

HEAD = header()
Outcome = tuple[Any, ...]


def outcome(data: bytes, decoder: str, chunk: int = 1 << 20, start: int | None = None) -> Outcome:
    """Everything a read of ``data`` shows: entries, the error (type, offset, message) and the
    reader's state where it stopped."""
    got: list[Any] = []
    try:
        r = WalReader(io.BytesIO(data), "fuzz.wal", chunk_size=chunk, decoder=decoder)
        got.extend(r.entries(start))
    except WalError as exc:
        return got, (type(exc).__name__, exc.offset, str(exc))
    return got, None, r.stop_offset, r.incomplete_tail, r.has_trailer, r.edits_end


def parse_both(buf: bytes, p: int, limit: int) -> tuple[Outcome, Outcome]:
    def run(fn: Callable[..., Any]) -> Outcome:
        entries, stop, error = fn(buf, p, 1000, "fuzz.wal", limit)
        err = None if error is None else (type(error).__name__, error.offset, str(error))
        return entries, stop, err

    return run(wal_entries.parse_entries_c), run(wal_entries.parse_entries_py)


# -- the compiled decoder does the work ---------------------------------------------------------------


def _varied_entries() -> list[tuple[WalKey, list[Cell]]]:
    ids = (uuid.UUID(int=(1 << 128) - 1), uuid.UUID(int=1), uuid.UUID("c52d18af-2693-4839-b14a-9d82b35d1a9e"))
    out: list[tuple[WalKey, list[Cell]]] = []
    for i in range(40):
        key = WalKey(
            b"5f2c1a8e9b7d4c3a2b1e0f9d8c7b6a59" if i % 7 else b"r%d" % i,
            b"ns:t" if i % 3 else b"t",
            i * 2**57,  # up to 10-byte varints
            2**64 - 1 - i,
            ids[: i % 4],
            {b"f": 1, b"g": 2} if i % 5 else {},
            (2**64 - 1) if i % 2 else 0,
            (2**63 + i) if i % 4 else 0,
            i,
            (("k", b"v"), ("\u00e9", b"")) if i % 6 == 0 else (),
        )
        cells = [
            Cell(
                b"row%d" % (i // 2),
                b"f" if j % 2 else b"",
                b"q%d" % j if j % 3 else b"",
                -(2**63) + i if j == 3 else 1_700_000_000_000 + i,
                list(CellType)[(i + j) % 5],
                bytes(range(j * 40 % 256)) * (1 + i % 3),
                (Tag(1, b"ab"), Tag(255, b"")) if (i + j) % 4 == 0 else (),
            )
            for j in range(i % 6)
        ]
        out.append((key, cells))
    return out


@needs_c
def test_common_entries_are_decoded_without_deferring() -> None:
    buf = io.BytesIO()
    w = WalWriter(buf)
    w.append_many(_varied_entries())
    w.close(trailer=False)
    data = buf.getvalue()
    start = WalReader(io.BytesIO(data), "x", decoder="python").header_end
    assert wal_entries.c_parse is not None
    entries, stop, status = wal_entries.c_parse(data, start, 0, 10_000)
    assert status == wal_entries.C_DONE and stop == len(data) and len(entries) == 40
    py, py_stop, py_error = wal_entries.parse_entries_py(data, start, 0, "x", 10_000)
    assert entries == py and stop == py_stop and py_error is None
    assert [(e.key, list(e.cells)) for e in entries] == _varied_entries()
    # every field the same type as the Python decoder's, down to the records' classes
    for a, b in zip(entries, py, strict=True):
        assert type(a) is type(b) and type(a.key) is type(b.key) and type(a.key.scopes) is type(b.key.scopes)
        for ca, cb in zip(a.cells, b.cells, strict=True):
            assert [type(x) for x in ca] == [type(x) for x in cb]
            assert all(type(t) is Tag for t in ca.tags)
            assert hash(ca) == hash(cb)


@needs_c
@pytest.mark.parametrize("compression", [False, True], ids=["plain", "compressed"])
def test_cells_stamped_at_the_write_time_share_its_int(compression: bool) -> None:
    """HBase stamps a put's cells and its WALKey with one clock reading: the compiled decoders
    hand out one int object for the key's write time and those cells' timestamps (a cell with
    another timestamp, or one that is negative, gets its own), and decode what Python does."""
    now = 1_700_000_000_000
    entries = [
        (
            WalKey(b"5f2c1a8e9b7d4c3a2b1e0f9d8c7b6a59", b"t", i + 1, now + i, scopes={b"f": 1}),
            [Cell(b"row%d" % i, b"f", b"q%d" % j, now + i if i < 3 else -1, CellType.Put, b"v") for j in range(3)],
        )
        for i in range(4)
    ]
    entries.append((WalKey(b"r", b"t", 9, 2**64 - 1), [Cell(b"row", b"f", b"q", -1, CellType.Put, b"v")]))
    buf = io.BytesIO()
    w = WalWriter(buf, compression=compression)
    w.append_many(entries)
    w.close()
    got = list(WalReader(io.BytesIO(buf.getvalue()), "x", decoder="c").entries())
    assert [(e.key, list(e.cells)) for e in got] == entries
    assert got == list(WalReader(io.BytesIO(buf.getvalue()), "x", decoder="python").entries())
    for e in got[:3]:
        assert all(c.timestamp is e.key.write_time for c in e.cells), e.key.sequence_id
    first, second = got[3].cells[:2]
    assert first.timestamp == -1 and first.timestamp is not got[3].key.write_time
    assert second.timestamp is first.timestamp
    assert got[4].key.write_time == 2**64 - 1 and got[4].cells[0].timestamp == -1


@needs_c
def test_an_odd_key_is_left_to_protobuf_and_the_rest_decoded() -> None:
    good = WAL_pb2.WALKey(
        encoded_region_name=b"r", table_name=b"t", log_sequence_number=1, write_time=2, following_kv_count=1
    ).SerializeToString()
    cell = keyvalue(b"row", b"f", b"q", 5, 4, b"v")
    odd_keys = [
        good + b"\x78\x05",  # unknown field 15
        good + b"\x0a\x01s",  # the region a second time: protobuf keeps the last
        good + b"\x1a\x01x",  # field 3 with the wrong wire type: protobuf keeps it as unknown
        b"\x08\x80\x80\x80\x80\x00" + good,  # unknown field 1 varint, overlong
    ]
    for key in odd_keys:
        data = b"".join(varint(len(k)) + k + cell for k in (good, key, good))
        c, py = parse_both(data, 0, 32)
        assert c == py and len(py[0]) == 3 and py[2] is None, key
        assert wal_entries.c_parse is not None
        first, _, status = wal_entries.c_parse(data, 0, 0, 32)
        assert len(first) == 1 and status == wal_entries.C_DEFER, key


@needs_c
def test_an_entry_cut_short_stops_the_compiled_decoder_where_python_stops() -> None:
    """An entry the buffer's end cuts (in its length prefix, its key, a cell's head or a cell)
    stops the compiled decoder after the entries before it, asking for more bytes, exactly where
    the Python parser stops; the Python parser is not run on it. A cell too short for its
    length field before the cut is still left to Python, which names it."""
    entries = [
        (
            WalKey(b"r", b"t", i + 1, 2),
            [Cell(b"row%d" % i, b"f", b"q%d" % j, 3, CellType.Put, b"v" * 50) for j in range(40)],
        )
        for i in range(3)
    ]
    data = _wal(entries, False)
    read = list(WalReader(io.BytesIO(data), "x", decoder="python").entries())
    start, second = read[0].offset, read[1].offset
    assert wal_entries.c_parse is not None
    for cut in (second + 1, second + 30, second + 200, len(data) - 40, len(data) - 1):
        buf = data[:cut]
        got, stop, status = wal_entries.c_parse(buf, start, 0, 32)
        py = wal_entries.parse_entries_py(buf, start, 0, "x", 32)
        assert status == wal_entries.C_NEED_MORE and (got, stop) == py[:2] and py[2] is None, cut
        assert len(got) == (1 if cut < len(data) - 100 else 2)
    # a cell whose length is too small, cut short after it: Python names the cell
    bad = bytearray(data[: second + 200])
    assert bad[second] < 0x80  # a one-byte length prefix: the key, then the first cell
    struct.pack_into(">i", bad, second + 1 + bad[second], 3)
    got, stop, status = wal_entries.c_parse(bytes(bad), start, 0, 32)
    assert status == wal_entries.C_DEFER and len(got) == 1
    c, py = parse_both(bytes(bad), start, 32)
    assert c == py and py[2] is not None and "length too small" in py[2][2]


@needs_c
def test_the_reader_never_parses_a_plain_wal_in_python(monkeypatch: pytest.MonkeyPatch) -> None:
    """Read in chunks far smaller than its entries, a WAL of plainly valid entries is decoded by
    the compiled decoder alone: the entries each chunk cuts are read on, not parsed in Python."""
    entries = [
        (
            WalKey(b"r", b"t", i + 1, 2),
            [Cell(b"row%d" % i, b"f", b"q%d" % j, 3, CellType.Put, b"v" * 90) for j in range(300)],
        )
        for i in range(12)
    ]
    data = _wal(entries, False)
    in_python: list[int] = []
    python_parser = wal_entries.parse_entries_py

    def counted(*args: Any) -> Any:
        in_python.append(args[1])
        return python_parser(*args)

    monkeypatch.setattr(wal_entries, "parse_entries_py", counted)
    got = list(WalReader(io.BytesIO(data), "x", chunk_size=8192, decoder="c").entries())
    assert [(e.key, list(e.cells)) for e in got] == entries and in_python == []


@needs_c
def test_a_nested_message_that_does_not_parse_is_named_by_python() -> None:
    k = WAL_pb2.WALKey(encoded_region_name=b"r", table_name=b"t", log_sequence_number=1, write_time=2)
    body = k.SerializeToString() + b"\x42\x03abc"  # cluster_ids: 3 bytes that are no UUID
    data = HEAD + varint(len(body)) + body
    c, py = outcome(data, "c"), outcome(data, "python")
    assert c == py and py[1] is not None and "WALKey does not parse" in py[1][2]


# -- the reused buffer ----------------------------------------------------------------------------


class _NoReadinto:
    """A seekable file object that can only ``read`` (as some remote file systems' are)."""

    def __init__(self, data: bytes) -> None:
        self._f = io.BytesIO(data)

    def read(self, size: int = -1) -> bytes:
        return self._f.read(size)

    def seek(self, offset: int, whence: int = 0) -> int:
        return self._f.seek(offset, whence)

    def tell(self) -> int:
        return self._f.tell()

    def seekable(self) -> bool:
        return True


@needs_c
@pytest.mark.parametrize("chunk", [100, 4096, 1 << 20])
def test_an_odd_key_longer_than_the_python_window_is_decoded_as_bytes(chunk: int) -> None:
    """The compiled decoder reads a reused buffer and hands an odd entry to Python as a bytes
    copy, 64 KiB first: an entry of 300 KB is copied whole, and its fields are bytes."""
    good = WAL_pb2.WALKey(
        encoded_region_name=b"r", table_name=b"t", log_sequence_number=1, write_time=2, following_kv_count=1
    ).SerializeToString()
    odd = good + b"\x78\x05"  # unknown field 15: left to protobuf
    big = bytes(range(256)) * 1200  # 307,200 bytes
    body = b"".join(
        varint(len(k)) + k + keyvalue(b"row%d" % i, b"f", b"q", 5, 4, v)
        for i, (k, v) in enumerate([(good, b"a"), (odd, big), (good, b"b"), (odd, b"c")])
    )
    data = HEAD + body
    c, py = outcome(data, "c", chunk), outcome(data, "python", chunk)
    assert c == py and py[1] is None and [e.cells[0].value for e in py[0]] == [b"a", big, b"b", b"c"]
    for entry in c[0]:
        assert all(type(field) is bytes for field in (entry.key.table, *entry.cells[0][:3], entry.cells[0].value))
    unbuffered = list(WalReader(_NoReadinto(data), "w.wal", chunk_size=chunk, decoder="c").entries())  # type: ignore[arg-type]
    assert unbuffered == c[0]


# -- the fallback ---------------------------------------------------------------------------------


def test_unbuilt_decoder_falls_back_once_with_a_log_line(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(wal_entries, "C_UNAVAILABLE", "walship.wal._walcodec is not built (test)")
    monkeypatch.setattr(wal_entries, "_fallback_logged", False)
    data = HEAD + b""
    with caplog.at_level(logging.INFO, logger="walship.wal.entries"):
        assert WalReader(io.BytesIO(data), "a").decoder == "python"
        assert WalReader(io.BytesIO(data), "b").decoder == "python"
    lines = [r.getMessage() for r in caplog.records if "pure Python" in r.getMessage()]
    assert len(lines) == 1 and "not built (test)" in lines[0]
    with pytest.raises(ValueError, match="'c' is not available"):
        WalReader(io.BytesIO(data), "c", decoder="c")


def test_without_the_module_the_python_decoder_reads(tmp_path: Path) -> None:
    """A process where ``walship.wal._walcodec`` cannot be imported decodes in Python."""
    path = tmp_path / "w.wal"
    path.write_bytes(_wal([(WalKey(b"r", b"t", 1, 2), [Cell(b"a", b"f", b"q", 3, CellType.Put, b"v")])], True))
    script = (
        "import logging, sys; sys.modules['walship.wal._walcodec'] = None; logging.basicConfig(level=logging.INFO)\n"
        "from walship.wal import WalReader\n"
        f"r = WalReader(open({str(path)!r}, 'rb'))\n"
        "print(r.decoder, len(list(r.entries())))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["python", "1"]
    assert "walship.wal._walcodec is not built" in done.stderr and "pure Python" in done.stderr


def test_unknown_decoder_is_refused() -> None:
    with pytest.raises(ValueError, match=r"'decoder' must be one of \['c', 'python'\], got 'rust'"):
        WalReader(io.BytesIO(HEAD), "x", decoder="rust")


# -- differential fuzzing -------------------------------------------------------------------------

_cells = st.builds(
    Cell,
    st.binary(max_size=24),
    st.sampled_from([b"", b"f", b"cf", b"METAFAMILY"]),
    st.binary(max_size=12),
    st.integers(-(2**63), 2**63 - 1),
    st.sampled_from(list(CellType)),
    st.binary(max_size=300),
    st.lists(st.builds(Tag, st.integers(0, 255), st.binary(max_size=6)), max_size=2).map(tuple),
)
_keys = st.builds(
    WalKey,
    st.sampled_from([b"5f2c1a8e9b7d4c3a2b1e0f9d8c7b6a59", b"r"]),
    st.sampled_from([b"t", b"ns:t"]),
    st.integers(0, 2**64 - 1),
    st.integers(0, 2**64 - 1),
    st.lists(st.sampled_from([uuid.UUID(int=7), uuid.UUID(int=2**128 - 1)]), max_size=2).map(tuple),
    st.sampled_from([{}, {b"f": 1}, {b"f": 1, b"cf": 2}]),
    st.integers(0, 2**64 - 1),
    st.integers(0, 2**64 - 1),
    st.integers(0, 3),
    st.sampled_from([(), (("a", b"b"),)]),
)
_wal_entries = st.lists(st.tuples(_keys, st.lists(_cells, max_size=4)), max_size=10)
_mutations = st.lists(
    st.tuples(
        st.sampled_from(["flip", "set", "insert", "delete"]), st.integers(0, 2**20), st.binary(min_size=1, max_size=6)
    ),
    max_size=4,
)


def _wal(entries: list[tuple[WalKey, list[Cell]]], close: bool) -> bytes:
    buf = io.BytesIO()
    w = WalWriter(buf)
    w.append_many(entries)
    w.close(trailer=close)
    return buf.getvalue()


def _mutate(data: bytes, mutations: list[tuple[str, int, bytes]], floor: int) -> bytes:
    out = bytearray(data)
    for kind, pos, b in mutations:
        if len(out) <= floor:
            break
        i = floor + pos % (len(out) - floor)
        if kind == "flip":
            out[i] ^= b[0] or 1
        elif kind == "set":
            out[i : i + len(b)] = b
        elif kind == "insert":
            out[i:i] = b
        else:
            del out[i : i + len(b)]
    return bytes(out)


@needs_c
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_wal_entries, st.booleans(), _mutations, st.integers(0, 2**20), st.integers(1, 400))
def test_reads_agree_on_valid_and_corrupted_wals(
    entries: list[tuple[WalKey, list[Cell]]],
    close: bool,
    mutations: list[tuple[str, int, bytes]],
    cut: int,
    chunk: int,
) -> None:
    data = _mutate(_wal(entries, close), mutations, len(HEAD))
    if cut % 3 == 0:
        data = data[: len(HEAD) + cut % max(1, len(data) - len(HEAD) + 1)]
    assert outcome(data, "c", chunk) == outcome(data, "python", chunk)


@needs_c
@settings(max_examples=300, deadline=None)
@given(st.binary(min_size=0, max_size=600), st.integers(1, 64), st.integers(0, 40))
@example(b"\x00" * 40, 7, 0)
@example(b"\xff" * 12, 3, 0)
def test_parsers_agree_on_random_bytes(junk: bytes, limit: int, at: int) -> None:
    good = _wal([(WalKey(b"r", b"t", 1, 2, scopes={b"f": 1}), [Cell(b"a", b"f", b"q", 3, CellType.Put, b"v")])], False)
    body = good[len(HEAD) :]
    for buf in (junk, body + junk, body * 3 + junk, body + junk + body):
        c, py = parse_both(buf, min(at, len(buf)), limit)
        assert c == py


def _field(num: int, wire: int, value: int | bytes, pad: int = 0) -> bytes:
    tag = varint(num << 3 | wire)
    if wire == 0:
        assert isinstance(value, int)
        v = varint(value)
        if pad:  # an overlong varint: the same value with padding bytes
            v = bytes(b | 0x80 for b in v[:-1]) + bytes([v[-1] | 0x80]) + b"\x80" * (pad - 1) + b"\x00"
        return tag + v
    if wire == 2:
        assert isinstance(value, bytes)
        return tag + varint(len(value)) + value
    if wire == 1:
        return tag + struct.pack("<Q", int(value) % 2**64 if isinstance(value, int) else 0)
    return tag + struct.pack("<I", int(value) % 2**32 if isinstance(value, int) else 0)


def _uuid_bytes(u: uuid.UUID) -> bytes:
    return HBase_pb2.UUID(most_sig_bits=u.int >> 64, least_sig_bits=u.int & (2**64 - 1)).SerializeToString()


_nested = st.one_of(
    st.just(WAL_pb2.FamilyScope(family=b"f", scope_type=1).SerializeToString()),
    st.just(_uuid_bytes(uuid.UUID(int=5))),
    st.just(WAL_pb2.Attribute(key="k", value=b"v").SerializeToString()),
    st.binary(max_size=6),
)
_extra_fields = st.lists(
    st.one_of(
        st.tuples(st.sampled_from([3, 4, 7, 9, 10, 11, 13, 100]), st.just(0), st.integers(0, 2**70), st.integers(0, 3)),
        st.tuples(st.sampled_from([1, 2, 5, 6, 8, 12, 14]), st.just(2), _nested, st.just(0)),
        st.tuples(st.integers(1, 20), st.sampled_from([1, 5]), st.integers(0, 2**64), st.just(0)),
    ),
    max_size=4,
)


@needs_c
@settings(max_examples=400, deadline=None)
@given(_extra_fields, st.integers(0, 4), st.booleans(), st.integers(1, 3))
def test_parsers_agree_on_keys_of_every_shape(
    extra: list[tuple[int, int, Any, int]], n_cells: int, drop_required: bool, copies: int
) -> None:
    fields = [_field(1, 2, b"r"), _field(2, 2, b"t"), _field(3, 0, 9), _field(4, 0, 10)]
    if drop_required:
        fields.pop(2)
    fields.append(_field(7, 0, n_cells))
    fields += [_field(num, wire, value, pad) for num, wire, value, pad in extra]
    key = b"".join(fields)
    cells = b"".join(keyvalue(b"row", b"f", b"q%d" % i, i, 4, b"v" * i) for i in range(n_cells))
    entry = varint(len(key)) + key + cells
    plain = _wal([(WalKey(b"r", b"t", 1, 2), [Cell(b"a", b"f", b"q", 3, CellType.Put, b"v")])], False)[len(HEAD) :]
    buf = plain + entry * copies + plain
    c, py = parse_both(buf, 0, 32)
    assert c == py
    data = HEAD + buf
    assert outcome(data, "c", 50) == outcome(data, "python", 50)
