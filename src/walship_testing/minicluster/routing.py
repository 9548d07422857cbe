"""The write path across a table's regions: which region holds a row, and writes split by
region as an HBase region server splits a client's batch.

Each region logs its own edits, with its own sequence ids, in the WAL of the server holding
it (a region with no live holder is assigned first); the edits of a batch keep their order
within each region. Every edit is checked before anything is written (all or nothing), and
the store takes the whole batch at once. A bulk load gives each region it touches its own
HFiles and BULK_LOAD marker, as HBase's ``BulkLoadHFiles`` loads a file per region. The
regions of a READONLY table refuse writes (:func:`check_writable`).

Functions on a cluster (:class:`~walship_testing.minicluster.view.ClusterView`); the caller holds
its lock.
"""

from __future__ import annotations

import bisect
import logging
import uuid
from collections.abc import Sequence
from typing import Any

from walship.errors import ReadOnlyTableError, TableDisabledError
from walship.wal import Cell
from walship_testing.minicluster.placement import assign, bulk_load_entry
from walship_testing.minicluster.readonly import is_read_only
from walship_testing.minicluster.regionserver import RegionServer
from walship_testing.minicluster.store import Family, Region, Store
from walship_testing.minicluster.view import ClusterView
from walship_testing.minicluster.writes import RowEdit, wal_entries

__all__ = ["append_edits", "bulk_load_cells", "check_writable", "holder", "region_for_row"]

log = logging.getLogger(__name__)


def region_for_row(regions: Sequence[Region], row: bytes) -> Region:
    """The region whose ``[start, end)`` holds ``row``, of a table's regions in key order
    (which cover every key: the first starts at ``''``, the last ends there)."""
    i = bisect.bisect_right([r.start_key for r in regions], row) - 1
    return regions[max(i, 0)]


def _grouped(regions: Sequence[Region], rows: Sequence[bytes]) -> list[tuple[Region, list[int]]]:
    """Indexes of ``rows`` by the region holding each, the regions in order of first use."""
    groups: dict[str, tuple[Region, list[int]]] = {}
    for i, row in enumerate(rows):
        region = region_for_row(regions, row)
        groups.setdefault(region.encoded, (region, []))[1].append(i)
    return list(groups.values())


def _store(cluster: ClusterView) -> Store:
    if cluster.store is None:
        raise TableDisabledError("the cluster is not running")
    return cluster.store


def holder(cluster: ClusterView, region: Region) -> RegionServer:
    """The live server holding ``region``; it is assigned first when it has none."""
    rs = cluster.owner.get(region.encoded)
    if rs is None or not rs.alive:
        rs = assign(cluster, region)
    return rs


def check_writable(cluster: ClusterView, table: bytes, rows: Sequence[bytes], actions: int) -> None:
    """HBase's ``HRegion.checkReadOnly``, on the regions of ``rows`` (an enabled table's).

    :param actions: the mutations of the call (each refused).
    :raises ReadOnlyTableError: the table's descriptor says READONLY; it names the servers
        holding the rows' regions.
    """
    store = _store(cluster)
    if not rows or not is_read_only(store.table_descriptor(table)):
        return
    regions = store.regions(table)
    owners = {cluster.owner.get(region_for_row(regions, row).encoded) for row in rows} if regions else set()
    raise ReadOnlyTableError(table, actions, sorted(str(rs.name) for rs in owners if rs is not None))


def append_edits(
    cluster: ClusterView, table: bytes, families: dict[bytes, Family], edits: Sequence[RowEdit], now: int
) -> list[RegionServer]:
    """Log the edits of each region in the WAL of its server (one batch: see
    :func:`~walship_testing.minicluster.writes.wal_entries`), then apply them all to the store;
    returns the servers written to.

    :raises NoSuchFamilyError: a cell of a family the table does not have.
    :raises BadRequestError: an empty row key, a cell of another row, a negative timestamp.
    """
    store = _store(cluster)
    groups = _grouped(store.regions(table), [e.row for e in edits])
    # a region without a live holder opens first: its open takes sequence ids too
    servers = {region.encoded: holder(cluster, region) for region, _ in groups}
    planned = [
        (region, wal_entries(store, table, families, region.encoded, cluster.seq.get(region.encoded, 0), group, now))
        for region, group in ((region, [edits[i] for i in indexes]) for region, indexes in groups)
    ]
    cells: list[Cell] = []
    seqs: dict[str, int] = {}
    written: dict[str, RegionServer] = {}
    for region, entries in planned:
        if not entries:
            continue
        rs = servers[region.encoded]
        rs.append(region.encoded, entries)
        cluster.seq[region.encoded] = seqs[region.encoded] = entries[-1][0].sequence_id
        cells += [c for _, entry_cells in entries for c in entry_cells]
        written[str(rs.name)] = rs
    if seqs:
        store.apply(table, cells, seqs)
    return list(written.values())


def bulk_load_cells(cluster: ClusterView, table: bytes, cells: Sequence[Cell]) -> dict[str, Any]:
    """Load checked put cells into the store, one HFile per family and region, each region's
    files then named by a BULK_LOAD marker in its WAL (the HFiles are in place first); returns
    the first region and its files, and every region's files."""
    store = _store(cluster)
    assert cluster.cluster_id is not None
    loaded: dict[str, dict[str, list[str]]] = {}
    for region, indexes in _grouped(store.regions(table), [c.row for c in cells]):
        part = [cells[i] for i in indexes]
        rs = holder(cluster, region)
        seq = cluster.seq.get(region.encoded, 0) + 1
        files = {f: [f"{uuid.uuid4().hex}_SeqId_{seq}_"] for f in sorted({c.family for c in part})}
        store.apply(table, part, {region.encoded: seq})
        store.checkpoint()  # the HFiles are in place before the marker is logged
        rs.append(region.encoded, [bulk_load_entry(cluster.cluster_id, region, seq, files)])
        cluster.seq[region.encoded] = seq
        loaded[region.encoded] = {f.decode(): names for f, names in files.items()}
    first = next(iter(loaded))
    log.debug("bulk load into %s: %s", table.decode(errors="replace"), loaded)
    return {"region": first, "files": loaded[first], "regions": loaded}
