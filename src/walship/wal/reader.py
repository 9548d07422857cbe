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
from collections.abc import Iterator
from typing import BinaryIO

from google.protobuf.message import DecodeError

from walship.errors import CorruptWalError, WalError
from walship.protos import WAL_pb2
from walship.wal.format import INT32, MAGIC, TRAILER_MAGIC, TRAILER_TAIL_SIZE, check_header
from walship.wal.model import Cell, CellType, Tag, WalEntry, WalKey

__all__ = ["DEFAULT_CHUNK_SIZE", "WalReader", "read_wal"]

log = logging.getLogger(__name__)

DEFAULT_CHUNK_SIZE = 4 * 1024 * 1024

_CELL_HEAD = struct.Struct(">iiih")  # total length, key length, value length, row length
_TS_TYPE = struct.Struct(">qB")
_INT16 = struct.Struct(">h")
_TYPES: dict[int, CellType] = {t.value: t for t in CellType}
_EMPTY_SCOPES: dict[bytes, int] = {}
_KEY_INFRASTRUCTURE = 12  # int16 row length + int8 family length + int64 ts + int8 type


class _NeedMore(Exception):
    """The buffer ends inside the entry being parsed."""


class WalReader:
    """Decode the entries of one WAL file.

    :param fileobj: a seekable binary file object positioned anywhere.
    :param path: how the file is named in errors and logs.
    :param chunk_size: bytes read at a time; memory use stays near this plus one entry.
    :raises CorruptWalError: the file does not start with ``PWAL`` or its header is corrupt.
    :raises UnsupportedWalError: the header names compression, encryption, or an unknown
        writer or codec.
    """

    def __init__(self, fileobj: BinaryIO, path: str = "<wal>", *, chunk_size: int = DEFAULT_CHUNK_SIZE) -> None:
        if chunk_size <= 0:
            raise ValueError(f"'chunk_size' must be > 0, got {chunk_size}")
        if not fileobj.seekable():
            raise WalError(path, None, "the WAL must be opened as a seekable file")
        self._f = fileobj
        self.path = path
        self._chunk = chunk_size
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
        check_header(header, self.path)
        self.header = header
        self.header_end = end

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
                raise CorruptWalError(self.path, trailer_start, f"WALTrailer does not parse: {exc}") from exc
        self.has_trailer = True
        self.edits_end = trailer_start

    # -- entries -------------------------------------------------------------------------

    def entries(self, start: int | None = None) -> Iterator[WalEntry]:
        """Yield the entries from ``start`` (an entry boundary; default: the first entry).

        The file's size and trailer are looked at again on every call, so a reader of a
        WAL still being written sees the entries appended since.

        :raises WalError: ``start`` lies inside the header or past the end of the entries.
        :raises CorruptWalError: an entry does not parse; the message names its offset.
        """
        size = self._size()
        if self.header is None:
            self._read_header()
        self._locate_trailer(size)
        self.incomplete_tail = False
        if self.header is None:
            if start:
                raise WalError(self.path, start, f"position {start} is past the end of a WAL with no header yet")
            self.stop_offset = 0
            self.incomplete_tail = True
            return
        pos = self.header_end if not start else start
        if pos < self.header_end:
            raise WalError(self.path, pos, f"position {pos} lies inside the WAL header (entries start at {self.header_end})")
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
                try:
                    entry, q = _parse_entry(buf, p, buf_off, self.path)
                except _NeedMore:
                    break
                p = q
                self.stop_offset = buf_off + q
                yield entry
            read_to = buf_off + n
            if read_to >= limit:
                if p < n:
                    start = buf_off + p
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


