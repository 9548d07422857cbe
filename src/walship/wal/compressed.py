"""The entry parsers of compressed WALs (``hbase.regionserver.wal.enablecompression``).

An entry of a compressed WAL is a delimited ``WALKey`` whose encoded region name, table
name, scope families and extended-attribute values are dictionary tokens
(``WALKeyImpl.getBuilder`` with ``WALCellCodec.BaosAndCompressor``), then its cells as
``WALCellCodec.CompressedKvEncoder`` writes them::

    varint32 key length | varint32 value length | varint32 tags length
    row token (ROW) | family token (FAMILY) | qualifier token (QUALIFIER)
    int64 timestamp | type byte
    value: the bytes, or with value compression a varint32 length and the codec's bytes
    tags (when their length is not 0): with tag compression one TAG token per tag (its type
    byte and value), else the tags' bytes

Tokens and dictionaries are :mod:`walship.wal.dictionaries`'s, value codecs
:mod:`walship.wal.valuecodecs`'. The dictionaries change as entries are decoded, so a
:class:`CompressedState` belongs to one file and one position: the reader keeps it.

Both decoders give the same entries and errors: the compiled one (``walship.wal._walcodec``)
keeps its own copy of the dictionaries, and hands any entry it does not plainly decode (a
corrupt one, a rare key shape) to :func:`parse_compressed_py` with the dictionaries copied
over and back.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any

from google.protobuf.message import DecodeError

from walship.errors import CorruptWalError
from walship.protos import WAL_pb2
from walship.wal import dictionaries as _compression
from walship.wal.dictionaries import CompressionContext, LruDictionary
from walship.wal.entries import C_DEFER, NeedMore, _corrupt_cell, varint
from walship.wal.keys import cluster_ids_of
from walship.wal.model import CELL_TYPE_CODES, EMPTY_SCOPES, Cell, Tag, WalEntry, WalKey
from walship.wal.readahead import Buffer, on_bytes
from walship.wal.valuecodecs import ValueCodec

__all__ = ["CompressedState", "parse_compressed_c", "parse_compressed_py", "scopes_of"]

_TS_TYPE = struct.Struct(">qB")
_UINT16 = struct.Struct(">H")
_MAX_LEN = 0x7FFFFFFF
_tuple_new = tuple.__new__
_key_from_string = WAL_pb2.WALKeyRaw.FromString
_SCOPES: dict[tuple[tuple[bytes, int], ...], Mapping[bytes, int]] = {}
_SCOPES_MAX = 4096


class _Corrupt(Exception):
    """A token or value does not decode; the caller names the file and offset."""


def scopes_of(pairs: tuple[tuple[bytes, int], ...]) -> Mapping[bytes, int]:
    """The scopes of decoded ``(family, scope)`` pairs as a shared read-only mapping."""
    found = _SCOPES.get(pairs)
    if found is None:
        if len(_SCOPES) >= _SCOPES_MAX:
            _SCOPES.clear()
        found = _SCOPES[pairs] = MappingProxyType(dict(pairs))
    return found


class CompressedState:
    """The dictionaries (and value codec) of one compressed WAL at one position.

    :param decoder: ``"c"`` keeps a compiled twin of the dictionaries as well.
    """

    def __init__(self, tag_compression: bool, codec: ValueCodec | None, decoder: str) -> None:
        self.tag_compression = tag_compression
        self.codec = codec
        self.decoder = decoder
        self.reset()

    def reset(self) -> None:
        """Back to the empty dictionaries of a file's start."""
        caps = _compression.DEFAULT_CAPACITIES
        self.ctx = CompressionContext(tag_compression=self.tag_compression, capacities=caps)
        self.c: Any = None
        if self.decoder == "c":
            from walship.wal import _walcodec

            decompress = self.codec.decompress if self.codec is not None else None
            self.c = _walcodec.Context(caps, self.tag_compression, decompress, scopes_of)

    def snapshot(self) -> object:
        return self.c.export() if self.c is not None else self.ctx.export_state()

    def restore(self, snapshot: Any) -> None:
        if self.c is not None:
            self.c.load(snapshot)
        else:
            self.ctx.load_state(snapshot)


def parse_compressed_c(
    st: CompressedState, buf: Buffer, p: int, buf_off: int, path: str, limit: int
) -> tuple[list[WalEntry], int, CorruptWalError | None]:
    """:func:`parse_compressed_py` done by the compiled decoder, with the same results (``buf`` may
    be any buffer: the entries it hands to the Python parser are copied out as bytes)."""
    assert c_parse_compressed is not None
    out, p, status = c_parse_compressed(st.c, buf, p, buf_off, limit)
    while status == C_DEFER and len(out) < limit:
        st.ctx.load_state(st.c.export())
        more, p, error = on_bytes(lambda b, q, off: parse_compressed_py(st, b, q, off, path, 1), buf, p, buf_off)
        out += more
        if error is not None or not more:
            return out, p, error
        st.c.load(st.ctx.export_state())
        if len(out) < limit:
            more, p, status = c_parse_compressed(st.c, buf, p, buf_off, limit - len(out))
            out += more
    return out, p, None


