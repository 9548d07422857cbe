"""A cluster's identity, its live region servers and the HBase version they run."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterable

from kazoo.client import KazooClient
from kazoo.exceptions import NodeExistsError, NoNodeError

from walship.errors import ZkDataError, ZkError
from walship.zk.client import zk_call
from walship.zk.encoding import add_zk_metadata, decode_cluster_id, decode_server_version, encode_cluster_id
from walship.zk.layout import ZnodeLayout

__all__ = [
    "MASTER",
    "REGION_SERVERS",
    "WALSHIP",
    "cluster_exists",
    "ensure_cluster_id",
    "is_live",
    "live_servers",
    "read_cluster_id",
    "register_server",
    "remove_cluster",
    "server_version",
    "who_claims",
]


@zk_call("cluster")
def read_cluster_id(client: KazooClient, layout: ZnodeLayout) -> uuid.UUID:
    """The cluster id at ``<parent>/hbaseid``.

    :raises ZkError: the znode does not exist.
    :raises ZkDataError: it is not PBUF + ClusterId holding a UUID.
    """
    path = layout.cluster_id
    try:
        data, _ = client.get(path)
    except NoNodeError:
        raise ZkError(f"znode {path} does not exist: is {layout.parent} an HBase cluster?") from None
    text = decode_cluster_id(data, path)
    try:
        return uuid.UUID(text)
    except ValueError:
        raise ZkDataError(path, f"cluster id {text!r} is not a UUID") from None


@zk_call("cluster")
def ensure_cluster_id(
    client: KazooClient, layout: ZnodeLayout, cluster_id: uuid.UUID | None = None, *, writer: str | None = None
) -> uuid.UUID:
    """Create the cluster id if there is none (as the HBase master does on first start).

    :param writer: write it as HBase's master does, behind the metadata header naming this
        writer (:func:`walship.zk.encoding.add_zk_metadata`).
    """
    client.ensure_path(layout.parent)
    data = encode_cluster_id(str(cluster_id or uuid.uuid4()))
    with contextlib.suppress(NodeExistsError):
        client.create(layout.cluster_id, add_zk_metadata(data, writer) if writer else data)
    return read_cluster_id(client, layout)


@zk_call("cluster")
def live_servers(client: KazooClient, layout: ZnodeLayout) -> list[str]:
    """Servers with an ephemeral znode under ``<parent>/rs``."""
    try:
        return sorted(client.get_children(layout.live_servers))
    except NoNodeError:
        return []


@zk_call("cluster")
def register_server(client: KazooClient, layout: ZnodeLayout, server: str, data: bytes = b"") -> str:
    """Announce a live region server: an ephemeral znode that goes with the session; ``data``
    is what it announces (HBase writes PBUF + RegionServerInfo, see
    :func:`walship.zk.encoding.encode_server_info`)."""
    client.ensure_path(layout.live_servers)
    return str(client.create(layout.live_server(server), data, ephemeral=True))


#: The HBase version from which the master claims a dead server's replication queues
#: (HBASE-26029: a ServerCrashProcedure runs ClaimReplicationQueuesProcedure); before it,
#: every live region server raced for them.
MASTER_CLAIMS_SINCE = (2, 5)

#: Who claims a dead server's queues on a cluster (:func:`who_claims`).
MASTER, REGION_SERVERS, WALSHIP = "master", "region servers", "walship"


@zk_call("cluster")
def server_version(client: KazooClient, layout: ZnodeLayout, server: str) -> tuple[int, int] | None:
    """The ``(major, minor)`` version a live region server announces in its znode (see
    :func:`walship.zk.encoding.decode_server_version`); ``None`` when it announces none or is no
    longer live.

    :raises ZkDataError: the znode's data is not PBUF + RegionServerInfo.
    """
    path = layout.live_server(server)
    try:
        data, _ = client.get(path)
    except NoNodeError:
        return None
    return decode_server_version(data, path)


def who_claims(versions: Iterable[tuple[int, int] | None]) -> str:
    """Who claims dead servers' queues on a cluster whose live region servers announce
    ``versions``: its :data:`MASTER` when one runs 2.5 or later (HBase upgrades its masters
    first); its :data:`REGION_SERVERS` when they run an older HBase (each races for the queues
    of the peers HBase ships); :data:`WALSHIP` alone when none is an HBase region server with a
    replication source (the embedded cluster)."""
    announced = [v for v in versions if v is not None]
    if any(v >= MASTER_CLAIMS_SINCE for v in announced):
        return MASTER
    return REGION_SERVERS if announced else WALSHIP


@zk_call("cluster")
def is_live(client: KazooClient, layout: ZnodeLayout, server: str) -> bool:
    """Whether ``server`` has its ephemeral znode under ``<parent>/rs``."""
    return client.exists(layout.live_server(server)) is not None


@zk_call("cluster")
def cluster_exists(client: KazooClient, layout: ZnodeLayout) -> bool:
    """Whether the cluster's parent znode exists."""
    return client.exists(layout.parent) is not None


@zk_call("cluster")
def remove_cluster(client: KazooClient, layout: ZnodeLayout) -> None:
    """Delete the cluster's parent znode and everything under it (nothing when it is gone)."""
    with contextlib.suppress(NoNodeError):
        client.delete(layout.parent, recursive=True)
