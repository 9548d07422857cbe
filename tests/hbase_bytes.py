"""An independent encoder of HBase WAL bytes, written from the format reference and sharing
no code with walship.wal: test vectors for the reader, and a cross-check of the writer."""

from __future__ import annotations

import struct
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field

from walship.protos import WAL_pb2

DEFAULT_CODEC = "org.apache.hadoop.hbase.regionserver.wal.WALCellCodec"


def varint(n: int) -> bytes:
    out = b""
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out += bytes([b | 0x80])
        else:
            return out + bytes([b])


def keyvalue(
    row: bytes,
    family: bytes,
    qualifier: bytes,
    ts: int,
    type_code: int,
    value: bytes,
    tags: Sequence[tuple[int, bytes]] = (),
) -> bytes:
    """int32 total + KeyValue (+ tags), as KeyValueCodecWithTags writes it."""
    key = struct.pack(">h", len(row)) + row + struct.pack(">b", len(family)) + family + qualifier
    key += struct.pack(">q", ts) + struct.pack(">B", type_code)
    kv = struct.pack(">i", len(key)) + struct.pack(">i", len(value)) + key + value
    if tags:
        tag_bytes = b"".join(struct.pack(">h", len(v) + 1) + bytes([t]) + v for t, v in tags)
        kv += struct.pack(">h", len(tag_bytes)) + tag_bytes
    return struct.pack(">i", len(kv)) + kv


def header(writer: str | None = "ProtobufLogWriter", codec: str | None = DEFAULT_CODEC, **flags: object) -> bytes:
    h = WAL_pb2.WALHeader()
    h.has_compression = bool(flags.pop("has_compression", False))
    h.has_tag_compression = bool(flags.pop("has_tag_compression", False))
    if writer is not None:
        h.writer_cls_name = writer
    if codec is not None:
        h.cell_codec_cls_name = codec
    for name, value in flags.items():
        setattr(h, name, value)
    body = h.SerializeToString()
    return b"PWAL" + varint(len(body)) + body


@dataclass
class RawEntry:
    region: bytes
    table: bytes
    seq: int
    write_time: int
    cells: list[tuple[bytes, bytes, bytes, int, int, bytes, list[tuple[int, bytes]]]]
    cluster_ids: list[uuid.UUID] = field(default_factory=list)
    scopes: dict[bytes, int] = field(default_factory=dict)

    def encode(self) -> bytes:
        k = WAL_pb2.WALKey()
        k.encoded_region_name = self.region
        k.table_name = self.table
        k.log_sequence_number = self.seq
        k.write_time = self.write_time
        for fam, scope in self.scopes.items():
            s = k.scopes.add()
            s.family = fam
            s.scope_type = scope  # type: ignore[assignment]
        k.following_kv_count = len(self.cells)
        for cid in self.cluster_ids:
            u = k.cluster_ids.add()
            u.most_sig_bits = cid.int >> 64
            u.least_sig_bits = cid.int & ((1 << 64) - 1)
        body = k.SerializeToString()
        return varint(len(body)) + body + b"".join(keyvalue(*c) for c in self.cells)


TRAILER = struct.pack(">i", 0) + b"LAWP"


def wal_bytes(entries: Sequence[RawEntry], *, trailer: bool = True, head: bytes | None = None) -> bytes:
    data = head if head is not None else header()
    data += b"".join(e.encode() for e in entries)
    return data + (TRAILER if trailer else b"")
