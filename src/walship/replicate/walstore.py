"""Where a source cluster's WALs live: ``<root>/WALs/<server>/`` while written,
``<root>/oldWALs/`` once archived. The root is a local path or an fsspec URL (``hdfs://``)."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from typing import Any, BinaryIO, cast

import fsspec
from fsspec.implementations.local import LocalFileSystem

from walship.errors import WalMissingError
from walship.wal.names import parse_wal_name

__all__ = ["ReadStats", "WalLocation", "WalStore"]

log = logging.getLogger(__name__)

#: Deletes in flight at once on a remote file system (HDFS has no bulk delete: each is a call
#: to the NameNode, so thousands of them one after another add up to many seconds).
DELETE_WORKERS = 16


@dataclass(frozen=True)
class WalLocation:
    path: str
    archived: bool
    size: int
    mtime: float = 0.0  # seconds; when the file last grew


@dataclass
class ReadStats:
    """What was read from WAL files: files opened, and bytes their reads returned."""

    opens: int = 0
    bytes: int = 0

    def to_json(self) -> dict[str, int]:
        return asdict(self)


class _Counted:
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

    def __enter__(self) -> _Counted:
        return self

    def __exit__(self, *exc: object) -> None:
        self._f.close()


class WalStore:
    """Finds and opens WALs under one cluster's WAL root.

    :param root: the directory holding ``WALs/`` and ``oldWALs/`` (``hbase.wal.dir``, or
        ``hbase.rootdir``); for a minicluster, its data dir.
    """

    def __init__(self, root: str) -> None:
        self.root = root
        fs, base = fsspec.core.url_to_fs(root)
        self.fs: Any = fs
        self.base = base.rstrip("/")

    def candidates(self, wal: str, server: str | None = None) -> list[tuple[str, bool]]:
        """The paths HBase would look at, in its order: the server's WAL dir (and its
        ``-splitting`` twin during log splitting), then the archive (flat or per server)."""
        parsed = parse_wal_name(wal)
        owner = server or (str(parsed.server) if parsed.server else None)
        out: list[tuple[str, bool]] = []
        if owner:
            out.append((f"{self.base}/WALs/{owner}/{wal}", False))
            out.append((f"{self.base}/WALs/{owner}-splitting/{wal}", False))
        out.append((f"{self.base}/oldWALs/{wal}", True))
        if owner:
            out.append((f"{self.base}/oldWALs/{owner}/{wal}", True))
        return out

    def locate(self, wal: str, server: str | None = None) -> WalLocation:
        """:raises WalMissingError: in none of the places, which the message lists."""
        tried = []
        for path, archived in self.candidates(wal, server):
            try:
                info = self.fs.info(path)
            except FileNotFoundError:
                tried.append(path)
                continue
            return WalLocation(path, archived, int(info.get("size") or 0), _mtime(info))
        raise WalMissingError(f"WAL {wal} not found; looked in: {', '.join(tried)}")

    def open(self, location: WalLocation, stats: ReadStats | None = None) -> BinaryIO:
        """The WAL file, open for reading; with ``stats``, its opening and reads are counted there."""
        f: BinaryIO = self.fs.open(location.path, "rb")
        return f if stats is None else cast(BinaryIO, _Counted(f, stats))

    def list_archive(self) -> list[tuple[str, float, int]]:
        """(path, mtime seconds, size) of every file under ``oldWALs/`` (one level of
        per-server folders included)."""
        out = []
        try:
            entries = self.fs.ls(f"{self.base}/oldWALs", detail=True)
        except FileNotFoundError:
            return []
        for e in entries:
            if e.get("type") == "directory":
                for sub in self.fs.ls(e["name"], detail=True):
                    if sub.get("type") != "directory":
                        out.append((sub["name"], _mtime(sub), int(sub.get("size") or 0)))
            else:
                out.append((e["name"], _mtime(e), int(e.get("size") or 0)))
        return out

    def delete(self, paths: Sequence[str]) -> list[bool]:
        """Delete files: for each path, in order, whether it was deleted here (``False``: it
        was gone already, deleted meanwhile by someone else). Local files are deleted one
        after another; on a remote file system several deletes are in flight at once.

        :raises OSError: a delete failed for another reason (those before it were done).
        """

        def one(path: str) -> bool:
            try:
                self.fs.rm_file(path)
            except FileNotFoundError:
                return False
            return True

        if len(paths) < 2 or isinstance(self.fs, LocalFileSystem):
            return [one(p) for p in paths]
        with ThreadPoolExecutor(max_workers=min(DELETE_WORKERS, len(paths)), thread_name_prefix="walship-rm") as pool:
            return list(pool.map(one, paths))

    def listing(self) -> dict[str, WalLocation]:
        """Every file under ``WALs/*/`` and ``oldWALs/`` by file name, from one listing of
        each folder (no per-file lookups); a name in both places is taken from ``WALs/``, as
        :meth:`locate` would. ``WALs/`` is listed first, so a WAL archived meanwhile shows up
        in ``oldWALs/``."""
        live: dict[str, WalLocation] = {}
        try:
            for d in self.fs.ls(f"{self.base}/WALs", detail=True):
                if d.get("type") == "directory":
                    for f in self.fs.ls(d["name"], detail=True):
                        if f.get("type") != "directory":
                            live[_basename(f["name"])] = WalLocation(
                                f["name"], False, int(f.get("size") or 0), _mtime(f)
                            )
        except FileNotFoundError:
            pass
        out = {_basename(path): WalLocation(path, True, size, mtime) for path, mtime, size in self.list_archive()}
        out.update(live)
        return out

    def wal_files(self) -> list[tuple[str, bool]]:
        """Every file under ``WALs/*/`` and ``oldWALs/`` with whether it is archived."""
        out: list[tuple[str, bool]] = []
        try:
            for d in self.fs.ls(f"{self.base}/WALs", detail=True):
                if d.get("type") == "directory":
                    out.extend(
                        (f["name"], False) for f in self.fs.ls(d["name"], detail=True) if f.get("type") != "directory"
                    )
        except FileNotFoundError:
            pass
        out.extend((p, True) for p, _, _ in self.list_archive())
        return out


def _mtime(info: dict[str, Any]) -> float:
    value = info.get("mtime") or info.get("created") or 0
    return float(value.timestamp() if hasattr(value, "timestamp") else value)


def _basename(path: str) -> str:
    return path.rstrip("/").rsplit("/", 1)[-1]
