"""Mutations written straight into a real HBase 2.6 region server (``ClientService.Multi``, cells
in a ``KeyValueCodec`` cell block): puts and every kind of delete land as written, with their
own timestamps; the clusters an edit passed through (``_cs.id``) reach the region server's WAL;
a region the server does not hold fails every mutation of the call, by HBase's exception."""

from __future__ import annotations

import uuid

import pytest
from real_hbase import all_wal_entries, cluster, create_table, thrift2_client, unique

from walship.clusterids import encode_cluster_ids
from walship.rpc.auth import SimpleAuth
from walship.rpc.meta import locate, read_meta_location, table_regions
from walship.rpc.multi import RegionServerClient, RowMutation
from walship.thrift.hbase2 import hbase2
from walship.wal import Cell, CellType
from walship.wal.model import METAFAMILY
from walship.zk import ZnodeLayout, zk_client
from walship_testing.harness import HBaseProcess

pytestmark = pytest.mark.integration

ORIGIN = (uuid.UUID(int=11), uuid.UUID(int=12))


def region_of(hb: HBaseProcess, table: str) -> tuple[bytes, str, int]:
    """The full name of the table's one region (its hbase:meta row) and its server's address."""
    host, port, _ = hb.call("regions", table=table)[0]["server"].split(",")
    client = thrift2_client(hb)
    try:  # hbase:meta's rows compare by its own comparator: read them all (a test cluster's few)
        rows = [
            r
            for r in client.getScannerResults(b"hbase:meta", hbase2.TScan(), 10_000)
            if r.row.startswith(f"{table},".encode())
        ]
    finally:
        client.close()
    assert len(rows) == 1, rows
    return rows[0].row, host, int(port)


def put(row: bytes, column: bytes, ts: int, value: bytes) -> Cell:
    family, qualifier = column.split(b":")
    return Cell(row, family, qualifier, ts, int(CellType.Put), value)


def test_puts_and_every_delete_land_as_written(real_hbase: tuple[HBaseProcess, HBaseProcess]) -> None:
    _, b = real_hbase
    table = unique("multi")
    create_table(b, table)
    region, host, port = region_of(b, table)
    puts = [put(b"x", b"r:a", ts, b"a%d" % ts) for ts in (100, 200, 300)]
    puts += [put(b"x", b"r:b", ts, b"b%d" % ts) for ts in (100, 200)]
    puts += [put(b"x", b"r:c", 100, b"c100"), put(b"x", b"l:y", 100, b"y100"), put(b"x", b"l:z", 200, b"z200")]
    puts += [put(b"w", b"r:a", 50, b"w50"), put(b"w", b"l:a", 50, b"wl50")]
    deletes = [
        Cell(b"x", b"r", b"a", 200, int(CellType.Delete)),  # that one version
        Cell(b"x", b"r", b"b", 150, int(CellType.DeleteColumn)),  # versions up to 150
        Cell(b"x", b"l", b"", 100, int(CellType.DeleteFamilyVersion)),  # the family's cells at 100
    ]
    family_delete = [Cell(b"w", b"r", b"", 60, int(CellType.DeleteFamily))]
    with RegionServerClient(host, port, SimpleAuth()) as rs:
        failed = rs.multi(
            region,
            [
                RowMutation(b"x", False, [c for c in puts if c.row == b"x"]),
                RowMutation(b"w", False, [c for c in puts if c.row == b"w"]),
                RowMutation(b"x", True, deletes),
                RowMutation(b"w", True, family_delete),
            ],
        )
    assert failed == []
    t = cluster(b, table).table()
    versions = {col: t.cells(b"x", col, versions=5, include_timestamp=True) for col in (b"r:a", b"r:b", b"r:c")}
    assert versions == {
        b"r:a": [(b"a300", 300), (b"a100", 100)],
        b"r:b": [(b"b200", 200)],
        b"r:c": [(b"c100", 100)],
    }
    assert t.row(b"x", columns=[b"l"], include_timestamp=True) == {b"l:z": (b"z200", 200)}
    assert t.row(b"w", include_timestamp=True) == {b"l:a": (b"wl50", 50)}


def test_the_clusters_an_edit_came_through_reach_the_peers_wal(real_hbase: tuple[HBaseProcess, HBaseProcess]) -> None:
    _, b = real_hbase
    table = unique("multiids")
    create_table(b, table)
    region, host, port = region_of(b, table)
    cells = [put(b"k", b"r:q", 7, b"v")]
    with RegionServerClient(host, port, SimpleAuth()) as rs:
        assert rs.multi(region, [RowMutation(b"k", False, cells)], encode_cluster_ids(ORIGIN)) == []
    logged = [
        e
        for e in all_wal_entries(cluster(b, table))
        if e.key.table == table.encode() and e.cells[0].family != METAFAMILY  # not the region's open marker
    ]
    assert [(list(e.cells), e.key.cluster_ids) for e in logged] == [(cells, ORIGIN)]


def test_a_region_the_server_does_not_hold_fails_every_mutation_by_name(
    real_hbase: tuple[HBaseProcess, HBaseProcess],
) -> None:
    _, b = real_hbase
    table = unique("multigone")
    create_table(b, table)
    region, host, port = region_of(b, table)
    gone = region.replace(region.split(b".")[1], b"0" * 32)  # the same table, an encoded name nobody has
    mutations = [RowMutation(b"k%d" % i, False, [put(b"k%d" % i, b"r:q", 1, b"v")]) for i in range(3)]
    with RegionServerClient(host, port, SimpleAuth()) as rs:
        failed = rs.multi(gone, mutations)
    assert [(f.index, f.short_class) for f in failed] == [(i, "NotServingRegionException") for i in range(3)]
    assert all("0" * 32 in f.message for f in failed), failed
    assert cluster(b, table).table().row(b"k0") == {}


def test_a_tables_regions_are_read_from_hbase_meta_as_hbase_has_them(
    real_hbase: tuple[HBaseProcess, HBaseProcess],
) -> None:
    """hbase:meta's region server from ZooKeeper, then the table's rows of hbase:meta: every
    region of a table split in four, with its keys and server, as HBase's Admin lists them;
    another table's regions (one whose name the first one's starts with) are not among them."""
    a, _ = real_hbase
    table = unique("meta")
    create_table(a, table, splits=[b"g", b"n", b"t"])
    create_table(a, table + "x")
    with zk_client(a.zk_hosts) as zk:
        location = read_meta_location(zk, ZnodeLayout(a.znode_parent))
    assert location is not None
    with RegionServerClient(*location, SimpleAuth()) as meta:
        regions = table_regions(meta, table.encode())
    admin = a.call("regions", table=table)
    assert [(r.encoded, r.start.hex(), r.end.hex(), f"{r.host},{r.port},{r.start_code}") for r in regions] == [
        (r["region"], r["start"], r["end"], r["server"]) for r in admin
    ]
    assert [r.start for r in regions] == [b"", b"g", b"n", b"t"]
    assert [locate(regions, row).start for row in (b"", b"f", b"g", b"m", b"zz")] == [b"", b"", b"g", b"g", b"t"]
    # the full name is what a region server takes: a put into each region lands
    for r in regions:
        with RegionServerClient(r.host, r.port, SimpleAuth()) as rs:
            row = r.start + b"-row"
            assert rs.multi(r.name, [RowMutation(row, False, [put(row, b"r:q", 1, b"v")])]) == []
    assert sorted(k for k, _ in cluster(a, table).table().scan()) == [b"-row", b"g-row", b"n-row", b"t-row"]
