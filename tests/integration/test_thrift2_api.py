"""Thrift2 (THBaseService) over TCP: reads, writes with per-cell timestamps, the four delete
types (what a reader sees and the marker in the WAL), ``_cs.id``, atomic row mutations,
check-and-mutate, scanners, admin calls, happybase on the same cluster, and bad input answered
with ``TIOError``. Each call is made to real HBase 2.6's Thrift2 server and to the minicluster's
alike (:class:`twins.Twin`), and each WAL entry the call logged is read from both clusters' WALs:
HBase is the reference, and every assert here holds for both. Where both refuse a call, the
minicluster's error is the one checked, for its message names the thing. Region locations and
the ports' serving modes are the minicluster's own."""

from __future__ import annotations

import json
import re
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import happybase
import pytest
from real_hbase import all_wal_entries, cluster, thrift2_client, unique
from thriftpy2.protocol import TBinaryProtocolFactory, TCompactProtocolFactory
from thriftpy2.rpc import make_client
from thriftpy2.thrift import TApplicationException
from thriftpy2.transport import TBufferedTransportFactory, TFramedTransportFactory, TTransportException
from twins import Twin, now_free
from waiting import wait_until

from walship.cli import main
from walship.errors import MiniClusterError
from walship.thrift.hbase2 import hbase2
from walship.wal import CellType, WalEntry, WalReader, parse_wal_name
from walship_testing.harness import HBaseProcess
from walship_testing.minicluster import AdminClient, encode_cluster_ids
from walship_testing.minicluster.process import MiniClusterProcess

pytestmark = pytest.mark.integration

Factory = Callable[..., MiniClusterProcess]
T = hbase2
DT = hbase2.TDeleteType
OP = hbase2.TCompareOperator
FOREVER = 2**31 - 1
#: What a Thrift2 server raises to a client.
ANSWERED = (T.TIOError, T.TIllegalArgument, TApplicationException)
Hbase = __import__("Hbase_thrift")


# -- helpers -------------------------------------------------------------------------------------


def client_for(mc: MiniClusterProcess, **factories: Any) -> Any:
    host, port = mc.thrift2
    return make_client(T.THBaseService, host, port, timeout=30000, **factories)


@dataclass
class Both:
    """Real HBase (cluster B of the harness, which no test ships from) and the test's
    minicluster: the twin Thrift2 client ``c`` and each cluster, for its WALs."""

    c: Any
    real: HBaseProcess
    mc: MiniClusterProcess


@pytest.fixture
def both(real_hbase: tuple[HBaseProcess, HBaseProcess], minicluster: MiniClusterProcess) -> Iterator[Both]:
    twin = Twin(thrift2_client(real_hbase[1]), client_for(minicluster), ANSWERED, minicluster_errors=True)
    yield Both(twin, real_hbase[1], minicluster)
    twin.real.close()
    twin.mini.close()


def tname(name: str | bytes) -> Any:
    name = name.decode() if isinstance(name, bytes) else name
    ns, sep, qualifier = name.rpartition(":")
    return T.TTableName(ns=ns.encode() if sep else None, qualifier=qualifier.encode())


def create(client: Any, name: str | bytes, **families: dict[str, Any]) -> None:
    columns = [T.TColumnFamilyDescriptor(name=f.encode(), **opts) for f, opts in families.items()]
    client.createTable(T.TTableDescriptor(tableName=tname(name), columns=columns), None)


def cv(family: bytes, qualifier: bytes, value: bytes, ts: int | None = None) -> Any:
    return T.TColumnValue(family=family, qualifier=qualifier, value=value, timestamp=ts)


def put(client: Any, table: bytes, row: bytes, *values: Any, ts: int | None = None, **kw: Any) -> None:
    client.put(table, T.TPut(row=row, columnValues=list(values), timestamp=ts, **kw))


def versions(client: Any, table: bytes, row: bytes, family: bytes, qualifier: bytes) -> list[tuple[bytes, int]]:
    """(value, timestamp) of every visible version of one column, newest first."""
    got = client.get(table, T.TGet(row=row, columns=[T.TColumn(family, qualifier)], maxVersions=100))
    return [(c.value, c.timestamp) for c in got.columnValues]


def mini_entries(mc: MiniClusterProcess, table: bytes) -> list[WalEntry]:
    """Every non-meta WAL entry of ``table`` the minicluster logged (current WALs and archived)."""
    root = mc.data_dir
    files = [p for p in (root / "WALs").rglob("*") if p.is_file()] + list((root / "oldWALs").iterdir())
    out = []
    for path in sorted(files, key=lambda p: parse_wal_name(p.name)):
        with open(path, "rb") as f:
            out.extend(e for e in WalReader(f, str(path)).entries() if not e.is_meta and e.key.table == table)
    return sorted(out, key=lambda e: e.key.sequence_id)


def _logged_as(entries: list[WalEntry]) -> list[Any]:
    return [(cells_of([e]), e.key.cluster_ids, e.key.scopes) for e in entries]


def logged(b: Both, table: bytes) -> list[WalEntry]:
    """Every non-meta WAL entry of ``table`` so far, in order: HBase's, once the minicluster
    logged the same (cells, cluster ids, scopes; the timestamps a server chose read alike)."""
    real = sorted(
        (e for e in all_wal_entries(cluster(b.real, table.decode())) if not e.is_meta and e.key.table == table),
        key=lambda e: e.key.sequence_id,
    )
    mini = mini_entries(b.mc, table)
    assert now_free(_logged_as(mini)) == now_free(_logged_as(real)), (
        f"the WAL entries of {table!r}:\n  HBase       {_logged_as(real)}\n  minicluster {_logged_as(mini)}"
    )
    return real


