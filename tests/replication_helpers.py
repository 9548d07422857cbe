"""Helpers for end-to-end replication tests: clusters with a table, peers, shipping, comparing."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import happybase

from walship.minicluster import AdminClient
from walship.minicluster.process import MiniClusterProcess
from walship.replicate import PeerSummary, Shipper, WalStore
from walship.zk import PeerConfig, ReplicationPeers, ZnodeLayout, zk_client

TABLE = b"t"


@dataclass
class Cluster:
    mc: MiniClusterProcess
    zk_hosts: str  # with the test's chroot

    @property
    def parent(self) -> str:
        return self.mc.znode_parent

    @property
    def cluster_key(self) -> str:
        hostport, _, chroot = self.zk_hosts.partition("/")
        return f"{hostport}:/{chroot}{self.parent}"

    def conn(self) -> happybase.Connection:
        return happybase.Connection(*self.mc.thrift)

    def table(self) -> happybase.Table:
        return self.conn().table(TABLE)

    def thrift_address(self) -> str:
        host, port = self.mc.thrift
        return f"{host}:{port}"


def make_cluster(factory: Callable[..., MiniClusterProcess], zk_hosts: str, name: str, **kwargs: object) -> Cluster:
    mc = factory(name, **kwargs)
    c = Cluster(mc, zk_hosts)
    conn = c.conn()
    conn.create_table(TABLE, {"r": {"max_versions": 5}, "l": {"max_versions": 5}})
    AdminClient(mc.admin).set_scope(TABLE.decode(), "r", 1)
    conn.close()
    return c


def add_peer(source: Cluster, target: Cluster, peer_id: str = "1", **config: str) -> None:
    with zk_client(source.zk_hosts) as client:
        ReplicationPeers(client, ZnodeLayout(source.parent)).add(
            PeerConfig(
                peer_id, target.cluster_key, configuration={"walship.sink.thrift": target.thrift_address(), **config}
            )
        )


def ship(source: Cluster, peer_id: str = "1", **kwargs: object) -> PeerSummary:
    with zk_client(source.zk_hosts) as client:
        shipper = Shipper(client, ZnodeLayout(source.parent), WalStore(str(source.mc.data_dir)))
        return shipper.ship_peer(peer_id, **kwargs)  # type: ignore[arg-type]


def contents(
    cluster: Cluster, family: bytes | None = None, versions: int = 5
) -> dict[bytes, dict[bytes, list[tuple[bytes, int]]]]:
    """Every visible cell of every row (all versions), optionally of one family."""
    conn = cluster.conn()
    t = conn.table(TABLE)
    out: dict[bytes, dict[bytes, list[tuple[bytes, int]]]] = {}
    for row, data in t.scan(columns=[family] if family else None):
        out[row] = {col: t.cells(row, col, versions=versions, include_timestamp=True) for col in sorted(data)}
    conn.close()
    return out
