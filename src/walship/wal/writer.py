"""Write HBase WAL files in the format ProtobufLogWriter / AsyncProtobufLogWriter write.

Used by the minicluster and by tests. The header is written and flushed when the writer
opens (as AsyncProtobufLogWriter does, so a freshly rolled WAL already holds ``PWAL`` and its
header); :meth:`WalWriter.close` writes the trailer.

Example::

    with open(path, "wb") as f, WalWriter(f) as w:
        end = w.append(key, cells)
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterable, Sequence
from types import TracebackType
from typing import BinaryIO

from walship.protos import WAL_pb2
from walship.wal.format import ACCEPTED_WRITERS, DEFAULT_CODEC, MAGIC, TRAILER_MAGIC, encode_varint
from walship.wal.model import Cell, CellType, Tag, WalKey

__all__ = ["WalWriter", "encode_cell", "encode_key"]

_CELL_HEAD = struct.Struct(">iiih")
_TS_TYPE = struct.Struct(">qB")
_INT16 = struct.Struct(">H")
_UINT64_MASK = (1 << 64) - 1
_MAX_ROW = 0x7FFF  # Short.MAX_VALUE
_MAX_FAMILY = 0x7F  # Byte.MAX_VALUE
_MAX_TAGS = 0xFFFF


def encode_cell(cell: Cell) -> bytes:
    """Encode one cell as WALCellCodec does without compression: int32 length + KeyValue."""
    row, family, qualifier, ts, ctype, value, tags = cell
    if len(row) > _MAX_ROW:
        raise ValueError(f"row is {len(row)} bytes; HBase allows at most {_MAX_ROW}")
    if len(family) > _MAX_FAMILY:
        raise ValueError(f"family is {len(family)} bytes; HBase allows at most {_MAX_FAMILY}")
    code = CellType(ctype).value
    klen = 12 + len(row) + len(family) + len(qualifier)
    tag_bytes = b""
    if tags:
        tag_bytes = b"".join(_encode_tag(t) for t in tags)
        if len(tag_bytes) > _MAX_TAGS:
            raise ValueError(f"tags are {len(tag_bytes)} bytes; HBase allows at most {_MAX_TAGS}")
        tag_bytes = _INT16.pack(len(tag_bytes)) + tag_bytes
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


def _encode_tag(tag: Tag) -> bytes:
    if not 0 <= tag.type <= 255:
        raise ValueError(f"tag type must be a byte, got {tag.type}")
    return _INT16.pack(len(tag.value) + 1) + bytes((tag.type,)) + tag.value


def encode_key(key: WalKey, cell_count: int) -> bytes:
    """Encode a WAL key as a length-delimited ``WALKey`` protobuf."""
    pb = WAL_pb2.WALKey(
        encoded_region_name=key.encoded_region_name,
        table_name=key.table,
        log_sequence_number=key.sequence_id,
        write_time=key.write_time,
        following_kv_count=cell_count,
    )
    for family, scope in key.scopes.items():
        pb.scopes.add(family=family, scope_type=scope)
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
        pb.extended_attributes.add(key=name, value=value)
    body = pb.SerializeToString()
    return encode_varint(len(body)) + body


class WalWriter:
    """Append entries to a new WAL file.

    :param fileobj: a binary file object opened for writing at offset 0.
    :param writer_class: the ``writer_cls_name`` to record; HBase accepts only
        ``ProtobufLogWriter`` and ``AsyncProtobufLogWriter``.
    :param cell_codec: the ``cell_codec_cls_name`` to record.
    """

    def __init__(
        self,
        fileobj: BinaryIO,
        *,
        writer_class: str = "AsyncProtobufLogWriter",
        cell_codec: str = DEFAULT_CODEC,
    ) -> None:
        if writer_class not in ACCEPTED_WRITERS:
            raise ValueError(f"'writer_class' must be one of {sorted(ACCEPTED_WRITERS)}, got {writer_class!r}")
        self._f = fileobj
        header = WAL_pb2.WALHeader(
            has_compression=False,
            has_tag_compression=False,
            has_value_compression=False,
            writer_cls_name=writer_class,
            cell_codec_cls_name=cell_codec,
        )
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
        data = encode_key(key, len(cells)) + b"".join(encode_cell(c) for c in cells)
        self._f.write(data)
        self._offset += len(data)
        return self._offset

    def append_many(self, entries: Iterable[tuple[WalKey, Sequence[Cell]]]) -> int:
        """Append several entries with one write; return the end offset of the last."""
        parts = [encode_key(k, len(cs)) + b"".join(encode_cell(c) for c in cs) for k, cs in entries]
        data = b"".join(parts)
        self._f.write(data)
        self._offset += len(data)
        return self._offset

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
