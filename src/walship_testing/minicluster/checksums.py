"""Hadoop's checksum files, as a local file system keeps them beside every file: the
minicluster writes one beside each closed WAL when started with ``--wal-checksums``."""

from __future__ import annotations

import os
import struct
import zlib
from pathlib import Path

from walship.wal.names import checksum_file_of

__all__ = ["BYTES_PER_CHECKSUM", "CHECKSUM_MAGIC", "archive_wal", "write_checksum_file"]

#: Hadoop's ChecksumFileSystem: ``crc\0``, bytes per checksum, then a CRC-32 per chunk.
CHECKSUM_MAGIC = b"crc\x00"
BYTES_PER_CHECKSUM = 512


def write_checksum_file(path: Path) -> Path:
    """Write Hadoop's checksum file ``.<name>.crc`` of ``path`` beside it (a CRC-32 of every
    512 bytes, big-endian), as Hadoop's local file system keeps one beside every file."""
    data = path.read_bytes()
    out = bytearray(CHECKSUM_MAGIC + struct.pack(">i", BYTES_PER_CHECKSUM))
    for i in range(0, len(data), BYTES_PER_CHECKSUM):
        out += struct.pack(">I", zlib.crc32(data[i : i + BYTES_PER_CHECKSUM]))
    crc = path.with_name(checksum_file_of(path.name))
    crc.write_bytes(bytes(out))
    return crc


def archive_wal(path: Path, old_wals_dir: Path) -> None:
    """Move a WAL, and its checksum file when it has one, into ``old_wals_dir``."""
    os.replace(path, old_wals_dir / path.name)
    crc = path.with_name(checksum_file_of(path.name))
    if crc.exists():
        os.replace(crc, old_wals_dir / crc.name)
