"""Read HBase WAL files (ProtobufLogWriter / AsyncProtobufLogWriter, uncompressed).

The reader works on any seekable binary file object (a local file, an fsspec or pyarrow
file on HDFS) and decodes entries from any entry boundary, so a replication position can
resume exactly where the last shipped entry ended.

Two ways a read can stop short, told apart on purpose:

* an **incomplete tail**: the last entry of a file without a trailer is cut short by the
  end of the file. The writer may still be appending, so this is no error: iteration stops
  before that entry and :attr:`WalReader.incomplete_tail` is set, with
  :attr:`WalReader.stop_offset` at its first byte.
* **corruption**: the bytes of an entry are all there but do not parse, or a closed file
  (one with a trailer) ends inside an entry. :class:`~walship.errors.CorruptWalError` names
  the file and the byte offset. Nothing is ever skipped.

Entries are decoded by the compiled ``walship.wal._walcodec`` (src/walship/wal/_walcodec.c,
built by ``make setup``) when it is there, else, with one log line saying so, by the
pure-Python parser of this module (:func:`_parse_entries_py`). The compiled one decodes the
plainly valid entries and leaves every other one (cut short, corrupt, a rare key shape) to the
Python parser, so both give the same entries and the same errors; ``WalReader(...,
decoder="python")`` picks the pure-Python one.

Example::

    with open(path, "rb") as f:
        reader = WalReader(f, path)
        for entry in reader.entries(start=position):
            ...
        position = reader.stop_offset
"""

from __future__ import annotations

import io
import logging
import struct
import uuid
from collections.abc import Callable, Iterator, Mapping
from types import MappingProxyType
from typing import Any, BinaryIO

from google.protobuf.message import DecodeError

from walship.errors import CorruptWalError, WalError
from walship.protos import HBase_pb2, WAL_pb2
from walship.wal.format import INT32, MAGIC, TRAILER_MAGIC, TRAILER_TAIL_SIZE, check_header
from walship.wal.model import EMPTY_SCOPES, Cell, CellType, Tag, WalEntry, WalKey

__all__ = ["DECODERS", "DEFAULT_CHUNK_SIZE", "WalReader", "default_decoder", "read_wal"]

log = logging.getLogger(__name__)

DEFAULT_CHUNK_SIZE = 4 * 1024 * 1024

_CELL_HEAD = struct.Struct(">iiih")  # total length, key length, value length, row length
_TS_TYPE = struct.Struct(">qB")
_INT16 = struct.Struct(">h")
_TYPE_CODES = frozenset(t.value for t in CellType)
_NO_TAGS: tuple[tuple[Tag, ...]] = ((),)
_SHAPES: dict[tuple[int, int, int, int, int], struct.Struct] = {}
_SHAPES_SEEN: dict[tuple[int, ...], int] = {}
_Regroup = Callable[[tuple[Any, ...]], tuple[Cell, ...]]
_RUNS: dict[tuple[int, int, int, int, int, int], tuple[struct.Struct, _Regroup]] = {}
_REGROUPERS: dict[int, _Regroup] = {}
_SHAPES_MAX = 8192
# Entries parsed per call: enough to spread the call's cost, few enough to stay in cache.
_BATCH = 32
_tuple_new = tuple.__new__
_SCOPES_CACHE: dict[Any, Mapping[bytes, int]] = {}
_SCOPES_CACHE_MAX = 4096
_key_from_string = WAL_pb2.WALKeyRaw.FromString
_UUID_CACHE: dict[bytes, uuid.UUID] = {}

#: The decoders :class:`WalReader` can use: ``"c"``, the compiled ``walship.wal._walcodec``
#: (built by ``make setup``), and ``"python"``, the pure-Python parser of this module.
DECODERS = ("c", "python")


class _NeedMore(Exception):
    """The buffer ends inside the entry being parsed."""


