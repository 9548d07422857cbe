"""The minicluster's ``hbase:meta``: one row per region, written as HBase 2.x's master writes
it (``RegionStateStore`` and ``MetaTableAccessor``), read through the Thrift servers like any
table.

A region's row is keyed by its region name, ``<table>,<start key>,<region id>.<encoded>.``,
the encoded name being the MD5 hex of ``<table>,<start key>,<region id>``
(``RegionInfo.createRegionName``). Each change of its state puts ``info:state`` (and where it
is: ``info:sn`` while in transition; ``info:server``, ``info:serverstartcode`` and
``info:seqnumDuringOpen`` once OPEN). For a table with a family of replication scope 1
(``hasGlobalReplicationScope``) an OPEN also puts the open sequence id in
``rep_barrier:seqnumDuringOpen``, a family that keeps every version; a split puts one more
barrier on the parent (its highest sequence id + 1) and ``rep_barrier:parent`` on the
daughters; a merge deletes the parents' ``info`` family, puts that last barrier on each and
``rep_barrier:parent`` (both names, in key order) on the merged region. Deleting a table
deletes its rows.

The cells live in the cluster's store under the table name ``hbase:meta`` (not a user table:
no WAL, no region of its own). Rows are ordered as HBase orders meta rows
(``MetaCellComparator``: table, then start key, then region id), which plain byte order is
not when a start key holds bytes below ``,``. Every put gets a timestamp above the last one
(HBase takes the clock's), so no version of a barrier hides another.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import struct
import time
from collections.abc import Sequence

from walship.errors import NoSuchFamilyError
from walship.serial.metarow import INFO, META_TABLE, PARENT, REP_BARRIER, SEQNUM, STATE
from walship.servername import ServerName
from walship.wal import Cell, CellType
from walship_testing.minicluster.store import Region, Store

__all__ = [
    "META_TABLE",
    "META_VERSIONS",
    "Meta",
    "check_meta_families",
    "compare_meta_rows",
    "encoded_name",
    "meta_row_key",
    "meta_rows_in_range",
    "parents_value",
    "region_name",
]

log = logging.getLogger(__name__)

TABLE_FAMILY = b"table"
#: meta's families and the versions each keeps (``FSTableDescriptors``: ``hbase.meta.versions``
#: = 3; ``rep_barrier``: every version)
META_VERSIONS: dict[bytes, int] = {INFO: 3, TABLE_FAMILY: 3, REP_BARRIER: 2**31 - 1}
SERVER = b"server"
STARTCODE = b"serverstartcode"
SERVERNAME = b"sn"
_ESCAPE = b"\xff"
_SEPARATOR = b"\xff\x00"


def encoded_name(table: bytes, start_key: bytes, region_id: int) -> str:
    """``RegionInfo.createRegionName``'s encoded name: the MD5 hex of ``table,start,id``."""
    return hashlib.md5(b"%s,%s,%d" % (table, start_key, region_id)).hexdigest()


def region_name(region: Region) -> bytes:
    """The region's full name, its meta row key."""
    return b"%s,%s,%d.%s." % (region.table, region.start_key, region.region_id, region.encoded.encode())


def parents_value(names: Sequence[bytes]) -> bytes:
    """``MetaTableAccessor.getParentsBytes``: each ``0xFF`` of a name doubled, the names
    separated by ``0xFF 0x00``."""
    return _SEPARATOR.join(name.replace(_ESCAPE, _ESCAPE + _ESCAPE) for name in names)


def _cmp(a: bytes, b: bytes) -> int:
    return (a > b) - (a < b)