def cells_of(entries: list[WalEntry]) -> list[tuple[bytes, bytes, bytes, int, int]]:
    return [(c.row, c.family, c.qualifier, c.timestamp, int(c.type)) for e in entries for c in e.cells]


def now_ms() -> int:
    return int(time.time() * 1000)


@pytest.fixture
def t(both: Both) -> bytes:
    """A table of the test's own on both clusters: family f keeps 5 versions, g 1."""
    name = unique("t")
    create(both.c, name, f={"maxVersions": 5}, g={})
    return name.encode()


# -- reads and writes ----------------------------------------------------------------------------


def test_put_get_per_cell_timestamps_and_versions(both: Both, t: bytes) -> None:
    c = both.c
    put(c, t, b"r", cv(b"f", b"a", b"v10", 10), cv(b"f", b"a", b"v20", 20), cv(b"g", b"b", b"w"), ts=15)
    before = now_ms()
    put(c, t, b"r", cv(b"f", b"n", b"now"))
    after = now_ms()
    assert versions(c, t, b"r", b"f", b"a") == [(b"v20", 20), (b"v10", 10)]
    assert versions(c, t, b"r", b"g", b"b") == [(b"w", 15)]
    ((value, ts),) = versions(c, t, b"r", b"f", b"n")
    assert value == b"now" and before <= ts <= after
    entries = logged(both, t)
    assert cells_of(entries) == [
        (b"r", b"f", b"a", 10, CellType.Put),
        (b"r", b"f", b"a", 20, CellType.Put),
        (b"r", b"g", b"b", 15, CellType.Put),
        (b"r", b"f", b"n", ts, CellType.Put),
    ]
    assert [e.key.cluster_ids for e in entries] == [(), ()]

    whole = c.get(t, T.TGet(row=b"r"))  # one version per column, in family/qualifier order
    assert whole.row == b"r" and not whole.partial and not whole.stale
    assert [(v.family, v.qualifier, v.value, v.type) for v in whole.columnValues] == [
        (b"f", b"a", b"v20", CellType.Put),
        (b"f", b"n", b"now", CellType.Put),
        (b"g", b"b", b"w", CellType.Put),
    ]
    exact = c.get(t, T.TGet(row=b"r", columns=[T.TColumn(b"f", b"a")], timestamp=10))
    assert [(v.value, v.timestamp) for v in exact.columnValues] == [(b"v10", 10)]
    ranged = c.get(t, T.TGet(row=b"r", timeRange=T.TTimeRange(11, 21), maxVersions=5))
    assert [(v.qualifier, v.timestamp) for v in ranged.columnValues] == [(b"a", 20), (b"b", 15)]
    family_only = c.get(t, T.TGet(row=b"r", columns=[T.TColumn(b"g")]))
    assert [v.qualifier for v in family_only.columnValues] == [b"b"]
    filtered = c.get(t, T.TGet(row=b"r", filterString=b"ValueFilter(=, 'binary:w')"))
    assert [v.value for v in filtered.columnValues] == [b"w"]

    missing = c.get(t, T.TGet(row=b"nope"))
    assert missing.row is None and missing.columnValues == []
    assert c.exists(t, T.TGet(row=b"r")) is True
    assert c.exists(t, T.TGet(row=b"nope")) is False
    assert c.exists(t, T.TGet(row=b"r", columns=[T.TColumn(b"g", b"zz")])) is False
    many = c.getMultiple(t, [T.TGet(row=b"nope"), T.TGet(row=b"r", columns=[T.TColumn(b"g", b"b")])])
    assert [r.row for r in many] == [None, b"r"] and many[1].columnValues[0].value == b"w"

    c.putMultiple(t, [T.TPut(row=b"m%d" % i, columnValues=[cv(b"f", b"q", b"%d" % i, 7)]) for i in range(3)])
    assert [versions(c, t, b"m%d" % i, b"f", b"q") for i in range(3)] == [[(b"%d" % i, 7)] for i in range(3)]
    assert len(logged(both, t)) == 3  # one WAL entry for putMultiple's rows of one region, as HBase's batchMutate


# the row holds f:a at 10, 20, 30; f:b at 10, 20; g:c at 20
DELETE_CASES = [
    pytest.param(
        DT.DELETE_COLUMN,
        T.TColumn(b"f", b"a", 20),
        (b"f", b"a", 20, CellType.Delete),
        {(b"f", b"a"): [30, 10], (b"f", b"b"): [20, 10], (b"g", b"c"): [20]},
        id="DELETE_COLUMN",
    ),
    pytest.param(
        DT.DELETE_COLUMNS,
        T.TColumn(b"f", b"a", 20),
        (b"f", b"a", 20, CellType.DeleteColumn),
        {(b"f", b"a"): [30], (b"f", b"b"): [20, 10], (b"g", b"c"): [20]},
        id="DELETE_COLUMNS",
    ),
    pytest.param(
        DT.DELETE_FAMILY,
        T.TColumn(b"f", None, 20),
        (b"f", b"", 20, CellType.DeleteFamily),
        {(b"f", b"a"): [30], (b"f", b"b"): [], (b"g", b"c"): [20]},
        id="DELETE_FAMILY",
    ),
    pytest.param(
        DT.DELETE_FAMILY_VERSION,
        T.TColumn(b"f", None, 20),
        (b"f", b"", 20, CellType.DeleteFamilyVersion),
        {(b"f", b"a"): [30, 10], (b"f", b"b"): [10], (b"g", b"c"): [20]},
        id="DELETE_FAMILY_VERSION",
    ),
]


