"""``walship minicluster start``: run a cluster in the foreground until SIGTERM or SIGINT.

The Thrift port serves every transport and protocol unless told one (HBase's ``-f`` and
``-c``), and TLS when given a certificate (HBase's ``hbase.thrift.ssl.enabled``). With a
Thrift2 port, HBase's second Thrift service (``THBaseService``) is served there too, on the
same cluster and with the same transport, protocol and TLS options.
"""

from __future__ import annotations

import json
import logging
import signal
import sys
import threading
from pathlib import Path
from types import FrameType

from walship.minicluster.admin import AdminServer
from walship.minicluster.cluster import MiniCluster
from walship.minicluster.regionserver import WalSettings
from walship.minicluster.thrift import HbaseHandler, ThriftServer, server_tls_context
from walship.minicluster.thrift2 import THBaseHandler
from walship.thrift.hbase2 import hbase2

__all__ = ["run_minicluster"]

log = logging.getLogger(__name__)


def _address(addr: tuple[object, ...]) -> str:
    host, port = addr[0], addr[1]
    return f"{host if isinstance(host, str) else bytes(host).decode()}:{port}"  # type: ignore[call-overload]


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
) -> int:
    """Start, print one JSON ``ready`` line, serve until a signal, shut down cleanly.

    :param thrift2_port: serve Thrift2 (``THBaseService``) on this port (0: a free one;
        ``None``: no Thrift2 server).
    :param thrift_transport: ``buffered`` or ``framed``: the only transport the Thrift ports
        accept (default: both).
    :param thrift_protocol: ``binary`` or ``compact``: the only protocol it accepts (default: both).
    :param thrift_ssl_cert: the server's certificate (PEM; may hold the key too): serve TLS.
    :param thrift_ssl_key: the certificate's private key (PEM).
    :param roll_order: ``default``, or ``hbase`` to roll in HBase's order (see :mod:`walship.minicluster.cluster`).
    :param wal: how the region servers write their WALs (multiwal, checksum files, compression).
    :raises ConfigError: bad Thrift options (checked before anything starts).
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
    )
    cluster.start()
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
    admin = AdminServer(cluster, host, admin_port)
    cluster.endpoints = {
        "thrift": _address(thrift.address),
        "thrift2": _address(thrift2.address) if thrift2 is not None else None,
        "admin": _address(admin.address),
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
        thrift.stop()
        if thrift2 is not None:
            thrift2.stop()
        admin.stop()
        cluster.stop()
        print(json.dumps({"stopped": True, "name": name}), flush=True)
        sys.stdout.flush()
    return 0
