"""Which edits go to a peer: HBase's WAL entry filter chain, in HBase's order.

1. system tables (namespace ``hbase``) never replicate;
2. scope: only cells of families whose scope is GLOBAL (1) in the entry's scopes; METAFAMILY
   markers have no scope and go with them;
3. the peer's table-cfs / namespaces (or, replicating all, its exclude lists);
4. cluster marking: an entry whose cluster ids hold the peer's id has been there already (no
   loops in master-master or cyclic set-ups); otherwise the source's id is appended.

A bulk load marker never ships (its HFiles are not in the WAL), but :meth:`EntryFilter.bulk_load`
says when one concerns the peer, so that it is counted and logged, never dropped unseen.
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import Callable, Mapping
from types import ModuleType
from typing import NamedTuple

from walship.peer import PeerConfig
from walship.sinks.base import FilteredEntry
from walship.wal import layout
from walship.wal.markers import BulkLoad, bulk_load_of
from walship.wal.model import METAFAMILY, ScopeType, WalEntry

__all__ = ["COMPILED", "LIMITS", "TALLY", "EntryFilter", "FilteredEntry", "TableRule", "table_rule"]

_GLOBAL = int(ScopeType.GLOBAL)


class TableRule(NamedTuple):
    """Whether a peer takes a table at all, and which of its families (a named tuple: the
    compiled filter reads it by position).

    :param include: only these families (``None``: every family).
    :param exclude: every family but these (``None``: none excluded).
    """

    replicate: bool
    include: frozenset[bytes] | None = None
    exclude: frozenset[bytes] | None = None

    def selects(self, family: bytes) -> bool:
        """Whether the peer takes cells of ``family`` of this table (their scope aside)."""
        if not self.replicate:
            return False
        if self.include is not None and family not in self.include:
            return False
        return self.exclude is None or family not in self.exclude


#: The lists the compiled batcher counts a run into and reads its limits from, by position (see
#: :meth:`walship.replicate.batcher.member.Member.take_run`).
TALLY = ("position", "read", "size", "wire", "filtered", "last_write_time")
LIMITS = ("read", "wire", "size")

#: The compiled filter and batcher (``_batcher.c``), when built for these tuples; else ``None``
#: and :meth:`EntryFilter.apply_py` and ``Member.take_run_py`` run.
COMPILED: ModuleType | None = layout.load(
    "walship.replicate.batcher._batcher",
    {"FilteredEntry": FilteredEntry._fields, "TableRule": TableRule._fields, "Tally": TALLY, "Limits": LIMITS},
)


def table_rule(peer: PeerConfig, table: bytes) -> TableRule:
    """Which families of ``table`` (``t`` or ``ns:t``, as a WAL key names it) the peer selects
    through its table-cfs / namespaces, or, replicating all, its exclude lists (step 3).

    System tables (namespace ``hbase``) are never selected (step 1).
    """
    if table.startswith(b"hbase:"):
        return TableRule(False)
    ns_b, sep, _ = table.partition(b":")
    namespace = ns_b.decode(errors="replace") if sep else "default"
    name = table.decode(errors="replace")
    if name.startswith("default:"):
        name = name[len("default:") :]
    if peer.replicate_all:
        if peer.exclude_namespaces and namespace in peer.exclude_namespaces:
            return TableRule(False)
        if peer.exclude_table_cfs and name in peer.exclude_table_cfs:
            excluded = peer.exclude_table_cfs[name]
            return TableRule(bool(excluded), exclude=frozenset(f.encode() for f in excluded) if excluded else None)
        return TableRule(True)
    if peer.namespaces and namespace in peer.namespaces:
        return TableRule(True)
    if peer.table_cfs and name in peer.table_cfs:
        fams = peer.table_cfs[name]
        return TableRule(True, include=frozenset(f.encode() for f in fams) if fams else None)
    return TableRule(False)


def _kept(
    family: bytes, scopes: Mapping[bytes, int], include: frozenset[bytes] | None, exclude: frozenset[bytes] | None
) -> bool:
    """Whether a cell of ``family`` goes: scoped GLOBAL, and selected by the peer's table rule."""
    return (
        scopes.get(family) == _GLOBAL
        and (include is None or family in include)
        and (exclude is None or family not in exclude)
    )