class WalReader:
    """Decode the entries of one WAL file.

    :param fileobj: a seekable binary file object positioned anywhere.
    :param path: how the file is named in errors and logs.
    :param chunk_size: bytes read at a time; memory use stays near this plus one entry.
    :param decoder: one of :data:`DECODERS`; default: :func:`default_decoder`, the compiled
        one when it is built. Both decode the same bytes into the same entries and errors.
    :raises CorruptWalError: the file does not start with ``PWAL`` or its header is corrupt.
    :raises UnsupportedWalError: the header names compression, encryption, or an unknown
        writer or codec.
    :raises ValueError: an unknown ``decoder``, or ``"c"`` when it is not built.
    """

    def __init__(
        self,
        fileobj: BinaryIO,
        path: str = "<wal>",
        *,
        chunk_size: int = DEFAULT_CHUNK_SIZE,
        decoder: str | None = None,
    ) -> None:
        if chunk_size <= 0:
            raise ValueError(f"'chunk_size' must be > 0, got {chunk_size}")
        if decoder is None:
            decoder = default_decoder()
        elif decoder not in DECODERS:
            raise ValueError(f"'decoder' must be one of {list(DECODERS)}, got {decoder!r}")
        elif decoder == "c" and _C_UNAVAILABLE is not None:
            raise ValueError(f"'decoder' 'c' is not available: {_C_UNAVAILABLE}")
        if not fileobj.seekable():
            raise WalError(path, None, "the WAL must be opened as a seekable file")
        self._f = fileobj
        self.path = path
        self._chunk = chunk_size
        #: The decoder in use: ``"c"`` or ``"python"``.
        self.decoder = decoder
        self._parse = _parse_entries_c if decoder == "c" else _parse_entries_py
        #: The decoded header, or ``None`` when the file is too short to hold one yet.
        self.header: WAL_pb2.WALHeader | None = None
        #: Offset of the first entry (just after the header); 0 while there is no header.
        self.header_end = 0
        #: Offset where reading stopped: the end of the last entry read, or the first byte of
        #: an incomplete tail. Set by :meth:`entries`.
        self.stop_offset = 0
        #: True when the last :meth:`entries` call stopped before an entry cut short by the
        #: end of a file that has no trailer.
        self.incomplete_tail = False
        #: True when the file ends with a trailer (``LAWP``): it was closed cleanly.
        self.has_trailer = False
        #: Where the entries end: the trailer's first byte, or the file size.
        self.edits_end = 0
        self._read_header()

    # -- header and trailer -------------------------------------------------------------

    def _size(self) -> int:
        return self._f.seek(0, io.SEEK_END)

    def _read_header(self) -> None:
        size = self._size()
        self._f.seek(0)
        head = self._f.read(min(size, 4 + 5 + 4096))
        if head[: len(MAGIC)] != MAGIC[: len(head)]:
            raise CorruptWalError(self.path, 0, f"not a PWAL file: starts with {head[:4]!r}, expected {MAGIC!r}")
        if len(head) < len(MAGIC):
            return  # a WAL being created: not even the magic yet
        try:
            length, pos = _varint(head, len(MAGIC), self.path, len(MAGIC))
        except _NeedMore:
            return
        end = pos + length
        if end > size:
            return  # header still being written
        if end > len(head):
            self._f.seek(0)
            head = self._f.read(end)
        header = WAL_pb2.WALHeader()
        try:
            header.ParseFromString(head[pos:end])
        except DecodeError as exc:
            raise CorruptWalError(self.path, len(MAGIC), f"WALHeader does not parse: {exc}") from exc
        for name in ("writer_cls_name", "cell_codec_cls_name"):
            value = getattr(header, name)
            if isinstance(value, bytes):  # protobuf hands a proto2 string that is not UTF-8 back as bytes
                raise CorruptWalError(self.path, len(MAGIC), f"WALHeader does not parse: {name} {value!r} is not UTF-8")
        check_header(header, self.path)
        self.header = header
        self.header_end = end

    def refresh(self) -> None:
        """Look at the file again: its header if it had none yet, its size and trailer
        (:attr:`edits_end`, :attr:`has_trailer`). :meth:`entries` does this itself."""
        size = self._size()
        if self.header is None:
            self._read_header()
        self._locate_trailer(size)

    def _locate_trailer(self, size: int) -> None:
        """Find where the entries end: before the trailer if there is one, else at EOF."""
        self.has_trailer = False
        self.edits_end = size
        if self.header is None or size < self.header_end + TRAILER_TAIL_SIZE:
            return
        self._f.seek(size - TRAILER_TAIL_SIZE)
        tail = self._f.read(TRAILER_TAIL_SIZE)
        if tail[4:] != TRAILER_MAGIC:
            return
        trailer_size = INT32.unpack_from(tail)[0]
        trailer_start = size - TRAILER_TAIL_SIZE - trailer_size
        if trailer_size < 0 or trailer_start < self.header_end:
            return  # HBase reads such a file as having no trailer
        if trailer_size:
            self._f.seek(trailer_start)
            try:
                WAL_pb2.WALTrailer.FromString(self._f.read(trailer_size))
            except DecodeError as exc:
                # as HBase's reader: a trailer that does not parse is no trailer (an open WAL
                # whose last entry merely ends with ``LAWP``, or a torn close)
                log.debug(
                    "%s: bytes ending in the trailer magic at %d are no WALTrailer: %s", self.path, trailer_start, exc
                )
                return
        self.has_trailer = True
        self.edits_end = trailer_start

    # -- entries -------------------------------------------------------------------------

    def _entries_run_to_eof(self, start: int) -> bool:
        """The bytes from ``start`` to the end of the file are whole entries, ending exactly
        at EOF (so what looked like a trailer is the tail of the last one)."""
        here = self._f.tell()
        self._f.seek(start)
        buf = self._f.read()
        self._f.seek(here)  # the caller reads on from where it was
        batch, end, error = self._parse(buf, 0, start, self.path, _BATCH)
        return bool(batch) and error is None and end == len(buf)

    def entries(self, start: int | None = None) -> Iterator[WalEntry]:
        """Yield the entries from ``start`` (an entry boundary; default: the first entry).

        The file's size and trailer are looked at again on every call, so a reader of a
        WAL still being written sees the entries appended since.

        :raises WalError: ``start`` lies inside the header or past the end of the entries.
        :raises CorruptWalError: an entry does not parse; the message names its offset.
        """
        self.refresh()
        self.incomplete_tail = False
        if self.header is None:
            if start:
                raise WalError(self.path, start, f"position {start} is past the end of a WAL with no header yet")
            self.stop_offset = 0
            self.incomplete_tail = True
            return
        pos = start if start else self.header_end
        if pos < self.header_end:
            raise WalError(
                self.path, pos, f"position {pos} lies inside the WAL header (entries start at {self.header_end})"
            )
        if pos > self.edits_end:
            raise WalError(self.path, pos, f"position {pos} is past the end of the entries ({self.edits_end})")
        self.stop_offset = pos
        yield from self._iter_from(pos)

    def _iter_from(self, pos: int) -> Iterator[WalEntry]:
        f = self._f
        limit = self.edits_end
        f.seek(pos)
        buf = b""
        buf_off = pos  # file offset of buf[0]
        p = 0
        while True:
            n = len(buf)
            while p < n:
                batch, p, error = self._parse(buf, p, buf_off, self.path, _BATCH)
                for entry in batch:
                    self.stop_offset = entry.end_offset
                    yield entry
                if error is not None:
                    raise error
                if len(batch) < _BATCH:
                    break  # the buffer ends inside an entry, or at its end
            read_to = buf_off + n
            if read_to >= limit and p == n and self.has_trailer and self._entries_run_to_eof(limit):
                # an open WAL whose last entries happen to end like a trailer (``<int32>LAWP``,
                # the bytes before it a valid WALTrailer): they are entries; read on to EOF
                log.debug("%s: the bytes that look like a trailer at %d are entries", self.path, limit)
                self.has_trailer = False
                limit = self.edits_end = self._size()
                f.seek(read_to)  # _size() moved to the end
            if read_to >= limit:
                if p < n:
                    start = buf_off + p
                    if self.has_trailer and self._entries_run_to_eof(start):
                        # an open WAL whose last entry happens to end like a trailer
                        # (``<int32>LAWP``): the "trailer" is entry bytes; read on to EOF
                        log.debug("%s: the bytes that look like a trailer belong to the entry at %d", self.path, start)
                        self.has_trailer = False
                        limit = self.edits_end = self._size()
                        f.seek(read_to)  # _size() moved to the end
                        continue
                    if self.has_trailer:
                        raise CorruptWalError(
                            self.path,
                            start,
                            f"entry runs past the end of the entries ({limit}) of a closed WAL",
                        )
                    self.incomplete_tail = True
                    log.debug("%s: incomplete entry at offset %d (file size %d)", self.path, start, limit)
                return
            rest = buf[p:]
            want = min(max(self._chunk, len(rest)), limit - read_to)
            more = f.read(want)
            if not more:
                # the file shrank under us; treat what we have as the end
                limit = read_to
                continue
            buf = rest + more
            buf_off += p
            p = 0


