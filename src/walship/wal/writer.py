"""Write HBase WAL files in the format ProtobufLogWriter / AsyncProtobufLogWriter write.

Used by the minicluster and by tests. The header is written and flushed when the writer
opens (as AsyncProtobufLogWriter does, so a freshly rolled WAL already holds ``PWAL`` and its
header); :meth:`WalWriter.close` writes the trailer.

A writer can also write compressed WALs, as a region server with
``hbase.regionserver.wal.enablecompression`` does (:mod:`walship.wal.dictionaries`): with
``compression=True``, plus ``tag_compression`` (``hbase.regionserver.wal.tags.enablecompression``)
and ``value_compression`` (``hbase.regionserver.wal.value.enablecompression`` with
``hbase.regionserver.wal.value.compression.type``, one of :data:`walship.wal.valuecodecs.SUPPORTED`).

Example::

    with open(path, "wb") as f, WalWriter(f, compression=True, value_compression="gz") as w:
        end = w.append(key, cells)
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterable, Sequence
from types import TracebackType
from typing import BinaryIO

from walship.protos import WAL_pb2
from walship.wal.dictionaries import CompressionContext
from walship.wal.format import ACCEPTED_WRITERS, DEFAULT_CODEC, MAGIC, TRAILER_MAGIC, encode_varint
from walship.wal.model import Cell, CellType, Tag, WalKey
from walship.wal.valuecodecs import ValueCodec, value_codec

__all__ = ["CompressedEncoder", "WalWriter", "encode_cell", "encode_key"]

_CELL_HEAD = struct.Struct(">iiih")
_TS_TYPE = struct.Struct(">qB")
_INT16 = struct.Struct(">H")
_UINT64_MASK = (1 << 64) - 1
_MAX_ROW = 0x7FFF  # Short.MAX_VALUE
_MAX_FAMILY = 0x7F  # Byte.MAX_VALUE
_MAX_TAGS = 0xFFFF


def encode_cell(cell: Cell) -> bytes:
    """Encode one cell as WALCellCodec does without compression: int32 length + KeyValue."""
    row, family, qualifier, ts, ctype, value, _ = cell
    tag_bytes = _check_cell(cell)
    if tag_bytes:
        tag_bytes = _INT16.pack(len(tag_bytes)) + tag_bytes
    code = CellType(ctype).value
    klen = 12 + len(row) + len(family) + len(qualifier)
    total = 8 + klen + len(value) + len(tag_bytes)
    return b"".join(
        (
            _CELL_HEAD.pack(total, klen, len(value), len(row)),
            row,
            bytes((len(family),)),
            family,
            qualifier,
            _TS_TYPE.pack(ts, code),
            value,
            tag_bytes,
        )
    )


def _check_cell(cell: Cell) -> bytes:
    """Refuse a cell HBase cannot hold (:class:`ValueError`); return its tags' bytes."""
    row, family, _, ts, ctype, _, tags = cell
    if len(row) > _MAX_ROW:
        raise ValueError(f"row is {len(row)} bytes; HBase allows at most {_MAX_ROW}")
    if len(family) > _MAX_FAMILY:
        raise ValueError(f"family is {len(family)} bytes; HBase allows at most {_MAX_FAMILY}")
    CellType(ctype)
    _TS_TYPE.pack(ts, 0)  # a signed 64-bit timestamp
    tag_bytes = b"".join(_encode_tag(t) for t in tags)
    if len(tag_bytes) > _MAX_TAGS:
        raise ValueError(f"tags are {len(tag_bytes)} bytes; HBase allows at most {_MAX_TAGS}")
    return tag_bytes


def _check_key(key: WalKey) -> None:
    """Refuse a key the WALKey protobuf cannot hold (:class:`ValueError`)."""
    for name in ("sequence_id", "write_time", "nonce_group", "nonce", "orig_sequence_id"):
        value = getattr(key, name)
        if not 0 <= value <= _UINT64_MASK:
            raise ValueError(f"{name} must be an unsigned 64-bit integer, got {value}")
    for family, scope in key.scopes.items():
        if scope not in (0, 1, 2):
            raise ValueError(f"scope of family {family!r} must be 0, 1 or 2, got {scope}")
    for name, _ in key.extended_attributes:
        name.encode("utf-8")


