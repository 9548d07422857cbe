"""Region placement and failover: which live region server holds each region, and how a
region opens and closes, as an HBase region server and master do it.

An open (:func:`open_region`) goes as HBase 2.x's ``TransitRegionStateProcedure`` and
``HRegion.openHRegion`` take it: meta says OPENING (at the target); the region's open
sequence id is its highest sequence id + 1 (``HRegion.initialize``); the target writes a
REGION_OPEN marker carrying it into its WAL, the marker's own entry being the next sequence
id (the region's MVCC advanced to the open sequence id first); then meta says OPEN, with a
replication barrier for a replicated table. A close (:func:`close_region`): meta says CLOSING;
the server writes a REGION_CLOSE marker carrying the highest sequence id, the marker's entry
the next one, which is then the region's highest (HBase writes it to the region's max
sequence id file); meta says CLOSED. Between the two meta writes of an open the marker is in
the WAL and the barrier not yet in meta, as in HBase; the cluster's lock keeps writes to the
region out meanwhile, as a region in transition takes none.

A region goes to the least loaded live server (fewest regions, then the lowest name). When a
server is aborted its regions are ABNORMALLY_CLOSED and open on the live ones.

Functions on a cluster (:class:`~walship_testing.minicluster.view.ClusterView`, which the MiniCluster
is); the caller holds its lock.
"""

from __future__ import annotations

import logging
import time
import uuid
from typing import Any

from walship.errors import BadRequestError, TableDisabledError
from walship.protos import HBase_pb2, WAL_pb2
from walship.servername import ServerName
from walship.wal import METAFAMILY, Cell, CellType, WalKey
from walship.wal.markers import BULK_LOAD
from walship_testing.minicluster.meta import Meta, region_name
from walship_testing.minicluster.regionserver import RegionServer
from walship_testing.minicluster.store import Region, Store
from walship_testing.minicluster.view import ClusterView
from walship_testing.minicluster.walfiles import archive_dir

__all__ = [
    "abort_server",
    "assign",
    "bulk_load_entry",
    "close_region",
    "least_loaded",
    "open_region",
    "region_event_entry",
]

log = logging.getLogger(__name__)

_EVENTS = {
    "REGION_OPEN": WAL_pb2.RegionEventDescriptor.REGION_OPEN,
    "REGION_CLOSE": WAL_pb2.RegionEventDescriptor.REGION_CLOSE,
}


def _parts(cluster: ClusterView) -> tuple[Store, Meta]:
    if cluster.store is None or cluster.meta is None:
        raise TableDisabledError("the cluster is not running")
    return cluster.store, cluster.meta


def least_loaded(
    cluster: ClusterView, *, exclude: str | None = None, besides: RegionServer | None = None
) -> RegionServer:
    """The live server with the fewest regions (then the lowest name), other than ``besides``.

    :param exclude: a region not to count (the one being placed).
    :raises TableDisabledError: no (other) live region server.
    """
    live = [rs for rs in cluster.live_servers() if rs is not besides]
    if not live:
        raise TableDisabledError("no live region server" + (f" other than {besides.name}" if besides else ""))
    load = {str(rs.name): 0 for rs in live}
    for enc, rs in cluster.owner.items():
        if rs.alive and enc != exclude and str(rs.name) in load:
            load[str(rs.name)] += 1
    return min(live, key=lambda rs: (load[str(rs.name)], str(rs.name)))


def assign(cluster: ClusterView, region: Region) -> RegionServer:
    """Open ``region`` on the least loaded live server; returns that server.

    :raises TableDisabledError: no live region server.
    """
    target = least_loaded(cluster, exclude=region.encoded)
    open_region(cluster, region, target)
    return target


def open_region(cluster: ClusterView, region: Region, target: RegionServer) -> int:
    """Open ``region`` on ``target`` as HBase does (see the module docstring); returns the
    open sequence id."""
    store, meta = _parts(cluster)
    meta.transition(region, "OPENING", target.name)
    open_seq = cluster.seq.get(region.encoded, 0) + 1
    target.append(region.encoded, [region_event_entry("REGION_OPEN", store, target.name, region, open_seq)])
    cluster.owner[region.encoded] = target
    _advance(cluster, store, region, open_seq + 1)
    meta.transition(region, "OPEN", target.name, open_seq)
    return open_seq


def close_region(cluster: ClusterView, region: Region) -> int:
    """Close ``region`` on its server as HBase does (see the module docstring); returns its
    highest sequence id, the REGION_CLOSE marker's.

    :raises BadRequestError: the region is not open on a live server.
    """
    store, meta = _parts(cluster)
    rs = cluster.owner.get(region.encoded)
    if rs is None or not rs.alive:
        raise BadRequestError(f"region {region.encoded} of table {region.table.decode(errors='replace')} is not open")
    meta.transition(region, "CLOSING", rs.name)
    highest = cluster.seq.get(region.encoded, 0)
    rs.append(region.encoded, [region_event_entry("REGION_CLOSE", store, rs.name, region, highest)])
    del cluster.owner[region.encoded]
    _advance(cluster, store, region, highest + 1)
    meta.transition(region, "CLOSED")
    return highest + 1