def parse_compressed_py(
    st: CompressedState, buf: bytes, p: int, buf_off: int, path: str, limit: int
) -> tuple[list[WalEntry], int, CorruptWalError | None]:
    """Parse up to ``limit`` complete entries of a compressed WAL in ``buf`` from index ``p``,
    as :func:`walship.wal.entries.parse_entries_py` does for a plain one. An entry cut short
    by the end of ``buf`` leaves the dictionaries as they were before it."""
    ctx = st.ctx
    out: list[WalEntry] = []
    n = len(buf)
    try:
        while p < n and len(out) < limit:
            try:
                entry, c = _entry(st, buf, p, n, buf_off, path)
            except BaseException:
                ctx.rollback()
                raise
            ctx.commit()
            out.append(entry)
            p = c
    except NeedMore:
        pass
    except CorruptWalError as exc:
        return out, p, exc
    return out, p, None


def _entry(st: CompressedState, buf: bytes, p: int, n: int, buf_off: int, path: str) -> tuple[WalEntry, int]:
    ctx = st.ctx
    klen, q = varint(buf, p, path, buf_off + p)
    kend = q + klen
    if kend > n:
        raise NeedMore
    try:
        pb = _key_from_string(buf[q:kend])
        key = _key(pb, ctx)
    except DecodeError as exc:
        raise CorruptWalError(path, buf_off + p, f"WALKey does not parse: {exc}") from exc
    except _Corrupt as exc:
        raise CorruptWalError(path, buf_off + p, f"WALKey: {exc}") from exc
    c = kend
    cells: list[Cell] = []
    for i in range(pb.following_kv_count):
        try:
            cell, c2 = _cell(st, buf, c, n, path, buf_off)
        except _Corrupt as exc:
            raise _corrupt_cell(path, buf_off, p, c, i, str(exc)) from exc
        cells.append(cell)
        c = c2
    return _tuple_new(WalEntry, (key, tuple(cells), buf_off + p, buf_off + c)), c


def _key(pb: WAL_pb2.WALKeyRaw, ctx: CompressionContext) -> WalKey:
    """The key, its tokens decoded in ``WALKeyImpl.readFieldsFromPb``'s order: region, table,
    scope families, extended-attribute values (through the TABLE dictionary)."""
    region = _key_token(ctx.region, pb.encoded_region_name)
    table = _key_token(ctx.table, pb.table_name)
    scopes: Mapping[bytes, int] = EMPTY_SCOPES
    if pb.scopes:
        pairs = []
        for raw in pb.scopes:
            s = WAL_pb2.FamilyScope.FromString(raw)
            pairs.append((_key_token(ctx.family, s.family), s.scope_type))
        scopes = scopes_of(tuple(pairs))
    attrs: tuple[tuple[str, bytes], ...] = ()
    if pb.extended_attributes:
        decoded = []
        for raw in pb.extended_attributes:
            a = WAL_pb2.Attribute.FromString(raw)
            name: str | bytes = a.key
            if isinstance(name, bytes):  # protobuf hands a proto2 string that is not UTF-8 back as bytes
                raise DecodeError(f"extended attribute name {name!r} is not UTF-8")
            decoded.append((name, _key_token(ctx.table, a.value)))
        attrs = tuple(decoded)
    return _tuple_new(
        WalKey,
        (
            region,
            table,
            pb.log_sequence_number,
            pb.write_time,
            cluster_ids_of(pb),
            scopes,
            pb.nonceGroup,
            pb.nonce,
            pb.orig_sequence_number,
            attrs,
        ),
    )


def _key_token(d: LruDictionary, data: bytes) -> bytes:
    """One token held whole in a key field (``WALCellCodec.uncompressByteString``)."""
    if not data:
        raise _Corrupt(f"empty {d.name} token")
    status = data[0]
    if status == 0xFF:
        try:
            length, q = varint(data, 1, "", 0)
        except (NeedMore, CorruptWalError):
            raise _Corrupt(f"{d.name} token has no valid length") from None
        if q + length != len(data):
            raise _Corrupt(f"{d.name} token says {length} bytes, holds {len(data) - q}")
        value = data[q:]
        d.add(value)
        return value
    if status & 0x80 or len(data) != 2:
        raise _Corrupt(f"{d.name} token {data[:8].hex()} is neither an index nor bytes")
    found = d.get((status << 8) | data[1])
    if found is None:
        raise _Corrupt(f"{d.name} dictionary has no index {(status << 8) | data[1]} (it holds {len(d)})")
    return found


