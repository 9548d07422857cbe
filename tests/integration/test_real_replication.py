"""On real HBase 2.6, both sides: A -> B exact over HBase's own Thrift1 and Thrift2 servers and
straight into B's region servers (sink hbase), and master-master A <-> B with no loops."""

from __future__ import annotations

import pytest
from real_hbase import (
    all_wal_entries,
    cluster,
    create_table,
    managed_peer,
    unique,
    wait_queues_hold_current_wals,
    write_workload,
)
from replication_helpers import SINK_PROTOCOLS, contents, ship

from walship_testing.harness import HBaseProcess

pytestmark = pytest.mark.integration

#: the Thrift sinks, and sink hbase, which real HBase serves (the minicluster has no region
#: servers' RPC)
REAL_PROTOCOLS = (*SINK_PROTOCOLS, "hbase")


@pytest.mark.parametrize("protocol", REAL_PROTOCOLS)
def test_a_to_b_exact_every_version_and_delete(real_hbase: tuple[HBaseProcess, HBaseProcess], protocol: str) -> None:
    a_hb, b_hb = real_hbase
    ns = unique("ns")
    table = f"{ns}:exact"
    for hb in real_hbase:
        hb.call("create_namespace", namespace=ns)
        create_table(hb, table, splits=[b"m"])
    a, b = cluster(a_hb, table), cluster(b_hb, table)
    with managed_peer(a, b, unique("p"), protocol) as peer:
        wait_queues_hold_current_wals(a, peer)
        write_workload(a_hb, table, version_deletes=protocol != "thrift1")  # Thrift1 refuses those (tested apart)
        summary = ship(a, peer)
        assert summary.status == "ok", summary.error
        assert contents(b, versions=10) == contents(a, b"r", versions=10)  # every version, every delete's effect
        assert contents(b, b"l") == {}  # scope 0 stays home
        assert contents(b) != {}
        assert ship(a, peer).totals()["entries_shipped"] == 0  # nothing new, nothing changed
        assert contents(b, versions=10) == contents(a, b"r", versions=10)


@pytest.mark.parametrize("protocol", REAL_PROTOCOLS)
def test_master_master_without_loops(real_hbase: tuple[HBaseProcess, HBaseProcess], protocol: str) -> None:
    a_hb, b_hb = real_hbase
    table = unique("mm")
    for hb in real_hbase:
        create_table(hb, table)
    a, b = cluster(a_hb, table), cluster(b_hb, table)
    with managed_peer(a, b, unique("ab"), protocol) as ab, managed_peer(b, a, unique("ba"), protocol) as ba:
        wait_queues_hold_current_wals(a, ab)
        wait_queues_hold_current_wals(b, ba)
        for i in range(20):
            a.table().put(b"from-a-%02d" % i, {b"r:q": b"a"})
            b.table().put(b"from-b-%02d" % i, {b"r:q": b"b"})
        shipped = []
        for _ in range(3):  # back and forth until nothing moves
            shipped.append((ship(a, ab).totals()["entries_shipped"], ship(b, ba).totals()["entries_shipped"]))
        assert shipped[0] == (20, 20) and shipped[1:] == [(0, 0), (0, 0)]
        assert contents(a, b"r") == contents(b, b"r") and len(contents(a, b"r")) == 40
        # each edit was applied once on each side: A logged its own 20 and B's 20, no echo
        for here, there in ((a, b), (b, a)):
            ids = [  # per cell: HBase logs a batch of puts that arrived in one call as one entry
                e.key.cluster_ids
                for e in all_wal_entries(here)
                if e.key.table == table.encode() and not e.is_meta
                for _ in e.cells
            ]
            assert len(ids) == 40
            assert sorted(map(len, ids)) == [0] * 20 + [1] * 20
            assert {str(i[0]) for i in ids if i} == {there.mc.cluster_id}