def fill_delete_row(c: Any, t: bytes) -> None:
    put(c, t, b"r", cv(b"f", b"a", b"a10", 10), cv(b"f", b"b", b"b10", 10))
    put(c, t, b"r", cv(b"f", b"a", b"a20", 20), cv(b"f", b"b", b"b20", 20), cv(b"g", b"c", b"c20", 20))
    put(c, t, b"r", cv(b"f", b"a", b"a30", 30))


def visible(c: Any, t: bytes) -> dict[tuple[bytes, bytes], list[int]]:
    return {col: [ts for _, ts in versions(c, t, b"r", *col)] for col in ((b"f", b"a"), (b"f", b"b"), (b"g", b"c"))}


@pytest.mark.parametrize(("delete_type", "column", "marker", "expected"), DELETE_CASES)
def test_each_delete_type_its_effect_and_its_wal_marker(
    both: Both,
    t: bytes,
    delete_type: int,
    column: Any,
    marker: tuple[bytes, bytes, int, int],
    expected: dict[tuple[bytes, bytes], list[int]],
) -> None:
    fill_delete_row(both.c, t)
    both.c.deleteSingle(t, T.TDelete(row=b"r", columns=[column], deleteType=delete_type))
    assert visible(both.c, t) == expected
    assert cells_of(logged(both, t)[-1:]) == [(b"r", *marker)]


def test_a_delete_without_columns_deletes_the_whole_row(both: Both, t: bytes) -> None:
    c = both.c
    fill_delete_row(c, t)
    c.deleteSingle(t, T.TDelete(row=b"r", timestamp=20))
    assert visible(c, t) == {(b"f", b"a"): [30], (b"f", b"b"): [], (b"g", b"c"): []}
    assert cells_of(logged(both, t)[-1:]) == [
        (b"r", b"f", b"", 20, CellType.DeleteFamily),
        (b"r", b"g", b"", 20, CellType.DeleteFamily),
    ]
    before = now_ms()
    c.deleteSingle(t, T.TDelete(row=b"r"))
    after = now_ms()
    assert visible(c, t) == {(b"f", b"a"): [], (b"f", b"b"): [], (b"g", b"c"): []}
    markers = cells_of(logged(both, t)[-1:])
    assert [(m[1], m[4]) for m in markers] == [(b"f", CellType.DeleteFamily), (b"g", CellType.DeleteFamily)]
    assert all(before <= m[3] <= after for m in markers)


def test_delete_column_without_a_timestamp_deletes_only_the_newest_version(both: Both, t: bytes) -> None:
    c = both.c
    fill_delete_row(c, t)
    newest = T.TDelete(row=b"r", columns=[T.TColumn(b"f", b"a")], deleteType=DT.DELETE_COLUMN)
    c.deleteSingle(t, newest)
    assert visible(c, t)[(b"f", b"a")] == [20, 10]
    assert cells_of(logged(both, t)[-1:]) == [(b"r", b"f", b"a", 30, CellType.Delete)]  # the latest cell's ts
    c.deleteSingle(t, newest)
    assert visible(c, t)[(b"f", b"a")] == [10]
    assert cells_of(logged(both, t)[-1:]) == [(b"r", b"f", b"a", 20, CellType.Delete)]
    # two in one delete: the newest two versions of f:b
    twice = T.TDelete(row=b"r", columns=[T.TColumn(b"f", b"b"), T.TColumn(b"f", b"b")], deleteType=DT.DELETE_COLUMN)
    c.deleteSingle(t, twice)
    assert visible(c, t)[(b"f", b"b")] == []
    assert [m[3] for m in cells_of(logged(both, t)[-1:])] == [20, 10]
    # no version to delete: now
    before = now_ms()
    c.deleteSingle(t, T.TDelete(row=b"r", columns=[T.TColumn(b"f", b"none")], deleteType=DT.DELETE_COLUMN))
    ((_, _, _, ts, kind),) = cells_of(logged(both, t)[-1:])
    assert kind == CellType.Delete and before <= ts <= now_ms()
    # with columns, the delete's own timestamp is not used (HBase 2.6's deleteFromThrift builds
    # the Delete without it): a column without one deletes its latest version, 20, not 5
    c.deleteSingle(t, T.TDelete(row=b"r", columns=[T.TColumn(b"g", b"c")], timestamp=5, deleteType=DT.DELETE_COLUMN))
    assert cells_of(logged(both, t)[-1:]) == [(b"r", b"g", b"c", 20, CellType.Delete)]
    assert visible(c, t)[(b"g", b"c")] == []


def test_delete_columns_and_family_without_a_timestamp_use_now(both: Both, t: bytes) -> None:
    c = both.c
    fill_delete_row(c, t)
    before = now_ms()
    c.deleteSingle(t, T.TDelete(row=b"r", columns=[T.TColumn(b"f", b"a")]))  # default: DELETE_COLUMNS
    c.deleteSingle(t, T.TDelete(row=b"r", columns=[T.TColumn(b"g")], deleteType=DT.DELETE_FAMILY))
    after = now_ms()
    (col,), (fam,) = (e.cells for e in logged(both, t)[-2:])
    assert (col.type, col.qualifier, fam.type, fam.family) == (CellType.DeleteColumn, b"a", CellType.DeleteFamily, b"g")
    assert before <= col.timestamp <= after and before <= fam.timestamp <= after
    assert visible(c, t) == {(b"f", b"a"): [], (b"f", b"b"): [20, 10], (b"g", b"c"): []}
    assert c.deleteMultiple(t, [T.TDelete(row=b"r"), T.TDelete(row=b"other")]) == []
    assert visible(c, t) == {(b"f", b"a"): [], (b"f", b"b"): [], (b"g", b"c"): []}


