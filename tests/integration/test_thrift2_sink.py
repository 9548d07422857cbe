"""The Thrift2 sink: every edit exactly as written, single-version deletes included (the
behaviour it shares with the Thrift1 sink runs in test_replication.py and test_tail.py)."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import pytest
from replication_helpers import TABLE, Cluster, add_peer, make_cluster, ship

from walship.errors import ConfigError
from walship.replicate.batcher.filters import EntryFilter
from walship.sinks.base import SinkContext
from walship.sinks.registry import create_sink
from walship.thrift.conn import open_thrift2
from walship.thrift.hbase2 import hbase2
from walship.wal import CellType, WalEntry, WalReader, parse_wal_name
from walship.zk import ReplicationPeers, ZnodeLayout, zk_client
from walship_testing.minicluster.process import MiniClusterProcess

pytestmark = pytest.mark.integration

Factory = Callable[..., MiniClusterProcess]
T = hbase2.TDeleteType


@pytest.fixture
def ab2(minicluster_factory: Factory, zk_hosts: str) -> tuple[Cluster, Cluster]:
    """A -> B over the Thrift2 sink, with ``walship.incompatible=fail`` (which it never needs)."""
    a = make_cluster(minicluster_factory, zk_hosts, "A")
    b = make_cluster(minicluster_factory, zk_hosts, "B")
    add_peer(a, b, protocol="thrift2", **{"walship.incompatible": "fail"})
    return a, b


def thrift2(cluster: Cluster) -> Any:
    return open_thrift2(*cluster.mc.thrift2)


def every_version(cluster: Cluster, family: bytes = b"r") -> dict[bytes, list[tuple[bytes, bytes, int, bytes]]]:
    """Every visible version of every cell of the family, read over Thrift2."""
    with thrift2(cluster) as c:
        scan = hbase2.TScan(columns=[hbase2.TColumn(family=family)], maxVersions=100)
        results = c.client.getScannerResults(TABLE, scan, 10_000)
    return {r.row: sorted((v.family, v.qualifier, v.timestamp, v.value) for v in r.columnValues) for r in results}


def wal_entries(cluster: Cluster) -> list[WalEntry]:
    """Every entry of the cluster's WALs, in order (meta markers left out)."""
    root = cluster.mc.data_dir
    files = [p for p in (root / "WALs").rglob("*") if p.is_file()] + list((root / "oldWALs").iterdir())
    out = []
    for path in sorted(files, key=lambda p: parse_wal_name(p.name)):
        with open(path, "rb") as f:
            out += [e for e in WalReader(f, str(path)).entries() if not e.is_meta]
    return out


def markers(cluster: Cluster) -> list[tuple[bytes, bytes, bytes, int, int, tuple[uuid.UUID, ...]]]:
    """The delete markers in the cluster's WALs: (row, family, qualifier, timestamp, type, cluster ids)."""
    return [
        (c.row, c.family, c.qualifier, c.timestamp, int(c.type), e.key.cluster_ids)
        for e in wal_entries(cluster)
        for c in e.cells
        if c.type != CellType.Put
    ]


def put(row: bytes, cells: list[tuple[bytes, bytes, int, bytes]]) -> Any:
    return hbase2.TPut(
        row=row,
        columnValues=[hbase2.TColumnValue(family=f, qualifier=q, value=v, timestamp=ts) for f, q, ts, v in cells],
    )


def delete(row: bytes, kind: int, columns: list[tuple[bytes, bytes | None, int | None]] | None = None) -> Any:
    cols = [hbase2.TColumn(family=f, qualifier=q, timestamp=ts) for f, q, ts in columns] if columns else None
    return hbase2.TDelete(row=row, columns=cols, deleteType=kind)


def single_version_workload(a: Cluster) -> None:
    """HBase's testDeleteTypes and more: versions removed one by one, families by version."""
    with thrift2(a) as c:
        api = c.client
        for row in (b"d1", b"d2", b"d3", b"d4", b"d5"):
            api.putMultiple(
                TABLE, [put(row, [(b"r", q, ts, b"%s-%d" % (q, ts)) for q in (b"a", b"b") for ts in (100, 101, 102)])]
            )
        api.deleteSingle(TABLE, delete(b"d1", T.DELETE_COLUMN, [(b"r", b"a", 101)]))  # the middle version
        api.deleteSingle(TABLE, delete(b"d1", T.DELETE_COLUMN, [(b"r", b"b", None)]))  # the newest version
        api.deleteSingle(TABLE, delete(b"d2", T.DELETE_FAMILY_VERSION, [(b"r", None, 100)]))  # every column at 100
        api.deleteSingle(TABLE, delete(b"d3", T.DELETE_COLUMN, [(b"r", b"a", 100)]))
        api.deleteSingle(TABLE, delete(b"d3", T.DELETE_COLUMNS, [(b"r", b"a", 102)]))  # testDeleteTypes: all gone
        api.deleteSingle(TABLE, delete(b"d4", T.DELETE_FAMILY, [(b"r", None, 101)]))  # 100 and 101 of the family
        api.deleteSingle(TABLE, delete(b"d5", T.DELETE_COLUMN))  # no columns: the whole row
        # several timestamps in one edit, and a put masked by an older single-version delete
        api.mutateRow(
            TABLE,
            hbase2.TRowMutations(
                row=b"m1",
                mutations=[
                    hbase2.TMutation(put=put(b"m1", [(b"r", b"x", 7, b"seven"), (b"r", b"x", 9, b"nine")])),
                    hbase2.TMutation(deleteSingle=delete(b"m1", T.DELETE_COLUMN, [(b"r", b"x", 9)])),
                    hbase2.TMutation(put=put(b"m1", [(b"l", b"x", 9, b"local")])),
                ],
            ),
        )


