"""``walship copy``: a first copy of what a new peer selects, with rows written before the peer
existed (in WALs that were rolled before it: no queue will ever ship them), during the copy
and after it; then shipping, and B equals A, and ``walship verify`` finds no bad row. On the
minicluster and on real HBase.

The copy reads with a raw scan, so it carries the delete markers: rows whose later puts have
timestamps older than a marker (of each type) written before the peer existed are hidden on
the peer as on the source. The raw scan itself (``_raw_`` on a ``TScan``) is checked on the
minicluster's Thrift2 server and on real HBase's, against the same expected cells."""

from __future__ import annotations

import datetime
import json
import threading
from collections.abc import Callable
from typing import Any

import pytest
import real_hbase as real_hbase_module
from airflow_env import AIRFLOW_MARKS, source_conn, task_failures
from real_hbase import BACKENDS
from region_ops import Source
from replication_helpers import Cluster, add_peer, contents, make_cluster, ship

from walship.cli import main
from walship.copy import copy_job
from walship.copy.raw import raw_scan
from walship.copy.source import RegionServerSource
from walship.errors import VerifyError
from walship.peer import MANAGED_KEY
from walship.thrift.conn import open_thrift2
from walship.thrift.hbase2 import hbase2
from walship.verify.scan import Side
from walship.wal import CellType
from walship_testing.harness import HBaseProcess
from walship_testing.minicluster import AdminClient
from walship_testing.minicluster.process import MiniClusterProcess

pytestmark = [pytest.mark.integration, *AIRFLOW_MARKS]


def global_flags(a: Cluster) -> list[str]:
    return ["--zk", a.zk_hosts, "--znode-parent", a.parent, "--wal-root", a.mc.wal_root,
            "--source-thrift2", a.thrift2_address()]  # fmt: skip


def copy_flags(a: Cluster) -> list[str]:
    """The global flags a copy needs: no WAL root (a copy reads no WAL)."""
    return ["--zk", a.zk_hosts, "--znode-parent", a.parent, "--source-thrift2", a.thrift2_address()]


@pytest.fixture(autouse=True)
def no_wal_root_in_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """``walship copy`` runs without a WAL root: none may come from the environment either."""
    monkeypatch.delenv("WALSHIP_WAL_ROOT", raising=False)


def write_versions(a: Cluster, prefix: bytes, n: int) -> None:
    """Rows with three versions of r:q at their own timestamps, a scope-0 cell, and a version
    deleted (what a delete masked is not copied, and not expected on B)."""
    host, port = a.mc.thrift2
    table = a.table_name
    with open_thrift2(host, port) as c:
        puts = [
            hbase2.TPut(
                row=prefix + b"%03d" % i,
                columnValues=[
                    *(
                        hbase2.TColumnValue(family=b"r", qualifier=b"q", value=b"v%d" % ts, timestamp=ts)
                        for ts in (10, 20, 30)
                    ),
                    hbase2.TColumnValue(family=b"l", qualifier=b"x", value=b"local", timestamp=10),
                ],
            )
            for i in range(n)
        ]
        c.client.putMultiple(table, puts)
        c.client.deleteSingle(
            table,
            hbase2.TDelete(
                row=prefix + b"000",
                columns=[hbase2.TColumn(family=b"r", qualifier=b"q", timestamp=20)],
                deleteType=hbase2.TDeleteType.DELETE_COLUMN,
            ),
        )


D = hbase2.TDeleteType
#: HBase's raw scan attribute, true (``Scan.setRaw(true)``).
RAW = {b"_raw_": b"\xff"}
#: Per delete type: the marker (TDeleteType, qualifier, timestamp) written after the early
#: puts, and the later puts (qualifier, timestamp) with timestamps it masks: the source keeps
#: them masked whenever they come.
MARKERS: dict[str, tuple[int, bytes | None, int, list[tuple[bytes, int]]]] = {
    "version": (D.DELETE_COLUMN, b"q", 20, [(b"q", 20)]),
    "column": (D.DELETE_COLUMNS, b"q", 25, [(b"q", 15), (b"q", 5)]),
    "family": (D.DELETE_FAMILY, None, 25, [(b"q", 15), (b"p", 5)]),
    "familyversion": (D.DELETE_FAMILY_VERSION, None, 20, [(b"q", 20), (b"p", 20)]),
}
#: Every such row's puts before its marker.
EARLY = [(b"q", 10), (b"q", 20), (b"q", 30), (b"p", 20), (b"p", 30)]
#: What the source shows of each row (family r): qualifier and timestamp of the early puts.
VISIBLE = {
    "version": [(b"p", 30), (b"p", 20), (b"q", 30), (b"q", 10)],
    "column": [(b"p", 30), (b"p", 20), (b"q", 30)],
    "family": [(b"p", 30), (b"q", 30)],
    "familyversion": [(b"p", 30), (b"q", 30), (b"q", 10)],
}
CELL_TYPES = {
    D.DELETE_COLUMN: CellType.Delete,
    D.DELETE_COLUMNS: CellType.DeleteColumn,
    D.DELETE_FAMILY: CellType.DeleteFamily,
    D.DELETE_FAMILY_VERSION: CellType.DeleteFamilyVersion,
}
RawCell = tuple[bytes, bytes, int, int, bytes]