def test_cs_id_sets_the_wal_key_cluster_ids(both: Both, t: bytes) -> None:
    c = both.c
    ids = [uuid.uuid4(), uuid.uuid4()]
    attrs = {b"_cs.id": encode_cluster_ids(ids)}
    put(c, t, b"r", cv(b"f", b"a", b"v", 5), attributes=attrs)
    c.deleteSingle(t, T.TDelete(row=b"r", columns=[T.TColumn(b"f", b"a", 5)], attributes=attrs))
    other = {b"_cs.id": encode_cluster_ids(ids[:1])}
    c.mutateRow(
        t,
        T.TRowMutations(
            row=b"r",
            mutations=[
                T.TMutation(put=T.TPut(row=b"r", columnValues=[cv(b"f", b"b", b"x", 6)], attributes=other)),
                T.TMutation(deleteSingle=T.TDelete(row=b"r", columns=[T.TColumn(b"g", b"c", 6)], attributes=attrs)),
            ],
        ),
    )
    put(c, t, b"r", cv(b"f", b"c", b"local", 7))
    assert [e.key.cluster_ids for e in logged(both, t)] == [tuple(ids), tuple(ids), tuple(ids[:1]), ()]


def test_mutate_row_is_one_atomic_wal_entry(both: Both, t: bytes) -> None:
    c = both.c
    put(c, t, b"r", cv(b"f", b"b", b"old", 5))
    c.mutateRow(
        t,
        T.TRowMutations(
            row=b"r",
            mutations=[
                T.TMutation(put=T.TPut(row=b"r", columnValues=[cv(b"g", b"x", b"1", 8), cv(b"f", b"a", b"2", 9)])),
                T.TMutation(deleteSingle=T.TDelete(row=b"r", columns=[T.TColumn(b"f", b"b", 5)])),
            ],
        ),
    )
    assert cells_of(logged(both, t)[1:]) == [
        (b"r", b"f", b"a", 9, CellType.Put),  # a mutation's cells in family order, as HBase's family map
        (b"r", b"g", b"x", 8, CellType.Put),
        (b"r", b"f", b"b", 5, CellType.DeleteColumn),
    ]
    assert versions(c, t, b"r", b"f", b"b") == [] and versions(c, t, b"r", b"g", b"x") == [(b"1", 8)]
    wrong = T.TRowMutations(
        row=b"r",
        mutations=[
            T.TMutation(put=T.TPut(row=b"r", columnValues=[cv(b"f", b"z", b"1")])),
            T.TMutation(put=T.TPut(row=b"s", columnValues=[cv(b"f", b"z", b"1")])),
        ],
    )
    with pytest.raises(T.TIOError, match=r"TRowMutations of row b'r': a mutation of row b's'"):
        c.mutateRow(t, wrong)
    bad_family = T.TRowMutations(
        row=b"r",
        mutations=[
            T.TMutation(put=T.TPut(row=b"r", columnValues=[cv(b"f", b"z", b"1")])),
            T.TMutation(put=T.TPut(row=b"r", columnValues=[cv(b"nope", b"z", b"1")])),
        ],
    )
    with pytest.raises(T.TIOError, match=r"no column family b'nope' \(row b'r'\)"):
        c.mutateRow(t, bad_family)
    assert len(logged(both, t)) == 2 and versions(c, t, b"r", b"f", b"z") == []  # all or nothing


CHECKS = [
    # (operator, given value, expected) against the stored value b"m"; HBase compares given to stored
    (OP.LESS, b"a", True),
    (OP.LESS, b"m", False),
    (OP.LESS_OR_EQUAL, b"m", True),
    (OP.LESS_OR_EQUAL, b"z", False),
    (OP.EQUAL, b"m", True),
    (OP.EQUAL, b"n", False),
    (OP.NOT_EQUAL, b"n", True),
    (OP.NOT_EQUAL, b"m", False),
    (OP.GREATER_OR_EQUAL, b"m", True),
    (OP.GREATER_OR_EQUAL, b"a", False),
    (OP.GREATER, b"z", True),
    (OP.GREATER, b"m", False),
    (OP.EQUAL, b"", False),  # an empty value: the column must be missing or empty
    (OP.NOT_EQUAL, b"", True),  # ... or, NOT_EQUAL, present and not empty (HBASE-26742)
]


@pytest.mark.parametrize(("op", "value", "expected"), CHECKS)
def test_check_and_mutate(both: Both, t: bytes, op: int, value: bytes | None, expected: bool) -> None:
    c = both.c
    put(c, t, b"r", cv(b"f", b"a", b"m", 5))
    then = T.TRowMutations(
        row=b"r",
        mutations=[
            T.TMutation(put=T.TPut(row=b"r", columnValues=[cv(b"f", b"done", b"yes", 6)])),
            T.TMutation(deleteSingle=T.TDelete(row=b"r", columns=[T.TColumn(b"f", b"a")])),
        ],
    )
    assert c.checkAndMutate(t, b"r", b"f", b"a", op, value, then) is expected
    assert versions(c, t, b"r", b"f", b"done") == ([(b"yes", 6)] if expected else [])
    assert len(logged(both, t)) == (2 if expected else 1)


