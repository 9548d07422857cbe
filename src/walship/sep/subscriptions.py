"""SEP subscriptions: walship-managed peers whose "cluster" is a znode of walship's own.

A subscription ``NAME`` is a peer written as ``walship peer add`` writes one (HBase's
peer-state DISABLED, ``walship.managed=true``, walship's own switch), with
``walship.subscription=true`` and ``walship.sink.protocol=sep`` in its configuration, and a
cluster key pointing at ``<parent>/replication/walship/subscriptions/NAME`` of the source's
own ZooKeeper (a Parquet change log instead has ``walship.sink.protocol=changelog`` and
``walship.changelog.url``). That znode holds an ``hbaseid`` with a fresh cluster id in HBase's encoding,
so the shipper reads the "peer cluster's" id and prevents loops exactly as for a real peer;
HBase enqueues WALs for it like for any peer, and everything a peer has (queues, positions,
locks, failover claims, progress records, status) a subscription has too.

Example::

    subs = Subscriptions(client, ZnodeLayout("/hbase"), "zk1:2181,zk2:2181")
    subs.add(subs.config("indexer", listener="mypackage.indexer:Indexer", threads=4))
    subs.add(subs.config("audit", changelog="hdfs://nn/changelog/audit"))
"""

from __future__ import annotations

import contextlib
import datetime
import logging
import re
from collections.abc import Iterable
from typing import Any

from kazoo.client import KazooClient

from walship.errors import (
    ConfigError,
    InvalidPeerConfigError,
    PeerError,
    PeerExistsError,
    PeerNotFoundError,
    WalshipError,
)
from walship.peer import MANAGED_KEY, SUBSCRIPTION_KEY, PeerConfig, TableCfs, table_cfs_json, validate_peer_id
from walship.rpc.peers import PeerAdmin
from walship.sep.config import (
    CHANGELOG_PROTOCOL,
    CHANGELOG_URL_KEY,
    FILTER_KEY,
    LISTENER_KEY,
    PAYLOAD_COLUMN_KEY,
    PROTOCOL,
    PROTOCOL_KEY,
    START_TIME_KEY,
    THREADS_KEY,
    SepSettings,
)
from walship.zk.cluster import cluster_exists, ensure_cluster_id, read_cluster_id, remove_cluster
from walship.zk.layout import ZnodeLayout
from walship.zk.peers import ReplicationPeers

__all__ = ["Subscriptions", "describe", "subscription_cluster_key"]

log = logging.getLogger(__name__)

_HOST_RE = re.compile(r"^([^:,\s/]+)(?::(\d{1,5}))?$")


def subscription_cluster_key(zk_hosts: str, layout: ZnodeLayout, name: str) -> str:
    """The cluster key of subscription ``name``: the source's own ZooKeeper (``zk_hosts``, as
    ``--zk`` gives it, chroot included) and the subscription's znode.

    :raises ConfigError: the hosts use different ports (a cluster key has one port).
    """
    hostpart, slash, chroot = zk_hosts.strip().partition("/")
    hosts: list[str] = []
    ports: set[int] = set()
    for part in hostpart.split(","):
        m = _HOST_RE.match(part.strip())
        if not m:
            raise ConfigError(f"invalid ZooKeeper host {part!r} in {zk_hosts!r}")
        hosts.append(m.group(1))
        ports.add(int(m.group(2) or 2181))
    if len(ports) != 1:
        raise ConfigError(
            f"ZooKeeper {zk_hosts!r} uses several ports: a subscription's cluster key (host,...:port:/path) "
            "takes one; list the servers with the same port"
        )
    prefix = f"/{chroot.strip('/')}" if slash and chroot.strip("/") else ""
    return f"{','.join(hosts)}:{ports.pop()}:{prefix}{layout.subscription(name)}"


def describe(peer: PeerConfig) -> dict[str, Any]:
    """A subscription as ``walship subscription list|show --json`` prints it."""
    conf = peer.configuration
    start = conf.get(START_TIME_KEY, "").strip()
    start_iso = None
    if start.lstrip("-").isdigit():
        start_iso = datetime.datetime.fromtimestamp(int(start) / 1000, datetime.UTC).isoformat(timespec="milliseconds")
    parquet = conf.get(CHANGELOG_URL_KEY) if conf.get(PROTOCOL_KEY) == CHANGELOG_PROTOCOL else None
    threads: str | int | None = None if parquet else conf.get(THREADS_KEY, "1")
    if isinstance(threads, str) and threads.strip().isdigit():
        threads = int(threads)
    return {
        "name": peer.peer_id,
        "state": "ENABLED" if peer.enabled else "DISABLED",
        "listener": conf.get(LISTENER_KEY),
        "parquet": parquet,
        "threads": threads,
        "start_time": int(start) if start_iso else None,
        "start_time_iso": start_iso,
        "payload_column": conf.get(PAYLOAD_COLUMN_KEY),
        "filter": conf.get(FILTER_KEY),
        "table_cfs": table_cfs_json(peer.table_cfs),
        "namespaces": sorted(peer.namespaces) if peer.namespaces else None,
        "cluster_key": peer.cluster_key,
        "serial": peer.serial,
    }


