"""Value compression of WAL cells (HBase 2.5+, ``hbase.regionserver.wal.value.enablecompression``).

With it, each cell's value is written after the type byte as a varint32 length and the
bytes that HBase's ``CompressionContext.ValueCompressor`` flushes for that value: one
compression stream per WAL, finished and reset after every value
(``Compression.FinishOnFlushCompressionStream``), so every value is a whole, independent
unit of its codec. The header names the codec by the ordinal of ``Compression.Algorithm``
(``value_compression_algorithm``), chosen by ``hbase.regionserver.wal.value.compression.type``.

How each codec frames a value, as HBase 2.6 with Hadoop 3.3 writes it:

* ``gz`` (``ReusableStreamGzipCodec``, or Hadoop's native ``GzipCodec``): one gzip member.
* ``snappy``, ``lz4`` (Hadoop's ``SnappyCodec`` / ``Lz4Codec``, and HBase's own codecs):
  Hadoop's block framing (``BlockCompressorStream``): the value's length as a big-endian
  int32, then chunks of an int32 length and one raw snappy / LZ4 block each, as many as
  the value needs; a value larger than the codec's buffer is followed by an empty block
  (``00000000``, HBASE-28390), and an empty value is that empty block alone.
* ``zstd``: Hadoop's ``ZStandardCodec`` (the default) writes one zstd frame; HBase's own
  ``ZstdCodec`` (``hbase.io.compress.zstd.codec``) writes the block framing above with a
  zstd frame per chunk. A frame starts with the zstd magic number, which no block framing
  can start with (its value would be over 680 MB), so both are read.
* ``none``: the value's bytes.

``lzo``, ``bzip2``, ``lzma`` and ``brotli`` are refused by name. An empty value's bytes are
skipped, not decoded, as HBase's reader does.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable
from typing import Any

__all__ = [
    "ALGORITHMS",
    "SETTING",
    "SUPPORTED",
    "ValueCodec",
    "value_codec",
]

#: ``Compression.Algorithm`` of HBase 2.6 in ordinal order (the header's value).
ALGORITHMS = ("lzo", "gz", "none", "snappy", "lz4", "bzip2", "zstd", "lzma", "brotli")
#: The value compression types walship reads and writes.
SUPPORTED = ("gz", "snappy", "lz4", "zstd", "none")
#: The HBase setting that chooses the value codec (named in errors).
SETTING = "hbase.regionserver.wal.value.compression.type"

_INT32 = struct.Struct(">i")
_ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
# The 10-byte header java.util.zip.GZIPOutputStream writes (JDK 16+: OS 255, "unknown").
_GZIP_HEADER = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"
_BUFFER = 256 * 1024  # io.compression.codec.{snappy,lz4}.buffersize default
# BlockCompressorStream's largest input per block: the buffer less the codec's overhead
_MAX_INPUT = {"snappy": _BUFFER - (_BUFFER // 6 + 32), "lz4": _BUFFER - (_BUFFER // 255 + 16)}


class ValueCodec:
    """Compress and decompress cell values as one HBase value codec does.

    :meth:`decompress` raises :class:`ValueError` (saying why) for bytes that are not one
    value of exactly ``size`` bytes in this codec's framing.
    """

    def __init__(self, name: str, chunk: Callable[[bytes, int], bytes] | None, pack: Callable[[bytes], bytes]) -> None:
        self.name = name
        self.ordinal = ALGORITHMS.index(name)
        self._chunk = chunk  # one block-framed chunk -> its bytes (at most the int given)
        self._pack = pack

    def __repr__(self) -> str:
        return f"ValueCodec({self.name!r})"

    def decompress(self, data: bytes, size: int) -> bytes:
        if size == 0:
            return b""  # HBase skips an empty value's bytes unread
        if self.name == "gz":
            out = _gunzip(data, size)
        elif self.name == "none":
            out = bytes(data)
        elif self.name == "zstd" and data[:4] == _ZSTD_MAGIC:
            out = _unzstd(data, size)
        else:
            out = self._unblock(data, size)
        if len(out) != size:
            raise ValueError(f"{self.name} value decompresses to {len(out)} bytes, the cell says {size}")
        return out

    def compress(self, value: bytes) -> bytes:
        return self._pack(value)

    def _length(self, data: bytes, p: int, what: str) -> tuple[int, int]:
        """The int32 length of a block or chunk at ``p``, and the offset after it."""
        if p + 4 > len(data):
            raise ValueError(f"{self.name} {what} length cut short at byte {p} of {len(data)}")
        return _INT32.unpack_from(data, p)[0], p + 4

    def _unblock(self, data: bytes, size: int) -> bytes:
        """Undo Hadoop's block framing (``BlockDecompressorStream``)."""
        assert self._chunk is not None
        parts: list[bytes] = []
        p, n, got = 0, len(data), 0
        while p < n:
            raw, p = self._length(data, p, "block")
            if raw < 0 or got + raw > size:
                raise ValueError(f"{self.name} block of {raw} bytes overruns the value of {size}")
            block = 0
            while block < raw:
                clen, p = self._length(data, p, "chunk")
                if clen < 0 or p + clen > n:
                    raise ValueError(f"{self.name} chunk of {clen} bytes overruns the value's {n} bytes")
                piece = self._chunk(data[p : p + clen], raw - block)
                p += clen
                if not piece:
                    raise ValueError(f"{self.name} chunk decompresses to nothing")
                block += len(piece)
                parts.append(piece)
            if block != raw:
                raise ValueError(f"{self.name} block decompresses to {block} bytes, its header says {raw}")
            got += raw
        return b"".join(parts)


