"""``walship minicluster start``: run a cluster in the foreground until SIGTERM or SIGINT.

The Thrift port serves every transport and protocol unless told one (HBase's ``-f`` and
``-c``), and TLS when given a certificate (HBase's ``hbase.thrift.ssl.enabled``). With a
Thrift2 port, HBase's second Thrift service (``THBaseService``) is served there too, on the
same cluster and with the same transport, protocol and TLS options. The master's RPC
(:mod:`walship_testing.minicluster.master`) is served on the master port and registered in
``<parent>/master`` before the ready line, and unregistered first on the way out.
"""

from __future__ import annotations

import json
import logging
import signal
import sys
import threading
from pathlib import Path
from types import FrameType
from typing import Any

from walship.errors import BadRequestError
from walship.thrift.hbase2 import hbase2
from walship_testing.minicluster.admin import AdminServer
from walship_testing.minicluster.cluster import MiniCluster
from walship_testing.minicluster.master import MasterServer
from walship_testing.minicluster.regionserver import WalSettings
from walship_testing.minicluster.thrift import HbaseHandler, ThriftServer, server_tls_context
from walship_testing.minicluster.thrift2 import THBaseHandler

__all__ = ["run_minicluster"]

log = logging.getLogger(__name__)


def _address(addr: tuple[object, ...]) -> str:
    host, port = addr[0], addr[1]
    return f"{host if isinstance(host, str) else bytes(host).decode()}:{port}"  # type: ignore[call-overload]


class ThriftServers:
    """The cluster's Thrift servers, by address: the ones it started with, and more started
    and stopped while it runs (``POST /thrift/start`` and ``/thrift/stop`` of the admin
    endpoint), as an operator runs several Thrift servers in front of one HBase cluster."""

    def __init__(self, cluster: MiniCluster, host: str, modes: dict[str, Any]) -> None:
        self.cluster = cluster
        self.host = host
        self.modes = modes
        self.running: dict[str, ThriftServer] = {}
        self._lock = threading.Lock()

    def add(self, server: ThriftServer) -> str:
        address = _address(server.address)
        with self._lock:
            self.running[address] = server
        return address

    def start(self, service: str, port: int = 0) -> dict[str, Any]:
        """Start one more ``thrift1`` or ``thrift2`` server (on ``port``, 0 for a free one)."""
        if service not in ("thrift1", "thrift2"):
            raise BadRequestError(f"a Thrift server is thrift1 or thrift2, not {service!r}")
        try:
            if service == "thrift1":
                server = ThriftServer(HbaseHandler(self.cluster), self.host, port, **self.modes)
            else:
                server = ThriftServer(
                    THBaseHandler(self.cluster), self.host, port, service=hbase2.THBaseService, **self.modes
                )
        except OSError as exc:
            raise BadRequestError(f"cannot serve {service} on {self.host}:{port}: {exc.strerror or exc}") from None
        server.start()
        address = self.add(server)
        log.info("started a %s server on %s", service, address)
        return {"service": service, "address": address}

    def stop(self, address: str) -> dict[str, Any]:
        """Stop the server at ``address``: it refuses new connections and drops open ones."""
        with self._lock:
            server = self.running.pop(address, None)
        if server is None:
            raise BadRequestError(f"no Thrift server of this cluster at {address!r}")
        server.stop()
        log.info("stopped the Thrift server on %s", address)
        return {"stopped": address}

    def stop_all(self) -> None:
        with self._lock:
            servers, self.running = list(self.running.values()), {}
        for server in servers:
            server.stop()


