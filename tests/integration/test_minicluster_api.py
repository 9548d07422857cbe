"""happybase over TCP against the minicluster: every API area behaves as on HBase. The calls
(table administration, puts, gets, versions, deletes, batches, scans, filters, counters, raw
Thrift1 calls) are made to real HBase 2.6's Thrift1 server and to the minicluster's alike
(:class:`twins.Twin`), each answer compared with HBase's: HBase is the reference, and the
asserts here hold for both. The transports, a garbage-fed socket and the scope command are the
minicluster's own."""

from __future__ import annotations

import contextlib
import re
import struct
import time
from collections.abc import Iterator
from typing import Any

import happybase
import pytest
from real_hbase import unique
from thriftpy2.thrift import TApplicationException
from twins import Twin
from waiting import wait_until

from walship.errors import MiniClusterError
from walship_testing.harness import HBaseProcess
from walship_testing.minicluster import AdminClient
from walship_testing.minicluster.process import MiniClusterProcess

pytestmark = pytest.mark.integration

Hbase = __import__("Hbase_thrift")
#: What HBase's Thrift1 server raises to a client (the same classes from both clusters).
ANSWERED = (Hbase.IOError, Hbase.IllegalArgument, Hbase.AlreadyExists, TApplicationException)


@pytest.fixture
def conn(minicluster: MiniClusterProcess) -> Iterator[happybase.Connection]:
    host, port = minicluster.thrift
    c = happybase.Connection(host, port)
    yield c
    c.close()


@pytest.fixture
def twin(
    real_hbase: tuple[HBaseProcess, HBaseProcess], minicluster: MiniClusterProcess
) -> Iterator[tuple[Twin, Twin, bytes]]:
    """A table of the test's own on real HBase (its peer cluster B, which no test ships from)
    and on the minicluster, families f (3 versions) and g (1): the twin table, the twin raw
    Thrift1 client and the table's name."""
    conns = [happybase.Connection(*real_hbase[1].thrift, timeout=60000), happybase.Connection(*minicluster.thrift)]
    name = unique("api")
    for c in conns:
        c.create_table(name, {"f": {"max_versions": 3}, "g": {"max_versions": 1}})
    yield Twin(*(c.table(name) for c in conns), ANSWERED), Twin(*(c.client for c in conns), ANSWERED), name.encode()
    for c in conns:
        c.close()


@pytest.fixture
def table(twin: tuple[Twin, Twin, bytes]) -> Twin:
    return twin[0]


def test_table_admin(real_hbase: tuple[HBaseProcess, HBaseProcess], minicluster: MiniClusterProcess) -> None:
    """Table administration, on both clusters (the names are the test's own: real HBase holds
    every test's tables). Where both refuse a call, the minicluster's error is checked, for its
    message names the thing."""
    conns = [happybase.Connection(*real_hbase[1].thrift, timeout=60000), happybase.Connection(*minicluster.thrift)]

    def both(of: Any) -> Twin:
        return Twin(*(of(c) for c in conns), ANSWERED, minicluster_errors=True)

    admin = both(lambda c: c)
    ns, b = unique("ns"), unique("b")
    a = f"{ns}:a"
    real_hbase[1].call("create_namespace", namespace=ns)  # the minicluster makes one as a table needs it
    try:
        admin.create_table(a, {"cf": {"max_versions": 5}})
        admin.create_table(b, {"x": {}, "y:": {}})
        for c in conns:  # tables() lists every table: real HBase holds other tests' too
            assert {a.encode(), b.encode()} <= set(c.tables())
        fams = both(lambda c: c.table(a)).families()
        assert list(fams) == [b"cf"] and fams[b"cf"]["max_versions"] == 5
        assert sorted(both(lambda c: c.table(b)).families()) == [b"x", b"y"]
        for c in conns:  # where a region is served is the cluster's own
            (region,) = c.table(b).regions()
            assert region["start_key"] == b"" and region["end_key"] == b"" and region["port"] > 0
        with pytest.raises(Hbase.AlreadyExists):
            admin.create_table(b, {"x": {}})
        with pytest.raises(TApplicationException) as failed:  # HBase's handler fails inside
            admin.create_table("bad/name", {"x": {}})
        assert failed.value.message == b"Internal error processing createTable: invalid table name b'bad/name'"
        with pytest.raises(Hbase.IllegalArgument, match="maxVersions"):
            admin.create_table(unique("c"), {"x": {"max_versions": 0}})
        assert admin.is_table_enabled(b)
        admin.disable_table(b)
        assert not admin.is_table_enabled(b)
        with pytest.raises(Hbase.IOError, match="disabled"):
            both(lambda c: c.table(b)).put(b"r", {b"x:q": b"v"})
        with pytest.raises(Hbase.IOError, match="disabled"):
            both(lambda c: c.table(b)).row(b"r")
        admin.enable_table(b)
        with pytest.raises(Hbase.IOError, match="must be disabled"):
            both(lambda c: c.client).deleteTable(b.encode())
        admin.delete_table(b, disable=True)
        for c in conns:
            names = set(c.tables())
            assert a.encode() in names and b.encode() not in names
        with pytest.raises(Hbase.IOError, match="does not exist"):
            both(lambda c: c.table("nope")).row(b"r")
        with pytest.raises(Hbase.IOError, match="does not exist"):
            both(lambda c: c.table("nope")).put(b"r", {b"x:q": b"v"})
        admin.compact_table(a, major=True)
    finally:
        for c in conns:
            c.close()


