"""What the split-out parts of the minicluster (placement, the info report) read and change of
a cluster: a protocol the :class:`~walship.minicluster.cluster.MiniCluster` satisfies, so that
they need neither the class nor its module (no import runs back up to it)."""

from __future__ import annotations

import logging
import uuid
from pathlib import Path
from typing import Protocol

from walship.minicluster.meta import Meta
from walship.minicluster.regionserver import RegionServer
from walship.minicluster.store import Store
from walship.zk import ZnodeLayout

__all__ = ["ClusterView"]

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
