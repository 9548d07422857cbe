"""What the benchmarks share: a scoped table on a minicluster, and waiting for a source to
queue its WALs for new peers."""

from __future__ import annotations

import time
from collections.abc import Iterable

import happybase
from kazoo.client import KazooClient

from walship.zk import ReplicationQueues, ZnodeLayout
from walship_testing.minicluster.admin import AdminClient
from walship_testing.minicluster.process import MiniClusterProcess


def scoped_table(mc: MiniClusterProcess, table: str = "bench") -> None:
    """``table`` with one family ``f`` (one version), replication scope 1."""
    conn = happybase.Connection(*mc.thrift)
    conn.create_table(table, {"f": {"max_versions": 1}})
    conn.close()
    AdminClient(mc.admin).set_scope(table, "f", 1)


def wait_enqueued(client: KazooClient, layout: ZnodeLayout, peers: Iterable[str], timeout: float = 30.0) -> None:
    """Until the source has a queue for each of ``peers`` (it queues its WALs on a watch)."""
    wanted = set(peers)
    queues = ReplicationQueues(client, layout)
    deadline = time.monotonic() + timeout
    while {q.peer_id for q in queues.list_queues()} != wanted:
        if time.monotonic() > deadline:
            raise SystemExit("the minicluster did not enqueue its WAL for every peer")
        time.sleep(0.05)
