"""One logical region server of the minicluster: its name, its ZooKeeper session, its WALs.

A roll names the new WAL, adds it to every peer's queue, then switches to it, as HBase's
``AbstractFSWAL`` does with its ``WALActionsListener`` (the replication source manager).

How it writes them is the cluster's :class:`WalSettings`. With ``groups`` > 0 the server
writes several WAL groups at once, as HBase's multiwal
(``RegionGroupingProvider`` with its default ``BoundedGroupingStrategy``): each region is
given ``regiongroup-<n>`` round robin the first time it writes, each group has its own
current WAL (named ``<server>.<server>.regiongroup-<n>.<ts>``, created on the group's first
write), and a roll rolls every group. One queue per peer lists the WALs of every group.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from kazoo.client import KazooClient

from walship.errors import BadRequestError
from walship.servername import ServerName
from walship.wal import Cell, WalKey, WalWriter, build_wal_name
from walship.wal.valuecodecs import SUPPORTED as VALUE_CODECS
from walship.zk import ReplicationQueues, ZnodeLayout, connect, register_server
from walship.zk.client import inherit_acls
from walship_testing.minicluster.checksums import write_checksum_file

__all__ = ["GroupWal", "RegionServer", "WalSettings"]


@dataclass(frozen=True)
class WalSettings:
    """How the minicluster's region servers write their WALs, as the HBase settings of the
    same name make a region server write them.

    :param groups: 0: one WAL per server (HBase's default provider); N: multiwal with N region
        groups per server (``hbase.wal.provider=multiwal``).
    :param checksums: Hadoop's checksum file ``.<name>.crc`` beside each closed WAL, as a
        Hadoop local file system writes one.
    :param compression: ``hbase.regionserver.wal.enablecompression`` (dictionaries).
    :param tag_compression: ``hbase.regionserver.wal.tags.enablecompression``.
    :param value_compression: ``hbase.regionserver.wal.value.compression.type`` (gz, snappy,
        lz4, zstd), or ``None``.
    """

    groups: int = 0
    checksums: bool = False
    compression: bool = False
    tag_compression: bool = False
    value_compression: str | None = None

    def __post_init__(self) -> None:
        if self.groups < 0:
            raise BadRequestError(f"WAL groups must be >= 0, got {self.groups}")
        if (self.tag_compression or self.value_compression) and not self.compression:
            raise BadRequestError("tag and value compression of WALs need WAL compression on")
        if self.value_compression is not None and self.value_compression not in VALUE_CODECS:
            raise BadRequestError(
                f"WAL value compression must be one of {', '.join(VALUE_CODECS)}, got {self.value_compression!r}"
            )

    def writer(self, f: BinaryIO) -> WalWriter:
        """A WAL writer on ``f`` writing as these settings say."""
        return WalWriter(
            f,
            compression=self.compression,
            tag_compression=self.tag_compression,
            value_compression=self.value_compression,
        )


@dataclass
class _OpenWal:
    file: BinaryIO
    writer: WalWriter
    name: str
    path: Path


class GroupWal:
    """The WAL of one WAL group: the file being written, and the next one while a roll is
    under way (opened and enqueued, not written yet)."""

    def __init__(self, provider_id: str | None) -> None:
        self.provider_id = provider_id
        self.current: _OpenWal | None = None
        self.next: _OpenWal | None = None


class RegionServer:
    """One logical region server: its name, its own ZooKeeper session, its current WALs.

    :param wal: how it writes its WALs.
    :param announce: what its znode holds (PBUF + RegionServerInfo, or nothing).
    """

    def __init__(
        self,
        name: ServerName,
        data_dir: Path,
        zk_hosts: str,
        layout: ZnodeLayout,
        wal: WalSettings,
        *,
        announce: bytes = b"",
    ) -> None:
        self.name = name
        self.announce = announce
        self.zk_hosts = zk_hosts
        self.layout = layout
        self.zk: KazooClient | None = None
        self.alive = False
        self.wal_dir = data_dir / "WALs" / str(name)
        self.wal = wal
        self.wal_groups = wal.groups
        self._groups: dict[str | None, GroupWal] = {}
        self._region_group: dict[str, str] = {}  # encoded region -> provider id (multiwal)
        self._counter = 0
        self._last_ts = 0

    def start(self) -> None:
        self.zk = connect(self.zk_hosts)
        inherit_acls(self.zk, self.layout.parent)
        register_server(self.zk, self.layout, str(self.name), self.announce)
        self.wal_dir.mkdir(parents=True, exist_ok=True)
        self.alive = True
        if not self.wal_groups:
            self._open_group(None)

    # -- WAL groups ----------------------------------------------------------------------------

    def group_of(self, region: str) -> str | None:
        """The WAL group a region writes to: ``None`` for the default provider, else
        ``regiongroup-<n>``, given round robin to regions in the order they first write."""
        if not self.wal_groups:
            return None
        found = self._region_group.get(region)
        if found is None:
            found = f"regiongroup-{self._counter}"
            self._counter = (self._counter + 1) % self.wal_groups
            self._region_group[region] = found
        return found

    def _open_group(self, provider_id: str | None) -> GroupWal:
        group = self._groups.get(provider_id)
        if group is None:
            group = self._groups[provider_id] = GroupWal(provider_id)
            self._begin(group)
            self._complete(group)
        return group

    @property
    def wal_names(self) -> list[str]:
        """The current WAL of each group, oldest group first."""
        return [g.current.name for g in self._groups.values() if g.current is not None]

    @property
    def wal_name(self) -> str:
        """The current WAL (of the first group, with multiwal); ``""`` before any."""
        names = self.wal_names
        return names[0] if names else ""

    @property
    def wal_bytes(self) -> int | None:
        """Bytes in the largest current WAL, or ``None`` while there is none."""
        sizes = [g.current.writer.offset for g in self._groups.values() if g.current is not None]
        return max(sizes) if sizes else None

    # -- rolls -----------------------------------------------------------------------------------

    def open_new_wal(self) -> list[Path]:
        """Roll every group: name a new WAL, add it to every peer's queue, then switch to it.
        Returns the rolled WALs' paths (closed with their trailer)."""
        self.begin_roll()
        return self.complete_roll()

    @property
    def rolling(self) -> bool:
        return any(g.next is not None for g in self._groups.values())

    def begin_roll(self) -> None:
        """For every group: name the new WAL, add it to every peer's queue and open it;
        appends still go to the current WAL until :meth:`complete_roll`."""
        for group in self._groups.values():
            if group.next is None:
                self._begin(group)

    def complete_roll(self) -> list[Path]:
        """Close each group's current WAL with its trailer and switch to the one
        :meth:`begin_roll` opened; returns the closed WALs' paths."""
        closed = []
        for group in self._groups.values():
            old = self._complete(group)
            if old is not None:
                closed.append(old)
        return closed

    def _begin(self, group: GroupWal) -> None:
        assert self.zk is not None
        ts = max(int(time.time() * 1000), self._last_ts + 1)
        self._last_ts = ts
        name = build_wal_name(self.name, ts, provider_id=group.provider_id)
        ReplicationQueues(self.zk, self.layout).add_wal(str(self.name), name)
        path = self.wal_dir / name
        f = open(path, "xb")  # noqa: SIM115 - owned by this server until the next roll
        writer = self.wal.writer(f)
        writer.sync()
        group.next = _OpenWal(f, writer, name, path)

    def _complete(self, group: GroupWal) -> Path | None:
        if group.next is None:
            return None
        old = self._close(group, trailer=True)
        group.current, group.next = group.next, None
        return old

    def close_wals(self, *, trailer: bool) -> list[Path]:
        """Close every group's current WAL (a crash: ``trailer=False``); returns their paths."""
        return [p for g in self._groups.values() if (p := self._close(g, trailer=trailer)) is not None]

    def _close(self, group: GroupWal, *, trailer: bool) -> Path | None:
        wal = group.current
        if wal is None:
            return None
        wal.writer.close(trailer=trailer)
        if trailer:
            wal.writer.sync()
        wal.file.close()
        group.current = None
        if self.wal.checksums:
            write_checksum_file(wal.path)
        return wal.path

    # -- writes ----------------------------------------------------------------------------------

    def append(self, region: str, entries: Sequence[tuple[WalKey, Sequence[Cell]]]) -> None:
        """Append a region's entries to its group's current WAL and sync it."""
        group = self._open_group(self.group_of(region))
        assert group.current is not None
        group.current.writer.append_many(entries)
        group.current.writer.sync()

    def stop_session(self) -> None:
        if self.zk is not None:
            with contextlib.suppress(Exception):
                self.zk.stop()
                self.zk.close()
            self.zk = None
        self.alive = False
