"""An embedded HBase-compatible cluster for the demo and the tests: HBase's two Thrift APIs
(happybase's Thrift1 and Thrift2's ``THBaseService``), real PWAL write-ahead logs, HBase's
znode layout and replication queues."""

from __future__ import annotations

from walship_testing.minicluster.admin import AdminClient
from walship_testing.minicluster.cluster import (
    MiniCluster,
    RowEdit,
    RowMutation,
    decode_cluster_ids,
    encode_cluster_ids,
)
from walship_testing.minicluster.runner import run_minicluster

__all__ = [
    "AdminClient",
    "MiniCluster",
    "RowEdit",
    "RowMutation",
    "decode_cluster_ids",
    "encode_cluster_ids",
    "run_minicluster",
]
