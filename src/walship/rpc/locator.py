"""A cluster's regions and the connections to its region servers, as HBase's client keeps them:
hbase:meta's region server from the cluster's ZooKeeper, a table's regions from hbase:meta
(:mod:`walship.rpc.meta`), both kept until a region server says a region is not there
(:meth:`RegionLocator.forget`), and one connection to each server (or several: ``stream``).

Sink ``hbase`` writes through one into a peer; ``walship copy`` reads the source's rows
through one.

Example::

    with RegionLocator("zk1:2181", ZnodeLayout("/hbase"), default_auth(), "peer 1") as where:
        region = where.region_of(b"t", b"row")
        rs = where.server(region.host, region.port)
"""

from __future__ import annotations

import logging
from types import TracebackType

from walship.errors import MasterUnavailableError, MetaLocationMissingError, RemoteHBaseError, TableNotFoundError
from walship.rpc.auth import Authentication
from walship.rpc.meta import RegionLocation, locate, read_meta_location, table_regions
from walship.rpc.multi import RegionServerClient
from walship.zk import ZnodeLayout, zk_client

__all__ = ["BUSY", "RELOCATE", "RegionLocator"]

log = logging.getLogger(__name__)

#: HBase's answers that mean "look the region up again"
RELOCATE = frozenset(
    {
        "NotServingRegionException",
        "RegionMovedException",
        "RegionOpeningException",
        "RegionServerStoppedException",
        "ServerNotRunningYetException",
        "RegionServerAbortedException",
    }
)
#: HBase's answers that mean "the same again, a little later"
BUSY = frozenset(
    {"RegionTooBusyException", "CallQueueTooBigException", "RetryImmediatelyException", "CallDroppedException"}
)


class RegionLocator:
    """The regions of a cluster's tables, and its region servers' connections.

    :param zk_hosts: the cluster's ZooKeeper (``host:port[,...]``).
    :param label: who the cluster is, for messages (``peer 1``, ``the source cluster``).
    """

    def __init__(
        self,
        zk_hosts: str,
        layout: ZnodeLayout,
        auth: Authentication,
        label: str,
        *,
        zk_auth: str | None = None,
    ) -> None:
        self.zk_hosts = zk_hosts
        self.layout = layout
        self.label = label
        self._auth = auth
        self._zk_auth = zk_auth
        self._regions: dict[bytes, list[RegionLocation]] = {}
        self._starts: dict[bytes, list[bytes]] = {}
        self._servers: dict[str, RegionServerClient] = {}

    def _meta(self) -> RegionServerClient:
        """hbase:meta's region server.

        :raises ZkError: the cluster's ZooKeeper does not answer, refuses, or holds something else.
        :raises MetaLocationMissingError: no hbase:meta location is registered.
        """
        with zk_client(self.zk_hosts, auth=self._zk_auth) as zk:
            location = read_meta_location(zk, self.layout)
        if location is None:
            raise MetaLocationMissingError(
                f"{self.label}: no hbase:meta location at {self.layout.meta_region_server} on {self.zk_hosts} "
                "(a cluster still starting, or one without region servers' RPC, as the minicluster)"
            )
        return self.server(*location)

    def server(self, host: str, port: int, stream: int = 0) -> RegionServerClient:
        """The connection of ``stream`` to ``host:port`` (opened when there is none)."""
        key = f"{host}:{port}" if stream == 0 else f"{host}:{port}#{stream}"
        client = self._servers.get(key)
        if client is None:
            client = self._servers[key] = RegionServerClient(host, port, self._auth)
        return client

    def drop_server(self, address: str, stream: int = 0) -> None:
        """Close the connection of ``stream`` to ``address`` (``host:port``): the next call opens
        a new one."""
        client = self._servers.pop(address if stream == 0 else f"{address}#{stream}", None)
        if client is not None:
            client.close()

    def regions(self, table: bytes) -> list[RegionLocation]:
        """The table's regions in key order (read from hbase:meta when not kept).

        :raises TableNotFoundError: hbase:meta has no region of the table.
        :raises MasterUnavailableError: hbase:meta's server did not answer or refused the scan.
        :raises ZkError: see :meth:`_meta`.
        """
        regions = self._regions.get(table)
        if regions is None:
            meta = self._meta()
            try:
                regions = table_regions(meta, table)
            except (RemoteHBaseError, MasterUnavailableError) as exc:
                self.drop_server(meta.server)
                raise MasterUnavailableError(f"{self.label}: reading hbase:meta: {exc}") from None
            if not regions:
                raise TableNotFoundError(f"{self.label}: table {table.decode(errors='replace')} does not exist")
            self._regions[table] = regions
            self._starts[table] = [r.start for r in regions]
        return regions

    def region_of(self, table: bytes, row: bytes) -> RegionLocation:
        """The region of ``table`` holding ``row`` (see :meth:`regions`)."""
        regions = self.regions(table)
        return regions[0] if len(regions) == 1 else locate(regions, row, self._starts[table])

    def forget(self, table: bytes) -> None:
        """Read the table's regions again next time (one moved, split, or was not assigned)."""
        self._regions.pop(table, None)
        self._starts.pop(table, None)

    def close(self) -> None:
        for key in list(self._servers):
            self._servers.pop(key).close()

    def __enter__(self) -> RegionLocator:
        return self

    def __exit__(self, _t: type[BaseException] | None, _e: BaseException | None, _tb: TracebackType | None) -> None:
        self.close()
