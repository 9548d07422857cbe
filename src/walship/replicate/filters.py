"""Which edits go to a peer: HBase's WAL entry filter chain, in HBase's order.

1. system tables (namespace ``hbase``) never replicate;
2. scope: only cells of families whose scope is GLOBAL (1) in the entry's scopes; METAFAMILY
   markers have no scope and go with them;
3. the peer's table-cfs / namespaces (or, replicating all, its exclude lists);
4. cluster marking: an entry whose cluster ids hold the peer's id has been there already (no
   loops in master-master or cyclic set-ups); otherwise the source's id is appended.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from walship.sinks.base import FilteredEntry
from walship.wal.model import ScopeType, WalEntry
from walship.zk.peers import PeerConfig

__all__ = ["EntryFilter", "FilteredEntry"]

_GLOBAL = int(ScopeType.GLOBAL)


@dataclass(frozen=True)
class _Rule:
    replicate: bool
    include: frozenset[bytes] | None = None
    exclude: frozenset[bytes] | None = None


class EntryFilter:
    """The filter chain for one peer.

    :param source_id: the source cluster's id (appended to shipped edits).
    :param peer_id: the peer cluster's id (edits that carry it are dropped).
    """

    def __init__(self, peer: PeerConfig, source_id: uuid.UUID, peer_cluster_id: uuid.UUID) -> None:
        self.peer = peer
        self.source_id = source_id
        self.peer_cluster_id = peer_cluster_id
        self._table_cache: dict[bytes, _Rule] = {}

    def _table_rule(self, table: bytes) -> _Rule:
        """Whether the table replicates at all, and which of its families do."""
        cached = self._table_cache.get(table)
        if cached is not None:
            return cached
        ns_b, sep, _ = table.partition(b":")
        namespace = ns_b.decode(errors="replace") if sep else "default"
        name = table.decode(errors="replace")
        if name.startswith("default:"):
            name = name[len("default:") :]
        peer = self.peer
        rule = _Rule(False)
        if peer.replicate_all:
            if peer.exclude_namespaces and namespace in peer.exclude_namespaces:
                rule = _Rule(False)
            elif peer.exclude_table_cfs and name in peer.exclude_table_cfs:
                excluded = peer.exclude_table_cfs[name]
                rule = _Rule(bool(excluded), exclude=frozenset(f.encode() for f in excluded) if excluded else None)
            else:
                rule = _Rule(True)
        elif peer.namespaces and namespace in peer.namespaces:
            rule = _Rule(True)
        elif peer.table_cfs and name in peer.table_cfs:
            fams = peer.table_cfs[name]
            rule = _Rule(True, include=frozenset(f.encode() for f in fams) if fams else None)
        self._table_cache[table] = rule
        return rule

    def apply(self, entry: WalEntry) -> FilteredEntry | None:
        """The entry's replicable part, or ``None`` when nothing of it goes to this peer."""
        key = entry.key
        if key.table.startswith(b"hbase:"):
            return None
        scopes = key.scopes
        if not scopes:
            return None
        rule = self._table_rule(key.table)
        if not rule.replicate:
            return None
        cells = tuple(c for c in entry.cells if scopes.get(c.family) == _GLOBAL)
        if rule.include is not None:
            cells = tuple(c for c in cells if c.family in rule.include)
        if rule.exclude is not None:
            cells = tuple(c for c in cells if c.family not in rule.exclude)
        if not cells:
            return None
        if self.peer_cluster_id in key.cluster_ids:
            return None
        ids = key.cluster_ids if self.source_id in key.cluster_ids else (*key.cluster_ids, self.source_id)
        return FilteredEntry(entry, cells, ids)