def test_check_and_mutate_on_a_missing_column(both: Both, t: bytes) -> None:
    c = both.c
    then = T.TRowMutations(row=b"r", mutations=[T.TMutation(put=T.TPut(row=b"r", columnValues=[cv(b"f", b"a", b"1")]))])
    assert c.checkAndMutate(t, b"r", b"f", b"a", OP.EQUAL, b"x", then) is False
    assert c.checkAndMutate(t, b"r", b"f", b"a", OP.NOT_EQUAL, b"", then) is False
    assert c.checkAndMutate(t, b"r", b"f", b"a", OP.EQUAL, b"", then) is True  # create if absent
    assert c.checkAndMutate(t, b"r", b"f", b"a", OP.EQUAL, b"", then) is False  # now it exists
    assert [v for v, _ in versions(c, t, b"r", b"f", b"a")] == [b"1"]
    with pytest.raises(T.TIOError, match="NO_OP"):
        c.checkAndMutate(t, b"r", b"f", b"a", OP.NO_OP, b"1", then)
    with pytest.raises(T.TIOError, match=r"no column family b'x' \(row b'r'\)"):
        c.checkAndMutate(t, b"r", b"x", b"a", OP.EQUAL, b"", then)
    with pytest.raises(T.TIOError, match=r"checkAndMutate of row b'q': the mutations are of row b'r'"):
        c.checkAndMutate(t, b"q", b"f", b"a", OP.EQUAL, b"", then)
    # no value at all: HBase 2.6's handler reads the missing buffer, an internal error on both
    for op in (OP.EQUAL, OP.NOT_EQUAL):
        with pytest.raises(TApplicationException, match="Internal error processing checkAndMutate"):
            c.checkAndMutate(t, b"r", b"f", b"a", op, None, then)
    assert len(logged(both, t)) == 1


# -- scanners ------------------------------------------------------------------------------------


def rows_of(results: list[Any]) -> list[bytes]:
    return [r.row for r in results]


def scanned(c: Twin, table: bytes, scan: Any, *pages: int) -> list[list[Any]]:
    """``scan`` opened on both clusters (their scanner ids differ), read in pages of the sizes
    given and closed: HBase's pages, once the minicluster's are the same."""
    ids = (c.real.openScanner(table, scan), c.mini.openScanner(table, scan))
    out = []
    for size in pages:
        real, mini = (side.getScannerRows(sid, size) for side, sid in zip((c.real, c.mini), ids, strict=True))
        assert mini == real, f"a page of {size} of {scan}:\n  HBase       {real}\n  minicluster {mini}"
        out.append(real)
    for side, sid in zip((c.real, c.mini), ids, strict=True):
        side.closeScanner(sid)
    return out


def test_scanners(both: Both, t: bytes) -> None:
    c = both.c
    c.putMultiple(
        t,
        [
            T.TPut(row=b"r%02d" % i, columnValues=[cv(b"f", b"a", b"%d" % i, 10), cv(b"g", b"b", b"x", 10)])
            for i in range(25)
        ],
    )
    put(c, t, b"r03", cv(b"f", b"a", b"newer", 20))
    pages = scanned(c, t, T.TScan(), 10, 10, 10, 10)
    assert [len(p) for p in pages] == [10, 10, 5, 0]
    assert rows_of([r for p in pages for r in p]) == [b"r%02d" % i for i in range(25)]
    assert [v.value for v in pages[0][3].columnValues] == [b"newer", b"x"]  # maxVersions defaults to 1
    # reading a closed or unknown scanner is refused alike (the minicluster's message says which
    # id); closing one again is let be, as a scanner may have expired
    for side, message in ((c.real, "Invalid scanner Id"), (c.mini, "Invalid scanner Id {}")):
        sid = side.openScanner(t, T.TScan())
        side.closeScanner(sid)
        side.closeScanner(sid)
        for unknown in (sid, 4242):
            with pytest.raises(T.TIllegalArgument) as refused:
                side.getScannerRows(unknown, 1)
            assert refused.value.message == message.format(unknown)
    # a scanner of a table that does not exist opens; its first read fails
    for side in (c.real, c.mini):
        sid = side.openScanner(b"nope", T.TScan())
        with pytest.raises(T.TIOError, match="nope"):
            side.getScannerRows(sid, 1)

    def scan(numRows: int = 100, **kw: Any) -> list[Any]:
        return c.getScannerResults(t, T.TScan(**kw), numRows)

    assert rows_of(scan(startRow=b"r05", stopRow=b"r08")) == [b"r05", b"r06", b"r07"]
    assert rows_of(scan(startRow=b"r07", stopRow=b"r04", reversed=True)) == [b"r07", b"r06", b"r05"]
    assert rows_of(scan(reversed=True, limit=3)) == [b"r24", b"r23", b"r22"]
    assert rows_of(scan(limit=4, numRows=2)) == [b"r00", b"r01"]
    assert rows_of(scan(filterString=b"PrefixFilter('r1')")) == [b"r%02d" % i for i in range(10, 20)]
    three = scan(startRow=b"r03", stopRow=b"r04", maxVersions=5, columns=[T.TColumn(b"f", b"a")])
    assert [(v.value, v.timestamp) for v in three[0].columnValues] == [(b"newer", 20), (b"3", 10)]
    assert rows_of(scan(timeRange=T.TTimeRange(15, 25))) == [b"r03"]
    assert [len(r.columnValues) for r in scan(numRows=7, columns=[T.TColumn(b"g")])] == [1] * 7
    parts = scan(startRow=b"r00", stopRow=b"r01", batchSize=1)
    assert [(r.row, r.partial, [v.family for v in r.columnValues]) for r in parts] == [
        (b"r00", True, [b"f"]),
        (b"r00", False, [b"g"]),
    ]
    assert [rows_of(p) for p in scanned(c, t, T.TScan(startRow=b"r20", limit=2), 10, 10)] == [[b"r20", b"r21"], []]
    assert [rows_of(p) for p in scanned(c, t, T.TScan(startRow=b"r20"), 2, 2, 10)] == [
        [b"r20", b"r21"],
        [b"r22", b"r23"],
        [b"r24"],
    ]


# -- regions and admin ---------------------------------------------------------------------------


