"""A Thrift sink's calls reach the peer in WAL order on each of its connections, each built and
encoded while the one before is at the peer: a refused call stops the rest of its connection's
calls (with one connection, the rest of its batch); every row's calls keep to one connection."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable

import pytest
from replication_helpers import SINK_PROTOCOLS, TABLE, Cluster, add_peer, contents, make_cluster

from walship.errors import SinkError
from walship.replicate.batcher.filters import EntryFilter
from walship.sinks.base import FilteredEntry, SinkContext
from walship.sinks.pooled import PooledSink
from walship.sinks.registry import create_sink
from walship.sinks.streams import INLINE_CELLS, PeerStreams
from walship.thrift.conn import THRIFT_CONNECTIONS_KEY
from walship.wal import WalReader, parse_wal_name
from walship.zk import ReplicationPeers, ZnodeLayout, zk_client
from walship_testing.minicluster import AdminClient
from walship_testing.minicluster.process import MiniClusterProcess

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


@pytest.mark.parametrize("connections", ["1", "3"])
@pytest.mark.parametrize("protocol", SINK_PROTOCOLS)
def test_a_refused_call_stops_the_rest_of_its_connection(
    minicluster_factory: Factory, zk_hosts: str, protocol: str, connections: str
) -> None:
    a = make_cluster(minicluster_factory, zk_hosts, "A", regionservers=1)  # one WAL, in write order
    b = make_cluster(minicluster_factory, zk_hosts, "B")
    add_peer(a, b, protocol=protocol, **{THRIFT_CONNECTIONS_KEY: connections})
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
    tables = [fe.entry.key.table for fe in batch]  # a WAL entry for each call of 1,000 rows, as HBase logs a batch
    assert tables == [TABLE] * 3 + [b"other"] + [TABLE]
    cells = sum(len(fe.cells) for fe in batch)
    assert cells == BEFORE + 1 + AFTER
    with zk_client(a.zk_hosts) as client:
        peer = ReplicationPeers(client, ZnodeLayout(a.parent)).get("1")
    sink = create_sink(peer, SinkContext(wal_root=str(a.mc.data_dir)))
    streams = int(connections)  # the batch holds 3,001 cells: a stream for each 1,000, up to the setting
    assert isinstance(sink, PooledSink) and sink.streams.streams_for(cells) == streams
    before = {b"before-%05d" % i for i in range(BEFORE)}
    late_rows = {b"late-%05d" % i for i in range(AFTER)}
    try:
        with pytest.raises(SinkError, match=r"peer 1 refused .*table other"):
            sink.apply(batch, "A's WALs")
        rows = set(contents(b))
        if streams == 1:
            # everything before the refused call arrived (several calls, in order), nothing after it
            assert rows == before
        else:
            # on the refused call's connection: everything before it arrived, nothing after it;
            # the other connections' calls went on meanwhile (the batch is shipped again whole)
            refused = PeerStreams.stream_of(b"x", streams)
            assert {row for row in before if PeerStreams.stream_of(row, streams) == refused} <= rows
            assert not {row for row in late_rows & rows if PeerStreams.stream_of(row, streams) == refused}
            assert rows <= before | late_rows
        # the same sink applies the next batch on the same sender: the batch after a failure works
        late = [fe for fe in batch if fe.entry.key.table == TABLE and fe.cells[0].row.startswith(b"late-")]
        stats = sink.apply(late, "A's WALs")
    finally:
        sink.close()
    assert stats.cells == AFTER and stats.calls == 1
    assert len(set(contents(b))) == BEFORE + AFTER


@pytest.mark.parametrize("protocol", SINK_PROTOCOLS)
def test_a_small_batch_is_sent_from_the_caller_and_stops_at_a_refused_call(
    minicluster_factory: Factory, zk_hosts: str, protocol: str
) -> None:
    """A batch under INLINE_CELLS cells (a tailer's) is sent from the applying thread, no sender
    thread started, with the same order and the same stop at a refused call."""
    a = make_cluster(minicluster_factory, zk_hosts, "A", regionservers=1)
    b = make_cluster(minicluster_factory, zk_hosts, "B")
    add_peer(a, b, protocol=protocol)
    conn = a.conn()
    conn.create_table("other", {"r": {"max_versions": 1}})  # replicated, but B has no such table
    AdminClient(a.mc.admin).set_scope("other", "r", 1)
    with conn.table(TABLE).batch(batch_size=10, timestamp=1000) as t:
        for i in range(40):
            t.put(b"before-%05d" % i, {b"r:q": b"v"})
    conn.table("other").put(b"x", {b"r:q": b"v"}, timestamp=2000)
    with conn.table(TABLE).batch(batch_size=10, timestamp=3000) as t:
        for i in range(20):
            t.put(b"late-%05d" % i, {b"r:q": b"v"})
    conn.close()
    batch = filtered_wal(a, "1", b)
    assert [len(fe.cells) for fe in batch] == [10] * 4 + [1] + [10] * 2  # an entry a call, as HBase logs a batch
    assert sum(len(fe.cells) for fe in batch) < INLINE_CELLS
    with zk_client(a.zk_hosts) as client:
        peer = ReplicationPeers(client, ZnodeLayout(a.parent)).get("1")
    sink = create_sink(peer, SinkContext(wal_root=str(a.mc.data_dir)))
    try:
        with pytest.raises(SinkError, match=r"peer 1 refused .*table other"):
            sink.apply(batch, "A's WALs")
        assert set(contents(b)) == {b"before-%05d" % i for i in range(40)}  # nothing after the refusal
        late = [fe for fe in batch if fe.cells[0].row.startswith(b"late-")]
        stats = sink.apply(late, "A's WALs")
        assert not [t.name for t in threading.enumerate() if t.name.startswith("walship-thrift")]
    finally:
        sink.close()
    assert stats.cells == 20 and stats.calls == 1
    assert len(set(contents(b))) == 60


@pytest.mark.parametrize("protocol", SINK_PROTOCOLS)
def test_a_row_s_edits_keep_their_order_over_several_connections(
    minicluster_factory: Factory, zk_hosts: str, protocol: str
) -> None:
    """Every row written four times at one timestamp (the last write wins): a batch spread over
    four connections leaves each row with its last value, as A has it."""
    a = make_cluster(minicluster_factory, zk_hosts, "A", regionservers=1)
    b = make_cluster(minicluster_factory, zk_hosts, "B")
    add_peer(a, b, protocol=protocol, **{THRIFT_CONNECTIONS_KEY: "4"})
    add_peer(a, b, "2", protocol=protocol)  # its default: one connection for its one server
    rows, rounds = 1500, 4
    conn = a.conn()
    for k in range(rounds):
        with conn.table(TABLE).batch(batch_size=500, timestamp=1000) as t:
            for i in range(rows):
                t.put(b"row-%05d" % i, {b"r:q": b"round-%d" % k})
    conn.close()
    batch = filtered_wal(a, "1", b)
    with zk_client(a.zk_hosts) as client:
        peer = ReplicationPeers(client, ZnodeLayout(a.parent)).get("1")
        one = ReplicationPeers(client, ZnodeLayout(a.parent)).get("2")
    sink = create_sink(peer, SinkContext(wal_root=str(a.mc.data_dir)))
    try:
        assert isinstance(sink, PooledSink) and sink.streams.streams_for(rows * rounds) == 4
        stats = sink.apply(batch, "A's WALs")
        assert len(sink.streams.connected()) == 4
        sink.apply(batch[-1:], "A's WALs")  # a small batch after it: one connection is left open
        assert len(sink.streams.connected()) == 1
    finally:
        sink.close()
    single = create_sink(one, SinkContext(wal_root=str(a.mc.data_dir)))
    assert isinstance(single, PooledSink) and single.streams.streams_for(rows * rounds) == 1
    single.close()
    assert stats.cells == rows * rounds and stats.calls >= 4
    last = {row: {b"r:q": [(b"round-%d" % (rounds - 1), 1000)]} for row in (b"row-%05d" % i for i in range(rows))}
    assert contents(b, versions=1) == last


@pytest.mark.parametrize("protocol", SINK_PROTOCOLS)
def test_a_peer_with_two_servers_gets_a_large_batch_over_both(
    minicluster_factory: Factory, zk_hosts: str, protocol: str
) -> None:
    a = make_cluster(minicluster_factory, zk_hosts, "A", regionservers=1)
    b = make_cluster(minicluster_factory, zk_hosts, "B")
    service = "thrift2" if protocol == "thrift2" else "thrift1"
    first = b.thrift2_address() if protocol == "thrift2" else b.thrift_address()
    second = AdminClient(b.mc.admin).start_thrift(service)
    key = "walship.sink.thrift2" if protocol == "thrift2" else "walship.sink.thrift"
    add_peer(a, b, protocol=protocol, **{key: f"{first},{second}"})
    with a.conn().table(TABLE).batch(batch_size=1000) as t:
        for i in range(2500):
            t.put(b"row-%05d" % i, {b"r:q": b"v"})
    batch = filtered_wal(a, "1", b)
    with zk_client(a.zk_hosts) as client:
        peer = ReplicationPeers(client, ZnodeLayout(a.parent)).get("1")
    sink = create_sink(peer, SinkContext(wal_root=str(a.mc.data_dir)))
    try:
        assert isinstance(sink, PooledSink) and sink.streams.connections == 2  # by default, one a server
        stats = sink.apply(batch, "A's WALs")
        servers = {f"{host}:{port}" for host, port in filter(None, sink.streams.connected())}
    finally:
        sink.close()
    assert servers == {first, second}
    assert stats.cells == 2500 and len(contents(b)) == 2500