def run_minicluster(
    *,
    name: str,
    data_dir: Path,
    zk: str,
    znode_parent: str,
    thrift_port: int,
    admin_port: int,
    thrift2_port: int | None = None,
    regionservers: int = 3,
    wal_roll_size: int = 64 * 1024 * 1024,
    host: str = "127.0.0.1",
    thrift_transport: str | None = None,
    thrift_protocol: str | None = None,
    thrift_ssl_cert: Path | None = None,
    thrift_ssl_key: Path | None = None,
    roll_order: str = "default",
    wal: WalSettings | None = None,
    master_port: int = 0,
    queue_claims: str = "master",
    claim_delay: float = 0.0,
) -> int:
    """Start, print one JSON ``ready`` line, serve until a signal, shut down cleanly.

    :param thrift2_port: serve Thrift2 (``THBaseService``) on this port (0: a free one;
        ``None``: no Thrift2 server).
    :param thrift_transport: ``buffered`` or ``framed``: the only transport the Thrift ports
        accept (default: both).
    :param thrift_protocol: ``binary`` or ``compact``: the only protocol it accepts (default: both).
    :param thrift_ssl_cert: the server's certificate (PEM; may hold the key too): serve TLS.
    :param thrift_ssl_key: the certificate's private key (PEM).
    :param roll_order: ``default``, or ``hbase`` to roll in HBase's order (see :mod:`walship_testing.minicluster.cluster`).
    :param wal: how the region servers write their WALs (multiwal, checksum files, compression).
    :param master_port: serve the master's RPC (``MasterService``) on this port (0: a free one).
    :param queue_claims: who claims a crashed server's queues, ``master`` after ``claim_delay``
        seconds or ``walship`` (see :mod:`walship_testing.minicluster.queueclaims`).
    :raises ConfigError: bad Thrift options (checked before anything starts).
    :raises MiniClusterError: the master's port cannot be bound.
    """
    tls = server_tls_context(thrift_ssl_cert, thrift_ssl_key)
    ThriftServer.check_modes(thrift_transport, thrift_protocol)
    cluster = MiniCluster(
        name,
        data_dir,
        zk,
        znode_parent,
        regionservers=regionservers,
        wal_roll_size=wal_roll_size,
        host=host,
        roll_order=roll_order,
        wal=wal,
        queue_claims=queue_claims,
        claim_delay=claim_delay,
    )
    cluster.start()
    try:
        master = MasterServer(cluster, host, master_port)
        master.start()
    except BaseException:
        cluster.stop()
        raise
    thrift = ThriftServer(
        HbaseHandler(cluster), host, thrift_port, transport=thrift_transport, protocol=thrift_protocol, tls=tls
    )
    thrift2 = None
    if thrift2_port is not None:
        thrift2 = ThriftServer(
            THBaseHandler(cluster),
            host,
            thrift2_port,
            service=hbase2.THBaseService,
            transport=thrift_transport,
            protocol=thrift_protocol,
            tls=tls,
        )
    servers = ThriftServers(cluster, host, {"transport": thrift_transport, "protocol": thrift_protocol, "tls": tls})
    servers.add(thrift)
    if thrift2 is not None:
        servers.add(thrift2)
    admin = AdminServer(cluster, host, admin_port, servers=servers)
    cluster.endpoints = {
        "thrift": _address(thrift.address),
        "thrift2": _address(thrift2.address) if thrift2 is not None else None,
        "admin": _address(admin.address),
        "master": master.address.address,
    }
    thrift.start()
    if thrift2 is not None:
        thrift2.start()
    admin.start()
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        log.info("signal %d: shutting down", signum)
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    ready = {
        "ready": True,
        "name": name,
        "cluster_id": str(cluster.cluster_id),
        "thrift": cluster.endpoints["thrift"],
        "thrift2": cluster.endpoints["thrift2"],
        "thrift_modes": thrift.modes,
        "thrift_tls": tls is not None,
        "admin": _address(admin.address),
        "master": master.address.address,
        "zk": zk,
        "znode_parent": znode_parent,
        "data_dir": str(cluster.data_dir),
        "regionservers": [str(rs.name) for rs in cluster.servers],
    }
    print(json.dumps(ready), flush=True)
    try:
        while not stop.wait(0.5):
            pass
    finally:
        master.stop()
        servers.stop_all()
        admin.stop()
        cluster.stop()
        print(json.dumps({"stopped": True, "name": name}), flush=True)
        sys.stdout.flush()
    return 0
