"""Region placement and failover: which live region server holds each region.

A region goes to the least loaded live server (fewest regions, then the lowest name), which
writes a REGION_OPEN marker into its WAL, as an HBase region server does when it opens a
region. When a server is aborted its regions move to the live ones.

Functions on a cluster (:class:`~walship.minicluster.view.ClusterView`, which the MiniCluster
is); the caller holds its lock.
"""

from __future__ import annotations

import logging
import time
import uuid
from typing import Any

from walship.errors import BadRequestError, TableDisabledError
from walship.minicluster.regionserver import RegionServer
from walship.minicluster.store import Region
from walship.minicluster.view import ClusterView
from walship.minicluster.walfiles import archive_dir
from walship.protos import HBase_pb2, WAL_pb2
from walship.servername import ServerName
from walship.wal import METAFAMILY, Cell, CellType, WalKey
from walship.wal.markers import BULK_LOAD

__all__ = ["abort_server", "assign", "bulk_load_entry", "region_open_entry"]

log = logging.getLogger(__name__)


def assign(cluster: ClusterView, region: Region) -> RegionServer:
    """Open ``region`` on the least loaded live server; returns that server.

    :raises TableDisabledError: no live region server.
    """
    live = cluster.live_servers()
    if not live:
        raise TableDisabledError("no live region server")
    load = {str(rs.name): 0 for rs in live}
    for enc, rs in cluster.owner.items():
        if rs.alive and enc != region.encoded:
            load[str(rs.name)] += 1
    target = min(live, key=lambda rs: (load[str(rs.name)], str(rs.name)))
    cluster.owner[region.encoded] = target
    seq = cluster.seq.get(region.encoded, 0) + 1
    cluster.seq[region.encoded] = seq
    target.append(region.encoded, [region_open_entry(target.name, region, seq)])
    return target


def region_open_entry(server: ServerName, region: Region, seq: int) -> tuple[WalKey, list[Cell]]:
    """A REGION_OPEN marker, as HBase writes one into the WAL when a region opens."""
    desc = WAL_pb2.RegionEventDescriptor(
        event_type=WAL_pb2.RegionEventDescriptor.REGION_OPEN,
        table_name=region.table,
        encoded_region_name=region.encoded.encode(),
        log_sequence_number=seq,
    )
    desc.server.host_name = server.host
    desc.server.port = server.port
    desc.server.start_code = server.start_code
    marker = Cell(
        region.start_key or b"\x00",
        METAFAMILY,
        b"HBASE::REGION_EVENT::REGION_OPEN",
        int(time.time() * 1000),
        CellType.Put,
        desc.SerializeToString(),
    )
    return WalKey(region.encoded.encode(), region.table, seq, int(time.time() * 1000)), [marker]


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
    ends (its ephemeral znode goes, its queues stay for a claimer), its regions move to the
    live servers. Its WALs are archived, as after HBase splits a dead server's logs.

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
    moved = []
    for region in cluster.store.regions():
        if cluster.owner.get(region.encoded) is rs:
            moved.append((region.encoded, str(assign(cluster, region).name)))
    log.info("aborted region server %s; regions moved: %s", name, moved)
    return {"aborted": name, "wal": wals[0] if wals else None, "wals": wals, "regions_moved": moved}