def _varint(buf: bytes, p: int, path: str, file_off: int) -> tuple[int, int]:
    """Decode a varint32 as ``CodedInputStream.readRawVarint32`` does."""
    result = 0
    shift = 0
    n = len(buf)
    for i in range(10):
        if p + i >= n:
            raise _NeedMore
        b = buf[p + i]
        if i < 5:
            result |= (b & 0x7F) << shift
            shift += 7
        if b < 0x80:
            return result & 0xFFFFFFFF, p + i + 1
    raise CorruptWalError(path, file_off, "malformed varint length prefix")


def _parse_entries_c(
    buf: bytes, p: int, buf_off: int, path: str, limit: int
) -> tuple[list[WalEntry], int, CorruptWalError | None]:
    """:func:`_parse_entries_py` done by the compiled decoder, with the same results.

    The compiled decoder decodes only whole, plainly valid entries; it stops before any other
    (cut short by the end of ``buf``, corrupt, or a WALKey in a rarer protobuf shape) and
    leaves it to :func:`_parse_entries_py`, which decodes it or names its corruption. So
    every error message and offset comes from the Python parser.
    """
    assert _c_parse is not None
    out, p, deferred = _c_parse(buf, p, buf_off, limit)
    while deferred and len(out) < limit:
        more, p, error = _parse_entries_py(buf, p, buf_off, path, 1)
        out += more
        if error is not None or not more:
            return out, p, error
        if len(out) < limit:
            more, p, deferred = _c_parse(buf, p, buf_off, limit - len(out))
            out += more
    return out, p, None