def test_put_get_versions_and_timestamps(table: Twin) -> None:
    for ts in (10, 20, 30, 40):
        table.put(b"r", {b"f:q": b"v%d" % ts, b"g:q": b"w%d" % ts}, timestamp=ts)
    assert table.row(b"r") == {b"f:q": b"v40", b"g:q": b"w40"}
    assert table.row(b"r", include_timestamp=True)[b"f:q"] == (b"v40", 40)
    # newest first, capped by the family's max_versions
    assert table.cells(b"r", b"f:q", versions=10, include_timestamp=True) == [(b"v40", 40), (b"v30", 30), (b"v20", 20)]
    assert table.cells(b"r", b"g:q", versions=10) == [b"w40"]
    # timestamps are an exclusive upper bound, as Thrift's *Ts calls use them
    assert table.row(b"r", timestamp=40) == {b"f:q": b"v30", b"g:q": b"w30"}
    assert table.cells(b"r", b"f:q", versions=2, timestamp=35) == [b"v30", b"v20"]
    assert table.row(b"r", columns=[b"f"]) == {b"f:q": b"v40"}
    assert table.row(b"r", columns=[b"g:q", b"f:zz"]) == {b"g:q": b"w40"}
    assert table.row(b"missing") == {}
    table.put(b"r2", {b"f:": b"empty qualifier", b"f:bin\x00": b"\x00\xff"})
    assert table.row(b"r2") == {b"f:": b"empty qualifier", b"f:bin\x00": b"\x00\xff"}
    assert dict(table.rows([b"r", b"nope", b"r2"], columns=[b"f"])) == {
        b"r": {b"f:q": b"v40"},
        b"r2": {b"f:": b"empty qualifier", b"f:bin\x00": b"\x00\xff"},
    }
    with pytest.raises(Hbase.IOError, match="Column family nofam does not exist"):
        table.put(b"r", {b"nofam:q": b"v"})
    with pytest.raises(Hbase.IOError, match="Column family nofam does not exist"):
        table.row(b"r", columns=[b"nofam"])


def test_deletes_mask_the_right_cells(table: Twin) -> None:
    for ts in (10, 20, 30):
        table.put(b"r", {b"f:a": b"a%d" % ts, b"f:b": b"b%d" % ts, b"g:c": b"c%d" % ts}, timestamp=ts)
    table.delete(b"r", columns=[b"f:a"], timestamp=20)  # DeleteColumn: versions <= 20
    assert table.cells(b"r", b"f:a", versions=3) == [b"a30"]
    table.put(b"r", {b"f:a": b"late"}, timestamp=15)  # older than the marker: masked, as on HBase
    assert table.cells(b"r", b"f:a", versions=3) == [b"a30"]
    table.delete(b"r", columns=[b"f"], timestamp=30)  # DeleteFamily: all of f <= 30
    assert table.row(b"r") == {b"g:c": b"c30"}
    table.put(b"r", {b"f:a": b"new"}, timestamp=31)
    assert table.row(b"r") == {b"f:a": b"new", b"g:c": b"c30"}
    deleted_at = int(time.time() * 1000)
    table.delete(b"r")  # the whole row, now
    assert table.row(b"r") == {}
    # a put in the same millisecond as the delete would be masked, as on HBase: the clock moves on first
    wait_until(lambda: int(time.time() * 1000) > deleted_at + 1, interval=0.001, what="a later millisecond")
    table.put(b"r", {b"f:a": b"after"})
    assert table.row(b"r") == {b"f:a": b"after"}


