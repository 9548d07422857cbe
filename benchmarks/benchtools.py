"""What the benchmarks share: a scoped table on a minicluster, waiting for a source to queue
its WALs for new peers, and a scratch ZooKeeper server with a client."""

from __future__ import annotations

import tempfile
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

import happybase
from kazoo.client import KazooClient

from walship.zk import ReplicationQueues, ZnodeLayout, connect
from walship.zk.localserver import LocalZooKeeper, free_port
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


@contextmanager
def scratch_zookeeper(prefix: str) -> Iterator[tuple[Path, KazooClient, str]]:
    """A scratch folder, a ZooKeeper server of its own in it and a client of that server:
    (the folder, the client, the server's hosts); all stopped and gone afterwards."""
    with tempfile.TemporaryDirectory(prefix=prefix) as tmp:
        root = Path(tmp)
        zk = LocalZooKeeper(root / "zk", free_port())
        zk.start()
        try:
            client = connect(zk.hosts)
            try:
                yield root, client, zk.hosts
            finally:
                client.stop()
                client.close()
        finally:
            zk.stop()
