"""A Thrift sink's calls reach the peer one at a time, in WAL order, each built and encoded while
the one before is at the peer: a refused call stops the rest of its batch."""

from __future__ import annotations

import uuid
from collections.abc import Callable

import pytest
from replication_helpers import SINK_PROTOCOLS, TABLE, Cluster, add_peer, contents, make_cluster

from walship.errors import SinkError
from walship.minicluster import AdminClient
from walship.minicluster.process import MiniClusterProcess
from walship.replicate.filters import EntryFilter
from walship.sinks.base import FilteredEntry, SinkContext, create_sink
from walship.wal import WalReader, parse_wal_name
from walship.zk import ReplicationPeers, ZnodeLayout, zk_client

pytestmark = pytest.mark.integration

Factory = Callable[..., MiniClusterProcess]
BEFORE, AFTER = 2500, 500  # rows of table t before and after the refused edits: several calls each


def filtered_wal(a: Cluster, peer_id: str, b: Cluster) -> list[FilteredEntry]:
    """Every entry of A's WALs, in order, as the peer's filter keeps it."""
    with zk_client(a.zk_hosts) as client:
        peer = ReplicationPeers(client, ZnodeLayout(a.parent)).get(peer_id)
    entry_filter = EntryFilter(peer, uuid.UUID(a.mc.cluster_id), uuid.UUID(b.mc.cluster_id))
    root = a.mc.data_dir
    files = [p for p in (root / "WALs").rglob("*") if p.is_file()] + list((root / "oldWALs").iterdir())
    out = []
    for path in sorted(files, key=lambda p: parse_wal_name(p.name)):
        with open(path, "rb") as f:
            out += [fe for e in WalReader(f, str(path)).entries() if (fe := entry_filter.apply(e)) is not None]
    return out


@pytest.mark.parametrize("protocol", SINK_PROTOCOLS)
def test_a_refused_call_stops_the_rest_of_its_batch(minicluster_factory: Factory, zk_hosts: str, protocol: str) -> None:
    a = make_cluster(minicluster_factory, zk_hosts, "A", regionservers=1)  # one WAL, in write order
    b = make_cluster(minicluster_factory, zk_hosts, "B")
    add_peer(a, b, protocol=protocol)
    conn = a.conn()
    conn.create_table("other", {"r": {"max_versions": 1}})  # replicated, but B has no such table
    AdminClient(a.mc.admin).set_scope("other", "r", 1)
    with conn.table(TABLE).batch(batch_size=1000, timestamp=1000) as t:
        for i in range(BEFORE):
            t.put(b"before-%05d" % i, {b"r:q": b"v"})
    conn.table("other").put(b"x", {b"r:q": b"v"}, timestamp=2000)
    with conn.table(TABLE).batch(batch_size=1000, timestamp=3000) as t:
        for i in range(AFTER):
            t.put(b"late-%05d" % i, {b"r:q": b"v"})
    conn.close()
    batch = filtered_wal(a, "1", b)
    tables = [fe.entry.key.table for fe in batch]
    assert tables == [TABLE] * BEFORE + [b"other"] + [TABLE] * AFTER
    with zk_client(a.zk_hosts) as client:
        peer = ReplicationPeers(client, ZnodeLayout(a.parent)).get("1")
    sink = create_sink(peer, SinkContext(wal_root=str(a.mc.data_dir)))
    try:
        with pytest.raises(SinkError, match=r"peer 1 refused .*table other"):
            sink.apply(batch, "A's WALs")
        rows = set(contents(b))
        # everything before the refused call arrived (several calls, in order), nothing after it
        assert rows == {b"before-%05d" % i for i in range(BEFORE)}
        # the same sink applies the next batch on the same sender: the batch after a failure works
        late = [fe for fe in batch if fe.entry.key.table == TABLE and fe.cells[0].row.startswith(b"late-")]
        stats = sink.apply(late, "A's WALs")
    finally:
        sink.close()
    assert stats.cells == AFTER and stats.calls == 1
    assert len(set(contents(b))) == BEFORE + AFTER