class Subscriptions:
    """Add, list, enable, disable and remove subscriptions.

    :param zk_hosts: the source's ZooKeeper as ``--zk`` names it (for the cluster key).
    :param peers: what adds, changes and removes the subscriptions' peers: the master's
        (:func:`walship.rpc.peers.peer_admin`); by default HBase's znodes directly (a cluster
        that is down), which is also what reads them.
    """

    def __init__(self, client: KazooClient, layout: ZnodeLayout, zk_hosts: str, peers: PeerAdmin | None = None) -> None:
        self.client = client
        self.layout = layout
        self.zk_hosts = zk_hosts
        self.peers: PeerAdmin = peers if peers is not None else ReplicationPeers(client, layout)

    def config(
        self,
        name: str,
        *,
        listener: str | None = None,
        changelog: str | None = None,
        threads: int | str | None = None,
        start_time: int | None = None,
        payload_column: str | None = None,
        filter: str | None = None,
        table_cfs: TableCfs | None = None,
        namespaces: Iterable[str] | None = None,
        enabled: bool = True,
        serial: bool = True,
    ) -> PeerConfig:
        """The peer of a new subscription (not written; :meth:`add` writes it): its events go
        to ``listener`` or into the Parquet change log at the URL ``changelog`` (one of them;
        ``threads`` and ``payload_column`` are a listener's only).

        A subscription is a serial peer unless ``serial`` is false: a listener sees each
        region's edits in the order they were written, as HBase's serial replication gives them.

        :raises InvalidPeerConfigError: a bad name or setting (the listener, the filter hook
            and the change log's URL are checked by the sink,
            :func:`walship.sinks.registry.validate_sink_config`).
        """
        validate_peer_id(name)
        if (listener is None) == (changelog is None):
            raise InvalidPeerConfigError(f"subscription {name}: give a listener or a change log URL (one of them)")
        configuration = {MANAGED_KEY: "true", SUBSCRIPTION_KEY: "true"}
        if changelog is not None:
            configuration |= {PROTOCOL_KEY: CHANGELOG_PROTOCOL, CHANGELOG_URL_KEY: changelog}
        else:
            assert listener is not None
            configuration |= {PROTOCOL_KEY: PROTOCOL, LISTENER_KEY: listener, THREADS_KEY: "1"}
        if threads is not None:  # a change log refuses it, naming the key (SepSettings.of)
            configuration[THREADS_KEY] = str(threads).strip()
        if start_time is not None:
            configuration[START_TIME_KEY] = str(start_time)
        if payload_column is not None:
            configuration[PAYLOAD_COLUMN_KEY] = payload_column
        if filter is not None:
            configuration[FILTER_KEY] = filter
        peer = PeerConfig(
            peer_id=name,
            cluster_key=subscription_cluster_key(self.zk_hosts, self.layout, name),
            enabled=enabled,
            table_cfs=table_cfs or None,
            namespaces=frozenset(namespaces) if namespaces else None,
            configuration=configuration,
            serial=serial,
        )
        SepSettings.of(peer)
        return peer

    def add(self, peer: PeerConfig) -> None:
        """Write the subscription's ``hbaseid``, then its peer (HBase then enqueues WALs for it).

        :raises PeerExistsError: a peer (subscription or not) of that name exists.
        """
        name = peer.peer_id
        if not peer.subscription:
            raise PeerError(f"peer {name} is not a subscription ({SUBSCRIPTION_KEY} is not true)")
        if self.peers.exists(name):
            raise PeerExistsError(f"subscription {name}: a peer of that name exists already ({self.layout.peer(name)})")
        root = ZnodeLayout(self.layout.subscription(name))
        created = not cluster_exists(self.client, root)
        cluster_id = ensure_cluster_id(self.client, root)
        try:
            self.peers.add(peer)
        except BaseException:
            if created:  # our own leftovers only; never another's znodes
                with contextlib.suppress(WalshipError):  # the first error is the one to tell
                    remove_cluster(self.client, root)
            raise
        log.info("added subscription %s (cluster id %s) -> %s", name, cluster_id, peer.cluster_key)

    def get(self, name: str) -> PeerConfig:
        """:raises PeerNotFoundError: no such peer; :raises PeerError: it is not a subscription."""
        try:
            peer = self.peers.get(name)
        except PeerNotFoundError:
            raise PeerNotFoundError(f"subscription {name} does not exist ({self.layout.peer(name)})") from None
        if not peer.subscription:
            raise PeerError(f"peer {name} is not a subscription (use 'walship peer ...' for it)")
        return peer

    def list(self) -> list[PeerConfig]:
        return [p for p in self.peers.list() if p.subscription]

    def cluster_id(self, name: str) -> str:
        return str(read_cluster_id(self.client, ZnodeLayout(self.layout.subscription(name))))

    def enable(self, name: str) -> None:
        self.get(name)
        self.peers.enable(name)

    def disable(self, name: str) -> None:
        self.get(name)
        self.peers.disable(name)

    def remove(self, name: str) -> None:
        """Remove the peer (and so its queues, switch and progress), then its znode."""
        self.get(name)
        self.peers.remove(name)
        path = self.layout.subscription(name)
        remove_cluster(self.client, ZnodeLayout(path))
        log.info("removed subscription %s and %s", name, path)
