"""An embedded HBase-compatible cluster for the demo and the tests: happybase's Thrift1 API,
real PWAL write-ahead logs, HBase's znode layout and replication queues."""

from __future__ import annotations

from walship.minicluster.admin import AdminClient
from walship.minicluster.cluster import MiniCluster, RowMutation, decode_cluster_ids, encode_cluster_ids
from walship.minicluster.runner import run_minicluster

__all__ = ["AdminClient", "MiniCluster", "RowMutation", "decode_cluster_ids", "encode_cluster_ids", "run_minicluster"]
