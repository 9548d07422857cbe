"""One assembly of a source cluster: where its replication state is (ZooKeeper, the znode
parent, its credentials) and where its WALs are (the WAL root), put together into a connected
client, the znode layout and the WAL store. The ``walship`` command, the Airflow hook and the
Spark jobs all start here.

    site = SourceSite(zk="zk1:2181", znode_parent="/hbase", wal_root="hdfs://nn:8020/hbase")
    with site.connected() as (client, layout, walstore):
        Shipper(client, layout, walstore).ship("1")
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from dataclasses import dataclass, field

from kazoo.client import KazooClient

from walship.errors import ConfigError
from walship.replicate.walstore import WalStore
from walship.zk import ZnodeLayout, zk_client
from walship.zk.client import validate_hosts

__all__ = ["SourceSite"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SourceSite:
    """A source cluster as walship reaches it.

    :param zk: the ZooKeeper quorum, ``host:port[,host:port...]`` (a chroot allowed).
    :param znode_parent: HBase's ``zookeeper.znode.parent``.
    :param wal_root: the folder or URL holding ``WALs/`` and ``oldWALs/`` (``None``: the
        caller reads no WAL).
    :param auth: ZooKeeper credentials ``SCHEME:CREDENTIAL`` (``None``: ``WALSHIP_ZK_AUTH``, if
        set); never in reprs.
    :param timeout: seconds to connect to ZooKeeper.
    """

    zk: str
    znode_parent: str = "/hbase"
    wal_root: str | None = None
    auth: str | None = field(default=None, repr=False)
    timeout: float = 10.0

    @property
    def layout(self) -> ZnodeLayout:
        """Where HBase's and walship's znodes are under the parent.

        :raises ConfigError: the parent is not a znode path.
        """
        return ZnodeLayout(self.znode_parent)

    def walstore(self) -> WalStore:
        """The WAL store of :attr:`wal_root`.

        :raises ConfigError: there is no WAL root.
        :raises WalRootError: its file system cannot be opened.
        """
        if not self.wal_root:
            raise ConfigError(f"source {self.zk}{self.znode_parent}: no WAL root given (where WALs/ and oldWALs/ are)")
        return WalStore(self.wal_root)

    @contextlib.contextmanager
    def state(self) -> Iterator[tuple[KazooClient, ZnodeLayout]]:
        """A ZooKeeper client (its ACLs checked under the parent) and the layout; the client is
        closed on exit."""
        layout = self.layout
        hosts = validate_hosts(self.zk)
        with zk_client(hosts, timeout=self.timeout, auth=self.auth, parent=layout.parent) as client:
            yield client, layout

    @contextlib.contextmanager
    def connected(self) -> Iterator[tuple[KazooClient, ZnodeLayout, WalStore]]:
        """:meth:`state` and the WAL store (opened first: a bad WAL root is told before ZooKeeper
        is asked anything)."""
        walstore = self.walstore()
        with self.state() as (client, layout):
            yield client, layout, walstore