def early(q: bytes, ts: int) -> bytes:
    return b"v%s%d" % (q, ts)


def late(q: bytes, ts: int) -> bytes:
    return b"late%s%d" % (q, ts)


def write_marked(c: Cluster, prefix: bytes) -> None:
    """A row per delete type: the early puts, then the marker."""
    with open_thrift2(*c.mc.thrift2) as conn:
        for name, (kind, qualifier, ts, _late) in MARKERS.items():
            row = prefix + name.encode()
            values = [hbase2.TColumnValue(b"r", q, early(q, t), t) for q, t in EARLY]
            conn.client.put(c.table_name, hbase2.TPut(row=row, columnValues=values))
            column = hbase2.TColumn(family=b"r", qualifier=qualifier, timestamp=ts)
            conn.client.deleteSingle(c.table_name, hbase2.TDelete(row=row, columns=[column], deleteType=kind))


def write_late(c: Cluster, prefix: bytes) -> None:
    """Each row's later puts, with timestamps its marker masks."""
    with open_thrift2(*c.mc.thrift2) as conn:
        for name, (_kind, _qualifier, _ts, cells) in MARKERS.items():
            values = [hbase2.TColumnValue(b"r", q, late(q, t), t) for q, t in cells]
            conn.client.put(c.table_name, hbase2.TPut(row=prefix + name.encode(), columnValues=values))


def expected_raw(name: str) -> list[RawCell]:
    """A row of MARKERS as a raw scan returns it (family r): every put version (a later put
    at the coordinates of an early one replaces it) and the marker, in HBase's cell order."""
    kind, qualifier, ts, cells = MARKERS[name]
    found = {(b"r", q, t, int(CellType.Put)): early(q, t) for q, t in EARLY}
    found |= {(b"r", q, t, int(CellType.Put)): late(q, t) for q, t in cells}
    found[(b"r", qualifier or b"", ts, int(CELL_TYPES[kind]))] = b""
    return sorted(((*key, value) for key, value in found.items()), key=lambda c: (c[1], -c[2], -c[3]))


def scan_r(c: Cluster, attributes: dict[bytes, bytes] | None = None) -> dict[bytes, list[RawCell]]:
    """Every row of family r through a Thrift2 scanner (100 versions), each cell with its type."""
    with open_thrift2(*c.mc.thrift2) as conn:
        tscan = hbase2.TScan(columns=[hbase2.TColumn(family=b"r")], maxVersions=100, attributes=attributes)
        results = conn.client.getScannerResults(c.table_name, tscan, 100_000)
    return {
        bytes(r.row): [(cv.family, cv.qualifier or b"", cv.timestamp, cv.type, cv.value) for cv in r.columnValues]
        for r in results
    }


def visible_contents(*prefixes: bytes) -> dict[bytes, dict[bytes, list[tuple[bytes, int]]]]:
    """What the source shows of the rows of MARKERS, as ``contents`` reads it."""
    out: dict[bytes, dict[bytes, list[tuple[bytes, int]]]] = {}
    for prefix in prefixes:
        for name, cells in VISIBLE.items():
            columns = out.setdefault(prefix + name.encode(), {})
            for q, t in cells:
                columns.setdefault(b"r:" + q, []).append((early(q, t), t))
    return out


def markers_of(rows: dict[bytes, list[RawCell]]) -> dict[bytes, list[RawCell]]:
    return {row: [c for c in cells if c[3] != CellType.Put] for row, cells in rows.items()}


@pytest.fixture(params=BACKENDS)
def source(request: pytest.FixtureRequest) -> Cluster:
    """A source cluster with a table of the test's own: a minicluster, or real HBase 2.6."""
    if request.param == "real":
        hb, _ = request.getfixturevalue("real_hbase")
        table = real_hbase_module.unique("raw")
        real_hbase_module.create_table(hb, table)
        return real_hbase_module.cluster(hb, table)
    return make_cluster(request.getfixturevalue("minicluster_factory"), request.getfixturevalue("zk_hosts"), "A")