def _gunzip(data: bytes, size: int) -> bytes:
    d = zlib.decompressobj(31)
    try:
        out = d.decompress(data, size + 1)
    except zlib.error as exc:
        raise ValueError(f"gz value does not decompress: {exc}") from exc
    if not d.eof or d.unused_data or d.unconsumed_tail:
        raise ValueError("gz value is not exactly one whole gzip member")
    return out


def _gzip(value: bytes) -> bytes:
    c = zlib.compressobj(6, zlib.DEFLATED, -15)  # Deflater's default level, raw deflate
    body = c.compress(value) + c.flush()
    return _GZIP_HEADER + body + struct.pack("<II", zlib.crc32(value), len(value) & 0xFFFFFFFF)


def _zstd_module() -> Any:
    import zstandard

    return zstandard


def _unzstd(data: bytes, size: int) -> bytes:
    zstd = _zstd_module()
    d = zstd.ZstdDecompressor().decompressobj()
    try:
        out: bytes = d.decompress(data)
    except zstd.ZstdError as exc:
        raise ValueError(f"zstd value does not decompress: {exc}") from exc
    if not d.eof or d.unused_data:
        raise ValueError("zstd value is not exactly one whole zstd frame")
    return out


def _zstd_chunk(chunk: bytes, most: int) -> bytes:
    if chunk[:4] != _ZSTD_MAGIC:
        raise ValueError("zstd chunk does not start with the zstd magic number")
    return _unzstd(chunk, most)


def _snappy_chunk(chunk: bytes, most: int) -> bytes:
    import pyarrow

    size, shift, i = 0, 0, 0
    while True:  # a raw snappy block starts with its uncompressed length as a varint
        if i >= len(chunk) or i == 5:
            raise ValueError("snappy chunk has no valid length")
        b = chunk[i]
        size |= (b & 0x7F) << shift
        shift += 7
        i += 1
        if b < 0x80:
            break
    if size > most:
        raise ValueError(f"snappy chunk of {size} bytes overruns its block")
    try:
        out: bytes = pyarrow.decompress(chunk, size, codec="snappy", asbytes=True)
    except (OSError, ValueError) as exc:
        raise ValueError(f"snappy chunk does not decompress: {exc}") from exc
    return out


def _lz4_chunk(chunk: bytes, most: int) -> bytes:
    import lz4.block

    try:
        out: bytes = lz4.block.decompress(chunk, uncompressed_size=most)
    except lz4.block.LZ4BlockError as exc:
        raise ValueError(f"lz4 chunk does not decompress: {exc}") from exc
    return out


def _blocks(name: str, compress: Callable[[bytes], bytes]) -> Callable[[bytes], bytes]:
    """Hadoop's ``BlockCompressorStream`` for one value, finished as HBase finishes it."""
    most = _MAX_INPUT[name]

    def pack(value: bytes) -> bytes:
        n = len(value)
        if n == 0:
            return _INT32.pack(0)
        out = [_INT32.pack(n)]
        for i in range(0, n, most):
            c = compress(value[i : i + most])
            out += (_INT32.pack(len(c)), c)
        if n > most:
            out.append(_INT32.pack(0))  # the empty block finish() leaves after a split value
        return b"".join(out)

    return pack


def _snappy(segment: bytes) -> bytes:
    import pyarrow

    out: bytes = pyarrow.compress(segment, codec="snappy", asbytes=True)
    return out


def _lz4(segment: bytes) -> bytes:
    import lz4.block

    out: bytes = lz4.block.compress(segment, store_size=False)
    return out


def _zstd(value: bytes) -> bytes:
    # Hadoop's ZStandardCodec streams: level 3, no content size in the frame header
    out: bytes = _zstd_module().ZstdCompressor(level=3, write_content_size=False).compress(value)
    return out


def value_codec(name: str) -> ValueCodec:
    """The codec of a value compression type (a name of :data:`SUPPORTED`).

    :raises ValueError: a type HBase does not have, or one walship does not support.
    :raises ImportError: the Python package the codec needs is not installed.
    """
    if name not in SUPPORTED:
        raise ValueError(f"value compression type must be one of {list(SUPPORTED)}, got {name!r}")
    if name == "gz":
        return ValueCodec(name, None, _gzip)
    if name == "none":
        return ValueCodec(name, None, bytes)
    if name == "snappy":
        import pyarrow  # noqa: F401  (fail now, not on the first value)

        return ValueCodec(name, _snappy_chunk, _blocks(name, _snappy))
    if name == "lz4":
        import lz4.block  # noqa: F401

        return ValueCodec(name, _lz4_chunk, _blocks(name, _lz4))
    _zstd_module()
    return ValueCodec(name, _zstd_chunk, _zstd)
