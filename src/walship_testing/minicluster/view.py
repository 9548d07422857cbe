"""What the split-out parts of the minicluster (placement, the info report, the master's peer
procedures) read and change of a cluster: protocols the
:class:`~walship_testing.minicluster.cluster.MiniCluster` satisfies, so that they need neither the
class nor its module (no import runs back up to it)."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, Protocol

from kazoo.client import KazooClient

from walship.zk import ZnodeLayout
from walship_testing.minicluster.meta import Meta
from walship_testing.minicluster.regionserver import RegionServer
from walship_testing.minicluster.store import Store, VisibleCell

__all__ = ["ClusterView", "MasterView"]

log = logging.getLogger(__name__)


class ClusterView(Protocol):
    name: str
    data_dir: Path
    zk_hosts: str
    layout: ZnodeLayout
    cluster_id: uuid.UUID | None
    servers: list[RegionServer]
    #: encoded region -> the server holding it
    owner: dict[str, RegionServer]
    #: encoded region -> its last sequence id
    seq: dict[str, int]
    endpoints: dict[str, str | None]
    store: Store | None
    #: the cluster's hbase:meta (in the store)
    meta: Meta | None

    @property
    def old_wals_dir(self) -> Path: ...

    def live_servers(self) -> list[RegionServer]: ...

    def server(self, name: str) -> RegionServer: ...

    def wal_files(self) -> dict[str, list[str]]: ...


class MasterView(ClusterView, Protocol):
    """What the master's peer procedures use of a cluster besides :class:`ClusterView`."""

    #: the cluster's own ZooKeeper session (the master's writes and its registration)
    zk: KazooClient | None

    @property
    def lock(self) -> AbstractContextManager[Any]:
        """The cluster's lock: held by writes, rolls and region moves."""
        ...

    def refresh_peers(self, children: list[str] | None = None) -> None:
        """Every region server takes the peers as they are now (enqueues its current WALs
        for a new one)."""
        ...

    def scan(
        self,
        table: bytes,
        *,
        columns: dict[bytes, set[bytes] | None] | None = None,
        versions: int = 1,
    ) -> Iterator[tuple[bytes, list[VisibleCell]]]:
        """Rows with their visible cells (``hbase:meta`` too)."""
        ...
