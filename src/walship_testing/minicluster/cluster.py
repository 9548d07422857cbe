"""The embedded HBase-compatible cluster: region servers, WALs, replication queues, a store.

A write goes the way it goes in HBase: the region server owning the row's region appends a
WAL entry (table, encoded region name, sequence id, write time, the cluster ids of the
``_cs.id`` attribute, the scopes of the table's replicated families) and syncs it, then the
cells are applied to the store, then the client is answered. :class:`MiniCluster` runs those
steps under its lock; the mutations, their checks, the resolution of :data:`LATEST_TIMESTAMP`
and the WAL entries they become are in :mod:`walship_testing.minicluster.writes`, the placement of
regions on servers in :mod:`walship_testing.minicluster.placement`, a write's split by region in
:mod:`walship_testing.minicluster.routing`. On every roll the new WAL is added
to every peer's queue before it is used; the rolled WAL moves to ``oldWALs/`` once the store
holds its edits durably. The cluster never ships anything: walship does.

With ``roll_order="hbase"`` it rolls in HBase's own order instead: the old WAL is closed a
little after the new one takes appends, and archived only at the next roll, so a shipper must
not take "a newer WAL follows" for "closed". Rolls, replay at start and archiving are in
:mod:`walship_testing.minicluster.walfiles`; table administration in :mod:`walship_testing.minicluster.tables`,
the read path in :mod:`walship_testing.minicluster.reads`. Regions move, split and merge as in HBase
(:mod:`walship_testing.minicluster.regions`), and ``hbase:meta`` records it
(:mod:`walship_testing.minicluster.meta`), served over Thrift like any table.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from kazoo.client import KazooClient

from walship.clusterids import CLUSTER_ID_ATTRIBUTE, decode_cluster_ids, encode_cluster_ids
from walship.errors import BadRequestError, NoSuchFamilyError, TableDisabledError
from walship.servername import ServerName
from walship.wal import Cell, CellType
from walship.zk import ReplicationQueues, ZnodeLayout, connect, ensure_cluster_id
from walship.zk.client import inherit_acls
from walship_testing.minicluster import regions as region_admin
from walship_testing.minicluster import routing, tables
from walship_testing.minicluster.filters import Filter
from walship_testing.minicluster.meta import Meta
from walship_testing.minicluster.placement import abort_server, assign
from walship_testing.minicluster.queueclaims import MasterClaims, server_info
from walship_testing.minicluster.reads import readable_versions, scan_rows
from walship_testing.minicluster.regionserver import RegionServer, WalSettings
from walship_testing.minicluster.report import cluster_info
from walship_testing.minicluster.schema import check_family, check_table_name
from walship_testing.minicluster.store import Family, Region, Store, VisibleCell
from walship_testing.minicluster.walfiles import ROLL_ORDERS, WalRoller, archive_dir, list_wals, replay_wals
from walship_testing.minicluster.writes import (
    LATEST_TIMESTAMP,
    RowEdit,
    RowMutation,
    encode_long,
    incremented,
    row_edits,
)

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


class MiniCluster:
    """An embedded cluster. See the module docstring for the write path.

    :param regionservers: how many logical region servers.
    :param wal_roll_size: roll a WAL once it holds this many bytes.
    :param wal: how the region servers write their WALs (multiwal, checksum files, compression).
    :param queue_claims: who claims a crashed server's queues, ``master`` (after ``claim_delay``
        seconds) or ``walship``: see :mod:`walship_testing.minicluster.queueclaims`.
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
        wal: WalSettings | None = None,
        queue_claims: str = "master",
        claim_delay: float = 0.0,
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
        self.wal = wal or WalSettings()
        self.host = host
        self.lock = threading.RLock()
        self.claims = MasterClaims(queue_claims, claim_delay)
        self._rolls = WalRoller(roll_order, roll_close_delay, self.old_wals_dir, self.lock)
        self.store: Store | None = None
        self.meta: Meta | None = None
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

    @property
    def roll_order(self) -> str:
        """One of :data:`ROLL_ORDERS`."""
        return self._rolls.order

    @property
    def roll_close_delay(self) -> float:
        """In HBase's roll order: how long the old WAL keeps taking appends."""
        return self._rolls.close_delay

    def start(self) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.old_wals_dir.mkdir(exist_ok=True)
        (self.data_dir / "WALs").mkdir(exist_ok=True)
        self.store = Store(self.data_dir / "store.db")
        self.meta = Meta(self.store)
        self.zk = connect(self.zk_hosts)
        inherit_acls(self.zk, self.layout.parent)  # as HBase on a secured ZooKeeper: its znodes share the parent's ACL
        known = self.store.get_meta("cluster_id")
        # written as HBase's master writes it: behind RecoverableZooKeeper's metadata header
        self.cluster_id = ensure_cluster_id(
            self.zk, self.layout, uuid.UUID(known) if known else None, writer=f"master:{self.name}"
        )
        self.store.set_meta("cluster_id", str(self.cluster_id))
        self.seq = {r.encoded: r.seq for r in self.store.regions()}
        # replay what a crash (or an aborted server) left under WALs/: what was acknowledged is never lost
        replay_wals(self.store, self.data_dir / "WALs", self.old_wals_dir, self.seq)
        start_code = int(time.time() * 1000)
        for i in range(self.n_regionservers):
            name = ServerName(self.host, 16020 + i, start_code + i)
            rs = RegionServer(
                name,
                self.data_dir,
                self.zk_hosts,
                self.layout,
                self.wal,
                announce=server_info(self.claims.queue_claims),
            )
            rs.start()
            self.servers.append(rs)
        for region in self.store.regions():
            assign(self, region)
        self.zk.ensure_path(self.layout.peers)
        self._known_peers = set(self.zk.get_children(self.layout.peers))
        self.zk.ChildrenWatch(self.layout.peers, self._on_peers)
        log.info(
            "minicluster %s started: %d region servers, cluster id %s", self.name, len(self.servers), self.cluster_id
        )

    def _on_peers(self, children: list[str]) -> None:
        self.refresh_peers(children)

    def refresh_peers(self, children: list[str] | None = None) -> None:
        """A peer was added: enqueue every live server's current WAL for it, as HBase's
        ReplicationSourceManager does when a peer is added. Called by the master's peer
        procedures before they finish (HBase's RefreshPeerProcedure on every region server),
        and on a ZooKeeper watch for peers written behind the master (``children``: the peers
        it saw; ``None``: read them now)."""
        with self.lock:
            if children is None:
                if self.zk is None:
                    return
                children = self.zk.get_children(self.layout.peers)
            new = set(children) - self._known_peers
            self._known_peers = set(children)
            if not new:
                return
            for rs in self.live_servers():
                if rs.zk is not None:
                    for wal in rs.wal_names:
                        ReplicationQueues(rs.zk, self.layout).add_wal(str(rs.name), wal, peer_ids=sorted(new))
        log.info("peers %s added: current WALs enqueued", sorted(new))

    def stop(self) -> None:
        """Shut down cleanly: WALs closed with their trailer, store durable, WALs archived."""
        self.claims.stop()
        with self.lock:
            for rs in self.servers:
                if rs.alive:
                    rs.complete_roll()
                    rs.close_wals(trailer=True)
            if self.store is not None:
                self.store.checkpoint()
            for rs in self.servers:
                if rs.alive:
                    archive_dir(rs.wal_dir, self.old_wals_dir)
                rs.stop_session()
            self.servers = []
            if self.zk is not None:
                self.zk.stop()
                self.zk.close()
                self.zk = None
            if self.store is not None:
                self.store.close()
            self.meta = None

    # -- region servers --------------------------------------------------------------------------

    def live_servers(self) -> list[RegionServer]:
        return [rs for rs in self.servers if rs.alive]

    def server(self, name: str) -> RegionServer:
        for rs in self.servers:
            if str(rs.name) == name:
                return rs
        raise BadRequestError(f"no region server {name!r}; servers: {[str(r.name) for r in self.servers]}")

    def roll(self, server: str | None = None) -> list[str]:
        """Roll the WAL of one server (or every live server); returns the archived WAL names."""
        with self.lock:
            targets = [self.server(server)] if server else self.live_servers()
            for rs in targets:
                if not rs.alive:
                    raise BadRequestError(f"region server {rs.name} is not alive")
            return self._rolls.roll(targets, self._store)

    def abort_rs(self, server: str) -> dict[str, Any]:
        """Crash one region server; its regions move to the live servers (see
        :func:`~walship_testing.minicluster.placement.abort_server`)."""
        with self.lock:
            aborted = abort_server(self, server)
            assert self.zk is not None
            live = [str(rs.name) for rs in self.live_servers()]
            self.claims.after_crash(self.zk, self.layout, server, live)
            return aborted

    # -- schema ----------------------------------------------------------------------------------

    def _store(self) -> Store:
        if self.store is None:
            raise TableDisabledError("the cluster is not running")
        return self.store

    def create_table(
        self,
        table: bytes,
        families: Sequence[Family],
        descriptor: dict[str, object] | None = None,
        split_keys: Sequence[bytes] = (),
    ) -> None:
        """Create a table of one region (or one more than ``split_keys``), each assigned to
        the least loaded live server.

        :param descriptor: the table's own settings (Thrift2's attributes and durability).
        """
        tables.check_new_table(table, families)
        with self.lock:
            regions = tables.create_table(self._store(), table, families, descriptor, split_keys)
            assert self.meta is not None
            self.meta.created(regions)
            for region in regions:
                self.seq[region.encoded] = 0
                assign(self, region)

    def table_families(self, table: bytes) -> dict[bytes, Family]:
        return tables.table_families(self._store(), table)

    def check_enabled(self, table: bytes) -> dict[bytes, Family]:
        return tables.enabled_families(self._store(), table)

    def set_enabled(self, table: bytes, enabled: bool, *, strict: bool = False) -> None:
        """Enable or disable a table.

        :param strict: as HBase's Admin: refuse to enable an enabled table or to disable a
            disabled one (:class:`BadRequestError`).
        """
        with self.lock:
            tables.set_enabled(self._store(), table, enabled, strict=strict)

    def delete_table(self, table: bytes) -> None:
        with self.lock:
            for region in tables.deletable_regions(self._store(), table):
                self.owner.pop(region.encoded, None)
                self.seq.pop(region.encoded, None)
            self._store().delete_table(table)
            if self.meta is not None:
                self.meta.delete_table(table)

    def set_scope(self, table: bytes, family: bytes, scope: int) -> None:
        """Like ``alter 't', {NAME => 'f', REPLICATION_SCOPE => scope}``."""
        tables.check_scope(scope)
        with self.lock:
            tables.set_scope(self._store(), table, family, scope)

    def add_family(self, table: bytes, family: Family) -> None:
        """Like HBase's ``Admin.addColumnFamily``: online, the table may be enabled.

        :raises BadRequestError: the family exists already, or is not a valid family.
        """
        check_family(family)
        with self.lock:
            tables.add_family(self._store(), table, family)

    def modify_family(self, table: bytes, family: Family) -> None:
        """Like HBase's ``Admin.modifyColumnFamily``: the family's descriptor is replaced."""
        check_family(family)
        with self.lock:
            tables.modify_family(self._store(), table, family)

    def move_region(self, table: bytes, encoded: str, to: str | None = None) -> dict[str, Any]:
        """See :func:`~walship_testing.minicluster.regions.move_region`."""
        with self.lock:
            return region_admin.move_region(self, table, encoded, to)

    def split_region(self, table: bytes, row: bytes, encoded: str | None = None) -> dict[str, Any]:
        """See :func:`~walship_testing.minicluster.regions.split_region`."""
        with self.lock:
            return region_admin.split_region(self, table, row, encoded)

    def merge_regions(self, table: bytes, encoded: Sequence[str]) -> dict[str, Any]:
        """See :func:`~walship_testing.minicluster.regions.merge_regions`."""
        with self.lock:
            return region_admin.merge_regions(self, table, encoded)

    def regions(self, table: bytes) -> list[dict[str, Any]]:
        """See :func:`~walship_testing.minicluster.regions.region_list`."""
        with self.lock:
            return region_admin.region_list(self, table)

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
        puts_first: bool = False,
    ) -> None:
        """Apply Thrift1 row mutations (one timestamp for every cell, now by default; see
        :func:`~walship_testing.minicluster.writes.row_edits`) as two batches, as HBase 2.6's
        Thrift1 server does: the deletes, then the puts (``mutateRow``), or with
        ``puts_first`` the puts, then the deletes (``mutateRows``); see :meth:`mutate_cells`."""
        deletes, puts = row_edits(mutations, timestamp=timestamp, attributes=attributes)
        with self.lock:
            for edits in (puts, deletes) if puts_first else (deletes, puts):
                if edits:
                    self.mutate_cells(table, edits)

    def mutate_cells(self, table: bytes, edits: Sequence[RowEdit]) -> None:
        """Apply typed cells as one batch: the edits of each region in one WAL entry (synced),
        then the store, then return. Every edit is checked before anything is written: all or nothing.

        :raises ReadOnlyTableError: the table is READONLY (its regions refuse writes).
        :raises NoSuchFamilyError: a cell of a family the table does not have.
        :raises BadRequestError: an empty row key, a cell of another row, a negative timestamp.
        """
        with self.lock:
            families = self.check_enabled(table)
            routing.check_writable(self, table, [e.row for e in edits], sum(len(e.mutations) for e in edits))
            for rs in routing.append_edits(self, table, families, edits, int(time.time() * 1000)):
                if (rs.wal_bytes or 0) >= self.wal_roll_size and not rs.rolling:
                    self.roll(str(rs.name))

    def bulk_load(self, table: bytes, cells: Sequence[Cell]) -> dict[str, Any]:
        """Load put cells as HBase's bulk load does: straight into the store (one HFile per
        family), not through the WAL, which gets only a BULK_LOAD marker naming the files.

        :raises NoSuchFamilyError: a cell of a family the table does not have.
        :raises BadRequestError: no cells, a cell that is not a put, an empty row key.
        """
        with self.lock:
            families = self.check_enabled(table)
            if not cells:
                raise BadRequestError("a bulk load needs cells")
            for c in cells:
                if c.family not in families:
                    raise NoSuchFamilyError(f"table {table!r} has no column family {c.family!r}")
                if c.type != CellType.Put or not c.row or c.timestamp < 0:
                    raise BadRequestError(f"a bulk load takes puts with a row and a timestamp >= 0, got {c}")
            return routing.bulk_load_cells(self, table, cells)

    def increment(self, table: bytes, row: bytes, family: bytes, qualifier: bytes, amount: int) -> int:
        """``atomicIncrement``: the column holds a big-endian 8-byte long; returns the new value."""
        with self.lock:
            families = self.check_enabled(table)
            routing.check_writable(self, table, [row], 1)
            if family not in families:
                raise NoSuchFamilyError(f"table {table!r} has no column family {family!r}")
            found = self.read_row(table, row, {family: {qualifier}}, versions=1)
            value = incremented(found[0].value if found else None, amount, row=row, family=family, qualifier=qualifier)
            self.mutate(table, [RowMutation(row, puts=[(family, qualifier, encode_long(value))])])
            return value

    # -- reads ---------------------------------------------------------------------------------------

    def _readable(self, table: bytes, columns: dict[bytes, set[bytes] | None] | None) -> dict[bytes, int]:
        """Check a read: the table enabled, the families known; return their max_versions."""
        return readable_versions(self._store(), table, columns)

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
        raw: bool = False,
    ) -> Iterator[tuple[bytes, list[VisibleCell]]]:
        """Rows in key order (or reversed) with their visible cells (``raw``: every put version
        and the delete markers, as HBase's raw scan), after the filter. The table and the
        families are checked now, the rows read as the iterator is consumed."""
        max_versions = self._readable(table, columns)
        return scan_rows(
            self._store(),
            table,
            max_versions,
            start=start,
            stop=stop,
            columns=columns,
            versions=versions,
            max_ts=max_ts,
            min_ts=min_ts,
            reverse=reverse,
            row_filter=row_filter,
            chunk=chunk,
            raw=raw,
        )

    # -- info ----------------------------------------------------------------------------------------

    def wal_files(self) -> dict[str, list[str]]:
        return list_wals(self.data_dir / "WALs")

    def info(self) -> dict[str, Any]:
        """See :func:`~walship_testing.minicluster.report.cluster_info`."""
        return cluster_info(self, self._store())