def _advance(cluster: ClusterView, store: Store, region: Region, seq: int) -> None:
    """The region's highest sequence id is now ``seq`` (kept in the store: a restart opens the
    region above it, as HBase's max sequence id file makes it)."""
    cluster.seq[region.encoded] = seq
    store.apply(region.table, [], {region.encoded: seq})


def region_event_entry(
    event: str, store: Store, server: ServerName, region: Region, seq: int
) -> tuple[WalKey, list[Cell]]:
    """A REGION_OPEN or REGION_CLOSE marker as ``HRegion.writeRegionOpenMarker`` /
    ``writeRegionCloseMarker`` write it: a ``RegionEventDescriptor`` (table, encoded and full
    region name, ``seq`` as its sequence number, the server, a store per family) in one
    METAFAMILY cell, logged through the region's MVCC at ``seq`` + 1 with the region's
    replication scopes."""
    families = store.families(region.table)
    desc = WAL_pb2.RegionEventDescriptor(
        event_type=_EVENTS[event],
        table_name=region.table,
        encoded_region_name=region.encoded.encode(),
        log_sequence_number=seq,
        region_name=region_name(region),
    )
    desc.server.host_name = server.host
    desc.server.port = server.port
    desc.server.start_code = server.start_code
    for family in sorted(families):
        desc.stores.add(family_name=family, store_home_dir=family.decode(errors="replace"))
    now = int(time.time() * 1000)
    marker = Cell(
        region.start_key or b"\x00", METAFAMILY, b"HBASE::REGION_EVENT::" + event.encode(), now, CellType.Put,
        desc.SerializeToString(),
    )  # fmt: skip
    scopes = {f.name: f.scope for f in families.values() if f.scope}
    return WalKey(region.encoded.encode(), region.table, seq + 1, now, scopes=scopes), [marker]


def bulk_load_entry(
    cluster_id: uuid.UUID, region: Region, seq: int, files: dict[bytes, list[str]]
) -> tuple[WalKey, list[Cell]]:
    """A BULK_LOAD marker, as HBase writes one when HFiles are bulk-loaded into a region: a
    BulkLoadDescriptor naming each family's HFiles, and no scopes in the key (HBase clears
    them unless bulk load replication is on)."""
    ns, sep, name = region.table.partition(b":")
    desc = WAL_pb2.BulkLoadDescriptor(
        table_name=HBase_pb2.TableName(namespace=ns if sep else b"default", qualifier=name if sep else ns),
        encoded_region_name=region.encoded.encode(),
        bulkload_seq_num=seq,
        cluster_ids=[str(cluster_id)],
        replicate=True,
    )
    for family in sorted(files):
        desc.stores.add(family_name=family, store_home_dir=family.decode(), store_file=files[family])
    marker = Cell(
        region.start_key or b"\x00",
        METAFAMILY,
        BULK_LOAD,
        int(time.time() * 1000),
        CellType.Put,
        desc.SerializeToString(),
    )
    return WalKey(region.encoded.encode(), region.table, seq, int(time.time() * 1000)), [marker]


def abort_server(cluster: ClusterView, name: str) -> dict[str, Any]:
    """Crash one region server: its WAL is left without a trailer, its ZooKeeper session
    ends (its ephemeral znode goes, its queues stay for a claimer), its regions are
    ABNORMALLY_CLOSED and open on the live servers above their highest sequence id. Its WALs
    are archived, as after HBase splits a dead server's logs.

    :raises BadRequestError: no such server, the server is dead, or the last live one.
    """
    rs = cluster.server(name)
    if not rs.alive:
        raise BadRequestError(f"region server {name} is already dead")
    if len(cluster.live_servers()) == 1:
        raise BadRequestError(f"region server {name} is the last live one")
    wals = rs.wal_names
    rs.close_wals(trailer=False)
    rs.stop_session()
    assert cluster.store is not None
    cluster.store.checkpoint()
    archive_dir(rs.wal_dir, cluster.old_wals_dir)
    _, meta = _parts(cluster)
    moved = []
    for region in cluster.store.regions():
        if cluster.owner.get(region.encoded) is rs:
            del cluster.owner[region.encoded]
            meta.transition(region, "ABNORMALLY_CLOSED")  # ServerCrashProcedure, before it reassigns
            moved.append((region.encoded, str(assign(cluster, region).name)))
    log.info("aborted region server %s; regions moved: %s", name, moved)
    return {"aborted": name, "wal": wals[0] if wals else None, "wals": wals, "regions_moved": moved}
