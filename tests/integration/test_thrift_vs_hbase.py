"""The embedded cluster held to real HBase: the same Thrift2 and Thrift1 calls made to real
HBase 2.6's Thrift servers and to the minicluster's, each answer compared with HBase's (HBase
is the reference, not an expectation written here). Every timestamp is explicit, so that the
answers are the same to the byte; where HBase raises, the minicluster must raise the same type."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import happybase
import pytest
from real_hbase import thrift2_client, unique
from thriftpy2.rpc import make_client
from thriftpy2.thrift import TApplicationException

from walship.thrift.hbase2 import hbase2 as T
from walship_testing.harness import HBaseProcess
from walship_testing.minicluster.process import MiniClusterProcess

pytestmark = pytest.mark.integration

DT = T.TDeleteType
OP = T.TCompareOperator


@dataclass
class Twin:
    """One Thrift2 client of real HBase and one of the minicluster, called alike."""

    real: Any
    mini: Any

    def call(self, method: str, *args: Any) -> Any:
        """The call on both: HBase's answer, once the minicluster's equals it (or both raised
        errors of one type: HBase's error is raised)."""
        answers = []
        for client in (self.real, self.mini):
            try:
                answers.append((getattr(client, method)(*args), None))
            except (T.TIOError, T.TIllegalArgument, TApplicationException) as exc:
                answers.append((None, exc))
        (real, real_exc), (mini, mini_exc) = answers
        assert type(mini_exc) is type(real_exc), f"{method}{args}: HBase {real_exc!r}, minicluster {mini_exc!r}"
        if real_exc is not None:
            raise real_exc
        assert mini == real, f"{method}{args}:\n  HBase       {real}\n  minicluster {mini}"
        return real


def table_name(name: str) -> Any:
    return T.TTableName(ns=None, qualifier=name.encode())


@pytest.fixture
def twin(
    real_hbase: tuple[HBaseProcess, HBaseProcess], minicluster: MiniClusterProcess
) -> Iterator[tuple[Twin, bytes]]:
    """Both clients and a table of the test's own on each (family f keeps 5 versions, g 1)."""
    real = thrift2_client(real_hbase[0])
    host, port = minicluster.thrift2
    mini = make_client(T.THBaseService, host, port, timeout=60000)
    both = Twin(real, mini)
    name = unique("ref")
    columns = [T.TColumnFamilyDescriptor(name=b"f", maxVersions=5), T.TColumnFamilyDescriptor(name=b"g", maxVersions=1)]
    both.call("createTable", T.TTableDescriptor(tableName=table_name(name), columns=columns), None)
    yield both, name.encode()
    real.close()
    mini.close()


def cv(family: bytes, qualifier: bytes, value: bytes, ts: int) -> Any:
    return T.TColumnValue(family=family, qualifier=qualifier, value=value, timestamp=ts)


def whole(both: Twin, table: bytes, *rows: bytes) -> list[Any]:
    """Every version of every cell of ``rows``, as both clusters answer it."""
    return list(both.call("getMultiple", table, [T.TGet(row=r, maxVersions=100) for r in rows]))


def test_puts_versions_and_gets_answer_as_hbase_does(twin: tuple[Twin, bytes]) -> None:
    both, t = twin
    for ts in (10, 20, 30, 40, 50, 60):
        both.call("put", t, T.TPut(row=b"r1", columnValues=[cv(b"f", b"a", b"v%d" % ts, ts), cv(b"g", b"b", b"w", ts)]))
    both.call("putMultiple", t, [T.TPut(row=b"r%d" % i, columnValues=[cv(b"f", b"", b"", 5)]) for i in range(2, 6)])
    rows = whole(both, t, b"r1", b"r2", b"nope")
    assert [len(r.columnValues) for r in rows] == [6, 1, 0]  # f keeps 5 versions, g 1; no row: empty
    both.call("get", t, T.TGet(row=b"r1", columns=[T.TColumn(b"f", b"a")], maxVersions=3))
    both.call("get", t, T.TGet(row=b"r1", timeRange=T.TTimeRange(20, 41), maxVersions=100))
    both.call("get", t, T.TGet(row=b"r1", timestamp=30))
    assert both.call("exists", t, T.TGet(row=b"r3")) is True
    assert both.call("exists", t, T.TGet(row=b"r9")) is False
    with pytest.raises(T.TIOError):
        both.call("put", t, T.TPut(row=b"r1", columnValues=[cv(b"x", b"a", b"v", 1)]))  # no family x
    with pytest.raises(T.TIOError):
        both.call("get", b"no_such_table", T.TGet(row=b"r1"))


@pytest.mark.parametrize(
    ("delete_type", "column"),
    [
        (DT.DELETE_COLUMN, T.TColumn(b"f", b"a", timestamp=30)),
        (DT.DELETE_COLUMNS, T.TColumn(b"f", b"a", timestamp=30)),
        (DT.DELETE_FAMILY, T.TColumn(b"f", timestamp=30)),
        (DT.DELETE_FAMILY_VERSION, T.TColumn(b"f", timestamp=30)),
        (DT.DELETE_COLUMN, T.TColumn(b"f", b"a")),  # no timestamp: the newest version
        (DT.DELETE_COLUMNS, T.TColumn(b"f", b"a")),  # no timestamp: now, every version
    ],
)
def test_each_delete_leaves_what_hbase_leaves(twin: tuple[Twin, bytes], delete_type: int, column: Any) -> None:
    both, t = twin
    for ts in (20, 30, 40):
        values = [cv(b"f", b"a", b"a%d" % ts, ts), cv(b"f", b"b", b"b%d" % ts, ts), cv(b"g", b"c", b"c", ts)]
        both.call("put", t, T.TPut(row=b"r", columnValues=values))
    both.call("deleteSingle", t, T.TDelete(row=b"r", columns=[column], deleteType=delete_type))
    whole(both, t, b"r")


def test_a_whole_row_delete_and_a_row_mutation_leave_what_hbase_leaves(twin: tuple[Twin, bytes]) -> None:
    both, t = twin
    for row in (b"a", b"b"):
        both.call("put", t, T.TPut(row=row, columnValues=[cv(b"f", b"q", b"1", 10), cv(b"g", b"q", b"2", 10)]))
    both.call("deleteSingle", t, T.TDelete(row=b"a", timestamp=10))
    mutations = [
        T.TMutation(put=T.TPut(row=b"b", columnValues=[cv(b"f", b"new", b"3", 20)])),
        T.TMutation(deleteSingle=T.TDelete(row=b"b", columns=[T.TColumn(b"g", b"q", timestamp=10)])),
    ]
    both.call("mutateRow", t, T.TRowMutations(row=b"b", mutations=mutations))
    assert [len(r.columnValues) for r in whole(both, t, b"a", b"b")] == [0, 2]
    both.call("deleteMultiple", t, [T.TDelete(row=b"b", columns=[T.TColumn(b"f")], timestamp=20)])
    whole(both, t, b"b")


@pytest.mark.parametrize(
    ("op", "value"),
    [(OP.EQUAL, b"m"), (OP.EQUAL, b"n"), (OP.LESS, b"a"), (OP.GREATER, b"z"), (OP.NOT_EQUAL, b"m"),
     (OP.EQUAL, b""), (OP.NOT_EQUAL, b"")],
)  # fmt: skip
def test_check_and_mutate_decides_as_hbase_does(twin: tuple[Twin, bytes], op: int, value: bytes | None) -> None:
    both, t = twin
    both.call("put", t, T.TPut(row=b"r", columnValues=[cv(b"f", b"a", b"m", 5)]))
    then = T.TRowMutations(
        row=b"r",
        mutations=[
            T.TMutation(put=T.TPut(row=b"r", columnValues=[cv(b"f", b"done", b"yes", 6)])),
            T.TMutation(deleteSingle=T.TDelete(row=b"r", columns=[T.TColumn(b"f", b"a", timestamp=5)])),
        ],
    )
    both.call("checkAndMutate", t, b"r", b"f", b"a", op, value, then)
    both.call("checkAndMutate", t, b"r", b"f", b"missing", op, value, then)
    whole(both, t, b"r")


def test_check_and_mutate_without_a_value_fails_as_hbase_does(twin: tuple[Twin, bytes]) -> None:
    """HBase 2.6's Thrift2 server cannot take a check with no value at all (its handler reads
    the missing buffer): an internal error, on both. An empty value is the check for a missing
    or empty column (above)."""
    both, t = twin
    then = T.TRowMutations(
        row=b"r", mutations=[T.TMutation(put=T.TPut(row=b"r", columnValues=[cv(b"f", b"a", b"1", 1)]))]
    )
    for op in (OP.EQUAL, OP.NOT_EQUAL):
        with pytest.raises(TApplicationException, match="Internal error processing checkAndMutate"):
            both.call("checkAndMutate", t, b"r", b"f", b"a", op, None, then)
    assert whole(both, t, b"r")[0].columnValues == []


def test_scanners_page_and_select_as_hbase_does(twin: tuple[Twin, bytes]) -> None:
    both, t = twin
    puts = [
        T.TPut(row=b"r%02d" % i, columnValues=[cv(b"f", b"a", b"%d" % i, 10), cv(b"g", b"b", b"x", 10)])
        for i in range(25)
    ]
    both.call("putMultiple", t, puts)
    both.call("put", t, T.TPut(row=b"r03", columnValues=[cv(b"f", b"a", b"newer", 20)]))
    for scan, rows in [
        (T.TScan(), 100),
        (T.TScan(startRow=b"r05", stopRow=b"r08"), 100),
        (T.TScan(startRow=b"r07", stopRow=b"r04", reversed=True), 100),
        (T.TScan(reversed=True, limit=3), 100),
        (T.TScan(limit=4), 2),
        (T.TScan(filterString=b"PrefixFilter('r1')"), 100),
        (T.TScan(startRow=b"r03", stopRow=b"r04", maxVersions=5, columns=[T.TColumn(b"f", b"a")]), 100),
        (T.TScan(timeRange=T.TTimeRange(15, 25)), 100),
        (T.TScan(columns=[T.TColumn(b"g")]), 7),
    ]:
        both.call("getScannerResults", t, scan, rows)
    real_id = both.real.openScanner(t, T.TScan(startRow=b"r20"))
    mini_id = both.mini.openScanner(t, T.TScan(startRow=b"r20"))
    for size in (2, 2, 10, 10):
        assert both.mini.getScannerRows(mini_id, size) == both.real.getScannerRows(real_id, size)
    both.real.closeScanner(real_id)
    both.mini.closeScanner(mini_id)


def test_happybase_over_thrift1_answers_as_hbase_does(
    real_hbase: tuple[HBaseProcess, HBaseProcess], minicluster: MiniClusterProcess
) -> None:
    """The Thrift1 calls happybase makes (HBase's Thrift1 server is the reference)."""
    name = unique("ref1")
    conns = [happybase.Connection(*real_hbase[0].thrift), happybase.Connection(*minicluster.thrift)]
    try:
        for conn in conns:
            conn.create_table(name, {"f": {"max_versions": 5}, "g": {"max_versions": 1}})

        def same(step: Any) -> Any:
            real, mini = (step(conn.table(name)) for conn in conns)
            assert mini == real, f"HBase {real}, minicluster {mini}"
            return real

        for ts in (10, 20, 30, 40, 50, 60):
            same(lambda t, ts=ts: t.put(b"r1", {b"f:a": b"v%d" % ts, b"g:b": b"w"}, timestamp=ts))
        same(lambda t: [t.put(b"r%d" % i, {b"f:q": b"%d" % i}, timestamp=5) for i in range(2, 12)])
        same(lambda t: t.row(b"r1", include_timestamp=True))
        same(lambda t: t.row(b"r1", columns=[b"f:a"], timestamp=31, include_timestamp=True))
        same(lambda t: t.cells(b"r1", b"f:a", versions=10, include_timestamp=True))
        same(lambda t: t.cells(b"r1", b"g:b", versions=10, include_timestamp=True))
        same(lambda t: t.rows([b"r2", b"r1", b"nope"]))
        same(lambda t: list(t.scan(row_start=b"r3", row_stop=b"r6")))
        same(lambda t: list(t.scan(columns=[b"f:q"], limit=4, include_timestamp=True)))
        same(lambda t: list(t.scan(row_prefix=b"r1")))
        same(lambda t: t.delete(b"r1", columns=[b"f:a"], timestamp=30))
        same(lambda t: t.cells(b"r1", b"f:a", versions=10, include_timestamp=True))
        same(lambda t: t.delete(b"r2"))
        same(lambda t: t.row(b"r2"))
        same(lambda t: [t.counter_inc(b"c", b"f:n", 5), t.counter_inc(b"c", b"f:n", -2), t.counter_get(b"c", b"f:n")])
        with_batch = same(lambda t: _batched(t))
        assert with_batch[b"b0"] == {b"f:q": b"0"}
    finally:
        for conn in conns:
            conn.close()


def _batched(t: Any) -> dict[bytes, dict[bytes, bytes]]:
    with t.batch(timestamp=7) as b:
        for i in range(3):
            b.put(b"b%d" % i, {b"f:q": b"%d" % i})
        b.delete(b"b2")
    return dict(t.rows([b"b0", b"b1", b"b2"]))