def _token(d: LruDictionary, buf: bytes, c: int, n: int) -> tuple[bytes, int]:
    """One token in the cell stream at ``buf[c]``."""
    if c >= n:
        raise NeedMore
    status = buf[c]
    if status < 0x80 and c + 1 < n and (status << 8) | buf[c + 1] == d.head:
        return d.entries[d.head], c + 2  # the most recent entry again: nothing changes
    if status == 0xFF:
        length, q = _varint(buf, c + 1)
        end = q + length
        if end > n:
            raise NeedMore
        value = buf[q:end]
        d.add(value)
        return value, end
    if status & 0x80:
        raise _Corrupt(f"{d.name} token starts with {status:#04x}, neither an index nor 0xff")
    if c + 2 > n:
        raise NeedMore
    i = (status << 8) | buf[c + 1]
    found = d.get(i)
    if found is None:
        raise _Corrupt(f"{d.name} dictionary has no index {i} (it holds {len(d)})")
    return found, c + 2


def _varint(buf: bytes, c: int) -> tuple[int, int]:
    try:
        v, c = varint(buf, c, "", 0)
    except CorruptWalError:
        raise _Corrupt("malformed varint") from None
    if v > _MAX_LEN:
        raise _Corrupt(f"length {v} is negative as a Java int")
    return v, c


def _cell(st: CompressedState, buf: bytes, c: int, n: int, path: str, buf_off: int) -> tuple[Cell, int]:
    """One cell as ``CompressedKvDecoder.parseCell`` reads it."""
    ctx = st.ctx
    if c + 3 <= n and buf[c] < 0x80 and buf[c + 1] < 0x80 and buf[c + 2] < 0x80:  # one byte each, mostly
        klen, vlen, tlen = buf[c], buf[c + 1], buf[c + 2]
        c += 3
    else:
        klen, c = _varint(buf, c)
        vlen, c = _varint(buf, c)
        tlen, c = _varint(buf, c)
    if tlen > 0xFFFF:
        raise _Corrupt(f"tags length {tlen} is more than HBase allows (65535)")
    row, c = _token(ctx.row, buf, c, n)
    family, c = _token(ctx.family, buf, c, n)
    qualifier, c = _token(ctx.qualifier, buf, c, n)
    if len(row) > 0x7FFF or len(family) > 0x7F:
        raise _Corrupt(f"row of {len(row)} or family of {len(family)} bytes is too long")
    if klen != 12 + len(row) + len(family) + len(qualifier):
        raise _Corrupt(f"key length {klen} does not match row, family and qualifier")
    if c + 9 > n:
        raise NeedMore
    ts, tcode = _TS_TYPE.unpack_from(buf, c)
    if tcode not in CELL_TYPE_CODES:
        raise _Corrupt(f"unknown cell type {tcode}")
    c += 9
    codec = st.codec
    if codec is None:
        end = c + vlen
        if end > n:
            raise NeedMore
        value = buf[c:end]
    else:
        clen, c = _varint(buf, c)
        end = c + clen
        if end > n:
            raise NeedMore
        try:
            value = codec.decompress(buf[c:end], vlen)
        except ValueError as exc:
            raise _Corrupt(str(exc)) from exc
    c = end
    tags: tuple[Tag, ...] = ()
    if tlen:
        tags, c = _tags(ctx, buf, c, n, tlen)
    return _tuple_new(Cell, (row, family, qualifier, ts, tcode, value, tags)), c


def _tags(ctx: CompressionContext, buf: bytes, c: int, n: int, tlen: int) -> tuple[tuple[Tag, ...], int]:
    out: list[Tag] = []
    if ctx.tag_compression:  # TagCompressionContext.uncompressTags: tokens until tlen bytes
        got = 0
        while got < tlen:
            t, c = _token(ctx.tag, buf, c, n)
            if not t:
                raise _Corrupt("empty tag")
            got += 2 + len(t)
            out.append(Tag(t[0], t[1:]))
        if got != tlen:
            raise _Corrupt(f"tags decode to {got} bytes, the cell says {tlen}")
        return tuple(out), c
    end = c + tlen
    if end > n:
        raise NeedMore
    while c < end:
        if c + 3 > end:
            raise _Corrupt("truncated tag")
        length = _UINT16.unpack_from(buf, c)[0]
        if length < 1 or c + 2 + length > end:
            raise _Corrupt(f"tag length {length} overruns the tags")
        out.append(Tag(buf[c + 2], buf[c + 3 : c + 2 + length]))
        c += 2 + length
    return tuple(out), c


# -- the compiled decoder -------------------------------------------------------------------

c_parse_compressed: Callable[[Any, Buffer, int, int, int], tuple[list[WalEntry], int, int]] | None = None
try:
    from walship.wal import _walcodec
except ImportError:
    pass
else:
    c_parse_compressed = getattr(_walcodec, "parse_compressed", None)
