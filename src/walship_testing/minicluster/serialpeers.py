"""What HBase 2.6's peer procedures do on the cluster when a peer is added as serial, made
serial, made not serial, or a serial peer takes other tables (``ModifyPeerProcedure``'s
``reopenRegions`` and ``setLastPushedSequenceId``, ``UpdatePeerConfigProcedure``'s
``updateLastPushedSequenceIdForSerialPeer``).

The regions of every replicated table (a family of scope 1) the peer takes
(:func:`need_to_replicate`) are reopened in place, each open writing a new replication barrier
to ``hbase:meta``; then each region's last pushed id for the peer is set to its last barrier
- 1, read from the cluster's own ``hbase:meta`` (as walship's
:func:`~walship.replicate.serialstart.start_serial` starts a serial peer from a source's
Thrift2 server): what a region wrote before that open counts as pushed, and order holds from
there on. A table the peer
stops taking loses its regions' ids; a peer that stops being serial loses them all.

The caller holds the cluster's lock (regions are closed and opened).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from walship.peer import PeerConfig
from walship.replicate.batcher.filters import table_rule
from walship.serial.metarow import REP_BARRIER, SEQNUM, barriers_of, encoded_region_name
from walship.zk.lastpushed import LastPushedIds
from walship_testing.minicluster.meta import META_TABLE
from walship_testing.minicluster.placement import close_region, open_region
from walship_testing.minicluster.view import MasterView

__all__ = [
    "Barriers",
    "forget_tables",
    "last_barriers",
    "need_to_replicate",
    "reopen_regions",
    "set_last_pushed",
    "tables_changed",
]

log = logging.getLogger(__name__)

#: Every version of a barrier (``Scan.readAllVersions``).
_ALL_VERSIONS = 2**31 - 1
#: The fields HBase's ``isNamespacesAndTableCFsEqual`` compares.
_TABLE_FIELDS = ("replicate_all", "namespaces", "table_cfs", "exclude_namespaces", "exclude_table_cfs")

#: Each region's table, encoded name and last barrier.
Barriers = list[tuple[bytes, str, int]]


def need_to_replicate(peer: PeerConfig, table: bytes) -> bool:
    """HBase's ``ReplicationPeerConfig.needToReplicate(table)``: the peer takes (some families
    of) the table (``t`` or ``ns:t``): the shipper's own table rule. (It never takes a system
    table, which HBase's would with replicate_all; no system table has a family of scope 1, so
    the regions this module touches are the same.)"""
    return table_rule(peer, table).replicate


def tables_changed(old: PeerConfig, new: PeerConfig) -> bool:
    """Whether the two configurations take different tables (HBase's
    ``ReplicationUtils.isNamespacesAndTableCFsEqual``, negated)."""
    return any(getattr(old, f) != getattr(new, f) for f in _TABLE_FIELDS)


def _replicated(host: MasterView, table: bytes) -> bool:
    """``TableDescriptor.hasGlobalReplicationScope``: the table exists and has a family of scope 1."""
    assert host.meta is not None
    return host.meta.replicated(table)


def reopen_regions(host: MasterView, peer: PeerConfig, old: PeerConfig | None = None) -> int:
    """Reopen in place every open region of each enabled replicated table the peer takes (one
    that ``old``, already serial, took is left alone); returns how many regions reopened."""
    store = host.store
    if store is None:
        return 0
    reopened = 0
    for table in store.table_names():
        if not _replicated(host, table) or not need_to_replicate(peer, table):
            continue
        if old is not None and old.serial and need_to_replicate(old, table):
            continue
        if not store.table_enabled(table):
            continue  # HBase reopens an enabled table only
        for region in store.regions(table):
            server = host.owner.get(region.encoded)
            if server is None or not server.alive:
                continue
            close_region(host, region)
            open_region(host, region, server)
            reopened += 1
    log.info("peer %s: %d regions reopened for serial replication", peer.peer_id, reopened)
    return reopened


def last_barriers(host: MasterView) -> Barriers:
    """Every region's table, encoded name and last barrier, from the cluster's own
    ``hbase:meta`` (HBase's ``getTableEncodedRegionNameAndLastBarrier``)."""
    out: Barriers = []
    for row, cells in host.scan(META_TABLE, columns={REP_BARRIER: {SEQNUM}}, versions=_ALL_VERSIONS):
        try:
            encoded = encoded_region_name(row)
        except ValueError:
            continue
        barriers = barriers_of(row, cells)
        if barriers:
            out.append((row.partition(b",")[0], encoded, barriers[-1]))
    return out


def set_last_pushed(host: MasterView, peer: PeerConfig, tables: Callable[[bytes], bool] | None = None) -> int:
    """Each region of a replicated table the peer takes (or, with ``tables``, of those tables
    only) gets its last barrier - 1 as its last pushed id; returns how many regions."""
    assert host.zk is not None
    ids = {
        encoded: last - 1
        for table, encoded, last in last_barriers(host)
        if _replicated(host, table) and need_to_replicate(peer, table) and (tables is None or tables(table))
    }
    LastPushedIds(host.zk, host.layout).advance(peer.peer_id, ids)
    log.info("serial peer %s starts at the current open of %d regions", peer.peer_id, len(ids))
    return len(ids)


def forget_tables(host: MasterView, old: PeerConfig, new: PeerConfig) -> int:
    """The last pushed ids of the regions of each replicated table ``old`` took and ``new`` does
    not take, removed; returns how many were."""
    assert host.zk is not None
    regions = [
        encoded
        for table, encoded, _ in last_barriers(host)
        if _replicated(host, table) and need_to_replicate(old, table) and not need_to_replicate(new, table)
    ]
    return LastPushedIds(host.zk, host.layout).remove_regions(new.peer_id, regions)
