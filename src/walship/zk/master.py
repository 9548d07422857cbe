"""The active master's znode, ``<parent>/master``, as HBase 2.x's ``ActiveMasterManager`` writes
it: ephemeral, HBase's metadata header (``RecoverableZooKeeper``), then ``PBUF`` + ``Master``
(its ``ServerName``, RPC version 0 and its info port). Read by walship's RPC client to find
the master; written by the minicluster's master, which registers as HBase's does.

The minicluster's master takes the znode as HBase's ``ActiveMasterManager`` does
(:func:`become_active_master`): one naming its own address is a crashed run of itself whose
session has not expired yet, deleted; one naming another master is waited out, as a backup
master waits. On its way out it deletes the znode if it still names it (:func:`resign_master`).

Example::

    master = read_master(client, ZnodeLayout("/hbase"))   # None: no master registered
    if master is not None:
        print(master.address)                                # m1.example.com:16000
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from dataclasses import dataclass

from google.protobuf.message import DecodeError
from kazoo.client import KazooClient
from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

from walship.errors import ZkDataError, ZkError
from walship.protos import ZooKeeper_pb2
from walship.zk.client import zk_call
from walship.zk.encoding import PB_MAGIC, add_zk_metadata, strip_pb_magic, strip_zk_metadata
from walship.zk.layout import ZnodeLayout

__all__ = ["MasterAddress", "become_active_master", "read_master", "register_master", "resign_master"]

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


@zk_call("the active master")
def become_active_master(client: KazooClient, layout: ZnodeLayout, master: MasterAddress, *, timeout: float) -> str:
    """Register ``master`` as the active one, as HBase's ``ActiveMasterManager`` does: the
    ephemeral ``<parent>/master`` is created; if one names this master's host and port (a
    run of it that crashed, its session not expired yet: HBase's "master was restarted?") it
    is deleted first; if one names another master, that one is waited out (a backup master's
    wait), for up to ``timeout`` seconds. Returns the znode's path.

    :raises ZkError: another master stayed registered for ``timeout`` seconds (names it).
    """
    deadline = time.monotonic() + timeout
    client.ensure_path(layout.parent)
    while True:
        try:
            return str(client.create(layout.master, encode_master(master), ephemeral=True))
        except NodeExistsError:
            pass
        try:
            data, stat = client.get(layout.master)
        except NoNodeError:
            continue
        try:
            current: MasterAddress | None = decode_master(data, layout.master)
        except ZkDataError as exc:
            log.warning("%s; waiting for it to go", exc)
            current = None
        if current is not None and (current.host, current.port) == (master.host, master.port):
            log.info("%s names this master's address (%s): restarted? deleting it", layout.master, current.server_name)
            with contextlib.suppress(NoNodeError, BadVersionError):
                client.delete(layout.master, version=stat.version)
            continue
        gone = threading.Event()
        if client.exists(layout.master, watch=lambda event, gone=gone: gone.set()) is None:
            continue
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            holder = current.server_name if current is not None else "an unreadable master"
            raise ZkError(f"another master is active at {layout.master} ({holder}); waited {timeout:g} s for it to go")
        log.info("another master is active at %s; waiting to become the next active master", layout.master)
        gone.wait(min(remaining, 1.0))


@zk_call("the active master")
def resign_master(client: KazooClient, layout: ZnodeLayout, master: MasterAddress) -> bool:
    """Delete ``<parent>/master`` if it still names ``master`` (host, port and start code), as
    HBase's ``ActiveMasterManager.stop`` does; returns whether it did."""
    try:
        data, stat = client.get(layout.master)
    except NoNodeError:
        return False
    try:
        current = decode_master(data, layout.master)
    except ZkDataError:
        return False
    if (current.host, current.port, current.start_code) != (master.host, master.port, master.start_code):
        return False
    try:
        client.delete(layout.master, version=stat.version)
    except (NoNodeError, BadVersionError):
        return False
    return True