def _parse_entry(buf: bytes, p: int, buf_off: int, path: str) -> tuple[WalEntry, int]:
    """Parse the entry starting at ``buf[p]``; return it and the index just after it."""
    b0 = buf[p]
    if b0 < 0x80:
        klen = b0
        q = p + 1
    else:
        klen, q = _varint(buf, p, path, buf_off + p)
    kend = q + klen
    n = len(buf)
    if kend > n:
        raise _NeedMore
    try:
        pb = WAL_pb2.WALKey.FromString(buf[q:kend])
    except DecodeError as exc:
        raise CorruptWalError(path, buf_off + p, f"WALKey does not parse: {exc}") from exc
    count = pb.following_kv_count
    cells: list[Cell] = []
    c = kend
    unpack_head = _CELL_HEAD.unpack_from
    unpack_ts = _TS_TYPE.unpack_from
    types = _TYPES
    for i in range(count):
        if c + 18 > n:  # int32 total + the smallest KeyValue head we unpack
            if c + 4 <= n and INT32.unpack_from(buf, c)[0] < 14:
                raise CorruptWalError(path, buf_off + c, f"cell {i} of entry at offset {buf_off + p}: length too small")
            raise _NeedMore
        total, klen_kv, vlen, rowlen = unpack_head(buf, c)
        cstart = c + 4
        cend = cstart + total
        if total < 0:
            raise CorruptWalError(path, buf_off + c, f"cell {i} of entry at offset {buf_off + p}: negative length")
        if cend > n:
            raise _NeedMore
        rest = total - 8 - klen_kv - vlen
        if (
            klen_kv < _KEY_INFRASTRUCTURE
            or vlen < 0
            or rest < 0
            or rest == 1
            or rowlen < 0
            or rowlen > klen_kv - _KEY_INFRASTRUCTURE
        ):
            raise CorruptWalError(
                path,
                buf_off + c,
                f"cell {i} of entry at offset {buf_off + p}: inconsistent lengths "
                f"(cell {total}, key {klen_kv}, value {vlen}, row {rowlen})",
            )
        r = cstart + 10  # after key length, value length, row length
        row = buf[r : r + rowlen]
        fpos = r + rowlen
        famlen = buf[fpos]
        qstart = fpos + 1 + famlen
        kend_kv = cstart + 8 + klen_kv
        tspos = kend_kv - 9
        if qstart > tspos:
            raise CorruptWalError(
                path, buf_off + c, f"cell {i} of entry at offset {buf_off + p}: family length {famlen} overruns the key"
            )
        ts, tcode = unpack_ts(buf, tspos)
        ctype = types.get(tcode)
        if ctype is None:
            raise CorruptWalError(path, buf_off + c, f"cell {i} of entry at offset {buf_off + p}: unknown cell type {tcode}")
        vend = kend_kv + vlen
        tags: tuple[Tag, ...] = ()
        if rest:
            tags = _parse_tags(buf, vend, cend, path, buf_off, i, p)
        cells.append(Cell(row, buf[fpos + 1 : qstart], buf[qstart:tspos], ts, ctype, buf[kend_kv:vend], tags))
        c = cend
    return WalEntry(_key_from_pb(pb), tuple(cells), buf_off + p, buf_off + c), c


def _parse_tags(buf: bytes, start: int, end: int, path: str, buf_off: int, cell_no: int, entry_p: int) -> tuple[Tag, ...]:
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


def _key_from_pb(pb: WAL_pb2.WALKey) -> WalKey:
    cluster_ids: tuple[uuid.UUID, ...] = ()
    if pb.cluster_ids:
        cluster_ids = tuple(uuid.UUID(int=(u.most_sig_bits << 64) | u.least_sig_bits) for u in pb.cluster_ids)
    elif pb.HasField("cluster_id"):  # 0.94-era single origin id, read as WALKeyImpl does
        u = pb.cluster_id
        cluster_ids = (uuid.UUID(int=(u.most_sig_bits << 64) | u.least_sig_bits),)
    scopes = {s.family: s.scope_type for s in pb.scopes} if pb.scopes else _EMPTY_SCOPES
    return WalKey(
        pb.encoded_region_name,
        pb.table_name,
        pb.log_sequence_number,
        pb.write_time,
        cluster_ids,
        scopes,
        pb.nonceGroup,
        pb.nonce,
        pb.orig_sequence_number,
        tuple((a.key, a.value) for a in pb.extended_attributes) if pb.extended_attributes else (),
    )


def read_wal(path: str, start: int | None = None) -> list[WalEntry]:
    """Read every complete entry of a local WAL file (a convenience for tools and tests)."""
    with open(path, "rb") as f:
        return list(WalReader(f, path).entries(start))