def test_region_locations_match_the_admin_endpoint(minicluster: MiniClusterProcess) -> None:
    """Where a region is served is the cluster's own: the minicluster's answer is checked
    against its admin endpoint."""
    c = client_for(minicluster)
    create(c, "t", f={})
    create(c, "ns1:u", f={})
    info = AdminClient(minicluster.admin).info()
    owners = {enc: rs["name"] for rs in info["regionservers"] for enc in rs["regions"]}
    for name, key in ((b"t", "t"), (b"ns1:u", "ns1:u")):
        (location,) = c.getAllRegionLocations(name)
        (encoded,) = next(t["regions"] for t in info["tables"] if t["name"] == key)
        server = location.serverName
        assert f"{server.hostName},{server.port},{server.startCode}" == owners[encoded]
        region = location.regionInfo
        assert (region.tableName, region.startKey, region.endKey) == (name, b"", b"")
        assert (region.offline, region.split, region.replicaId) == (False, False, 0)
        assert region.regionId > 0
        assert c.getRegionLocation(name, b"any-row", False) == location
    c.close()


def test_admin_calls(both: Both) -> None:
    c = both.c
    ns = unique("ns")
    both.real.call("create_namespace", namespace=ns)  # the minicluster makes a namespace as a table needs it
    nst, plain = f"{ns}:t", unique("plain")
    assert c.getThriftServerType() == T.TThriftServerType.TWO
    assert c.tableExists(tname(nst)) is False
    create(c, nst, d={})
    custom = T.TColumnFamilyDescriptor(
        name=b"c",
        maxVersions=4,
        minVersions=1,
        scope=1,
        timeToLive=3600,
        keepDeletedCells=T.TKeepDeletedCells.TRUE,
        compressionType=T.TCompressionAlgorithm.GZ,
        bloomnFilterType=T.TBloomFilterType.ROWCOL,
        inMemory=True,
        attributes={b"k": b"\x00v"},
        configuration={"hbase.hstore.blockingStoreFiles": "20"},
    )
    c.createTable(T.TTableDescriptor(tableName=tname(plain), columns=[custom], attributes={b"OWNER": b"me"}), None)
    assert c.tableExists(tname(nst)) and c.tableExists(T.TTableName(ns=b"default", qualifier=plain.encode()))

    desc = c.getTableDescriptor(tname(nst))
    assert (desc.tableName.ns, desc.tableName.qualifier) == (ns.encode(), b"t")
    (d,) = desc.columns
    # HBase's ColumnFamilyDescriptorBuilder defaults
    assert (d.name, d.maxVersions, d.minVersions, d.scope, d.timeToLive) == (b"d", 1, 0, 0, FOREVER)
    assert (d.blockSize, d.bloomnFilterType, d.compressionType, d.keepDeletedCells) == (
        65536,
        T.TBloomFilterType.ROW,
        T.TCompressionAlgorithm.NONE,
        T.TKeepDeletedCells.FALSE,
    )
    assert (d.blockCacheEnabled, d.inMemory, d.compressTags) == (True, False, True)
    described = c.getTableDescriptor(tname(plain))
    assert (described.tableName.ns, described.tableName.qualifier, described.attributes[b"OWNER"]) == (
        b"default",
        plain.encode(),
        b"me",
    )
    (p,) = described.columns
    assert (p.maxVersions, p.minVersions, p.scope, p.timeToLive, p.inMemory) == (4, 1, 1, 3600, True)
    assert (p.keepDeletedCells, p.compressionType, p.bloomnFilterType) == (
        T.TKeepDeletedCells.TRUE,
        T.TCompressionAlgorithm.GZ,
        T.TBloomFilterType.ROWCOL,
    )
    assert p.attributes[b"k"] == b"\x00v" and p.configuration == {"hbase.hstore.blockingStoreFiles": "20"}

    listed = c.getTableDescriptors([tname(plain), tname("missing"), tname(nst)])
    assert [x.tableName.qualifier for x in listed] == [plain.encode(), b"t"]
    assert [x.tableName.qualifier for x in c.getTableDescriptorsByPattern(f"{ns}:.*", False)] == [b"t"]
    assert [(n.ns, n.qualifier) for n in c.getTableNamesByPattern(f"{ns}:.*|{plain}", False)] == [
        (b"default", plain.encode()),  # by the name with its namespace
        (ns.encode(), b"t"),
    ]
    assert [n.qualifier for n in c.getTableNamesByPattern(f"default:{plain[:-2]}.*", True)] == [plain.encode()]
    assert c.getTableNamesByPattern("nothing", False) == []

    # enable/disable/delete, as HBase's Admin
    pb = plain.encode()
    assert c.isTableEnabled(tname(plain)) is True
    with pytest.raises(T.TIOError, match=f"table {plain} is already enabled"):
        c.enableTable(tname(plain))
    with pytest.raises(T.TIOError, match=f"table {plain} must be disabled before deleting it"):
        c.deleteTable(tname(plain))
    c.disableTable(tname(plain))
    assert c.isTableEnabled(tname(plain)) is False
    with pytest.raises(T.TIOError, match=f"table {plain} is disabled"):
        put(c, pb, b"r", cv(b"c", b"q", b"v"))
    with pytest.raises(T.TIOError, match=f"table {plain} is already disabled"):
        c.disableTable(tname(plain))
    c.enableTable(tname(plain))
    put(c, pb, b"r", cv(b"c", b"q", b"v", 1))
    assert [e.key.scopes for e in logged(both, pb)] == [{b"c": 1}]

    # families: add, then modify (the descriptor given replaces the family's, unset = default)
    c.addColumnFamily(tname(plain), T.TColumnFamilyDescriptor(name=b"n", maxVersions=2))
    put(c, pb, b"r", cv(b"n", b"q", b"1", 1), cv(b"n", b"q", b"2", 2), cv(b"n", b"q", b"3", 3))
    assert versions(c, pb, b"r", b"n", b"q") == [(b"3", 3), (b"2", 2)]
    # a time to live longer than the cells' age (their timestamps are 1-3 ms after 1970): the
    # minicluster keeps expired cells visible, where HBase hides them
    ttl = 2_000_000_000
    c.modifyColumnFamily(tname(plain), T.TColumnFamilyDescriptor(name=b"n", maxVersions=3, scope=1, timeToLive=ttl))
    put(c, pb, b"r", cv(b"n", b"q", b"4", 4))  # three kept now (HBase dropped "1" as its region reopened)
    assert versions(c, pb, b"r", b"n", b"q") == [(b"4", 4), (b"3", 3), (b"2", 2)]
    n = next(x for x in c.getTableDescriptor(tname(plain)).columns if x.name == b"n")
    assert (n.maxVersions, n.scope, n.timeToLive, n.blockSize) == (3, 1, ttl, 65536)
    c.modifyColumnFamily(tname(plain), T.TColumnFamilyDescriptor(name=b"c", maxVersions=4))  # scope back to 0
    put(c, pb, b"r2", cv(b"c", b"q", b"v", 1), cv(b"n", b"q", b"v", 1))
    assert logged(both, pb)[-1].key.scopes == {b"n": 1}
    families = next(t for t in AdminClient(both.mc.admin).info()["tables"] if t["name"] == plain)["families"]
    assert families == {"c": {"scope": 0, "max_versions": 4}, "n": {"scope": 1, "max_versions": 3}}

    c.disableTable(tname(plain))
    c.deleteTable(tname(plain))
    assert c.tableExists(tname(plain)) is False
    create(c, plain, c={})  # a new table of that name starts empty, with a fresh descriptor
    fresh = c.getTableDescriptor(tname(plain))
    assert b"OWNER" not in fresh.attributes and [x.name for x in fresh.columns] == [b"c"]
    assert c.get(pb, T.TGet(row=b"r")).columnValues == []