def compare_meta_rows(left: bytes, right: bytes) -> int:
    """``MetaCellComparator.compareRows``, step by step: the table (up to the first ``,``),
    a row without ``,`` first; then the start key (up to the last ``,``); then the rest (the
    region id and encoded name; from the row's start when there is no second ``,``, as HBase
    compares it)."""
    ld, rd = left.find(b","), right.find(b",")
    result = _cmp(left[: len(left) if ld < 0 else ld], right[: len(right) if rd < 0 else rd])
    if result:
        return result
    if ld < 0 or rd < 0:
        return (rd < 0) - (ld < 0)
    ld, rd = ld + 1, rd + 1
    lfar, rfar = left.rfind(b",", ld), right.rfind(b",", rd)
    result = _cmp(left[ld : len(left) if lfar < 0 else lfar], right[rd : len(right) if rfar < 0 else rfar])
    if result:
        return result
    return _cmp(left[lfar + 1 :], right[rfar + 1 :])


#: A sort key giving meta rows HBase's order (:func:`compare_meta_rows`).
meta_row_key = functools.cmp_to_key(compare_meta_rows)


def meta_rows_in_range(
    store: Store, start: bytes, stop: bytes, *, reverse: bool = False, after: bytes | None = None, limit: int
) -> list[bytes]:
    """Meta's row keys in [start, stop) (reversed: (stop, start]) in meta's order, after a
    resume key; :meth:`Store.rows_in_range <walship_testing.minicluster.store.Store.rows_in_range>`
    for ``hbase:meta``. Meta is small (a row per region): it is sorted whole."""
    rows = sorted(store.rows_in_range(META_TABLE, b"", b"", limit=2**31 - 1), key=meta_row_key, reverse=reverse)
    lo = meta_row_key(start) if start else None
    hi = meta_row_key(stop) if stop else None
    past = meta_row_key(after) if after is not None else None
    out = []
    for row in rows:
        key = meta_row_key(row)
        if not reverse:
            inside = (lo is None or key >= lo) and (hi is None or key < hi) and (past is None or key > past)
        else:
            inside = (lo is None or key <= lo) and (hi is None or key > hi) and (past is None or key < past)
        if inside:
            out.append(row)
            if len(out) == limit:
                break
    return out


def check_meta_families(columns: dict[bytes, set[bytes] | None] | None) -> dict[bytes, int]:
    """A read of ``hbase:meta``: its families' versions.

    :raises NoSuchFamilyError: ``columns`` names a family meta does not have.
    """
    for family in columns or ():
        if family not in META_VERSIONS:
            raise NoSuchFamilyError(f"table hbase:meta has no column family {family!r}")
    return dict(META_VERSIONS)


def _long(value: int) -> bytes:
    return struct.pack(">q", value)