def test_batches_and_attributes(twin: tuple[Twin, Twin, bytes]) -> None:
    table, client, name = twin
    with table.batch(batch_size=100) as b:
        for i in range(1000):
            b.put(b"row-%04d" % i, {b"f:q": b"%d" % i})
        b.delete(b"row-0005")
    assert table.row(b"row-0999") == {b"f:q": b"999"}
    assert table.row(b"row-0005") == {}
    m = Hbase.Mutation(column=b"f:q", value=b"raw", isDelete=False)
    cs = struct.pack(">i", 1) + bytes(range(16))
    client.mutateRowsTs(name, [Hbase.BatchMutation(row=b"attr", mutations=[m])], 77, {b"_cs.id": cs})
    assert table.row(b"attr", include_timestamp=True) == {b"f:q": (b"raw", 77)}
    # a _cs.id that does not hold its count of UUIDs: refused by the region server, not the Thrift server
    with pytest.raises(Hbase.IOError, match="Failed 1 action"):
        client.mutateRows(name, [Hbase.BatchMutation(row=b"x", mutations=[m])], {b"_cs.id": b"\x00\x00\x00\x05"})
    # a put of a family without a qualifier: left out, as HBase's Thrift1 server leaves it out
    client.mutateRow(name, b"x", [Hbase.Mutation(column=b"f", value=b"v", isDelete=False)], {})
    assert table.row(b"x") == {}


def test_scans(table: Twin) -> None:
    with table.batch() as b:
        for i in range(50):
            b.put(
                b"k%02d" % i,
                {b"f:a": b"a%d" % i, b"f:b": b"b%d" % i, b"g:c": b"c%d" % i},
            )
    keys = [k for k, _ in table.scan()]
    assert keys == [b"k%02d" % i for i in range(50)]
    assert [k for k, _ in table.scan(row_start=b"k10", row_stop=b"k13")] == [b"k10", b"k11", b"k12"]
    assert [k for k, _ in table.scan(row_prefix=b"k4")] == [b"k%02d" % i for i in range(40, 50)]
    assert [k for k, _ in table.scan(row_start=b"k05", limit=3, batch_size=2)] == [b"k05", b"k06", b"k07"]
    assert [k for k, _ in table.scan(row_start=b"k03", row_stop=b"k00", reverse=True)] == [b"k03", b"k02", b"k01"]
    assert [k for k, _ in table.scan(row_prefix=b"k1", reverse=True)][:2] == [b"k19", b"k18"]
    assert dict(table.scan(row_prefix=b"k01", columns=[b"g"])) == {b"k01": {b"g:c": b"c1"}}
    sorted_row = next(iter(table.scan(row_prefix=b"k02", sorted_columns=True)))[1]
    assert list(sorted_row) == [b"f:a", b"f:b", b"g:c"]
    parts = list(table.scan(row_prefix=b"k03", scan_batching=2))
    assert [(k, len(v)) for k, v in parts] == [(b"k03", 2), (b"k03", 1)]
    table.put(b"k00", {b"f:a": b"old"}, timestamp=5)
    assert dict(table.scan(row_prefix=b"k00", timestamp=6)) == {b"k00": {b"f:a": b"old"}}


@pytest.mark.parametrize(
    ("flt", "expected"),
    [
        (b"PrefixFilter('k1')", {b"k1", b"k10", b"k11"}),
        (b"SingleColumnValueFilter('f', 'n', =, 'binary:odd')", {b"k1", b"k3", b"k11"}),
        (b"SingleColumnValueFilter('f', 'n', =, 'binary:odd') AND PrefixFilter('k1')", {b"k1", b"k11"}),
        (b"PrefixFilter('k2') OR PrefixFilter('k3')", {b"k2", b"k3"}),
        (b"ValueFilter(=, 'binary:even')", {b"k0", b"k2", b"k10"}),
        (b"ValueFilter(=, 'substring:EVE')", {b"k0", b"k2", b"k10"}),
    ],
)
def test_filters_select_rows(table: Twin, flt: bytes, expected: set[bytes]) -> None:
    for i in (0, 1, 2, 3, 10, 11):
        table.put(b"k%d" % i, {b"f:n": b"odd" if i % 2 else b"even", b"f:m": b"x"})
    assert {k for k, _ in table.scan(filter=flt)} == expected


