"""One logical region server of the minicluster: its name, its ZooKeeper session, its WAL.

A roll names the new WAL, adds it to every peer's queue, then switches to it, as HBase's
``AbstractFSWAL`` does with its ``WALActionsListener`` (the replication source manager).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

from kazoo.client import KazooClient

from walship.servername import ServerName
from walship.wal import Cell, WalKey, WalWriter, build_wal_name
from walship.zk import ReplicationQueues, connect, register_server
from walship.zk.client import inherit_acls

if TYPE_CHECKING:
    from walship.minicluster.cluster import MiniCluster

__all__ = ["RegionServer"]


class RegionServer:
    """One logical region server: its name, its own ZooKeeper session, its current WAL."""

    def __init__(self, name: ServerName, cluster: MiniCluster) -> None:
        self.name = name
        self.cluster = cluster
        self.zk: KazooClient | None = None
        self.alive = False
        self.wal_dir = cluster.data_dir / "WALs" / str(name)
        self.wal_name = ""
        self.wal_path: Path | None = None
        self._file: BinaryIO | None = None
        self.writer: WalWriter | None = None
        self._last_ts = 0
        self._next: tuple[BinaryIO, WalWriter, str, Path] | None = None

    def start(self) -> None:
        self.zk = connect(self.cluster.zk_hosts)
        inherit_acls(self.zk, self.cluster.layout.parent)
        register_server(self.zk, self.cluster.layout, str(self.name))
        self.wal_dir.mkdir(parents=True, exist_ok=True)
        self.alive = True
        self.open_new_wal()

    def open_new_wal(self) -> Path | None:
        """Roll: name a new WAL, add it to every peer's queue, then switch to it. Returns the
        rolled WAL's path (closed with its trailer), if there was one."""
        self.begin_roll()
        return self.complete_roll()

    @property
    def rolling(self) -> bool:
        return self._next is not None

    def begin_roll(self) -> None:
        """Name the new WAL, add it to every peer's queue and open it; appends still go to the
        current WAL until :meth:`complete_roll`."""
        assert self.zk is not None
        ts = max(int(time.time() * 1000), self._last_ts + 1)
        self._last_ts = ts
        name = build_wal_name(self.name, ts)
        ReplicationQueues(self.zk, self.cluster.layout).add_wal(str(self.name), name)
        path = self.wal_dir / name
        f = open(path, "xb")  # noqa: SIM115 - owned by this server until the next roll
        writer = WalWriter(f)
        writer.sync()
        self._next = (f, writer, name, path)

    def complete_roll(self) -> Path | None:
        """Close the current WAL with its trailer and switch to the one :meth:`begin_roll`
        opened; returns the closed WAL's path."""
        if self._next is None:
            return None
        old = self.close_wal(trailer=True)
        self._file, self.writer, self.wal_name, self.wal_path = self._next
        self._next = None
        return old

    def close_wal(self, *, trailer: bool) -> Path | None:
        if self.writer is None or self._file is None:
            return None
        self.writer.close(trailer=trailer)
        if trailer:
            self.writer.sync()
        self._file.close()
        old = self.wal_path
        self.writer = None
        self._file = None
        return old

    def append(self, entries: Sequence[tuple[WalKey, Sequence[Cell]]]) -> None:
        assert self.writer is not None
        self.writer.append_many(entries)
        self.writer.sync()

    def stop_session(self) -> None:
        if self.zk is not None:
            with contextlib.suppress(Exception):
                self.zk.stop()
                self.zk.close()
            self.zk = None
        self.alive = False
