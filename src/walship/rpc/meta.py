"""Where a cluster's regions are, read as HBase's client reads them: hbase:meta's region server
from ZooKeeper (``<parent>/meta-region-server``), then the table's rows of hbase:meta, scanned
with ``ClientService.Scan``.

A table's rows in hbase:meta run from ``<table>,,`` to ``<table> ,,`` (hbase:meta compares a
row's table first); each is a region's full name and holds ``info:regioninfo`` (``PBUF`` +
``RegionInfo``: start and end key, whether it is a split parent gone offline),
``info:server`` (``host:port``) and ``info:serverstartcode``. A region without a server is not
assigned yet: its location has no host.

Example::

    with zk_client(peer_zk) as zk:
        host, port = read_meta_location(zk, ZnodeLayout("/hbase"))
    with RegionServerClient(host, port, SimpleAuth()) as rs:
        for region in table_regions(rs, b"t"):
            print(region.encoded, region.start, region.end, region.address)
"""

from __future__ import annotations

import bisect
import logging
import struct
from collections.abc import Sequence
from dataclasses import dataclass

from google.protobuf.message import DecodeError
from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from walship.errors import ZkDataError
from walship.protos import Client_pb2, HBase_pb2, ZooKeeper_pb2
from walship.rpc.multi import RegionServerClient
from walship.rpc.scan import region_scan
from walship.rpc.wire import RpcProtocolError
from walship.wal.model import Cell
from walship.zk.client import zk_call
from walship.zk.encoding import strip_pb_magic, strip_zk_metadata
from walship.zk.layout import ZnodeLayout

__all__ = ["META_REGION", "RegionLocation", "locate", "read_meta_location", "table_regions"]

log = logging.getLogger(__name__)

#: The full name of hbase:meta's (one) region.
META_REGION = b"hbase:meta,,1"
_INFO = b"info"
_SCAN_ROWS = 1000
_PB_MAGIC = b"PBUF"


@dataclass(frozen=True)
class RegionLocation:
    """A region of a table and the region server holding it (``host`` empty: not assigned)."""

    name: bytes
    start: bytes
    end: bytes
    host: str
    port: int
    start_code: int

    @property
    def encoded(self) -> str:
        """The encoded name: the last part of the full name, between its last two dots."""
        return self.name[:-1].rsplit(b".", 1)[-1].decode("ascii", "replace")

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"


@zk_call("hbase:meta's location")
def read_meta_location(client: KazooClient, layout: ZnodeLayout) -> tuple[str, int] | None:
    """The region server holding hbase:meta (``host``, ``port``), or ``None`` when the znode is
    not there (the cluster is starting).

    :raises ZkDataError: the znode holds something else.
    """
    path = layout.meta_region_server
    try:
        data, _ = client.get(path)
    except NoNodeError:
        return None
    meta = ZooKeeper_pb2.MetaRegionServer()
    try:
        meta.ParseFromString(strip_pb_magic(strip_zk_metadata(data, path), path, "MetaRegionServer"))
    except DecodeError as exc:
        raise ZkDataError(path, f"not PBUF + MetaRegionServer: {exc}") from None
    server = meta.server
    if not server.host_name or not 0 < server.port < 65536:
        raise ZkDataError(path, f"hbase:meta's ServerName has no host or port: {server.host_name!r}:{server.port}")
    return server.host_name, server.port


def table_regions(meta: RegionServerClient, table: bytes) -> list[RegionLocation]:
    """The regions of ``table`` in key order, from hbase:meta on ``meta`` (split parents left
    out, and region replicas other than the default one).

    :raises RemoteHBaseError: the server refused the scan (hbase:meta moved, say).
    :raises RpcProtocolError: a row of hbase:meta that does not parse (names it).
    """
    scan = Client_pb2.Scan(
        column=[Client_pb2.Column(family=_INFO)],
        start_row=table + b",,",
        stop_row=table + b" ,,",
        caching=_SCAN_ROWS,
    )
    out: list[RegionLocation] = []
    what = f"hbase:meta on {meta.server}"
    for rows in region_scan(meta, META_REGION, scan, _SCAN_ROWS, what):
        for cells in rows:
            region = _region(cells, what)
            if region is not None and region.name.startswith(table + b","):
                out.append(region)
    log.debug("%s: %d regions of %r", what, len(out), table)
    return out


def _region(cells: Sequence[Cell], what: str) -> RegionLocation | None:
    """The location of one row of hbase:meta (``None`` for a split parent or a replica's row)."""
    values = {c.qualifier: c.value for c in cells}
    name = cells[0].row
    raw = values.get(b"regioninfo")
    if raw is None or not raw.startswith(_PB_MAGIC):
        raise RpcProtocolError(f"{what}: row {name!r} has no PBUF info:regioninfo")
    info = HBase_pb2.RegionInfo()
    try:
        info.ParseFromString(raw[len(_PB_MAGIC) :])
    except DecodeError as exc:
        raise RpcProtocolError(f"{what}: row {name!r}: info:regioninfo is not a RegionInfo: {exc}") from None
    if info.offline or info.split or info.replica_id:
        return None
    host, port = "", 0
    server = values.get(b"server", b"")
    if server:
        host_part, _, port_part = server.decode("utf-8", "replace").rpartition(":")
        if not host_part or not port_part.isdigit():
            raise RpcProtocolError(f"{what}: row {name!r}: info:server is not host:port: {server!r}")
        host, port = host_part, int(port_part)
    code = values.get(b"serverstartcode", b"")
    start_code = struct.unpack(">q", code)[0] if len(code) == 8 else 0
    return RegionLocation(name, info.start_key, info.end_key, host, port, start_code)


def locate(regions: Sequence[RegionLocation], row: bytes, starts: Sequence[bytes] | None = None) -> RegionLocation:
    """The region of ``regions`` (a table's, in key order, as :func:`table_regions` gives them)
    that holds ``row``; ``starts``, their start keys, when the caller keeps them."""
    if starts is None:
        starts = [r.start for r in regions]
    return regions[max(0, bisect.bisect_right(starts, row) - 1)]