def test_single_version_deletes_arrive_exactly(ab2: tuple[Cluster, Cluster]) -> None:
    a, b = ab2
    single_version_workload(a)
    expected = every_version(a)
    summary = ship(a)
    assert summary.status == "ok", summary.error
    totals = summary.totals()
    assert totals["incompatible_skipped"] == 0 and totals["deadlettered"] == 0
    assert every_version(b) == expected
    # the versions the deletes left, exactly
    assert [(q, ts) for _, q, ts, _ in expected[b"d1"]] == [(b"a", 100), (b"a", 102), (b"b", 100), (b"b", 101)]
    assert [(q, ts) for _, q, ts, _ in expected[b"d2"]] == [(b"a", 101), (b"a", 102), (b"b", 101), (b"b", 102)]
    assert [q for _, q, _, _ in expected[b"d3"]] == [b"b"] * 3
    assert [(q, ts) for _, q, ts, _ in expected[b"d4"]] == [(b"a", 102), (b"b", 102)]
    assert b"d5" not in expected and expected[b"m1"] == [(b"r", b"x", 7, b"seven")]
    assert every_version(b, b"l") == {}  # the local family stays home
    # B's WAL holds the same markers, of the same types and timestamps, carrying A's id
    a_id = uuid.UUID(a.mc.cluster_id)
    theirs = [m[:5] for m in markers(a)]
    ours = markers(b)
    assert [m[:5] for m in ours] == [m for m in theirs if m[1] == b"r"]
    assert {m[5] for m in ours} == {(a_id,)}
    types = {m[4] for m in ours}
    assert types == {int(CellType.Delete), int(CellType.DeleteColumn), int(CellType.DeleteFamily),
                     int(CellType.DeleteFamilyVersion)}  # fmt: skip


def test_a_batch_applied_again_changes_nothing(ab2: tuple[Cluster, Cluster]) -> None:
    """At-least-once: the whole history applied a second time leaves the peer as it was."""
    a, b = ab2
    single_version_workload(a)
    assert ship(a).status == "ok"
    once = every_version(b)
    with zk_client(a.zk_hosts) as client:
        peer = ReplicationPeers(client, ZnodeLayout(a.parent)).get("1")
    entry_filter = EntryFilter(peer, uuid.UUID(a.mc.cluster_id), uuid.UUID(b.mc.cluster_id))
    batch = [fe for e in wal_entries(a) if (fe := entry_filter.apply(e)) is not None]
    sink = create_sink(peer, SinkContext(wal_root=str(a.mc.data_dir)))
    try:
        stats = sink.apply(batch, "all of A's WALs")
    finally:
        sink.close()
    assert stats.cells == sum(len(fe.cells) for fe in batch) > 0
    assert every_version(b) == once


def test_a_refused_edit_stops_the_queue_naming_the_table(ab2: tuple[Cluster, Cluster]) -> None:
    a, b = ab2
    with thrift2(b) as c:  # B loses the family A replicates
        c.client.disableTable(hbase2.TTableName(qualifier=TABLE))
    a.table().put(b"x", {b"r:q": b"1"})
    summary = ship(a)
    assert summary.status == "error"
    assert summary.error is not None and "refused" in summary.error and "table t" in summary.error


def test_a_thrift2_peer_without_servers_says_which_key_to_set(minicluster_factory: Factory, zk_hosts: str) -> None:
    a = make_cluster(minicluster_factory, zk_hosts, "A")
    b = make_cluster(minicluster_factory, zk_hosts, "B")
    add_peer(a, b, **{"walship.sink.protocol": "thrift2"})  # no walship.sink.thrift2
    a.table().put(b"x", {b"r:q": b"1"})
    with pytest.raises(ConfigError, match=r"peer 1 has no Thrift2 servers: set its walship\.sink\.thrift2="):
        ship(a)
