"""Region moves, splits and merges, as HBase 2.x's master runs them: every region closes and
opens as :mod:`walship_testing.minicluster.placement` describes (REGION_CLOSE and REGION_OPEN markers,
meta's states, a replication barrier per open of a replicated table).

* A move (``MoveRegionProcedure``): the region closes on its server and opens on the target
  above its highest sequence id.
* A split at a row (``SplitTableRegionProcedure``): the parent closes; two daughters
  ``[start, row)`` and ``[row, end)`` get the region id max(now, the parent's + 1); their
  highest sequence id is the parent's (HBase writes the parent's into their max sequence id
  files); meta gets them CLOSED, with the parent's last barrier (its highest sequence id + 1)
  and their parent; then both open on the parent's server.
* A merge of adjacent regions (``MergeTableRegionsProcedure``): the parents close; the merged
  region spans them, its region id the highest of theirs + 1, its highest sequence id the
  highest of theirs; meta loses the parents' ``info`` family, gets each parent's last barrier
  and the merged region CLOSED with both parents; then it opens on the first parent's server.

Everything is checked before anything changes: a refused request leaves the cluster as it
was. The cells stay in the store where they are (kept by table and row): only the regions
that hold them change. Functions on a cluster (:class:`~walship_testing.minicluster.view.ClusterView`);
the caller holds its lock.
"""

from __future__ import annotations

import itertools
import logging
import time
from collections.abc import Sequence
from typing import Any

from walship.errors import BadRequestError, TableDisabledError
from walship_testing.minicluster.meta import Meta, encoded_name
from walship_testing.minicluster.placement import close_region, least_loaded, open_region
from walship_testing.minicluster.regionserver import RegionServer
from walship_testing.minicluster.store import Region, Store
from walship_testing.minicluster.tables import enabled_families, table_families
from walship_testing.minicluster.view import ClusterView

__all__ = ["merge_regions", "move_region", "region_list", "split_region"]

log = logging.getLogger(__name__)


def _parts(cluster: ClusterView) -> tuple[Store, Meta]:
    if cluster.store is None or cluster.meta is None:
        raise TableDisabledError("the cluster is not running")
    return cluster.store, cluster.meta


def _name(table: bytes) -> str:
    return table.decode(errors="replace")


def _key(key: bytes) -> str:
    return key.decode("latin-1") if key.isascii() and key.decode("ascii").isprintable() else f"0x{key.hex()}"


def region_list(cluster: ClusterView, table: bytes) -> list[dict[str, Any]]:
    """The table's regions in key order, as the harness's ``regions`` lists them: encoded name,
    start and end key (hex), the server holding it, and its region id.

    :raises TableNotFoundError: no such table.
    """
    store, _ = _parts(cluster)
    table_families(store, table)
    out = []
    for r in store.regions(table):
        rs = cluster.owner.get(r.encoded)
        out.append(
            {
                "region": r.encoded,
                "start": r.start_key.hex(),
                "end": r.end_key.hex(),
                "server": str(rs.name) if rs is not None and rs.alive else None,
                "region_id": r.region_id,
            }
        )
    return out


def _region(store: Store, table: bytes, encoded: str) -> Region:
    regions = store.regions(table)
    for r in regions:
        if r.encoded == encoded:
            return r
    raise BadRequestError(
        f"table {_name(table)} has no region {encoded!r} (its regions: {', '.join(r.encoded for r in regions)})"
    )


def _holder(cluster: ClusterView, region: Region) -> RegionServer:
    rs = cluster.owner.get(region.encoded)
    if rs is None or not rs.alive:
        raise BadRequestError(f"region {region.encoded} of table {_name(region.table)} is not open on a live server")
    return rs


def _contains(region: Region, row: bytes) -> bool:
    return region.start_key <= row and (not region.end_key or row < region.end_key)


def move_region(cluster: ClusterView, table: bytes, encoded: str, to: str | None = None) -> dict[str, Any]:
    """Move a region to server ``to`` (a server name), or to the least loaded other live one.

    :raises TableNotFoundError: no such table.
    :raises TableDisabledError: the table is disabled.
    :raises BadRequestError: no such region, no such server, a dead server, the server that
        holds it already, or no other live server.
    """
    store, _ = _parts(cluster)
    enabled_families(store, table)
    region = _region(store, table, encoded)
    source = _holder(cluster, region)
    if to is not None:
        target = cluster.server(to)
        if not target.alive:
            raise BadRequestError(f"region server {to} is not alive")
        if target is source:
            raise BadRequestError(f"region {encoded} of table {_name(table)} is on {to} already")
    else:
        try:
            target = least_loaded(cluster, exclude=encoded, besides=source)
        except TableDisabledError:
            raise BadRequestError(f"no live region server other than {source.name} to move {encoded} to") from None
    closed_at = close_region(cluster, region)
    open_seq = open_region(cluster, region, target)
    log.info(
        "moved region %s of %s from %s to %s (open at %d)", encoded, _name(table), source.name, target.name, open_seq
    )
    return {
        "table": _name(table),
        "region": encoded,
        "from": str(source.name),
        "to": str(target.name),
        "closed_at": closed_at,
        "open_seq": open_seq,
    }


