"""Where a source cluster's WALs live: ``<root>/WALs/<server>/`` while written,
``<root>/oldWALs/`` once archived. The root is a local path or an fsspec URL: ``webhdfs://``
(HDFS over HTTP, nothing to install), ``hdfs://`` (pyarrow's client: libhdfs, Java and the
Hadoop client jars), or any other file system fsspec knows.

On HDFS the NameNode's length of a file being written lags what the writer hflushed: HBase's
current WAL lists 0 bytes until its first block is complete, though every acknowledged edit is
readable. A reader (``DFSInputStream``) asks the DataNode for the last block's visible length,
so :meth:`WalStore.locate` and :meth:`WalStore.open` give a WAL still under ``WALs/`` the size
a reader sees, and :meth:`WalStore.listing` marks its listed size as not that yet
(:attr:`WalLocation.visible`); :meth:`WalStore.visible_many` asks for many at once. Elsewhere
the listed size is what a reader sees and nothing more is asked.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Any, BinaryIO, cast
from urllib.parse import quote

from fsspec.implementations.local import LocalFileSystem

from walship.errors import WalMissingError, WalRootError
from walship.files import refusals_named, url_to_fs
from walship.replicate.walfiles import CountedFile, ReadStats, SizedFile
from walship.wal.names import parse_wal_name

__all__ = ["ReadStats", "WalLocation", "WalStore"]

log = logging.getLogger(__name__)

#: Deletes in flight at once on a remote file system (HDFS has no bulk delete: each is a call
#: to the NameNode, so thousands of them one after another add up to many seconds).
DELETE_WORKERS = 16
#: Visible lengths asked for at once on HDFS (each is a NameNode and a DataNode round trip).
PROBE_WORKERS = 16
#: The first step past the listed length when pyarrow's client searches for the visible end.
_PROBE_STEP = 64 * 1024

#: What an ``hdfs://`` root needs, for the one-line error when it cannot be opened.
HDFS_NEEDS = (
    "pyarrow's HDFS client needs libhdfs.so (ARROW_LIBHDFS_DIR, or HADOOP_HOME/lib/native), "
    "Java (JAVA_HOME) and the Hadoop client jars in CLASSPATH (`hadoop classpath --glob`); "
    "webhdfs://<namenode>:<http port>/<same path> reads the same WALs with none of these"
)


@dataclass(frozen=True)
class WalLocation:
    path: str
    archived: bool
    size: int
    mtime: float = 0.0  # seconds; when the file last grew
    #: ``size`` is what a reader sees; ``False`` for a listed size on HDFS of a WAL under
    #: ``WALs/``, which lags while the WAL is being written (:meth:`WalStore.visible`)
    visible: bool = True

    @property
    def name(self) -> str:
        """The WAL's file name (its name in a queue)."""
        return _basename(self.path)