def test_a_raw_scan_returns_every_version_and_the_markers_with_their_types(source: Cluster) -> None:
    """``_raw_`` = 0xFF on a ``TScan``: every put version, masked or not, and every delete
    marker with its type, in HBase's cell order; the same on the minicluster as on HBase.
    Without it (or with 0x00) a scan is as before: the visible puts only."""
    write_marked(source, b"m-")
    write_late(source, b"m-")
    assert scan_r(source, RAW) == {b"m-" + name.encode(): expected_raw(name) for name in MARKERS}
    visible = {
        b"m-" + name.encode(): [(b"r", q, t, int(CellType.Put), early(q, t)) for q, t in cells]
        for name, cells in VISIBLE.items()
    }
    assert scan_r(source) == visible
    assert scan_r(source, {b"_raw_": b"\x00"}) == visible


def test_a_raw_scan_of_the_region_servers_is_the_thrift2_one_across_regions_and_moves(
    real_hbase: tuple[HBaseProcess, HBaseProcess],
) -> None:
    """A copy reads a real source from its region servers (``ClientService.Scan``, raw): the
    same rows and cells, in the same order, as the Thrift2 raw scan, for ranges across regions,
    cut inside them or one region exactly, a page at a time; and again after a region moved to
    another server, its kept location stale (the scan looks the regions up again and goes on)."""
    hb = real_hbase[0]
    table = real_hbase_module.unique("rscan")
    real_hbase_module.create_table(hb, table, splits=[b"before030", b"m-f"])
    a = real_hbase_module.cluster(hb, table)
    write_versions(a, b"before", 60)
    write_marked(a, b"m-")
    write_late(a, b"m-")
    job = copy_job(zk=hb.zk_hosts, znode_parent=hb.znode_parent, source_thrift2=a.thrift2_address(), peer_id="1")
    ranges = [(b"", b""), (b"before010", b"m-family"), (b"before030", b"m-f"), (b"m-f", b"")]
    expected = [64, 51, 31, 3]

    def both(rs: RegionServerSource, side: Side) -> None:
        for (start, stop), n in zip(ranges, expected, strict=True):
            native = [(row, list(cells)) for row, cells in rs.raw_scan(table, start, stop, [b"r"], 0, caching=7)]
            over_thrift2 = list(raw_scan(side, table, start, stop, [b"r"]))
            assert native == over_thrift2 and len(native) == n, (start, stop, len(native), len(over_thrift2))
        marked = markers_of(scan_r(a, RAW))
        assert {row: [c[1:6] for c in cells if c.type != CellType.Put] for row, cells in native} == {
            row: marked[row] for row, _ in native
        }
        assert all(marked[row] for row, _ in native)  # every marker type, as the source keeps it

    with RegionServerSource(job) as rs, job.source_side() as side:
        both(rs, side)
        source = Source(a, real=True)
        region = next(r for r in source.regions() if r["start"] == b"m-f".hex())
        source.move(region["region"], next(s for s in source.servers() if s != region["server"]))
        both(rs, side)
        with pytest.raises(VerifyError, match="^the source cluster: table nosuch does not exist$"):
            list(rs.raw_scan("nosuch", b"", b"", [b"r"], caching=7))


def test_a_copy_into_a_peer_of_sink_hbase_without_the_table_names_it(
    real_hbase: tuple[HBaseProcess, HBaseProcess], capsys: pytest.CaptureFixture[str]
) -> None:
    """The plan finds a peer of sink ``hbase``'s tables in its hbase:meta (no Thrift2 asked):
    one it lacks stops the copy before a row is read, naming the table, the peer and its
    cluster key."""
    a_hb, b_hb = real_hbase
    table = real_hbase_module.unique("nopeer")
    real_hbase_module.create_table(a_hb, table)
    a = real_hbase_module.cluster(a_hb, table)
    b = real_hbase_module.cluster(b_hb, table)
    real_hbase_module.add_managed_peer(a, b, "3", "hbase")
    try:
        capsys.readouterr()
        code = main([*copy_flags(a), "copy", "--peer", "3", "--json"])
        err = capsys.readouterr().err.strip().splitlines()
        assert code == 1 and len(err) == 1, err
        assert f"table {table} does not exist on peer 3 ({b.cluster_key})" in err[0], err
    finally:
        real_hbase_module.remove_peer(a, "3")