def _parse_entries_py(
    buf: bytes, p: int, buf_off: int, path: str, limit: int
) -> tuple[list[WalEntry], int, CorruptWalError | None]:
    """Parse up to ``limit`` complete entries in ``buf`` from index ``p``.

    Returns the entries, the index where parsing stopped (the start of an entry cut short
    by the end of ``buf``, or ``len(buf)``) and the corruption that stopped it, if any: the
    entries before a corrupt one are returned first, so nothing that was readable is lost.

    This is the hot loop of every read: it is written for speed (locals, one struct call per
    cell, tuples built directly) and checks every length it trusts.
    """
    out: list[WalEntry] = []
    n = len(buf)
    unpack_head = _CELL_HEAD.unpack_from
    unpack_ts = _TS_TYPE.unpack_from
    types = _TYPE_CODES
    new = _tuple_new
    shapes = _SHAPES
    runs = _RUNS
    try:
        while p < n and len(out) < limit:
            b0 = buf[p]
            if b0 < 0x80:
                q = p + 1
                kend = q + b0
            else:
                klen, q = _varint(buf, p, path, buf_off + p)
                kend = q + klen
            if kend > n:
                raise _NeedMore
            try:
                pb = _key_from_string(buf[q:kend])
            except DecodeError as exc:
                raise CorruptWalError(path, buf_off + p, f"WALKey does not parse: {exc}") from exc
            count = pb.following_kv_count
            c = kend
            cells: list[Cell] = []
            decoded: tuple[Cell, ...] | None = None
            if count > 1 and runs:
                run = _uniform_run(buf, c, n, count)
                if run is not None:
                    decoded, c = run
                    count = 0  # decoded
            if count:
                append = cells.append
                run_shape: tuple[int, int, int, int, int] | None = None
                uniform = count > 1
                for i in range(count):
                    if c + 18 > n:  # int32 total + the fixed head unpacked below
                        if c + 4 <= n and INT32.unpack_from(buf, c)[0] < 14:
                            raise _corrupt_cell(path, buf_off, p, c, i, "length too small")
                        raise _NeedMore
                    total, klen_kv, vlen, rowlen = unpack_head(buf, c)
                    cend = c + 4 + total
                    if cend > n:
                        raise _NeedMore
                    fpos = c + 14 + rowlen
                    if rowlen >= 0 and fpos < cend:
                        shape = (total, klen_kv, vlen, rowlen, buf[fpos])
                        if i == 0:
                            run_shape = shape
                        elif shape != run_shape:
                            uniform = False
                        fast = shapes.get(shape)
                        if fast is not None:
                            # a known, already validated layout: one struct call decodes the cell
                            t = fast.unpack_from(buf, c)
                            if t[4] not in types:
                                raise _corrupt_cell(path, buf_off, p, c, i, f"unknown cell type {t[4]}")
                            append(new(Cell, t + _NO_TAGS))
                            c = cend
                            continue
                        _learn_shape(shape)
                    else:
                        uniform = False
                    kend_kv = c + 12 + klen_kv
                    vend = kend_kv + vlen
                    if rowlen < 0 or klen_kv < 12 + rowlen or vlen < 0 or (vend != cend and vend + 2 > cend):
                        raise _corrupt_cell(
                            path,
                            buf_off,
                            p,
                            c,
                            i,
                            f"inconsistent lengths (cell {total}, key {klen_kv}, value {vlen}, row {rowlen})",
                        )
                    qstart = fpos + 1 + buf[fpos]
                    tspos = kend_kv - 9
                    if qstart > tspos:
                        raise _corrupt_cell(path, buf_off, p, c, i, f"family length {buf[fpos]} overruns the key")
                    ts, tcode = unpack_ts(buf, tspos)
                    if tcode not in types:
                        raise _corrupt_cell(path, buf_off, p, c, i, f"unknown cell type {tcode}")
                    append(
                        new(
                            Cell,
                            (
                                buf[c + 14 : fpos],
                                buf[fpos + 1 : qstart],
                                buf[qstart:tspos],
                                ts,
                                tcode,
                                buf[kend_kv:vend],
                                _parse_tags(buf, vend, cend, path, buf_off, i, p) if vend != cend else (),
                            ),
                        )
                    )
                    c = cend
                if uniform and run_shape is not None:
                    _learn_run(run_shape, len(cells))
            if decoded is None:
                decoded = tuple(cells)
            try:
                key = _key_from_raw(pb)
            except DecodeError as exc:
                raise CorruptWalError(path, buf_off + p, f"WALKey does not parse: {exc}") from exc
            out.append(new(WalEntry, (key, decoded, buf_off + p, buf_off + c)))
            p = c
    except _NeedMore:
        pass
    except CorruptWalError as exc:
        return out, p, exc
    return out, p, None