class Meta:
    """The rows of ``hbase:meta`` in a store (see the module docstring).

    :param store: the cluster's store, which holds the cells.
    """

    def __init__(self, store: Store) -> None:
        self.store = store
        self._last_ts = 0

    def _ts(self) -> int:
        ts = max(int(time.time() * 1000), self._last_ts + 1)
        self._last_ts = ts
        return ts

    def replicated(self, table: bytes) -> bool:
        """``TableDescriptor.hasGlobalReplicationScope``: a family of scope 1 (GLOBAL)."""
        return any(f.scope == 1 for f in self.store.families(table).values())

    def _put(self, cells: Sequence[Cell]) -> None:
        self.store.apply(META_TABLE, cells)

    @staticmethod
    def _cell(row: bytes, family: bytes, qualifier: bytes, ts: int, value: bytes) -> Cell:
        return Cell(row, family, qualifier, ts, CellType.Put, value)

    def created(self, regions: Sequence[Region]) -> None:
        """New regions (``addRegionsToMeta``): state CLOSED until assigned."""
        ts = self._ts()
        self._put([self._cell(region_name(r), INFO, STATE, ts, b"CLOSED") for r in regions])

    def transition(
        self, region: Region, state: str, server: ServerName | None = None, open_seq: int | None = None
    ) -> bool:
        """``RegionStateStore.updateRegionLocation``: the state, where the region is, and on
        OPEN its open sequence id; returns whether a barrier was recorded (OPEN, and the
        table replicated)."""
        row = region_name(region)
        ts = self._ts()
        cells = []
        barrier = False
        if state == "OPEN":
            if server is None or open_seq is None:
                raise ValueError(f"an OPEN region {region.encoded} needs its server and open sequence id")
            cells += [
                self._cell(row, INFO, SERVER, ts, f"{server.host}:{server.port}".encode()),
                self._cell(row, INFO, STARTCODE, ts, _long(server.start_code)),
                self._cell(row, INFO, SEQNUM, ts, _long(open_seq)),
            ]
            if self.replicated(region.table):
                cells.append(self._cell(row, REP_BARRIER, SEQNUM, ts, _long(open_seq)))
                barrier = True
        elif server is not None:
            cells.append(self._cell(row, INFO, SERVERNAME, ts, str(server).encode()))
        cells.append(self._cell(row, INFO, STATE, ts, state.encode()))
        self._put(cells)
        log.debug("hbase:meta %s: %s%s", region.encoded, state, f" at {open_seq}" if open_seq is not None else "")
        return barrier

    def record_split(self, parent: Region, parent_max_seq: int, daughters: Sequence[Region]) -> int | None:
        """``MetaTableAccessor.splitRegion``: the daughters CLOSED (and opened at 1 for now);
        for a replicated table the parent's last barrier, its highest sequence id + 1, and the
        daughters' parent. Returns that barrier (``None``: not replicated)."""
        ts = self._ts()
        barrier = parent_max_seq + 1 if self.replicated(parent.table) and parent_max_seq > 0 else None
        cells = []
        if barrier is not None:
            cells.append(self._cell(region_name(parent), REP_BARRIER, SEQNUM, ts, _long(barrier)))
        for d in daughters:
            row = region_name(d)
            if barrier is not None:
                cells.append(self._cell(row, REP_BARRIER, PARENT, ts, parents_value([region_name(parent)])))
            cells += [self._cell(row, INFO, STATE, ts, b"CLOSED"), self._cell(row, INFO, SEQNUM, ts, _long(1))]
        self._put(cells)
        return barrier

    def merge(
        self, parents: Sequence[tuple[Region, int]], merged: Region, server: ServerName | None
    ) -> list[int | None]:
        """``MetaTableAccessor.mergeRegions``: each parent's ``info`` deleted and, for a
        replicated table, its last barrier (its highest sequence id + 1); the merged region
        CLOSED, located at ``server``, with its parents (in key order). Returns each parent's
        barrier, in key order (``None``: not replicated)."""
        ts = self._ts()
        replicated = self.replicated(merged.table)
        cells = []
        barriers: list[int | None] = []
        named = []
        for parent, max_seq in sorted(parents, key=lambda p: p[0].start_key):
            row = region_name(parent)
            cells.append(Cell(row, INFO, b"", ts, CellType.DeleteFamily))
            barriers.append(max_seq + 1 if replicated and max_seq > 0 else None)
            if barriers[-1] is not None:
                cells.append(self._cell(row, REP_BARRIER, SEQNUM, ts, _long(max_seq + 1)))
                named.append(row)
        row = region_name(merged)
        cells.append(self._cell(row, INFO, STATE, ts, b"CLOSED"))
        if server is not None:
            cells += [
                self._cell(row, INFO, SERVER, ts, f"{server.host}:{server.port}".encode()),
                self._cell(row, INFO, STARTCODE, ts, _long(server.start_code)),
                self._cell(row, INFO, SEQNUM, ts, _long(1)),
            ]
        if named:
            cells.append(self._cell(row, REP_BARRIER, PARENT, ts, parents_value(named)))
        self._put(cells)
        return barriers

    def delete_table(self, table: bytes) -> None:
        """``DeleteTableProcedure``: every row of the table's regions, whole."""
        ts = self._ts()
        rows = [r for r in meta_rows_in_range(self.store, b"", b"", limit=2**31 - 1) if r.startswith(table + b",")]
        self._put([Cell(row, family, b"", ts, CellType.DeleteFamily) for row in rows for family in META_VERSIONS])