def split_region(cluster: ClusterView, table: bytes, row: bytes, encoded: str | None = None) -> dict[str, Any]:
    """Split the region holding ``row`` (or region ``encoded``, which must hold it) at ``row``.

    :raises TableNotFoundError: no such table.
    :raises TableDisabledError: the table is disabled.
    :raises BadRequestError: an empty row, no such region, a row outside the region or at its
        start key (HBase: "Split row is equal to startkey"), a region not open.
    """
    store, meta = _parts(cluster)
    enabled_families(store, table)
    if not row:
        raise BadRequestError(f"table {_name(table)}: the split row must not be empty")
    regions = store.regions(table)
    parent = _region(store, table, encoded) if encoded else next(r for r in regions if _contains(r, row))
    if row == parent.start_key:
        raise BadRequestError(f"split row {_key(row)} is the start key of region {parent.encoded} of {_name(table)}")
    if not _contains(parent, row):
        span = f"[{_key(parent.start_key)}, {_key(parent.end_key) if parent.end_key else 'the end'})"
        raise BadRequestError(f"split row {_key(row)} is not inside region {parent.encoded} {span} of {_name(table)}")
    server = _holder(cluster, parent)
    highest = close_region(cluster, parent)
    rid = max(int(time.time() * 1000), parent.region_id + 1)
    daughters = [
        Region(encoded_name(table, parent.start_key, rid), table, parent.start_key, row, rid, highest),
        Region(encoded_name(table, row, rid), table, row, parent.end_key, rid, highest),
    ]
    store.replace_regions([parent.encoded], daughters)
    cluster.seq.pop(parent.encoded, None)
    for d in daughters:
        cluster.seq[d.encoded] = highest
    barrier = meta.record_split(parent, highest, daughters)
    target = server if server.alive else least_loaded(cluster)
    opened = [(d, open_region(cluster, d, target)) for d in daughters]
    log.info("split region %s of %s at %r: %s", parent.encoded, _name(table), row, [d.encoded for d in daughters])
    return {
        "table": _name(table),
        "parent": parent.encoded,
        "split_row": row.hex(),
        "server": str(target.name),
        "parent_closed_at": highest,
        "parent_barrier": barrier,
        "daughters": [_described(d, target, seq) for d, seq in opened],
    }


def merge_regions(cluster: ClusterView, table: bytes, encoded: Sequence[str]) -> dict[str, Any]:
    """Merge two or more adjacent regions of a table into one.

    :raises TableNotFoundError: no such table.
    :raises TableDisabledError: the table is disabled.
    :raises BadRequestError: fewer than two regions, one named twice, no such region, regions
        not adjacent (HBase: "Unable to merge non-adjacent or non-overlapping regions"), a
        region not open.
    """
    store, meta = _parts(cluster)
    enabled_families(store, table)
    if len(set(encoded)) != len(encoded):
        raise BadRequestError(f"table {_name(table)}: a region is named twice in a merge: {', '.join(encoded)}")
    if len(encoded) < 2:
        raise BadRequestError(f"table {_name(table)}: a merge needs two regions at least, got {len(encoded)}")
    parents = sorted((_region(store, table, e) for e in encoded), key=lambda r: r.start_key)
    for prev, nxt in itertools.pairwise(parents):
        if prev.end_key != nxt.start_key:
            raise BadRequestError(
                f"regions {prev.encoded} and {nxt.encoded} of table {_name(table)} are not adjacent "
                f"(one ends at {_key(prev.end_key)}, the other starts at {_key(nxt.start_key)})"
            )
    servers = [_holder(cluster, p) for p in parents]
    highest = [close_region(cluster, p) for p in parents]
    rid = max(p.region_id for p in parents) + 1
    start, end = parents[0].start_key, parents[-1].end_key
    merged = Region(encoded_name(table, start, rid), table, start, end, rid, max(highest))
    store.replace_regions([p.encoded for p in parents], [merged])
    for p in parents:
        cluster.seq.pop(p.encoded, None)
    cluster.seq[merged.encoded] = max(highest)
    target = servers[0] if servers[0].alive else least_loaded(cluster)
    barriers = meta.merge(list(zip(parents, highest, strict=True)), merged, target.name)
    open_seq = open_region(cluster, merged, target)
    log.info("merged regions %s of %s into %s", [p.encoded for p in parents], _name(table), merged.encoded)
    return {
        "table": _name(table),
        "parents": [
            {"region": p.encoded, "server": str(s.name), "closed_at": h, "barrier": b}
            for p, s, h, b in zip(parents, servers, highest, barriers, strict=True)
        ],
        "merged": _described(merged, target, open_seq),
    }


def _described(region: Region, server: RegionServer, open_seq: int) -> dict[str, Any]:
    return {
        "region": region.encoded,
        "start": region.start_key.hex(),
        "end": region.end_key.hex(),
        "server": str(server.name),
        "open_seq": open_seq,
    }