def _seen_twice(key: tuple[int, ...]) -> bool:
    """Count a layout; true on its second sighting (then it is worth compiling)."""
    seen = _SHAPES_SEEN.get(key, 0) + 1
    if seen < 2:
        if len(_SHAPES_SEEN) >= _SHAPES_MAX:
            _SHAPES_SEEN.clear()
        _SHAPES_SEEN[key] = seen
        return False
    _SHAPES_SEEN.pop(key, None)
    return True


def _learn_shape(shape: tuple[int, int, int, int, int]) -> None:
    """Count a cell layout; on its second sighting compile one struct that decodes it whole.

    A layout is (cell length, key length, value length, row length, family length). Cells of
    one table mostly share a few layouts, and one ``unpack_from`` per cell replaces a dozen
    slices and checks. Only valid, tag-free layouts are compiled, so the fast path needs no
    checks but the cell type's. The caches are bounded; data whose every cell differs just
    stays on the general path.
    """
    fmt = _cell_format(shape)
    if fmt is None or not _seen_twice(shape):
        return
    if len(_SHAPES) >= _SHAPES_MAX:
        _SHAPES.clear()
    _SHAPES[shape] = struct.Struct(">" + fmt)


def _cell_format(shape: tuple[int, int, int, int, int]) -> str | None:
    """The struct format decoding a valid, tag-free cell of this layout, or ``None``.

    It skips the int32 total, key length, value length and row length, then reads the row,
    skips the family length, then reads family, qualifier, timestamp, type and value.
    """
    total, klen, vlen, rowlen, famlen = shape
    qlen = klen - 12 - rowlen - famlen
    if rowlen < 0 or qlen < 0 or vlen < 0 or total != 8 + klen + vlen:
        return None
    return f"14x{rowlen}sx{famlen}s{qlen}sqB{vlen}s"


