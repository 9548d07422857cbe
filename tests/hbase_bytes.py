"""An independent encoder of HBase WAL bytes, written from the format reference and HBase's
protobuf field numbers, sharing no code with walship (not even its generated protobuf modules,
so a wrong field in walship's WAL.proto cannot sit on both sides): test vectors for the
reader, and a byte-for-byte check of the writer."""

from __future__ import annotations

import struct
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field

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


def _field(number: int, wire: int) -> bytes:
    return varint(number << 3 | wire)


def _uint(number: int, value: int) -> bytes:
    """A varint field (uint32/uint64/bool/enum)."""
    return _field(number, 0) + varint(int(value))


def _bytes(number: int, value: bytes | str) -> bytes:
    """A length-delimited field (bytes, string, an embedded message)."""
    data = value.encode() if isinstance(value, str) else value
    return _field(number, 2) + varint(len(data)) + data


#: WALHeader's fields as HBase's WAL.proto numbers them: name -> (number, kind).
_HEADER_FIELDS = {
    "has_compression": (1, "varint"),
    "encryption_key": (2, "bytes"),
    "has_tag_compression": (3, "varint"),
    "writer_cls_name": (4, "bytes"),
    "cell_codec_cls_name": (5, "bytes"),
    "has_value_compression": (6, "varint"),
    "value_compression_algorithm": (7, "varint"),
}


def header(writer: str | None = "ProtobufLogWriter", codec: str | None = DEFAULT_CODEC, **flags: object) -> bytes:
    """``PWAL`` + a delimited WALHeader, encoded by hand from HBase's field numbers (proto2:
    only the fields given, in field-number order, as protobuf's serializer writes them)."""
    fields: dict[str, object] = {
        "has_compression": flags.pop("has_compression", False),
        "has_tag_compression": flags.pop("has_tag_compression", False),
    }
    if writer is not None:
        fields["writer_cls_name"] = writer
    if codec is not None:
        fields["cell_codec_cls_name"] = codec
    fields.update(flags)
    body = b""
    for name, (number, kind) in sorted(_HEADER_FIELDS.items(), key=lambda item: item[1][0]):
        if name in fields:
            value = fields[name]
            body += _uint(number, int(value)) if kind == "varint" else _bytes(number, value)  # type: ignore[arg-type]
    unknown = set(fields) - set(_HEADER_FIELDS)
    if unknown:
        raise ValueError(f"no WALHeader field {sorted(unknown)}")
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
        """A delimited WALKey, by hand from HBase's field numbers (encoded_region_name 1,
        table_name 2, log_sequence_number 3, write_time 4, scopes 6 as FamilyScope {family 1,
        scope_type 2}, following_kv_count 7, cluster_ids 8 as UUID {least_sig_bits 1,
        most_sig_bits 2}), then the cells."""
        body = _bytes(1, self.region) + _bytes(2, self.table) + _uint(3, self.seq) + _uint(4, self.write_time)
        for fam, scope in self.scopes.items():
            body += _bytes(6, _bytes(1, fam) + _uint(2, scope))
        body += _uint(7, len(self.cells))
        for cid in self.cluster_ids:
            body += _bytes(8, _uint(1, cid.int & ((1 << 64) - 1)) + _uint(2, cid.int >> 64))
        return varint(len(body)) + body + b"".join(keyvalue(*c) for c in self.cells)


TRAILER = struct.pack(">i", 0) + b"LAWP"


def wal_bytes(entries: Sequence[RawEntry], *, trailer: bool = True, head: bytes | None = None) -> bytes:
    data = head if head is not None else header()
    data += b"".join(e.encode() for e in entries)
    return data + (TRAILER if trailer else b"")