def test_happybase_and_thrift2_share_the_cluster(both: Both) -> None:
    c = both.c
    conns = [happybase.Connection(*both.real.thrift, timeout=60000), happybase.Connection(*both.mc.thrift)]
    hb = Twin(*conns, (Hbase.IOError, Hbase.IllegalArgument, TApplicationException))
    name, made = unique("h"), unique("k")
    try:
        hb.create_table(name, {"f": {"max_versions": 3}})
        h = name.encode()
        put(c, h, b"r", cv(b"f", b"a", b"v1", 100), cv(b"f", b"a", b"v2", 200))
        table = Twin(*(conn.table(name) for conn in conns), (Hbase.IOError,))
        assert table.cells(b"r", b"f:a", versions=5, include_timestamp=True) == [(b"v2", 200), (b"v1", 100)]
        c.deleteSingle(h, T.TDelete(row=b"r", columns=[T.TColumn(b"f", b"a", 200)], deleteType=DT.DELETE_COLUMN))
        assert table.row(b"r", include_timestamp=True) == {b"f:a": (b"v1", 100)}
        table.put(b"s", {b"f:b": b"from-happybase"}, timestamp=300)
        got = c.get(h, T.TGet(row=b"s"))
        assert [(v.qualifier, v.value, v.timestamp) for v in got.columnValues] == [(b"b", b"from-happybase", 300)]
        (f,) = c.getTableDescriptor(tname(name)).columns  # created by Thrift1
        assert (f.name, f.maxVersions, f.timeToLive, f.scope) == (b"f", 3, FOREVER, 0)
        create(c, made, f={})
        for conn in conns:  # real HBase holds every test's tables
            assert made.encode() in conn.tables()
        assert Twin(*(conn.table(made) for conn in conns), (Hbase.IOError,)).families()[b"f"]["max_versions"] == 1
    finally:
        for conn in conns:
            conn.close()


# -- bad input -----------------------------------------------------------------------------------


