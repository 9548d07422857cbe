"""The active master's znode, ``<parent>/master``, as HBase 2.x's ``ActiveMasterManager`` writes
it: ephemeral, HBase's metadata header (``RecoverableZooKeeper``), then ``PBUF`` + ``Master``
(its ``ServerName``, RPC version 0 and its info port). Read by walship's RPC client to find
the master; written by the minicluster's master, which registers as HBase's does.

Example::

    master = read_master(client, ZnodeLayout("/hbase"))   # None: no master registered
    if master is not None:
        print(master.address)                                # m1.example.com:16000
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from google.protobuf.message import DecodeError
from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from walship.errors import ZkDataError
from walship.protos import ZooKeeper_pb2
from walship.zk.client import zk_call
from walship.zk.encoding import PB_MAGIC, add_zk_metadata, strip_pb_magic, strip_zk_metadata
from walship.zk.layout import ZnodeLayout

__all__ = ["MasterAddress", "read_master", "register_master"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class MasterAddress:
    """Where the active master serves its RPC."""

    host: str
    port: int
    start_code: int = 0
    info_port: int = 0

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def server_name(self) -> str:
        """HBase's ``host,port,startcode``."""
        return f"{self.host},{self.port},{self.start_code}"


def decode_master(data: bytes, path: str) -> MasterAddress:
    """The address a master znode holds.

    :raises ZkDataError: not (metadata header +) ``PBUF`` + ``Master`` with a host and a port.
    """
    body = strip_pb_magic(strip_zk_metadata(data, path), path, "Master")
    master = ZooKeeper_pb2.Master()
    try:
        master.ParseFromString(body)
    except DecodeError as exc:
        raise ZkDataError(path, f"not PBUF + Master: {exc}") from None
    server = master.master
    if not server.host_name or not 0 < server.port < 65536:
        raise ZkDataError(path, f"the master's ServerName has no host or port: {server.host_name!r}:{server.port}")
    return MasterAddress(server.host_name, server.port, server.start_code, master.info_port)


def encode_master(master: MasterAddress) -> bytes:
    pb = ZooKeeper_pb2.Master(rpc_version=0, info_port=master.info_port)
    pb.master.host_name = master.host
    pb.master.port = master.port
    pb.master.start_code = master.start_code
    return add_zk_metadata(PB_MAGIC + pb.SerializeToString(), f"master:{master.port}")


@zk_call("the active master")
def read_master(client: KazooClient, layout: ZnodeLayout) -> MasterAddress | None:
    """The active master registered at ``<parent>/master``, or ``None`` when none is.

    :raises ZkDataError: the znode holds something else.
    """
    try:
        data, _ = client.get(layout.master)
    except NoNodeError:
        return None
    return decode_master(data, layout.master)


@zk_call("the active master")
def register_master(client: KazooClient, layout: ZnodeLayout, master: MasterAddress) -> str:
    """Register ``master`` as the active one: an ephemeral ``<parent>/master`` that goes with
    the session, as HBase's ``ActiveMasterManager`` writes it.

    :raises ZkError: another master is registered.
    """
    client.ensure_path(layout.parent)
    return str(client.create(layout.master, encode_master(master), ephemeral=True))