def _encode_tag(tag: Tag) -> bytes:
    if not 0 <= tag.type <= 255:
        raise ValueError(f"tag type must be a byte, got {tag.type}")
    return _INT16.pack(len(tag.value) + 1) + bytes((tag.type,)) + tag.value


def encode_key(key: WalKey, cell_count: int, ctx: CompressionContext | None = None) -> bytes:
    """Encode a WAL key as a length-delimited ``WALKey`` protobuf; with ``ctx``, its region,
    table, scope families and attribute values as tokens (``WALKeyImpl.getBuilder``)."""
    if ctx is None:
        region, table = key.encoded_region_name, key.table
    else:
        region, table = ctx.region.encode(key.encoded_region_name), ctx.table.encode(key.table)
    pb = WAL_pb2.WALKey(
        encoded_region_name=region,
        table_name=table,
        log_sequence_number=key.sequence_id,
        write_time=key.write_time,
        following_kv_count=cell_count,
    )
    for family, scope in key.scopes.items():
        pb.scopes.add(family=family if ctx is None else ctx.family.encode(family), scope_type=scope)
    for cid in key.cluster_ids:
        pb.cluster_ids.add(least_sig_bits=cid.int & _UINT64_MASK, most_sig_bits=cid.int >> 64)
    # WALKeyImpl writes the nonces and the original sequence id only when they are set.
    if key.nonce_group:
        pb.nonceGroup = key.nonce_group
    if key.nonce:
        pb.nonce = key.nonce
    if key.orig_sequence_id > 0:
        pb.orig_sequence_number = key.orig_sequence_id
    for name, value in key.extended_attributes:
        pb.extended_attributes.add(key=name, value=value if ctx is None else ctx.table.encode(value))
    body = pb.SerializeToString()
    return encode_varint(len(body)) + body


class CompressedEncoder:
    """Encode entries as a compressed WAL holds them (``WALCellCodec.CompressedKvEncoder``),
    with the dictionaries of one file.

    :param tag_compression: tags as TAG tokens, else as their bytes.
    :param value_codec: compress each value with it, else write it as is.
    """

    def __init__(self, *, tag_compression: bool, value_codec: ValueCodec | None) -> None:
        self.ctx = CompressionContext(tag_compression=tag_compression, reader=False)
        self.codec = value_codec

    def entry(self, key: WalKey, cells: Sequence[Cell]) -> bytes:
        """The bytes of one entry. Everything is checked before the dictionaries change, so
        an entry refused with :class:`ValueError` leaves them as the file has them."""
        _check_key(key)
        tag_bytes = [_check_cell(c) for c in cells]
        return encode_key(key, len(cells), self.ctx) + b"".join(map(self._cell, cells, tag_bytes))

    def _cell(self, cell: Cell, tag_bytes: bytes) -> bytes:
        row, family, qualifier, ts, ctype, value, tags = cell
        code = CellType(ctype).value
        ctx = self.ctx
        parts = [
            encode_varint(12 + len(row) + len(family) + len(qualifier)),
            encode_varint(len(value)),
            encode_varint(len(tag_bytes)),
            ctx.row.encode(row),
            ctx.family.encode(family),
            ctx.qualifier.encode(qualifier),
            _TS_TYPE.pack(ts, code),
        ]
        if self.codec is not None:
            packed = self.codec.compress(value)
            parts += (encode_varint(len(packed)), packed)
        else:
            parts.append(value)
        if tags:
            if ctx.tag_compression:
                parts += (ctx.tag.encode(bytes((t.type,)) + t.value) for t in tags)
            else:
                parts.append(tag_bytes)
        return b"".join(parts)


