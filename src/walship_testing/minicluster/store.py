"""The minicluster's durable store: tables, families, regions and cells in SQLite.

Cells are kept as HBase keeps them before a major compaction: every put version and every
delete marker. Reads resolve visibility as HBase's ScanQueryMatcher does:

* ``DeleteFamily`` at ts T masks every cell of the family with timestamp <= T;
* ``DeleteFamilyVersion`` at T masks the family's cells with timestamp == T;
* ``DeleteColumn`` at T masks every version of the column with timestamp <= T;
* ``Delete`` at T masks the column's version at exactly T;

then the newest visible versions are returned, at most the family's ``max_versions``. A raw
scan reads the cells as they are kept (:meth:`Store.stored`; see
:func:`walship_testing.minicluster.reads.raw_cells`).
"""

from __future__ import annotations

import json
import logging
import sqlite3
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from walship.wal.model import Cell, CellType

__all__ = ["Family", "Region", "Store", "VisibleCell"]

log = logging.getLogger(__name__)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS tables (name BLOB PRIMARY KEY, enabled INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS families (
  tbl BLOB NOT NULL, family BLOB NOT NULL, max_versions INTEGER NOT NULL, scope INTEGER NOT NULL,
  descriptor TEXT NOT NULL, PRIMARY KEY (tbl, family));
CREATE TABLE IF NOT EXISTS regions (
  encoded TEXT PRIMARY KEY, tbl BLOB NOT NULL, start_key BLOB NOT NULL, end_key BLOB NOT NULL,
  region_id INTEGER NOT NULL, seq INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS cells (
  tbl BLOB NOT NULL, row BLOB NOT NULL, family BLOB NOT NULL, qualifier BLOB NOT NULL,
  ts INTEGER NOT NULL, value BLOB NOT NULL,
  PRIMARY KEY (tbl, row, family, qualifier, ts)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS markers (
  tbl BLOB NOT NULL, row BLOB NOT NULL, family BLOB NOT NULL, qualifier BLOB NOT NULL,
  ts INTEGER NOT NULL, type INTEGER NOT NULL,
  PRIMARY KEY (tbl, row, family, qualifier, ts, type)) WITHOUT ROWID;
"""


@dataclass(frozen=True)
class Family:
    """A column family: its name (no colon), versions kept, replication scope, descriptor."""

    name: bytes
    max_versions: int
    scope: int
    descriptor: dict[str, object]


@dataclass(frozen=True)
class Region:
    """A region: its encoded name, table, key range ('' = unbounded) and last sequence id."""

    encoded: str
    table: bytes
    start_key: bytes
    end_key: bytes
    region_id: int
    seq: int


@dataclass(frozen=True)
class VisibleCell:
    """A cell a read returns: a put, or in a raw scan a delete marker too (``type``: HBase's
    ``Cell.Type`` code, as :class:`~walship.wal.model.CellType`; a marker's value is empty)."""

    family: bytes
    qualifier: bytes
    timestamp: int
    value: bytes
    type: int = int(CellType.Put)


class Store:
    """SQLite-backed storage; one connection per thread, one writer at a time.

    :param path: the database file (created if missing).
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._local = threading.local()
        self._write_lock = threading.RLock()
        conn = self._conn()
        conn.executescript(_SCHEMA)
        conn.commit()

    def _conn(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(self.path, timeout=60, isolation_level=None, check_same_thread=True)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            self._local.conn = conn
        return conn

    def close(self) -> None:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None

    def checkpoint(self) -> None:
        """Make every committed write durable in the database file (fsync)."""
        with self._write_lock:
            conn = self._conn()
            conn.execute("PRAGMA synchronous=FULL")
            conn.execute("PRAGMA wal_checkpoint(FULL)")
            conn.execute("PRAGMA synchronous=NORMAL")

    # -- meta --------------------------------------------------------------------------------

    def get_meta(self, key: str) -> str | None:
        row = self._conn().execute("SELECT value FROM meta WHERE key=?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def set_meta(self, key: str, value: str) -> None:
        with self._write_lock:
            self._conn().execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (key, value))

    # -- schema ------------------------------------------------------------------------------

    def table_names(self) -> list[bytes]:
        """In HBase's order: by the name with its namespace (``default:`` for a table in none)."""
        names = [bytes(r[0]) for r in self._conn().execute("SELECT name FROM tables")]
        return sorted(names, key=lambda n: n if b":" in n else b"default:" + n)

    def table_enabled(self, table: bytes) -> bool | None:
        row = self._conn().execute("SELECT enabled FROM tables WHERE name=?", (table,)).fetchone()
        return None if row is None else bool(row[0])

    def families(self, table: bytes) -> dict[bytes, Family]:
        rows = self._conn().execute(
            "SELECT family, max_versions, scope, descriptor FROM families WHERE tbl=? ORDER BY family", (table,)
        )
        return {bytes(f): Family(bytes(f), int(v), int(s), json.loads(d)) for f, v, s, d in rows}

    def create_table(self, table: bytes, families: Sequence[Family], regions: Sequence[Region]) -> None:
        with self._write_lock:
            conn = self._conn()
            conn.execute("BEGIN IMMEDIATE")
            try:
                conn.execute("INSERT INTO tables VALUES (?, 1)", (table,))
                conn.executemany(
                    "INSERT INTO families VALUES (?, ?, ?, ?, ?)",
                    [(table, f.name, f.max_versions, f.scope, json.dumps(f.descriptor)) for f in families],
                )
                conn.executemany(
                    "INSERT INTO regions VALUES (?, ?, ?, ?, ?, ?)",
                    [(r.encoded, table, r.start_key, r.end_key, r.region_id, r.seq) for r in regions],
                )
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise

    def set_enabled(self, table: bytes, enabled: bool) -> None:
        with self._write_lock:
            self._conn().execute("UPDATE tables SET enabled=? WHERE name=?", (int(enabled), table))

    def set_scope(self, table: bytes, family: bytes, scope: int) -> None:
        with self._write_lock:
            self._conn().execute("UPDATE families SET scope=? WHERE tbl=? AND family=?", (scope, table, family))

    def add_family(self, table: bytes, family: Family) -> None:
        with self._write_lock:
            self._conn().execute(
                "INSERT INTO families VALUES (?, ?, ?, ?, ?)",
                (table, family.name, family.max_versions, family.scope, json.dumps(family.descriptor)),
            )

    def modify_family(self, table: bytes, family: Family) -> None:
        """Replace a family's versions, scope and descriptor."""
        with self._write_lock:
            self._conn().execute(
                "UPDATE families SET max_versions=?, scope=?, descriptor=? WHERE tbl=? AND family=?",
                (family.max_versions, family.scope, json.dumps(family.descriptor), table, family.name),
            )

    def table_descriptor(self, table: bytes) -> dict[str, object]:
        """The table's own descriptor (attributes, durability), beside its families'."""
        raw = self.get_meta(_table_key(table))
        return {} if raw is None else dict(json.loads(raw))

    def set_table_descriptor(self, table: bytes, descriptor: dict[str, object]) -> None:
        self.set_meta(_table_key(table), json.dumps(descriptor))

    def delete_table(self, table: bytes) -> None:
        with self._write_lock:
            conn = self._conn()
            conn.execute("BEGIN IMMEDIATE")
            try:
                for name in ("tables",):
                    conn.execute(f"DELETE FROM {name} WHERE name=?", (table,))
                for name in ("families", "regions", "cells", "markers"):
                    conn.execute(f"DELETE FROM {name} WHERE tbl=?", (table,))
                conn.execute("DELETE FROM meta WHERE key=?", (_table_key(table),))
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise

    def regions(self, table: bytes | None = None) -> list[Region]:
        sql = "SELECT encoded, tbl, start_key, end_key, region_id, seq FROM regions"
        params: tuple[object, ...] = ()
        if table is not None:
            sql += " WHERE tbl=?"
            params = (table,)
        rows = self._conn().execute(sql + " ORDER BY tbl, start_key", params)
        return [Region(e, bytes(t), bytes(s), bytes(k), int(i), int(q)) for e, t, s, k, i, q in rows]

    def replace_regions(self, old: Sequence[str], new: Sequence[Region]) -> None:
        """A split or a merge: the regions ``old`` (encoded names) give way to ``new``, in one
        transaction. The cells stay where they are: they are kept by table and row."""
        with self._write_lock:
            conn = self._conn()
            conn.execute("BEGIN IMMEDIATE")
            try:
                conn.executemany("DELETE FROM regions WHERE encoded=?", [(e,) for e in old])
                conn.executemany(
                    "INSERT INTO regions VALUES (?, ?, ?, ?, ?, ?)",
                    [(r.encoded, r.table, r.start_key, r.end_key, r.region_id, r.seq) for r in new],
                )
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise

    # -- writes --------------------------------------------------------------------------------

    def apply(self, table: bytes, cells: Iterable[Cell], region_seqs: dict[str, int] | None = None) -> None:
        """Apply cells (puts and delete markers) in one transaction, and record the regions'
        sequence ids. Re-applying the same cells changes nothing (replay is idempotent)."""
        puts = []
        marks = []
        for c in cells:
            if c.type == CellType.Put:
                puts.append((table, c.row, c.family, c.qualifier, c.timestamp, c.value))
            else:
                qualifier = b"" if c.type in (CellType.DeleteFamily, CellType.DeleteFamilyVersion) else c.qualifier
                marks.append((table, c.row, c.family, qualifier, c.timestamp, int(c.type)))
        with self._write_lock:
            conn = self._conn()
            conn.execute("BEGIN IMMEDIATE")
            try:
                if puts:
                    conn.executemany("INSERT OR REPLACE INTO cells VALUES (?, ?, ?, ?, ?, ?)", puts)
                if marks:
                    conn.executemany("INSERT OR IGNORE INTO markers VALUES (?, ?, ?, ?, ?, ?)", marks)
                for encoded, seq in (region_seqs or {}).items():
                    conn.execute("UPDATE regions SET seq=max(seq, ?) WHERE encoded=?", (seq, encoded))
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise

    # -- reads ---------------------------------------------------------------------------------

    def read_row(
        self,
        table: bytes,
        row: bytes,
        columns: dict[bytes, set[bytes] | None] | None,
        max_versions: dict[bytes, int],
        *,
        versions: int = 1,
        max_ts: int | None = None,
        min_ts: int | None = None,
    ) -> list[VisibleCell]:
        """The visible cells of one row, by family and qualifier, newest version first.

        :param columns: family -> qualifiers (``None``: the whole family); ``None``: all.
        :param max_ts: exclusive upper bound of the time range, as Thrift's ``*Ts`` calls use.
        :param min_ts: inclusive lower bound of the time range (HBase's ``TimeRange``).
        """
        cells, markers = self.stored(table, row, with_markers=False)
        return _visible(cells, markers, columns, max_versions, versions, (min_ts, max_ts)) if cells else []

    def stored(
        self, table: bytes, row: bytes, *, with_markers: bool = True
    ) -> tuple[list[tuple[bytes, bytes, int, bytes]], list[tuple[bytes, bytes, int, int]]]:
        """A row as it is kept: its put cells ``(family, qualifier, ts, value)`` by family and
        qualifier, newest first, and its delete markers ``(family, qualifier, ts, type)``
        (``with_markers=False``: none when the row has no put cell)."""
        conn = self._conn()
        cells = conn.execute(
            "SELECT family, qualifier, ts, value FROM cells WHERE tbl=? AND row=? ORDER BY family, qualifier, ts DESC",
            (table, row),
        ).fetchall()
        if not cells and not with_markers:
            return [], []
        markers = conn.execute("SELECT family, qualifier, ts, type FROM markers WHERE tbl=? AND row=?", (table, row))
        return cells, markers.fetchall()

    def rows_in_range(
        self,
        table: bytes,
        start: bytes,
        stop: bytes,
        *,
        reverse: bool = False,
        after: bytes | None = None,
        limit: int,
        markers: bool = False,
    ) -> list[bytes]:
        """Row keys with cells in [start, stop) (reverse: (stop, start]), after a resume key
        (``markers``: rows with only delete markers too, as a raw scan reads them)."""
        conn = self._conn()
        clauses = ["tbl=?"]
        params: list[object] = [table]
        # forward: start <= row < stop, after the resume key; reversed: the mirror image
        first, last, past, order = (">=", "<", ">", "ASC") if not reverse else ("<=", ">", "<", "DESC")
        for value, op in ((start, first), (stop, last)):
            if value:  # an empty start or stop key is unbounded
                clauses.append(f"row{op}?")
                params.append(value)
        if after is not None:
            clauses.append(f"row{past}?")
            params.append(after)
        where = " AND ".join(clauses)
        sql = f"SELECT DISTINCT row FROM cells WHERE {where}"
        if markers:
            sql += f" UNION SELECT row FROM markers WHERE {where}"
            params += params
        sql += f" ORDER BY row {order} LIMIT ?"
        params.append(limit)
        return [bytes(r[0]) for r in conn.execute(sql, params)]

    def compact(self, table: bytes) -> int:
        """Major compaction: drop masked cells, versions beyond max_versions and markers."""
        fams = {f.name: f.max_versions for f in self.families(table).values()}
        removed = 0
        with self._write_lock:
            rows = [bytes(r[0]) for r in self._conn().execute("SELECT DISTINCT row FROM cells WHERE tbl=?", (table,))]
            for row in rows:
                keep = {
                    (c.family, c.qualifier, c.timestamp)
                    for c in self.read_row(table, row, None, fams, versions=1 << 30)
                }
                conn = self._conn()
                allc = conn.execute(
                    "SELECT family, qualifier, ts FROM cells WHERE tbl=? AND row=?", (table, row)
                ).fetchall()
                drop = [(table, row, bytes(f), bytes(q), t) for f, q, t in allc if (bytes(f), bytes(q), t) not in keep]
                conn.execute("BEGIN IMMEDIATE")
                conn.executemany("DELETE FROM cells WHERE tbl=? AND row=? AND family=? AND qualifier=? AND ts=?", drop)
                conn.execute("DELETE FROM markers WHERE tbl=? AND row=?", (table, row))
                conn.execute("COMMIT")
                removed += len(drop)
        return removed


def _table_key(table: bytes) -> str:
    return f"table-descriptor:{table.hex()}"


def _visible(
    cells: Sequence[tuple[bytes, bytes, int, bytes]],
    markers: Sequence[tuple[bytes, bytes, int, int]],
    columns: dict[bytes, set[bytes] | None] | None,
    max_versions: dict[bytes, int],
    versions: int,
    time_range: tuple[int | None, int | None],
) -> list[VisibleCell]:
    min_ts, max_ts = time_range
    fam_all: dict[bytes, int] = {}  # DeleteFamily: newest marker ts
    fam_ver: dict[bytes, set[int]] = {}  # DeleteFamilyVersion: exact ts
    col_all: dict[tuple[bytes, bytes], int] = {}  # DeleteColumn
    col_ver: dict[tuple[bytes, bytes], set[int]] = {}  # Delete (one version)
    for f, q, ts, t in markers:
        f, q = bytes(f), bytes(q)
        if t == CellType.DeleteFamily:
            fam_all[f] = max(fam_all.get(f, ts), ts)
        elif t == CellType.DeleteFamilyVersion:
            fam_ver.setdefault(f, set()).add(ts)
        elif t == CellType.DeleteColumn:
            col_all[(f, q)] = max(col_all.get((f, q), ts), ts)
        elif t == CellType.Delete:
            col_ver.setdefault((f, q), set()).add(ts)
    out: list[VisibleCell] = []
    current: tuple[bytes, bytes] | None = None
    taken = 0
    for f, q, ts, value in cells:
        f, q = bytes(f), bytes(q)
        if columns is not None:
            if f not in columns:
                continue
            quals = columns[f]
            if quals is not None and q not in quals:
                continue
        if (f, q) != current:
            current = (f, q)
            taken = 0
        limit = min(versions, max_versions.get(f, 1))
        if taken >= limit:
            continue
        if (max_ts is not None and ts >= max_ts) or (min_ts is not None and ts < min_ts):
            continue
        if ts <= fam_all.get(f, -(2**63)) or ts in fam_ver.get(f, ()):
            continue
        if ts <= col_all.get((f, q), -(2**63)) or ts in col_ver.get((f, q), ()):
            continue
        out.append(VisibleCell(f, q, ts, bytes(value)))
        taken += 1
    return out