def test_bad_input_is_answered_with_tioerror_naming_the_thing(both: Both, t: bytes) -> None:
    c = both.c
    name, v = t.decode(), unique("v")
    cases: list[tuple[Callable[[], Any], str]] = [
        (lambda: c.get(b"nope", T.TGet(row=b"r")), "^TableNotFoundError: table nope does not exist$"),
        (lambda: put(c, b"nope", b"r", cv(b"f", b"a", b"v")), "table nope does not exist"),
        (lambda: c.deleteSingle(b"nope", T.TDelete(row=b"r")), "table nope does not exist"),
        (lambda: c.getScannerResults(b"nope", T.TScan(), 1), "table nope does not exist"),
        (lambda: c.getTableDescriptor(tname("ns9:nope")), "table ns9:nope does not exist"),
        (lambda: c.isTableEnabled(tname("nope")), "table nope does not exist"),
        (lambda: put(c, t, b"row7", cv(b"zz", b"a", b"v")), rf"table {t!r} has no column family b'zz' \(row b'row7'\)"),
        (lambda: c.get(t, T.TGet(row=b"r", columns=[T.TColumn(b"zz")])), "has no column family b'zz'"),
        (lambda: put(c, t, b"r", cv(b"f", b"a", b"v", -5)), "timestamp cannot be negative, got -5"),
        (lambda: c.get(t, T.TGet(row=b"r", maxVersions=0)), "maxVersions must be >= 1"),
        (lambda: put(c, t, b"r", cv(b"f", b"a", b"v"), attributes={b"_cs.id": b"xx"}), "attribute _cs.id"),
        (lambda: create(c, name, f={}), f"table {name} exists already"),
        (lambda: create(c, v), "at least one column family"),
        (lambda: create(c, v, f={"scope": 5}), "family b'f': replication scope must be 0 or 1, got 5"),
        (lambda: create(c, v, f={"timeToLive": 0}), "family b'f': timeToLive must be positive"),
        (
            lambda: c.addColumnFamily(tname(name), T.TColumnFamilyDescriptor(name=b"h", scope=5)),
            "family b'h': replication scope must be 0 or 1, got 5",
        ),
        (
            lambda: c.modifyColumnFamily(tname(name), T.TColumnFamilyDescriptor(name=b"f", scope=5)),
            "family b'f': replication scope must be 0 or 1, got 5",
        ),
        (
            lambda: c.modifyColumnFamily(tname(name), T.TColumnFamilyDescriptor(name=b"zz")),
            f"table {t!r} has no column family b'zz'",
        ),
        (
            lambda: c.addColumnFamily(tname(name), T.TColumnFamilyDescriptor(name=b"f")),
            f"table {t!r} has a column family b'f' already",
        ),
        (lambda: c.addColumnFamily(tname("nope"), T.TColumnFamilyDescriptor(name=b"f")), "table nope does not exist"),
        (lambda: c.deleteTable(tname("nope")), "table nope does not exist"),
    ]
    for call, message in cases:
        with pytest.raises(T.TIOError) as error:
            call()
        assert re.search(message, error.value.message), (message, error.value.message)
    # what HBase's handler fails on inside: an internal error, which the minicluster's names
    failing: list[tuple[Callable[[], Any], str]] = [
        (
            lambda: c.deleteSingle(
                t, T.TDelete(row=b"r", columns=[T.TColumn(b"f")], deleteType=DT.DELETE_FAMILY_VERSION)
            ),
            "deleteSingle: TDelete of row b'r', family b'f': "
            "a timestamp is required for TDelete with deleteType DELETE_FAMILY_VERSION",
        ),
        (lambda: put(c, t, b"r"), "put: TPut of row b'r': no columns to insert"),
        (lambda: put(c, t, b"", cv(b"f", b"a", b"v")), "put: TPut: the row key must not be empty"),
        (
            lambda: c.get(t, T.TGet(row=b"r", timeRange=T.TTimeRange(9, 3))),
            "get: TTimeRange: maxStamp 3 is smaller than minStamp 9",
        ),
        (
            lambda: c.openScanner(t, T.TScan(filterString=b"NoSuchFilter(1)")),
            "openScanner: .*unknown filter 'NoSuchFilter'",
        ),
        (lambda: create(c, "bad/name", f={}), "createTable: invalid table name b'bad/name'"),
        (lambda: create(c, v, f={"maxVersions": 0}), "createTable: family b'f': maxVersions must be >= 1, got 0"),
        (lambda: c.getTableNamesByPattern("(", False), r"getTableNamesByPattern: invalid table name pattern '\('"),
    ]
    for call, message in failing:
        with pytest.raises(TApplicationException) as failed:
            call()
        assert re.match(f"Internal error processing {message}", failed.value.message), (message, failed.value.message)
    assert c.getThriftServerType() == T.TThriftServerType.TWO  # the connections survived all of it
    assert c.get(t, T.TGet(row=b"r")).columnValues == []  # and nothing was written
    assert c.tableExists(tname(v)) is False
    assert c.getAllRegionLocations(b"nope") == []  # no region of it in hbase:meta: no error


# -- serving -------------------------------------------------------------------------------------


def test_thrift2_port_modes_restart_and_info(minicluster_factory: Factory, capsys: pytest.CaptureFixture[str]) -> None:
    mc = minicluster_factory("M", thrift_transport="framed", thrift_protocol="compact")
    assert mc.ready["thrift_modes"] == "framed/compact" and mc.thrift2[1] != mc.thrift[1]
    framed = client_for(mc, trans_factory=TFramedTransportFactory(), proto_factory=TCompactProtocolFactory())
    create(framed, "t", f={})
    put(framed, b"t", b"r", cv(b"f", b"a", b"v", 1))
    framed.close()
    plain = client_for(mc, trans_factory=TBufferedTransportFactory(), proto_factory=TBinaryProtocolFactory())
    with pytest.raises((TTransportException, ConnectionError)):  # refused, as the Thrift1 port refuses it
        plain.getThriftServerType()
    plain.close()
    log = mc.data_dir.parent / "M.minicluster.log"
    wait_until(
        lambda: "refused: it speaks buffered/binary; this server accepts only framed/compact" in log.read_text(),
        what="the minicluster's warning about the buffered/binary client",
    )

    port = mc.thrift2[1]
    mc.stop()
    mc.start()
    assert mc.thrift2[1] == port  # kept on restart, like the Thrift1 port
    again = client_for(mc, trans_factory=TFramedTransportFactory(), proto_factory=TCompactProtocolFactory())
    assert [v.value for v in again.get(b"t", T.TGet(row=b"r")).columnValues] == [b"v"]
    again.close()

    assert main(["minicluster", "info", "--admin", mc.admin, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["endpoints"]["thrift2"] == f"{mc.thrift2[0]}:{port}"
    assert main(["minicluster", "info", "--admin", mc.admin]) == 0
    assert f"thrift2={mc.thrift2[0]}:{port}" in capsys.readouterr().out


def test_no_thrift2_port(minicluster_factory: Factory) -> None:
    mc = minicluster_factory("N", thrift2_port=None)
    assert mc.ready["thrift2"] is None
    with pytest.raises(MiniClusterError, match="serves no Thrift2"):
        _ = mc.thrift2
    hb = happybase.Connection(*mc.thrift)
    hb.create_table("t", {"f": {}})
    assert hb.tables() == [b"t"]
    hb.close()