class EntryFilter:
    """The filter chain for one peer.

    :param source_id: the source cluster's id (appended to shipped edits).
    :param peer_id: the peer cluster's id (edits that carry it are dropped).
    """

    #: The entry's replicable part, or ``None`` when nothing of it goes to this peer: the
    #: compiled filter (a partial of ``_batcher.filter_entry``, no Python
    #: frame an entry), which leaves to :meth:`apply_py` what it does not decide; where the
    #: module is not built, :meth:`apply_py` itself.
    apply: Callable[[WalEntry], FilteredEntry | None]
    #: The compiled filter's arguments before the entry (what :attr:`apply` binds), for the
    #: compiled code that filters a run of entries itself; ``None`` where it is not built.
    compiled: tuple[object, ...] | None

    def __init__(self, peer: PeerConfig, source_id: uuid.UUID, peer_cluster_id: uuid.UUID) -> None:
        self.peer = peer
        self.source_id = source_id
        self.peer_cluster_id = peer_cluster_id
        self._table_cache: dict[bytes, TableRule] = {}
        self._own_ids = (source_id,)  # the cluster ids of an edit written here: one tuple for all
        self.compiled: tuple[object, ...] | None = None
        if COMPILED is not None:
            self.compiled = (
                self._table_cache,
                self._own_ids,
                source_id,
                peer_cluster_id,
                FilteredEntry,
                self.apply_py,
            )
            self.apply = functools.partial(COMPILED.filter_entry, *self.compiled)
        else:
            self.apply = self.apply_py

    def _table_rule(self, table: bytes) -> TableRule:
        """Whether the table replicates at all, and which of its families do (cached)."""
        cached = self._table_cache.get(table)
        if cached is None:
            cached = self._table_cache[table] = table_rule(self.peer, table)
        return cached

    def ordered(self, entry: WalEntry) -> bool:
        """Whether a serial peer keeps this entry's place in its region's order: an entry of a
        table the peer takes that did not come from the peer, whatever its cells' scopes (as
        HBase checks what its table and cluster filters let through, empty edits included)."""
        key = entry.key
        return (
            not key.table.startswith(b"hbase:")
            and self._table_rule(key.table).replicate
            and self.peer_cluster_id not in key.cluster_ids
        )

    def apply_py(self, entry: WalEntry) -> FilteredEntry | None:
        """:attr:`apply` in Python: what the compiled filter gives, and what it leaves to this
        (a table not seen yet, scopes of another mapping type)."""
        key = entry.key
        if key.table.startswith(b"hbase:"):
            return None
        scopes = key.scopes
        if not scopes:
            return None
        rule = self._table_rule(key.table)
        if not rule.replicate:
            return None
        cells = entry.cells
        include, exclude = rule.include, rule.exclude
        for c in cells:  # most entries keep every cell: then the entry's own tuple is kept
            f = c.family
            if (
                scopes.get(f) != _GLOBAL
                or (include is not None and f not in include)
                or (exclude is not None and f in exclude)
            ):
                cells = tuple(c for c in cells if _kept(c.family, scopes, include, exclude))
                break
        if not cells:
            return None
        ids = key.cluster_ids
        if not ids:
            return FilteredEntry(entry, cells, self._own_ids)
        if self.peer_cluster_id in ids:
            return None
        return FilteredEntry(entry, cells, ids if self.source_id in ids else (*ids, self.source_id))

    def bulk_load(self, entry: WalEntry, path: str) -> BulkLoad | None:
        """The part of a bulk load marker that concerns this peer (the families it takes of a
        table it replicates), or ``None``: no bulk load marker, another table or family, one
        not to replicate, or one that came from the peer (it carries the peer's cluster id).
        Without ``hbase.replication.bulkload.enabled`` HBase writes the marker without scopes;
        the families' scopes are then unknown and every family the peer selects counts.

        :raises CorruptWalError: the marker's descriptor does not parse.
        """
        cells = entry.cells
        if not cells or cells[0].family != METAFAMILY or entry.key.table.startswith(b"hbase:"):
            return None
        load = bulk_load_of(entry, path)
        if load is None or not load.replicate or self.peer_cluster_id in load.cluster_ids:
            return None
        rule = self._table_rule(load.table)
        scopes = entry.key.scopes
        files = {
            f: paths for f, paths in load.files.items() if rule.selects(f) and (not scopes or scopes.get(f) == _GLOBAL)
        }
        if not files:
            return None
        return BulkLoad(load.table, load.region, load.sequence_id, files, load.cluster_ids, load.replicate)
