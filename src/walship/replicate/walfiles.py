"""The file objects a WAL is read through: one that ends where a reader of a WAL being written
on HDFS sees its end (not where the NameNode's length says), and one that counts what is read."""

from __future__ import annotations

import io
from dataclasses import asdict, dataclass
from typing import Any, BinaryIO

__all__ = ["CountedFile", "ReadStats", "SizedFile"]


@dataclass
class ReadStats:
    """What was read from WAL files: files opened, and bytes their reads returned."""

    opens: int = 0
    bytes: int = 0

    def to_json(self) -> dict[str, int]:
        return asdict(self)


class SizedFile:
    """A file whose end is ``size``, not the length its file system reports (pyarrow's HDFS
    files: the NameNode's length); reads go on past that length, as far as ``size``."""

    def __init__(self, f: Any, size: int) -> None:
        self._f = f
        self._size = size

    def read(self, size: int = -1) -> bytes:
        left = max(0, self._size - self._f.tell())
        data: bytes = self._f.read(left if size < 0 else min(size, left))
        return data

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        if whence == io.SEEK_END:
            offset, whence = self._size + offset, io.SEEK_SET
        elif whence == io.SEEK_CUR:
            offset, whence = self._f.tell() + offset, io.SEEK_SET
        pos: int = self._f.seek(offset, whence)
        return pos

    def tell(self) -> int:
        pos: int = self._f.tell()
        return pos

    def seekable(self) -> bool:
        return True

    def close(self) -> None:
        self._f.close()

    def __enter__(self) -> SizedFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self._f.close()


class CountedFile:
    """A WAL file whose reads add up in a :class:`ReadStats` (reads are large: the cost is one
    addition per read)."""

    def __init__(self, f: BinaryIO, stats: ReadStats) -> None:
        self._f = f
        self._stats = stats
        stats.opens += 1

    def read(self, size: int = -1) -> bytes:
        data = self._f.read(size)
        self._stats.bytes += len(data)
        return data

    def seek(self, offset: int, whence: int = 0) -> int:
        return self._f.seek(offset, whence)

    def tell(self) -> int:
        return self._f.tell()

    def seekable(self) -> bool:
        return self._f.seekable()

    def close(self) -> None:
        self._f.close()

    def __enter__(self) -> CountedFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self._f.close()