def _learn_run(shape: tuple[int, int, int, int, int], count: int) -> None:
    """Count an entry whose ``count`` cells share one layout; compile the run on its second
    sighting, so that one struct call decodes all its cells (see :func:`_uniform_run`)."""
    key = (*shape, count)
    if key in _RUNS:
        return
    fmt = _cell_format(shape)
    if fmt is None or not _seen_twice(key):
        return
    if len(_RUNS) >= _SHAPES_MAX:
        _RUNS.clear()
    _RUNS[key] = (struct.Struct(">" + fmt * count), _regrouper(count))


def _regrouper(count: int) -> _Regroup:
    """A function turning the flat fields of ``count`` unpacked cells (six each) into their
    Cells: one tuple display per cell, which builds them faster than any generic regrouping."""
    found = _REGROUPERS.get(count)
    if found is None:
        cells = "".join(
            f"new(Cell, (t[{i}], t[{i + 1}], t[{i + 2}], t[{i + 3}], t[{i + 4}], t[{i + 5}], ())), "
            for i in range(0, 6 * count, 6)
        )
        found = _REGROUPERS[count] = eval(f"lambda t: ({cells})", {"new": _tuple_new, "Cell": Cell})
    return found


def _uniform_run(buf: bytes, c: int, n: int, count: int) -> tuple[tuple[Cell, ...], int] | None:
    """Decode ``count`` cells at ``buf[c]`` with one struct call when they all share a
    compiled layout; ``None`` sends them down the cell-by-cell path.

    Every cell's 14-byte head and family length are compared with the first cell's before
    the struct is trusted, so a differing cell is never decoded with the wrong layout.
    """
    if c + 18 > n:
        return None
    total, klen, vlen, rowlen = _CELL_HEAD.unpack_from(buf, c)
    stride = 4 + total
    end = c + count * stride
    fpos = 14 + rowlen
    if end > n or rowlen < 0 or fpos >= stride:
        return None
    famlen = buf[c + fpos]
    compiled = _RUNS.get((total, klen, vlen, rowlen, famlen, count))
    if compiled is None:
        return None
    run, regroup = compiled
    head = buf[c : c + 14]
    j = c + stride
    while j < end:
        if buf[j : j + 14] != head or buf[j + fpos] != famlen:
            return None
        j += stride
    t = run.unpack_from(buf, c)
    if not _TYPE_CODES.issuperset(t[4::6]):
        return None  # the cell-by-cell path names the bad cell
    return regroup(t), end


def _corrupt_cell(path: str, buf_off: int, p: int, c: int, i: int, what: str) -> CorruptWalError:
    return CorruptWalError(path, buf_off + c, f"cell {i} of entry at offset {buf_off + p}: {what}")


def _parse_tags(
    buf: bytes, start: int, end: int, path: str, buf_off: int, cell_no: int, entry_p: int
) -> tuple[Tag, ...]:
    tags_len = _INT16.unpack_from(buf, start)[0] & 0xFFFF
    t = start + 2
    if t + tags_len != end:
        raise CorruptWalError(
            path,
            buf_off + start,
            f"cell {cell_no} of entry at offset {buf_off + entry_p}: tags length {tags_len} does not match the cell",
        )
    out: list[Tag] = []
    while t < end:
        if t + 3 > end:
            raise CorruptWalError(path, buf_off + t, f"cell {cell_no}: truncated tag")
        tlen = _INT16.unpack_from(buf, t)[0] & 0xFFFF
        if tlen < 1 or t + 2 + tlen > end:
            raise CorruptWalError(path, buf_off + t, f"cell {cell_no}: tag length {tlen} overruns the tags")
        out.append(Tag(buf[t + 2], buf[t + 3 : t + 2 + tlen]))
        t += 2 + tlen
    return tuple(out)


