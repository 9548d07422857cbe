"""Constants and header rules of the PWAL format (HBase >= 0.96, unchanged through 2.x).

A WAL file is ``PWAL``, a length-delimited ``WALHeader``, then entries (a delimited
``WALKey`` followed by ``following_kv_count`` cells), and on a clean close a ``WALTrailer``,
its size as a big-endian int32 and ``LAWP``.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from walship.errors import UnsupportedWalError
from walship.protos import WAL_pb2
from walship.wal.valuecodecs import ALGORITHMS, SETTING, SUPPORTED, ValueCodec, value_codec

__all__ = [
    "ACCEPTED_CODECS",
    "ACCEPTED_WRITERS",
    "DEFAULT_CODEC",
    "MAGIC",
    "TRAILER_MAGIC",
    "HeaderCompression",
    "check_header",
    "encode_varint",
    "header_compression",
]

MAGIC = b"PWAL"
TRAILER_MAGIC = b"LAWP"
#: int32 trailer size + ``LAWP``: the last eight bytes of a cleanly closed WAL.
TRAILER_TAIL_SIZE = 8

DEFAULT_CODEC = "org.apache.hadoop.hbase.regionserver.wal.WALCellCodec"
#: Cell codecs whose uncompressed encoding is the plain KeyValue (with tags) layout.
ACCEPTED_CODECS = frozenset(
    {
        DEFAULT_CODEC,
        "org.apache.hadoop.hbase.codec.KeyValueCodec",
        "org.apache.hadoop.hbase.codec.KeyValueCodecWithTags",
    }
)
#: ``writer_cls_name`` values HBase's ProtobufLogReader accepts for unencrypted WALs.
ACCEPTED_WRITERS = frozenset({"ProtobufLogWriter", "AsyncProtobufLogWriter"})
_SECURE_WRITERS = frozenset({"SecureProtobufLogWriter", "SecureAsyncProtobufLogWriter"})

INT32 = struct.Struct(">i")


def check_header(header: WAL_pb2.WALHeader, path: str) -> None:
    """Refuse a header walship cannot read, saying which feature is the reason.

    Compression is checked by :func:`header_compression`.

    :raises UnsupportedWalError: for encryption, a writer class other than
        ProtobufLogWriter / AsyncProtobufLogWriter, or an unknown codec.
    """
    if header.HasField("encryption_key") or header.writer_cls_name in _SECURE_WRITERS:
        raise UnsupportedWalError(path, None, "encrypted WAL (hbase.regionserver.wal.encryption) is not supported")
    if not header.HasField("writer_cls_name") or header.writer_cls_name not in ACCEPTED_WRITERS:
        name = header.writer_cls_name if header.HasField("writer_cls_name") else "(none)"
        raise UnsupportedWalError(
            path, None, f"unknown writer class {name!r}; expected one of {sorted(ACCEPTED_WRITERS)}"
        )
    codec = header.cell_codec_cls_name if header.HasField("cell_codec_cls_name") else DEFAULT_CODEC
    if codec.endswith("SecureWALCellCodec"):
        raise UnsupportedWalError(path, None, f"encrypted WAL (cell codec {codec}) is not supported")
    if codec not in ACCEPTED_CODECS:
        raise UnsupportedWalError(
            path, None, f"unknown cell codec {codec!r}; expected one of {sorted(ACCEPTED_CODECS)}"
        )


class HeaderCompression(NamedTuple):
    """What a header says of compression (``AbstractProtobufWALReader.initCompression``)."""

    tag_compression: bool
    value_codec: ValueCodec | None


def header_compression(header: WAL_pb2.WALHeader, path: str) -> HeaderCompression | None:
    """The compression of a WAL, or ``None`` when it has none.

    As HBase's reader: tag and value compression count only with ``has_compression``, and
    ``has_value_compression`` without ``value_compression_algorithm`` leaves values plain.

    :raises UnsupportedWalError: a value compression type walship cannot decode, named with
        the file and the setting.
    """
    if not header.has_compression:
        return None
    codec = None
    if header.has_value_compression and header.HasField("value_compression_algorithm"):
        ordinal = header.value_compression_algorithm
        if ordinal >= len(ALGORITHMS):
            raise UnsupportedWalError(
                path,
                None,
                f"unknown value compression algorithm {ordinal} ({SETTING}); HBase 2.6 has 0..{len(ALGORITHMS) - 1}",
            )
        name = ALGORITHMS[ordinal]
        if name not in SUPPORTED:
            raise UnsupportedWalError(
                path,
                None,
                f"value compression {name!r} ({SETTING}) is not supported; walship reads {', '.join(SUPPORTED)}",
            )
        try:
            codec = value_codec(name)
        except ImportError as exc:
            raise UnsupportedWalError(
                path, None, f"value compression {name!r} ({SETTING}) needs the Python package {exc.name!r}"
            ) from exc
    return HeaderCompression(header.has_tag_compression, codec)


def encode_varint(value: int) -> bytes:
    """Encode a non-negative integer as a protobuf base-128 varint."""
    if value < 0:
        raise ValueError(f"varint must be >= 0, got {value}")
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)