@refusals_named("root")
class WalStore:
    """Finds and opens WALs under one cluster's WAL root. A file system's refusal (HDFS
    permissions, a principal WebHDFS does not let in) is a :class:`~walship.errors.FileAccessError`
    naming the root and the principal.

    :param root: the directory holding ``WALs/`` and ``oldWALs/`` (``hbase.wal.dir``, or
        ``hbase.rootdir``); for a minicluster, its data dir.
    """

    def __init__(self, root: str) -> None:
        self.root = root
        try:
            fs, base = url_to_fs(root)
        except ValueError as exc:  # fsspec: "Protocol not known"
            raise WalRootError(f"cannot open the WAL root {root!r}: {exc}") from None
        except (OSError, ImportError) as exc:
            # pyarrow's HDFS client: no libhdfs, no CLASSPATH, no JVM
            reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            needs = f"; {HDFS_NEEDS}" if root.startswith(("hdfs:", "viewfs:")) else ""
            raise WalRootError(f"cannot open {root}: {reason}{needs}") from exc
        self.fs: Any = fs
        self.base = base.rstrip("/")
        if isinstance(fs, LocalFileSystem) and os.path.exists(self.base) and not os.path.isdir(self.base):
            raise WalRootError(f"the WAL root {root!r} is a file, not a folder holding WALs/ and oldWALs/")
        self._hdfs = _hdfs_client(fs)
        #: the file system is HDFS: the listed size of a WAL being written lags what a reader sees
        self.lagging = self._hdfs is not None

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

    def _listed(self, path: str, archived: bool, info: dict[str, Any]) -> WalLocation:
        """A file as a listing (or ``info``) shows it."""
        return WalLocation(path, archived, int(info.get("size") or 0), _mtime(info), archived or not self.lagging)

    def locate(self, wal: str, server: str | None = None) -> WalLocation:
        """Where ``wal`` is, with the size a reader sees.

        :raises WalMissingError: in none of the places, which the message lists.
        """
        tried = []
        for path, archived in self.candidates(wal, server):
            try:
                info = self.fs.info(path)
            except FileNotFoundError:
                tried.append(path)
                continue
            loc = self._listed(path, archived, info)
            try:
                return self.visible(loc)
            except FileNotFoundError:
                tried.append(path)  # archived meanwhile: oldWALs/ comes later in the list
        raise WalMissingError(f"WAL {wal} not found; looked in: {', '.join(tried)}")

    def location(self, path: str, archived: bool) -> WalLocation:
        """The file at ``path`` (from :meth:`wal_files`), with the size a reader sees.

        :raises FileNotFoundError: it is gone.
        """
        return self.visible(self._listed(path, archived, self.fs.info(path)))

    def visible(self, loc: WalLocation) -> WalLocation:
        """``loc`` with the size a reader sees now: ``loc`` itself unless it is a listed size
        on HDFS. There a WAL being written lists the NameNode's length, which lags what HBase
        hflushed, and its NameNode time stays that of its creation: when the reader sees
        more, the WAL is being written, so it counts as growing now (``mtime``).

        :raises FileNotFoundError: the file is gone (archived or deleted since it was listed).
        """
        if loc.visible:
            return loc
        if self._hdfs == "webhdfs":
            size = self._webhdfs_visible(loc.path, loc.size)
        else:
            size = self._arrow_visible(loc.path, loc.size)
        if size != loc.size:
            log.debug("%s: %d bytes visible, %d listed (being written)", loc.path, size, loc.size)
        return replace(loc, size=size, mtime=time.time() if size > loc.size else loc.mtime, visible=True)

    def visible_many(self, locations: Sequence[WalLocation]) -> list[WalLocation | None]:
        """:meth:`visible` of each (``None``: gone since it was listed), asked for at once on HDFS."""

        def one(loc: WalLocation) -> WalLocation | None:
            try:
                return self.visible(loc)
            except FileNotFoundError:
                return None

        todo = sum(1 for loc in locations if not loc.visible)
        if todo < 2:
            return [one(loc) for loc in locations]
        with ThreadPoolExecutor(max_workers=min(PROBE_WORKERS, todo), thread_name_prefix="walship-size") as pool:
            return list(pool.map(one, locations))

    def _webhdfs_visible(self, path: str, listed: int) -> int:
        """An OPEN from the listed length's last byte: the DataNode serves up to the visible
        length and says how much that is (Content-Length), so the bytes are not read. (From
        the last byte, not the end: the NameNode refuses an OPEN at a closed file's length.)"""
        fs = self.fs
        offset = max(0, listed - 1)
        url = fs._apply_proxy(fs.url + quote(fs._strip_protocol(path), safe="/="))
        params = {**fs.pars, "op": "OPEN", "offset": str(offset)}
        resp = fs.session.get(url, params=params, allow_redirects=False, stream=True)
        try:
            if resp.status_code in (301, 302, 303, 307, 308) and "Location" in resp.headers:
                location = resp.headers["Location"]
                resp.close()
                resp = fs.session.get(fs._apply_proxy(location), stream=True)
            if resp.status_code == 404:
                raise FileNotFoundError(path)
            resp.raise_for_status()
            length = resp.headers.get("Content-Length")
            if length is not None:
                return offset + int(length)
            return offset + sum(len(chunk) for chunk in resp.iter_content(1 << 20))  # chunked
        finally:
            resp.close()

    def _arrow_visible(self, path: str, listed: int) -> int:
        """The first offset a positioned read gets nothing at. DFSInputStream's pread returns
        nothing at or past the visible length (its seek would throw, and libhdfs prints every
        exception), so: steps doubling from the listed length, then bisection."""
        f = self.fs.fs.open_input_file(self.fs._strip_protocol(path))
        try:

            def readable(offset: int) -> bool:
                return len(f.read_at(1, offset)) == 1

            if not readable(listed):
                return listed
            lo, step = listed + 1, _PROBE_STEP  # the visible length is >= lo
            while readable(lo + step - 1):
                lo += step
                step *= 2
            hi = lo + step - 1  # ... and <= hi
            while lo < hi:
                mid = (lo + hi) // 2
                if readable(mid):
                    lo = mid + 1
                else:
                    hi = mid
            return lo
        finally:
            f.close()

    def open(self, location: WalLocation, stats: ReadStats | None = None) -> BinaryIO:
        """The WAL file, open for reading up to the size a reader sees (``location.size``
        once :meth:`visible`); with ``stats``, its opening and reads are counted there.

        :raises FileNotFoundError: the file is gone.
        """
        f: BinaryIO
        if not self.lagging or location.archived:
            f = self.fs.open(location.path, "rb")
        else:
            loc = self.visible(location)
            if self._hdfs == "webhdfs":
                from fsspec.implementations.webhdfs import WebHDFile

                # the file's own length (the NameNode's) would stop every read there
                f = cast(
                    BinaryIO,
                    WebHDFile(
                        self.fs,
                        self.fs._strip_protocol(loc.path),
                        mode="rb",
                        block_size=self.fs.blocksize,
                        tempdir=self.fs.tempdir,
                        autocommit=True,
                        size=loc.size,
                    ),
                )
            else:
                f = cast(BinaryIO, SizedFile(self.fs.fs.open_input_file(self.fs._strip_protocol(loc.path)), loc.size))
        return f if stats is None else cast(BinaryIO, CountedFile(f, stats))

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
        in ``oldWALs/``. On HDFS the sizes under ``WALs/`` are the NameNode's (not
        :attr:`WalLocation.visible`): :meth:`visible_many` gives what a reader sees."""
        live: dict[str, WalLocation] = {}
        try:
            for d in self.fs.ls(f"{self.base}/WALs", detail=True):
                if d.get("type") == "directory":
                    for f in self.fs.ls(d["name"], detail=True):
                        if f.get("type") != "directory":
                            live[_basename(f["name"])] = self._listed(f["name"], False, f)
        except FileNotFoundError:
            pass
        out = {_basename(path): WalLocation(path, True, size, mtime) for path, mtime, size in self.list_archive()}
        out.update(live)
        return out

    def file_sizes(self, folder: str) -> list[tuple[str, int]]:
        """(path, size) of every entry of ``folder``: a tailer's probe for growth, many times
        a second, so on a local disk one directory scan (the sizes from its entries), not a
        file system's listing with every detail of each file.

        :raises FileNotFoundError: no such folder.
        :raises OSError: it cannot be listed.
        """
        if not isinstance(self.fs, LocalFileSystem):
            return [(e["name"], int(e.get("size") or 0)) for e in self.fs.ls(folder, detail=True)]
        out: list[tuple[str, int]] = []
        with os.scandir(folder) as entries:
            for entry in entries:
                try:
                    out.append((entry.path, entry.stat().st_size))
                except FileNotFoundError:
                    continue  # removed as it was listed: as if listed a moment later
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


def _hdfs_client(fs: Any) -> str | None:
    """``webhdfs`` (fsspec's WebHDFS), ``arrow`` (pyarrow's HDFS client) or ``None`` (not HDFS);
    the modules are imported only when the file system is theirs."""
    protocols = fs.protocol if isinstance(fs.protocol, (tuple, list)) else (fs.protocol,)
    if {"webhdfs", "swebhdfs"} & set(protocols):
        from fsspec.implementations.webhdfs import WebHDFS

        return "webhdfs" if isinstance(fs, WebHDFS) else None
    if {"hdfs", "viewfs"} & set(protocols):
        from fsspec.implementations.arrow import ArrowFSWrapper

        return "arrow" if isinstance(fs, ArrowFSWrapper) else None
    return None


def _mtime(info: dict[str, Any]) -> float:
    value = info.get("mtime") or info.get("created") or 0
    return float(value.timestamp() if hasattr(value, "timestamp") else value)


def _basename(path: str) -> str:
    return path.rstrip("/").rsplit("/", 1)[-1]