def _key_from_raw(pb: WAL_pb2.WALKeyRaw) -> WalKey:
    """Build a :class:`WalKey` from the raw twin of ``WALKey``; nested messages come from
    caches keyed by their bytes (parsed once each, with their real types and checks)."""
    cids = pb.cluster_ids
    if cids:
        cluster_ids: tuple[uuid.UUID, ...] = tuple(map(_uuid, cids))
    elif pb.cluster_id:  # 0.94-era single origin id, read as WALKeyImpl does
        cluster_ids = (_uuid(pb.cluster_id),)
    else:
        cluster_ids = ()
    scopes = pb.scopes
    attrs = pb.extended_attributes
    return _tuple_new(
        WalKey,
        (
            pb.encoded_region_name,
            pb.table_name,
            pb.log_sequence_number,
            pb.write_time,
            cluster_ids,
            _scopes(scopes) if scopes else EMPTY_SCOPES,
            pb.nonceGroup,
            pb.nonce,
            pb.orig_sequence_number,
            tuple(_attribute(a) for a in attrs) if attrs else (),
        ),
    )


def _uuid(raw: bytes) -> uuid.UUID:
    found = _UUID_CACHE.get(raw)
    if found is None:
        u = HBase_pb2.UUID.FromString(raw)
        found = uuid.UUID(int=(u.most_sig_bits << 64) | u.least_sig_bits)
        if len(_UUID_CACHE) >= _SCOPES_CACHE_MAX:
            _UUID_CACHE.clear()
        _UUID_CACHE[raw] = found
    return found


def _attribute(raw: bytes) -> tuple[str, bytes]:
    a = WAL_pb2.Attribute.FromString(raw)
    key: str | bytes = a.key
    if isinstance(key, bytes):  # protobuf hands a proto2 string that is not UTF-8 back as bytes
        raise DecodeError(f"extended attribute name {key!r} is not UTF-8")
    return key, a.value


def _scopes(scopes: Any) -> Mapping[bytes, int]:
    """The scopes of a key as a shared read-only mapping, cached by their bytes: every edit
    of a region carries the same scopes, and building a dict per entry was the largest single
    cost of decoding a key."""
    sig: Any = scopes[0] if len(scopes) == 1 else tuple(scopes)
    found = _SCOPES_CACHE.get(sig)
    if found is None:
        parsed = [WAL_pb2.FamilyScope.FromString(raw) for raw in scopes]
        if len(_SCOPES_CACHE) >= _SCOPES_CACHE_MAX:
            _SCOPES_CACHE.clear()
        found = _SCOPES_CACHE[sig] = MappingProxyType({s.family: s.scope_type for s in parsed})
    return found


# -- the compiled decoder -------------------------------------------------------------------

#: ``walship.wal._walcodec.parse`` once configured, else ``None``
_c_parse: Callable[[bytes, int, int, int], tuple[list[WalEntry], int, bool]] | None = None
_C_UNAVAILABLE: str | None = None  # why the compiled decoder cannot be used, when it cannot
_fallback_logged = False
try:
    from walship.wal import _walcodec
except ImportError as exc:
    _C_UNAVAILABLE = f"walship.wal._walcodec is not built ({exc})"
else:
    try:
        _walcodec.configure(Cell, Tag, WalKey, WalEntry, _uuid, _scopes, _attribute, EMPTY_SCOPES, DecodeError)
    except TypeError as exc:  # a model the compiled decoder cannot build: decode in Python
        _C_UNAVAILABLE = f"walship.wal._walcodec refused the WAL model: {exc}"
    else:
        _c_parse = _walcodec.parse


def default_decoder() -> str:
    """The decoder a :class:`WalReader` uses when none is named: ``"c"`` when the compiled
    decoder is built, else ``"python"`` (said once per process in the log, at INFO)."""
    global _fallback_logged
    if _C_UNAVAILABLE is None:
        return "c"
    if not _fallback_logged:
        _fallback_logged = True
        log.info("%s: WALs are decoded in pure Python, several times slower; `make setup` builds it", _C_UNAVAILABLE)
    return "python"


def read_wal(path: str, start: int | None = None) -> list[WalEntry]:
    """Read every complete entry of a local WAL file (a convenience for tools and tests)."""
    with open(path, "rb") as f:
        return list(WalReader(f, path).entries(start))
