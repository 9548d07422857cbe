"""Replication state in ZooKeeper, in HBase 2.x's layout and encodings."""

from __future__ import annotations

from walship.zk.client import DEFAULT_ZK, connect, zk_client
from walship.zk.cluster import ensure_cluster_id, live_servers, read_cluster_id, register_server
from walship.zk.layout import DEFAULT_PARENT, ZnodeLayout
from walship.zk.locks import queue_lock
from walship.zk.peers import ReplicationPeers
from walship.zk.queues import QueueId, QueueInfo, ReplicationQueues, WalPosition

__all__ = [
    "DEFAULT_PARENT",
    "DEFAULT_ZK",
    "QueueId",
    "QueueInfo",
    "ReplicationPeers",
    "ReplicationQueues",
    "WalPosition",
    "ZnodeLayout",
    "connect",
    "ensure_cluster_id",
    "live_servers",
    "queue_lock",
    "read_cluster_id",
    "register_server",
    "zk_client",
]