def test_a_raw_attribute_of_more_than_one_byte_is_refused_naming_it(minicluster: MiniClusterProcess) -> None:
    """``Bytes.toBoolean`` takes one byte: the minicluster refuses another length in one line."""
    a = Cluster(minicluster, "")
    with open_thrift2(*minicluster.thrift2) as conn:
        conn.client.createTable(
            hbase2.TTableDescriptor(
                tableName=hbase2.TTableName(qualifier=b"t"), columns=[hbase2.TColumnFamilyDescriptor(name=b"r")]
            ),
            None,
        )
    with pytest.raises(hbase2.TIOError, match="TScan attribute _raw_: a boolean is one byte .* got 2 byte"):
        scan_r(a, {b"_raw_": b"\xff\xff"})


def copy_carries_deletes(
    a: Cluster,
    b: Cluster,
    roll: Callable[[], None],
    add: Callable[[], None],
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Markers of every type written before the peer existed, later puts they mask written
    after it (shipped): before the copy (so copied too) and after it (shipped only). Once
    copied and shipped, B hides what A hides, B holds A's markers, and verify finds no bad row."""
    write_marked(a, b"m-")
    write_marked(a, b"n-")
    roll()
    add()
    added = datetime.datetime.now(datetime.UTC)
    write_late(a, b"m-")
    capsys.readouterr()
    code = main([*copy_flags(a), "copy", "--peer", "2", "--until", added.isoformat(), "--json"])
    out = capsys.readouterr()
    assert code == 0, out.err
    result = json.loads(out.out)
    assert result["rows"] == 8 and result["markers"] == 8, result
    real = isinstance(a.mc, HBaseProcess)  # real HBase: its region servers, both sides (the peer's sink hbase)
    assert (result["read_from"], result["written_to"]) == (("region_servers",) * 2 if real else ("thrift2",) * 2)
    write_late(a, b"n-")
    ship(a, "2")
    on_a, on_b = contents(a, b"r"), contents(b)
    assert on_a == visible_contents(b"m-", b"n-")  # the later puts are masked on the source
    assert on_b == on_a, sorted(set(on_a) ^ set(on_b)) or [(r, on_a[r], on_b[r]) for r in on_a if on_a[r] != on_b[r]]
    assert markers_of(scan_r(b, RAW)) == markers_of(scan_r(a, RAW))
    capsys.readouterr()
    code = main([*global_flags(a), "verify", "--peer", "2", "--recompare-sleep", "0", "--json"])
    verified = json.loads(capsys.readouterr().out)
    assert code == 0 and verified["counters"]["BADROWS"] == 0, verified["counters"]
    assert verified["counters"]["GOODROWS"] == 8


def test_a_copy_carries_the_delete_markers_on_the_minicluster(
    minicluster_factory: Callable[..., MiniClusterProcess], zk_hosts: str, capsys: pytest.CaptureFixture[str]
) -> None:
    a = make_cluster(minicluster_factory, zk_hosts, "A")
    b = make_cluster(minicluster_factory, zk_hosts, "B")
    copy_carries_deletes(
        a,
        b,
        lambda: AdminClient(a.mc.admin).roll(),
        lambda: add_peer(a, b, "2", protocol="thrift2", **{MANAGED_KEY: "true"}),
        capsys,
    )


def test_a_copy_carries_the_delete_markers_on_real_hbase(
    real_hbase: tuple[HBaseProcess, HBaseProcess], capsys: pytest.CaptureFixture[str]
) -> None:
    """On real HBase the copy reads the source's region servers and, the peer being of sink
    ``hbase``, writes into the peer's: each marker arrives with its type and timestamp."""
    a, b = real_hbase_module.table_on_both(*real_hbase, "marks")
    hb = a.mc
    assert isinstance(hb, HBaseProcess)

    def add() -> None:
        real_hbase_module.add_managed_peer(a, b, "2", "hbase")
        real_hbase_module.wait_queues_hold_current_wals(a, "2")

    try:
        copy_carries_deletes(a, b, lambda: hb.call("roll"), add, capsys)
    finally:
        real_hbase_module.remove_peer(a, "2")


def first_copy(
    a: Cluster,
    b: Cluster,
    roll: Callable[[], None],
    add: Callable[[], None],
    capsys: pytest.CaptureFixture[str],
) -> None:
    write_versions(a, b"before", 60)
    roll()  # those edits are in WALs no queue of the new peer holds
    add()
    added = datetime.datetime.now(datetime.UTC)
    ship(a, "2")
    assert not any(row.startswith(b"before") for row in contents(b))  # shipping alone misses them
    stop = threading.Event()

    def keep_writing() -> None:
        i = 0
        while not stop.is_set() and i < 400:
            a.table().put(b"during%04d" % i, {b"r:q": b"d%d" % i})
            i += 1

    writer = threading.Thread(target=keep_writing)
    writer.start()
    try:
        capsys.readouterr()
        code = main([*copy_flags(a), "copy", "--peer", "2", "--until", added.isoformat(), "--json"])
    finally:
        stop.set()
        writer.join()
    out = capsys.readouterr()
    assert code == 0, out.err
    result = json.loads(out.out)
    assert result["peer_id"] == "2" and result["tables"] == [a.table_name.decode()]
    assert result["rows"] >= 60 and result["cells"] >= 60 * 3 and result["splits"] >= 1
    assert result["markers"] >= 1  # the version deleted of before000, with the version it masks
    write_versions(a, b"after", 20)
    ship(a, "2")
    on_b, on_a = contents(b), contents(a, b"r")
    assert on_b == on_a, sorted(set(on_a) ^ set(on_b))[:5]
    assert on_b[b"before000"] == {b"r:q": [(b"v30", 30), (b"v10", 10)]}  # every version, its own timestamp
    assert on_b[b"before001"] == {b"r:q": [(b"v30", 30), (b"v20", 20), (b"v10", 10)]}
    assert contents(b, b"l") == {}  # scope 0 stays home
    capsys.readouterr()
    code = main([*global_flags(a), "verify", "--peer", "2", "--recompare-sleep", "0", "--json"])
    verified = json.loads(capsys.readouterr().out)
    assert code == 0 and verified["counters"]["BADROWS"] == 0, verified["counters"]
    # a second copy changes nothing
    assert main([*copy_flags(a), "copy", "--peer", "2", "--json"]) == 0
    capsys.readouterr()
    assert contents(b) == on_a


def test_the_copy_dag_copies_through_spark(
    dagbag: Any,
    minicluster_factory: Callable[..., MiniClusterProcess],
    zk_hosts: str,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
) -> None:
    """``walship_copy`` with Airflow itself (``dag.test()``) and a real spark-submit: one task
    per source region fills the new peer; a bad ``until`` fails the run, naming the Param."""
    a = make_cluster(minicluster_factory, zk_hosts, "A")
    b = make_cluster(minicluster_factory, zk_hosts, "B")
    write_versions(a, b"before", 40)
    write_marked(a, b"m-")
    AdminClient(a.mc.admin).roll()
    add_peer(a, b, "2", protocol="thrift2", **{MANAGED_KEY: "true"})
    conn = json.loads(source_conn(a))
    conn["extra"]["thrift2"] = a.thrift2_address()
    monkeypatch.setenv("AIRFLOW_CONN_WALSHIP_SOURCE", json.dumps(conn))
    dag = dagbag.dags["walship_copy"]
    assert type(dag.timetable).__name__ == "NullTimetable"  # manual only
    params = {"peer_id": "2", "tables": [], "until": "", "spark_conn_id": "spark_default"}
    run = dag.test(run_conf=params)
    states = {ti.task_id: ti.state for ti in run.get_task_instances()}
    assert run.state == "success", states
    assert contents(b) == contents(a, b"r") and len(contents(b)) == 40 + len(MARKERS)
    assert markers_of(scan_r(b, RAW)) == markers_of(scan_r(a, RAW))  # the Spark tasks copied the markers
    capfd.readouterr()
    bad = dag.test(run_conf={**params, "until": "yesterday"})
    assert bad.state == "failed"
    (reason,) = task_failures(capfd.readouterr().out)
    assert "Param until: not an ISO time: 'yesterday'" in reason


def test_first_copy_on_the_minicluster(
    minicluster_factory: Callable[..., MiniClusterProcess], zk_hosts: str, capsys: pytest.CaptureFixture[str]
) -> None:
    a = make_cluster(minicluster_factory, zk_hosts, "A")
    b = make_cluster(minicluster_factory, zk_hosts, "B")
    first_copy(
        a,
        b,
        lambda: AdminClient(a.mc.admin).roll(),
        lambda: add_peer(a, b, "2", protocol="thrift2", **{MANAGED_KEY: "true"}),
        capsys,
    )


def test_first_copy_on_real_hbase(
    real_hbase: tuple[HBaseProcess, HBaseProcess], capsys: pytest.CaptureFixture[str]
) -> None:
    a, b = real_hbase_module.table_on_both(*real_hbase, "copy")
    hb = a.mc
    assert isinstance(hb, HBaseProcess)

    def add() -> None:
        real_hbase_module.add_managed_peer(a, b, "2", "thrift2")
        real_hbase_module.wait_queues_hold_current_wals(a, "2")

    try:
        first_copy(a, b, lambda: hb.call("roll"), add, capsys)
    finally:
        real_hbase_module.remove_peer(a, "2")
