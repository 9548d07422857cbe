"""The embedded HBase-compatible cluster: region servers, WALs, replication queues, a store.

A write goes the way it goes in HBase: the region server owning the row's region appends a
WAL entry (table, encoded region name, sequence id, write time, the cluster ids of the
``_cs.id`` attribute, the scopes of the table's replicated families) and syncs it, then the
cells are applied to the store, then the client is answered. On every roll the new WAL is
added to every peer's queue before it is used; the rolled WAL moves to ``oldWALs/`` once the
store holds its edits durably. The cluster never ships anything: walship does.

With ``roll_order="hbase"`` it rolls in HBase's own order instead: the new WAL is enqueued
and opened, the old one keeps taking appends for ``roll_close_delay`` seconds (HBase writes
the entries in flight to it), then gets its trailer; it is archived only at the next roll,
after a flush. A shipper must then not take "a newer WAL follows" for "closed".
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import struct
import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kazoo.client import KazooClient

from walship.clusterids import CLUSTER_ID_ATTRIBUTE, decode_cluster_ids, encode_cluster_ids
from walship.errors import (
    BadRequestError,
    NoSuchFamilyError,
    TableDisabledError,
    TableExistsError,
    TableNotFoundError,
)
from walship.minicluster.filters import Filter
from walship.minicluster.regionserver import RegionServer
from walship.minicluster.schema import check_family, check_table_name
from walship.minicluster.store import Family, Region, Store, VisibleCell
from walship.protos import WAL_pb2
from walship.servername import ServerName
from walship.wal import METAFAMILY, Cell, CellType, WalKey, WalReader, parse_wal_name
from walship.zk import ReplicationQueues, ZnodeLayout, connect, ensure_cluster_id
from walship.zk.client import inherit_acls

__all__ = [
    "CLUSTER_ID_ATTRIBUTE",
    "LATEST_TIMESTAMP",
    "MiniCluster",
    "RowEdit",
    "RowMutation",
    "check_table_name",
    "decode_cluster_ids",
    "encode_cluster_ids",
]

log = logging.getLogger(__name__)

#: HBase's ``HConstants.LATEST_TIMESTAMP``: "now", resolved by the region server.
LATEST_TIMESTAMP = 2**63 - 1
#: ``default``: a roll closes the old WAL at once and archives it; ``hbase``: HBase's order.
ROLL_ORDERS = ("default", "hbase")


@dataclass
class RowMutation:
    """What one row of a Thrift ``BatchMutation`` asks for: deletes, then puts."""

    row: bytes
    puts: list[tuple[bytes, bytes, bytes]] = field(default_factory=list)  # family, qualifier, value
    deletes: list[tuple[bytes, bytes | None]] = field(default_factory=list)  # family, qualifier or None


@dataclass
class RowEdit:
    """One WAL entry of one row: the cells of one mutation, or of several applied atomically
    (Thrift2's ``mutateRow``), each mutation a list of typed cells.

    A cell timestamp of :data:`LATEST_TIMESTAMP` is resolved as HBase's ``HRegion`` does: a
    ``Delete`` (one version) takes the timestamp of the newest visible version of its column
    (the n-th newest for the n-th such delete of the column in one mutation), or now when
    there is none; every other cell takes now.
    """

    row: bytes
    mutations: list[list[Cell]]
    cluster_ids: tuple[uuid.UUID, ...] = ()


class MiniCluster:
    """An embedded cluster. See the module docstring for the write path.

    :param regionservers: how many logical region servers.
    :param wal_roll_size: roll a WAL once it holds this many bytes.
    """

    def __init__(
        self,
        name: str,
        data_dir: Path,
        zk_hosts: str,
        znode_parent: str,
        *,
        regionservers: int = 3,
        wal_roll_size: int = 64 * 1024 * 1024,
        host: str = "127.0.0.1",
        roll_order: str = "default",
        roll_close_delay: float = 0.5,
    ) -> None:
        if regionservers < 1:
            raise BadRequestError(f"'regionservers' must be >= 1, got {regionservers}")
        if wal_roll_size < 1024:
            raise BadRequestError(f"'wal_roll_size' must be >= 1024 bytes, got {wal_roll_size}")
        if roll_order not in ROLL_ORDERS:
            raise BadRequestError(f"'roll_order' must be one of {', '.join(ROLL_ORDERS)}, got {roll_order!r}")
        self.name = name
        self.data_dir = Path(data_dir).resolve()
        self.zk_hosts = zk_hosts
        self.layout = ZnodeLayout(znode_parent)
        self.n_regionservers = regionservers
        self.wal_roll_size = wal_roll_size
        self.roll_order = roll_order
        self.roll_close_delay = roll_close_delay
        self._closed: list[Path] = []  # rolled in HBase's order, closed, not archived yet
        self.host = host
        self.lock = threading.RLock()
        self.store: Store | None = None
        self.zk: KazooClient | None = None
        self.cluster_id: uuid.UUID | None = None
        self.servers: list[RegionServer] = []
        self.owner: dict[str, RegionServer] = {}  # encoded region -> server
        self.seq: dict[str, int] = {}
        self._known_peers: set[str] = set()
        #: the addresses it serves (``thrift``, ``thrift2``, ...), as the runner sets them
        self.endpoints: dict[str, str | None] = {}

    # -- lifecycle ---------------------------------------------------------------------------

    @property
    def old_wals_dir(self) -> Path:
        return self.data_dir / "oldWALs"

    def start(self) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.old_wals_dir.mkdir(exist_ok=True)
        (self.data_dir / "WALs").mkdir(exist_ok=True)
        self.store = Store(self.data_dir / "store.db")
        self.zk = connect(self.zk_hosts)
        inherit_acls(self.zk, self.layout.parent)  # as HBase on a secured ZooKeeper: its znodes share the parent's ACL
        known = self.store.get_meta("cluster_id")
        self.cluster_id = ensure_cluster_id(self.zk, self.layout, uuid.UUID(known) if known else None)
        self.store.set_meta("cluster_id", str(self.cluster_id))
        self.seq = {r.encoded: r.seq for r in self.store.regions()}
        self._recover()
        start_code = int(time.time() * 1000)
        for i in range(self.n_regionservers):
            rs = RegionServer(ServerName(self.host, 16020 + i, start_code + i), self)
            rs.start()
            self.servers.append(rs)
        for region in self.store.regions():
            self._assign(region)
        self.zk.ensure_path(self.layout.peers)
        self._known_peers = set(self.zk.get_children(self.layout.peers))
        self.zk.ChildrenWatch(self.layout.peers, self._on_peers)
        log.info(
            "minicluster %s started: %d region servers, cluster id %s", self.name, len(self.servers), self.cluster_id
        )

    def _on_peers(self, children: list[str]) -> None:
        """A peer was added: enqueue every live server's current WAL for it, as HBase's
        ReplicationSourceManager does when a peer is added."""
        new = set(children) - self._known_peers
        self._known_peers = set(children)
        if not new:
            return
        with self.lock:
            for rs in self.live_servers():
                if rs.zk is not None and rs.wal_name:
                    ReplicationQueues(rs.zk, self.layout).add_wal(str(rs.name), rs.wal_name, peer_ids=sorted(new))
        log.info("peers %s added: current WALs enqueued", sorted(new))

    def _recover(self) -> None:
        """Replay every WAL left under WALs/ (a crash, or a server aborted) into the store,
        then archive it: what was acknowledged is never lost."""
        assert self.store is not None
        tables = set(self.store.table_names())
        replayed = 0
        for server_dir in sorted((self.data_dir / "WALs").iterdir()):
            if not server_dir.is_dir():
                continue
            files = sorted((p for p in server_dir.iterdir() if p.is_file()), key=lambda p: parse_wal_name(p.name))
            for path in files:
                with open(path, "rb") as f:
                    reader = WalReader(f, str(path))
                    for entry in reader.entries():
                        region = entry.key.encoded_region_name.decode()
                        self.seq[region] = max(self.seq.get(region, 0), entry.key.sequence_id)
                        if entry.key.table in tables and not entry.is_meta:
                            self.store.apply(entry.key.table, entry.cells, {region: entry.key.sequence_id})
                            replayed += 1
                    if reader.incomplete_tail:
                        log.warning(
                            "%s ends with an incomplete entry at offset %d (a crash mid-write)",
                            path,
                            reader.stop_offset,
                        )
            self.store.checkpoint()
            for path in files:
                os.replace(path, self.old_wals_dir / path.name)
            with contextlib.suppress(OSError):
                server_dir.rmdir()
        if replayed:
            log.info("replayed %d WAL entries into the store", replayed)

    def stop(self) -> None:
        """Shut down cleanly: WALs closed with their trailer, store durable, WALs archived."""
        with self.lock:
            for rs in self.servers:
                if rs.alive:
                    rs.complete_roll()
                    rs.close_wal(trailer=True)
            if self.store is not None:
                self.store.checkpoint()
            for rs in self.servers:
                if rs.alive:
                    self._archive_dir(rs)
                rs.stop_session()
            self.servers = []
            if self.zk is not None:
                self.zk.stop()
                self.zk.close()
                self.zk = None
            if self.store is not None:
                self.store.close()

    def _archive_dir(self, rs: RegionServer) -> None:
        if not rs.wal_dir.exists():
            return
        for path in rs.wal_dir.iterdir():
            os.replace(path, self.old_wals_dir / path.name)
        with contextlib.suppress(OSError):
            rs.wal_dir.rmdir()

    # -- region servers --------------------------------------------------------------------------

    def live_servers(self) -> list[RegionServer]:
        return [rs for rs in self.servers if rs.alive]

    def server(self, name: str) -> RegionServer:
        for rs in self.servers:
            if str(rs.name) == name:
                return rs
        raise BadRequestError(f"no region server {name!r}; servers: {[str(r.name) for r in self.servers]}")

    def _assign(self, region: Region) -> RegionServer:
        live = self.live_servers()
        if not live:
            raise TableDisabledError("no live region server")
        load = {str(rs.name): 0 for rs in live}
        for enc, rs in self.owner.items():
            if rs.alive and enc != region.encoded:
                load[str(rs.name)] += 1
        target = min(live, key=lambda rs: (load[str(rs.name)], str(rs.name)))
        self.owner[region.encoded] = target
        self._region_event(target, region)
        return target

    def _region_event(self, rs: RegionServer, region: Region) -> None:
        """A REGION_OPEN marker, as HBase writes one into the WAL when a region opens."""
        seq = self.seq.get(region.encoded, 0) + 1
        self.seq[region.encoded] = seq
        desc = WAL_pb2.RegionEventDescriptor(
            event_type=WAL_pb2.RegionEventDescriptor.REGION_OPEN,
            table_name=region.table,
            encoded_region_name=region.encoded.encode(),
            log_sequence_number=seq,
        )
        desc.server.host_name = rs.name.host
        desc.server.port = rs.name.port
        desc.server.start_code = rs.name.start_code
        marker = Cell(
            region.start_key or b"\x00",
            METAFAMILY,
            b"HBASE::REGION_EVENT::REGION_OPEN",
            int(time.time() * 1000),
            CellType.Put,
            desc.SerializeToString(),
        )
        rs.append([(WalKey(region.encoded.encode(), region.table, seq, int(time.time() * 1000)), [marker])])

    def roll(self, server: str | None = None) -> list[str]:
        """Roll the WAL of one server (or every live server); returns the archived WAL names."""
        with self.lock:
            targets = [self.server(server)] if server else self.live_servers()
            for rs in targets:
                if not rs.alive:
                    raise BadRequestError(f"region server {rs.name} is not alive")
            if self.roll_order == "hbase":
                return self._roll_as_hbase(targets)
            rolled = []
            for rs in targets:
                old = rs.open_new_wal()
                if old is not None:
                    assert self.store is not None
                    self.store.checkpoint()
                    os.replace(old, self.old_wals_dir / old.name)
                    rolled.append(old.name)
            return rolled

    def _roll_as_hbase(self, targets: list[RegionServer]) -> list[str]:
        """Archive what earlier rolls closed (after a flush), then begin rolling ``targets``;
        their old WALs are closed ``roll_close_delay`` seconds later. Returns the archived names."""
        archived = []
        if self._closed:
            self._store().checkpoint()
            for path in self._closed:
                if path.exists():
                    os.replace(path, self.old_wals_dir / path.name)
                    archived.append(path.name)
            self._closed = []
        starting = [rs for rs in targets if not rs.rolling]
        for rs in starting:
            rs.begin_roll()
        if starting:
            timer = threading.Timer(self.roll_close_delay, self._complete_rolls, [starting])
            timer.daemon = True
            timer.start()
        return archived

    def _complete_rolls(self, servers: list[RegionServer]) -> None:
        with self.lock:
            for rs in servers:
                if rs.alive:
                    old = rs.complete_roll()
                    if old is not None:
                        self._closed.append(old)

    def abort_rs(self, server: str) -> dict[str, Any]:
        """Crash one region server: its WAL is left without a trailer, its ZooKeeper session
        ends (its ephemeral znode goes, its queues stay for a claimer), its regions move to the
        live servers. Its WALs are archived, as after HBase splits a dead server's logs."""
        with self.lock:
            rs = self.server(server)
            if not rs.alive:
                raise BadRequestError(f"region server {server} is already dead")
            if len(self.live_servers()) == 1:
                raise BadRequestError(f"region server {server} is the last live one")
            wal = rs.wal_name
            rs.close_wal(trailer=False)
            rs.stop_session()
            assert self.store is not None
            self.store.checkpoint()
            self._archive_dir(rs)
            moved = []
            for region in self.store.regions():
                if self.owner.get(region.encoded) is rs:
                    moved.append((region.encoded, str(self._assign(region).name)))
            log.info("aborted region server %s; regions moved: %s", server, moved)
            return {"aborted": server, "wal": wal, "regions_moved": moved}

    # -- schema ----------------------------------------------------------------------------------

    def _store(self) -> Store:
        if self.store is None:
            raise TableDisabledError("the cluster is not running")
        return self.store

    def create_table(
        self, table: bytes, families: Sequence[Family], descriptor: dict[str, object] | None = None
    ) -> None:
        """Create a table of one region, assigned to the least loaded live server.

        :param descriptor: the table's own settings (Thrift2's attributes and durability).
        """
        check_table_name(table)
        if not families:
            raise BadRequestError(f"table {table!r}: at least one column family is needed")
        names = [check_family(f).name for f in families]
        if len(set(names)) != len(names):
            raise BadRequestError(f"table {table!r}: a column family is named twice")
        with self.lock:
            store = self._store()
            if store.table_enabled(table) is not None:
                raise TableExistsError(f"table {table.decode(errors='replace')} exists already")
            region_id = int(time.time() * 1000)
            encoded = hashlib.md5(b"%s,,%d." % (table, region_id)).hexdigest()
            region = Region(encoded, table, b"", b"", region_id, 0)
            store.create_table(table, families, region)
            if descriptor:
                store.set_table_descriptor(table, descriptor)
            self.seq[encoded] = 0
            self._assign(region)

    def table_families(self, table: bytes) -> dict[bytes, Family]:
        store = self._store()
        if store.table_enabled(table) is None:
            raise TableNotFoundError(f"table {table.decode(errors='replace')} does not exist")
        return store.families(table)

    def check_enabled(self, table: bytes) -> dict[bytes, Family]:
        families = self.table_families(table)
        if not self._store().table_enabled(table):
            raise TableDisabledError(f"table {table.decode(errors='replace')} is disabled")
        return families

    def set_enabled(self, table: bytes, enabled: bool, *, strict: bool = False) -> None:
        """Enable or disable a table.

        :param strict: as HBase's Admin: refuse to enable an enabled table or to disable a
            disabled one (:class:`BadRequestError`).
        """
        with self.lock:
            self.table_families(table)
            if strict and self._store().table_enabled(table) == enabled:
                state = "enabled" if enabled else "disabled"
                raise BadRequestError(f"table {table.decode(errors='replace')} is already {state}")
            self._store().set_enabled(table, enabled)

    def delete_table(self, table: bytes) -> None:
        with self.lock:
            self.table_families(table)
            if self._store().table_enabled(table):
                raise TableDisabledError(f"table {table.decode(errors='replace')} must be disabled before deleting it")
            for region in self._store().regions(table):
                self.owner.pop(region.encoded, None)
            self._store().delete_table(table)

    def set_scope(self, table: bytes, family: bytes, scope: int) -> None:
        """Like ``alter 't', {NAME => 'f', REPLICATION_SCOPE => scope}``."""
        if scope not in (0, 1):
            raise BadRequestError(f"replication scope must be 0 or 1, got {scope}")
        with self.lock:
            families = self.table_families(table)
            if family not in families:
                raise NoSuchFamilyError(f"table {table!r} has no column family {family!r}")
            self._store().set_scope(table, family, scope)

    def add_family(self, table: bytes, family: Family) -> None:
        """Like HBase's ``Admin.addColumnFamily``: online, the table may be enabled.

        :raises BadRequestError: the family exists already, or is not a valid family.
        """
        check_family(family)
        with self.lock:
            if family.name in self.table_families(table):
                raise BadRequestError(f"table {table!r} has a column family {family.name!r} already")
            self._store().add_family(table, family)

    def modify_family(self, table: bytes, family: Family) -> None:
        """Like HBase's ``Admin.modifyColumnFamily``: the family's descriptor is replaced."""
        check_family(family)
        with self.lock:
            if family.name not in self.table_families(table):
                raise NoSuchFamilyError(f"table {table!r} has no column family {family.name!r}")
            self._store().modify_family(table, family)

    def region_locations(self, table: bytes) -> list[tuple[Region, RegionServer | None]]:
        """The table's regions in key order, each with the server that holds it (if any)."""
        with self.lock:
            self.table_families(table)
            return [(r, self.owner.get(r.encoded)) for r in self._store().regions(table)]

    # -- writes ------------------------------------------------------------------------------------

    def mutate(
        self,
        table: bytes,
        mutations: Sequence[RowMutation],
        *,
        timestamp: int | None = None,
        attributes: dict[bytes, bytes] | None = None,
    ) -> None:
        """Apply Thrift1 row mutations (one timestamp for every cell, now by default; per
        row its deletes, then its puts); see :meth:`mutate_cells`."""
        cluster_ids: tuple[uuid.UUID, ...] = ()
        if attributes and CLUSTER_ID_ATTRIBUTE in attributes:
            cluster_ids = decode_cluster_ids(attributes[CLUSTER_ID_ATTRIBUTE])
        ts = LATEST_TIMESTAMP if timestamp is None else timestamp
        edits = []
        for m in mutations:
            cells = [
                Cell(m.row, fam, b"", ts, CellType.DeleteFamily)
                if qual is None
                else Cell(m.row, fam, qual, ts, CellType.DeleteColumn)
                for fam, qual in m.deletes
            ]
            cells += [Cell(m.row, fam, qual, ts, CellType.Put, value) for fam, qual, value in m.puts]
            edits.append(RowEdit(m.row, [cells], cluster_ids))
        self.mutate_cells(table, edits)

    def mutate_cells(self, table: bytes, edits: Sequence[RowEdit]) -> None:
        """Apply typed cells: one WAL entry per :class:`RowEdit` (synced), then the store,
        then return. Every edit is checked before anything is written: all or nothing.

        :raises NoSuchFamilyError: a cell of a family the table does not have.
        :raises BadRequestError: an empty row key, a cell of another row, a negative timestamp.
        """
        with self.lock:
            families = self.check_enabled(table)
            now = int(time.time() * 1000)
            scopes = {f.name: f.scope for f in families.values() if f.scope}
            region = self._store().regions(table)[0]
            entries: list[tuple[WalKey, list[Cell]]] = []
            all_cells: list[Cell] = []
            seq = self.seq.get(region.encoded, 0)
            for edit in edits:
                cells = [c for m in edit.mutations for c in self._resolve(table, families, edit.row, m, now)]
                if not cells:
                    continue
                if not edit.row:
                    raise BadRequestError("row key must not be empty")
                seq += 1
                entries.append((WalKey(region.encoded.encode(), table, seq, now, edit.cluster_ids, scopes), cells))
                all_cells.extend(cells)
            if not entries:
                return
            rs = self.owner.get(region.encoded)
            if rs is None or not rs.alive:
                rs = self._assign(region)
            rs.append(entries)
            self.seq[region.encoded] = seq
            self._store().apply(table, all_cells, {region.encoded: seq})
            assert rs.writer is not None
            if rs.writer.offset >= self.wal_roll_size and not rs.rolling:
                self.roll(str(rs.name))

    def _resolve(
        self, table: bytes, families: dict[bytes, Family], row: bytes, mutation: Sequence[Cell], now: int
    ) -> list[Cell]:
        """Check one mutation's cells and give each a timestamp (see :class:`RowEdit`)."""
        out = []
        deletes: dict[tuple[bytes, bytes], int] = {}  # single-version deletes at LATEST per column
        for c in mutation:
            if c.row != row:
                raise BadRequestError(f"a cell of row {c.row!r} in the mutation of row {row!r}")
            if c.family not in families:
                raise NoSuchFamilyError(f"table {table!r} has no column family {c.family!r} (row {row!r})")
            ts = c.timestamp
            if ts == LATEST_TIMESTAMP and c.type == CellType.Delete:
                n = deletes[(c.family, c.qualifier)] = deletes.get((c.family, c.qualifier), 0) + 1
                versions = self._store().read_row(
                    table, row, {c.family: {c.qualifier}}, {c.family: families[c.family].max_versions}, versions=n
                )
                ts = versions[n - 1].timestamp if len(versions) >= n else now
            elif ts == LATEST_TIMESTAMP:
                ts = now
            elif ts < 0:
                raise BadRequestError(f"timestamp must be >= 0, got {ts} (row {row!r}, family {c.family!r})")
            out.append(c._replace(timestamp=ts))
        return out

    def increment(self, table: bytes, row: bytes, family: bytes, qualifier: bytes, amount: int) -> int:
        """``atomicIncrement``: the column holds a big-endian 8-byte long; returns the new value."""
        with self.lock:
            families = self.check_enabled(table)
            if family not in families:
                raise NoSuchFamilyError(f"table {table!r} has no column family {family!r}")
            found = self.read_row(table, row, {family: {qualifier}}, versions=1)
            current = 0
            if found:
                raw = found[0].value
                if len(raw) != 8:
                    raise BadRequestError(f"column {family!r}:{qualifier!r} of row {row!r} is not an 8-byte long")
                (current,) = struct.unpack(">q", raw)
            value = current + amount
            if not -(2**63) <= value < 2**63:
                raise BadRequestError(f"increment overflows a long: {current} + {amount}")
            self.mutate(table, [RowMutation(row, puts=[(family, qualifier, struct.pack(">q", value))])])
            return value

    # -- reads ---------------------------------------------------------------------------------------

    def _readable(self, table: bytes, columns: dict[bytes, set[bytes] | None] | None) -> dict[bytes, int]:
        """Check a read: the table enabled, the families known; return their max_versions."""
        families = self.check_enabled(table)
        for fam in columns or ():
            if fam not in families:
                raise NoSuchFamilyError(f"table {table!r} has no column family {fam!r}")
        return {f.name: f.max_versions for f in families.values()}

    def read_row(
        self,
        table: bytes,
        row: bytes,
        columns: dict[bytes, set[bytes] | None] | None,
        *,
        versions: int = 1,
        max_ts: int | None = None,
        min_ts: int | None = None,
    ) -> list[VisibleCell]:
        """The row's visible cells, newest version first, at most ``versions`` per column,
        with timestamps in ``[min_ts, max_ts)``."""
        max_versions = self._readable(table, columns)
        return self._store().read_row(
            table, row, columns, max_versions, versions=versions, max_ts=max_ts, min_ts=min_ts
        )

    def scan(
        self,
        table: bytes,
        *,
        start: bytes = b"",
        stop: bytes = b"",
        columns: dict[bytes, set[bytes] | None] | None = None,
        versions: int = 1,
        max_ts: int | None = None,
        min_ts: int | None = None,
        reverse: bool = False,
        row_filter: Filter | None = None,
        chunk: int = 500,
    ) -> Iterator[tuple[bytes, list[VisibleCell]]]:
        """Rows in key order (or reversed) with their visible cells, after the filter. The
        table and the families are checked now, the rows read as the iterator is consumed."""
        max_versions = self._readable(table, columns)
        store = self._store()

        def rows_in_range() -> Iterator[tuple[bytes, list[VisibleCell]]]:
            after: bytes | None = None
            while True:
                rows = store.rows_in_range(table, start, stop, reverse=reverse, after=after, limit=chunk)
                for row in rows:
                    cells = store.read_row(
                        table, row, columns, max_versions, versions=versions, max_ts=max_ts, min_ts=min_ts
                    )
                    if not cells:
                        continue
                    if row_filter is not None:
                        kept = row_filter.apply(row, cells)
                        if not kept:
                            continue
                        cells = kept
                    yield row, cells
                if len(rows) < chunk:
                    return
                after = rows[-1]

        return rows_in_range()

    # -- info ----------------------------------------------------------------------------------------

    def wal_files(self) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        wal_root = self.data_dir / "WALs"
        if wal_root.exists():
            for d in sorted(wal_root.iterdir()):
                out[d.name] = sorted(p.name for p in d.iterdir())
        return out

    def info(self) -> dict[str, Any]:
        store = self._store()
        return {
            "name": self.name,
            "cluster_id": str(self.cluster_id),
            "zk": self.zk_hosts,
            "znode_parent": self.layout.parent,
            "data_dir": str(self.data_dir),
            "endpoints": dict(self.endpoints),
            "regionservers": [
                {
                    "name": str(rs.name),
                    "alive": rs.alive,
                    "wal": rs.wal_name if rs.alive else None,
                    "wal_bytes": rs.writer.offset if rs.writer else None,
                    "regions": sorted(e for e, o in self.owner.items() if o is rs),
                }
                for rs in self.servers
            ],
            "tables": [
                {
                    "name": t.decode(errors="replace"),
                    "enabled": bool(store.table_enabled(t)),
                    "families": {
                        f.name.decode(errors="replace"): {"scope": f.scope, "max_versions": f.max_versions}
                        for f in store.families(t).values()
                    },
                    "regions": [r.encoded for r in store.regions(t)],
                }
                for t in store.table_names()
            ],
            "wals": self.wal_files(),
            "old_wals": sorted(p.name for p in self.old_wals_dir.iterdir()),
        }