class WalWriter:
    """Append entries to a new WAL file.

    :param fileobj: a binary file object opened for writing at offset 0.
    :param writer_class: the ``writer_cls_name`` to record; HBase accepts only
        ``ProtobufLogWriter`` and ``AsyncProtobufLogWriter``.
    :param cell_codec: the ``cell_codec_cls_name`` to record.
    :param compression: write a compressed WAL (``hbase.regionserver.wal.enablecompression``).
    :param tag_compression: with ``compression``, compress tags through their dictionary
        (``hbase.regionserver.wal.tags.enablecompression``, which HBase turns on by default).
    :param value_compression: with ``compression``, compress values with this type
        (``hbase.regionserver.wal.value.compression.type``: ``gz``, ``snappy``, ``lz4``,
        ``zstd`` or ``none``); ``None`` leaves them plain.
    :raises ValueError: an unknown writer class or value compression type, or tag or
        value compression without ``compression``.
    """

    def __init__(
        self,
        fileobj: BinaryIO,
        *,
        writer_class: str = "AsyncProtobufLogWriter",
        cell_codec: str = DEFAULT_CODEC,
        compression: bool = False,
        tag_compression: bool = False,
        value_compression: str | None = None,
    ) -> None:
        if writer_class not in ACCEPTED_WRITERS:
            raise ValueError(f"'writer_class' must be one of {sorted(ACCEPTED_WRITERS)}, got {writer_class!r}")
        if not compression and (tag_compression or value_compression is not None):
            raise ValueError("'tag_compression' and 'value_compression' need 'compression=True'")
        codec = value_codec(value_compression) if value_compression is not None else None
        self._f = fileobj
        self._encoder = CompressedEncoder(tag_compression=tag_compression, value_codec=codec) if compression else None
        header = WAL_pb2.WALHeader(
            has_compression=compression,
            has_tag_compression=tag_compression,
            has_value_compression=codec is not None,
            writer_cls_name=writer_class,
            cell_codec_cls_name=cell_codec,
        )
        if codec is not None:
            header.value_compression_algorithm = codec.ordinal
        body = header.SerializeToString()
        self._f.write(MAGIC + encode_varint(len(body)) + body)
        self._f.flush()
        self._offset = len(MAGIC) + len(encode_varint(len(body))) + len(body)
        self.closed = False

    @property
    def offset(self) -> int:
        """Bytes written so far: the end offset of the last entry."""
        return self._offset

    def append(self, key: WalKey, cells: Sequence[Cell]) -> int:
        """Append one entry; return its end offset (the position just after it)."""
        if self.closed:
            raise ValueError("WAL writer is closed")
        data = self._encode(key, cells)
        self._f.write(data)
        self._offset += len(data)
        return self._offset

    def append_many(self, entries: Iterable[tuple[WalKey, Sequence[Cell]]]) -> int:
        """Append several entries with one write; return the end offset of the last."""
        parts = [self._encode(k, cs) for k, cs in entries]
        data = b"".join(parts)
        self._f.write(data)
        self._offset += len(data)
        return self._offset

    def _encode(self, key: WalKey, cells: Sequence[Cell]) -> bytes:
        if self._encoder is not None:
            return self._encoder.entry(key, cells)
        return encode_key(key, len(cells)) + b"".join(map(encode_cell, cells))

    def sync(self) -> None:
        """Flush to the operating system and, for a real file, to disk."""
        self._f.flush()
        try:
            fd = self._f.fileno()
        except (AttributeError, OSError, ValueError):
            return
        os.fsync(fd)

    def close(self, *, trailer: bool = True) -> None:
        """Finish the file: an empty ``WALTrailer``, its size, ``LAWP``; then flush.

        ``trailer=False`` leaves the file as a crashed writer leaves it.
        """
        if self.closed:
            return
        if trailer:
            body = WAL_pb2.WALTrailer().SerializeToString()
            self._f.write(body + struct.pack(">i", len(body)) + TRAILER_MAGIC)
            self._offset += len(body) + 8
        self._f.flush()
        self.closed = True

    def __enter__(self) -> WalWriter:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close(trailer=exc_type is None)