def test_cell_filters(table: Twin) -> None:
    table.put(b"r", {b"f:apple": b"1", b"f:avocado": b"2", b"f:banana": b"3"})
    assert dict(table.scan(filter=b"ColumnPrefixFilter('av')")) == {b"r": {b"f:avocado": b"2"}}
    assert dict(table.scan(filter=b"KeyOnlyFilter()")) == {b"r": {b"f:apple": b"", b"f:avocado": b"", b"f:banana": b""}}
    assert dict(table.scan(filter=b"FirstKeyOnlyFilter()")) == {b"r": {b"f:apple": b"1"}}
    assert dict(table.scan(filter=b"ValueFilter(>=, 'binary:2')")) == {b"r": {b"f:avocado": b"2", b"f:banana": b"3"}}
    # HBase's filter parser throws what its Thrift1 server does not catch: an internal error
    for bad in (b"PrefixFilter('x'", b"NoSuchFilter()"):
        with pytest.raises(TApplicationException) as raised:
            table.scan(filter=bad)
        assert raised.value.message == b"Internal error processing scannerOpenWithScan"


def test_counters(table: Twin) -> None:
    assert table.counter_inc(b"c", b"f:n") == 1
    assert table.counter_inc(b"c", b"f:n", value=41) == 42
    assert table.counter_dec(b"c", b"f:n", value=2) == 40
    assert table.counter_get(b"c", b"f:n") == 40
    table.counter_set(b"c", b"f:n", -7)
    assert table.counter_get(b"c", b"f:n") == -7
    assert table.row(b"c") == {b"f:n": struct.pack(">q", -7)}
    table.put(b"c", {b"f:s": b"short"})
    with pytest.raises(Hbase.IOError, match="Field is not a long, it's 5 bytes wide"):
        table.counter_inc(b"c", b"f:s")


@pytest.mark.parametrize(
    ("transport", "protocol"), [("framed", "binary"), ("buffered", "compact"), ("framed", "compact")]
)
def test_transports_and_protocols(minicluster: MiniClusterProcess, transport: str, protocol: str) -> None:
    host, port = minicluster.thrift
    c = happybase.Connection(host, port, transport=transport, protocol=protocol)
    c.create_table(f"t_{transport}_{protocol}", {"f": {}})
    t = c.table(f"t_{transport}_{protocol}")
    t.put(b"r", {b"f:q": b"v"})
    assert t.row(b"r") == {b"f:q": b"v"}
    assert [k for k, _ in t.scan()] == [b"r"]
    c.close()


def test_scanner_errors(twin: tuple[Twin, Twin, bytes]) -> None:
    _, client, _ = twin
    with pytest.raises(Hbase.IllegalArgument, match="scanner ID is invalid"):
        client.scannerGetList(999, 1)
    with pytest.raises(Hbase.IllegalArgument):
        client.scannerClose(999)


def test_garbage_on_the_socket_does_not_crash_the_server(
    minicluster: MiniClusterProcess, conn: happybase.Connection
) -> None:
    import socket

    host, port = minicluster.thrift
    with socket.create_connection((host, port)) as s:
        s.sendall(b"\x80\x01\x00\x01garbage" * 3)
        s.settimeout(2)
        with contextlib.suppress(TimeoutError, OSError):
            s.recv(100)
    conn.create_table("still", {"f": {}})
    assert b"still" in conn.tables()


@pytest.mark.parametrize(
    ("table_name", "family", "scope", "message"),
    [
        ("t", "r", "x", "REPLICATION_SCOPE of t:r must be a number (0 or 1), got 'x'"),
        ("t", "r", 5, "replication scope must be 0 or 1, got 5"),
        ("nope", "r", 1, "table nope does not exist"),
        ("t", "zz", 1, "has no column family b'zz'"),
    ],
)
def test_set_scope_names_what_is_wrong(
    minicluster: MiniClusterProcess,
    conn: happybase.Connection,
    table_name: str,
    family: str,
    scope: object,
    message: str,
) -> None:
    conn.create_table("t", {"r": {}})
    with pytest.raises(MiniClusterError, match=re.escape(message)):
        AdminClient(minicluster.admin).set_scope(table_name, family, scope)  # type: ignore[arg-type]
    assert AdminClient(minicluster.admin).info()["tables"][0]["families"]["r"]["scope"] == 0  # nothing changed
