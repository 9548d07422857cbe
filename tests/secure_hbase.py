"""The Kerberized real-HBase stack for tests (the ``secure_hbase`` session fixture): one MIT KDC,
one ZooKeeper with SASL Kerberos, and two secure HBase 2.6 clusters from the harness, SA (the
source: two region servers, WALs on a Kerberized HDFS read over WebHDFS with SPNEGO) and SB (the
peer: one region server, local WALs), started in parallel.

Principals (realm :data:`REALM`; every service principal exists for each of :func:`host_names`):

- ``zookeeper/<host>``: the ZooKeeper server (clients name it ``localhost``: ``stack.zk_hosts``);
- ``hbase/<host>``: HBase's master, region servers, NameNode, DataNode and Thrift servers;
- ``HTTP/<host>``: SPNEGO of WebHDFS and of the HTTP Thrift2 server;
- ``walship``: HBase's superuser (znode ACL ``sasl:walship``, HDFS superuser group);
- ``walship-short``: a superuser too, whose tickets last 20 seconds (renewal tests);
- ``intruder``: known to the KDC, no superuser (HBase's AccessController refuses it).

Example (outside pytest)::

    stack = start_secure(Path("/tmp/secure"))
    try:
        os.environ.update(stack.client_env(stack.walship_keytab))
        ...
    finally:
        stack.stop()
"""

from __future__ import annotations

import logging
import socket
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from walship.zk.localserver import LocalZooKeeper, ZooKeeperKerberos, free_port
from walship_testing.harness.kdc import MitKdc
from walship_testing.harness.process import HBaseProcess, SecureHarness

__all__ = ["REALM", "SA_CONF", "SecureStack", "host_names", "start_secure"]

log = logging.getLogger(__name__)

REALM = "EXAMPLE.COM"
#: Superusers of both clusters.
SUPERUSERS = ("walship", "walship-short")
#: Source SA: HBase's log cleaner keeps archived WALs for an hour, so that what the secure tests
#: see deleted from oldWALs/ on its Kerberized HDFS is walship's cleaner's doing.
SA_CONF = {
    "hbase.master.logcleaner.ttl": "3600000",
    "hbase.master.cleaner.interval": "1000",
    "hbase.regionserver.abort.timeout": "3000",
}


def host_names() -> list[str]:
    """Every name a client or a server here may use for this machine."""
    names = ["localhost", "127.0.0.1", socket.gethostname(), socket.getfqdn()]
    return list(dict.fromkeys(n.lower() for n in names if n))


@dataclass
class SecureStack:
    """The running secure stack; :meth:`stop` stops all of it."""

    base: Path
    kdc: MitKdc
    zk_server: LocalZooKeeper
    sa: HBaseProcess
    sb: HBaseProcess
    #: ``zookeeper/*``, ``hbase/*`` and ``HTTP/*`` for every host name
    service_keytab: Path
    walship_keytab: Path
    walship_short_keytab: Path
    intruder_keytab: Path
    started_in: float = 0.0

    @property
    def krb5_conf(self) -> Path:
        return self.kdc.krb5_conf

    @property
    def realm(self) -> str:
        return self.kdc.realm

    @property
    def zk_hosts(self) -> str:
        """ZooKeeper's connect string (``localhost:port``: the host of its principal)."""
        return self.zk_server.hosts

    @property
    def service_host(self) -> str:
        """The host of HBase's service principals (``hbase/<host>``, ``HTTP/<host>``)."""
        return self.sa.service_host or "localhost"

    def client_env(self, keytab: Path) -> dict[str, str]:
        """Environment variables for a Python (MIT GSSAPI) client logging in from ``keytab``
        without kinit: ``KRB5_CONFIG``, ``KRB5_CLIENT_KTNAME`` and a fresh ``KRB5CCNAME=MEMORY:``."""
        return self.kdc.client_env(keytab)

    def stop(self) -> None:
        for hb in (self.sa, self.sb):
            hb.stop()
        self.zk_server.stop()
        self.kdc.stop()


def start_secure(base: Path) -> SecureStack:
    """Start the KDC, the SASL ZooKeeper and SA and SB (in parallel); see the module's docstring.

    :raises walship.errors.HarnessError: the KDC or a cluster did not start (the message names its log).
    """
    began = time.monotonic()
    kdc = MitKdc(base / "kdc", REALM).start()
    try:
        service = base / "kdc" / "services.keytab"
        for host in host_names():
            for service_name in ("zookeeper", "hbase", "HTTP"):
                kdc.add_principal(f"{service_name}/{host}", service)
        walship = kdc.add_principal("walship")
        short = kdc.add_principal("walship-short", maxlife="20 seconds")
        intruder = kdc.add_principal("intruder")
        zk = LocalZooKeeper(
            base / "zookeeper",
            free_port(),
            kerberos=ZooKeeperKerberos(f"zookeeper/localhost@{REALM}", service, kdc.krb5_conf),
        )
        zk.start()
    except BaseException:
        kdc.stop()
        raise
    secure = SecureHarness(kdc.krb5_conf, REALM, service, superusers=SUPERUSERS)
    sa = HBaseProcess(
        "SA", base / "SA", zk=zk.hosts, znode_parent="/hbase-sa", regionservers=2,
        wal_fs="hdfs", conf=SA_CONF, secure=secure,
    )  # fmt: skip
    sb = HBaseProcess("SB", base / "SB", zk=zk.hosts, znode_parent="/hbase-sb", regionservers=1, secure=secure)
    with ThreadPoolExecutor(max_workers=2) as pool:
        started = [pool.submit(hb.start) for hb in (sa, sb)]
    failed = [f.exception() for f in started if f.exception() is not None]
    if failed:
        for hb in (sa, sb):
            hb.kill()
        zk.stop()
        kdc.stop()
        raise failed[0]  # type: ignore[misc]
    stack = SecureStack(base, kdc, zk, sa, sb, service, walship, short, intruder, time.monotonic() - began)
    log.info("secure stack up in %.1f s: SA %s, SB %s", stack.started_in, sa.cluster_key, sb.cluster_key)
    return stack
