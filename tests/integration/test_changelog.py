"""The Parquet change log: a subscription whose events become one Parquet row per cell,
partitioned by table and date, equal to the source's WALs cell for cell, never a cell twice
(after a kill and a rerun, a batch read further, an interrupted compaction), readable by
pyarrow and Spark."""

from __future__ import annotations

import collections
import json
import logging
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.dataset as ds
import pytest
from replication_helpers import TABLE, Cluster, current_wals_enqueued, make_cluster
from waiting import wait_until

from walship.cli import main
from walship.peer import PeerConfig
from walship.sep.parquetlog import SCHEMA, escape_path_name
from walship.sinks.base import FilteredEntry, SinkContext
from walship.sinks.registry import create_sink
from walship.thrift.conn import open_thrift2
from walship.thrift.hbase2 import hbase2
from walship.wal import CellType, WalEntry
from walship.wal.model import Cell, WalKey
from walship.zk import ReplicationQueues, ZnodeLayout, zk_client
from walship_testing.minicluster import AdminClient
from walship_testing.minicluster.process import MiniClusterProcess

pytestmark = pytest.mark.integration

Factory = Callable[..., MiniClusterProcess]
T = hbase2.TDeleteType
NS_TABLE = b"ns:a"
#: (table, row, family, qualifier, timestamp, type, value, wal, offset, seqid, write time, cluster ids)
Row = tuple[str, bytes, bytes, bytes, int, str, bytes, str, int, int, int, tuple[str, ...]]


def add(a: Cluster, name: str, url: str, *extra: str) -> None:
    assert main([*a.cli_flags(), "subscription", "add", name, "--parquet", url, *extra]) == 0
    with zk_client(a.zk_hosts) as client:
        queues = ReplicationQueues(client, ZnodeLayout(a.parent))
        wait_until(lambda: current_wals_enqueued(a, queues, name), what=f"WALs queued for {name}")


@pytest.fixture
def a(minicluster_factory: Factory, zk_hosts: str) -> Cluster:
    """Source A: tables t and ns:a, family r scoped 1 and l scoped 0 in each."""
    a = make_cluster(minicluster_factory, zk_hosts, "A")
    conn = a.conn()
    conn.create_table(NS_TABLE, {"r": {"max_versions": 5}, "l": {"max_versions": 5}})
    AdminClient(a.mc.admin).set_scope(NS_TABLE.decode(), "r", 1)
    conn.close()
    return a


def put(row: bytes, cells: list[tuple[bytes, bytes, int, bytes]]) -> Any:
    return hbase2.TPut(
        row=row,
        columnValues=[hbase2.TColumnValue(family=f, qualifier=q, value=v, timestamp=ts) for f, q, ts, v in cells],
    )


def delete(row: bytes, kind: int, columns: list[tuple[bytes, bytes | None, int | None]] | None = None) -> Any:
    cols = [hbase2.TColumn(family=f, qualifier=q, timestamp=ts) for f, q, ts in columns] if columns else None
    return hbase2.TDelete(row=row, columns=cols, deleteType=kind)


def workload(a: Cluster) -> None:
    """Puts at explicit timestamps and every delete kind, in both tables; a local family;
    rows the filter hook drops."""
    with open_thrift2(*a.mc.thrift2) as c:
        api = c.client
        for table in (TABLE, NS_TABLE):
            for row in (b"d1", b"d2", b"d3", b"skip-me"):
                cells = [(b"r", q, ts, b"%s-%d" % (q, ts)) for q in (b"a", b"b") for ts in (100, 101, 102)]
                api.putMultiple(table, [put(row, [*cells, (b"l", b"x", 100, b"local")])])
            api.deleteSingle(table, delete(b"d1", T.DELETE_COLUMN, [(b"r", b"a", 101)]))  # Delete
            api.deleteSingle(table, delete(b"d1", T.DELETE_COLUMNS, [(b"r", b"b", 102)]))  # DeleteColumn
            api.deleteSingle(table, delete(b"d2", T.DELETE_FAMILY_VERSION, [(b"r", None, 100)]))
            api.deleteSingle(table, delete(b"d3", T.DELETE_FAMILY, [(b"r", None, 101)]))
            api.deleteSingle(table, delete(b"d3", T.DELETE_FAMILY, [(b"l", None, 101)]))  # local: stays home
            api.mutateRow(
                table,
                hbase2.TRowMutations(
                    row=b"m1",
                    mutations=[
                        hbase2.TMutation(put=put(b"m1", [(b"r", b"x", 7, b"seven"), (b"r", b"x", 9, b"nine")])),
                        hbase2.TMutation(deleteSingle=delete(b"m1", T.DELETE_COLUMN, [(b"r", b"x", 9)])),
                    ],
                ),
            )
    a.table().delete(b"d2", columns=[b"r:a"])  # happybase: DeleteColumn at the server's time


#: What a change log row says of its cell: (table, row, family, qualifier, timestamp, type, value);
#: a timestamp of None is the server's (any).
Written = tuple[str, bytes, bytes, bytes, int | None, str, bytes]


def workload_written() -> list[Written]:
    """The scope-1 cells :func:`workload` writes, derived from what it sends (not read back):
    family l is scope 0 and stays home; a delete's value is empty, a family delete has no
    qualifier, Thrift1's column delete is a DeleteColumn at the server's time."""
    out: list[Written] = []
    for table in ("t", "ns:a"):
        for row in (b"d1", b"d2", b"d3", b"skip-me"):
            out += [
                (table, row, b"r", q, ts, "Put", b"%s-%d" % (q, ts)) for q in (b"a", b"b") for ts in (100, 101, 102)
            ]
        out += [
            (table, b"d1", b"r", b"a", 101, "Delete", b""),
            (table, b"d1", b"r", b"b", 102, "DeleteColumn", b""),
            (table, b"d2", b"r", b"", 100, "DeleteFamilyVersion", b""),
            (table, b"d3", b"r", b"", 101, "DeleteFamily", b""),
            (table, b"m1", b"r", b"x", 7, "Put", b"seven"),
            (table, b"m1", b"r", b"x", 9, "Put", b"nine"),
            (table, b"m1", b"r", b"x", 9, "Delete", b""),
        ]
    out.append(("t", b"d2", b"r", b"a", None, "DeleteColumn", b""))
    return out


def cells_in(got: list[Row], expected: list[Written]) -> list[Written]:
    """The change log's rows as :data:`Written`, the timestamp left out where ``expected``
    leaves it to the server."""
    loose = {(w[0], w[1], w[2], w[3], w[5], w[6]) for w in expected if w[4] is None}
    out: list[Written] = []
    for r in got:
        written: Written = (r[0], r[1], r[2], r[3], r[4], r[5], r[6])
        if (r[0], r[1], r[2], r[3], r[5], r[6]) in loose:
            written = (r[0], r[1], r[2], r[3], None, r[5], r[6])
        out.append(written)
    return out


def assert_positions_are_whole_entries(a: Cluster, got: list[Row], *, since: int = 0) -> None:
    """Where each row says it came from: a WAL of A's, an offset inside it; the cells of one
    entry share its sequence id, write time and cluster ids (A's own), and the entries of a
    table (one region each here) have sequence ids of their own."""
    root = a.mc.data_dir
    sizes = {
        p.name: p.stat().st_size for p in [*(root / "WALs").rglob("*"), *(root / "oldWALs").glob("*")] if p.is_file()
    }
    by_entry: dict[tuple[str, int], set[tuple[str, int, int, tuple[str, ...]]]] = collections.defaultdict(set)
    for r in got:
        assert r[7] in sizes and 0 <= r[8] < sizes[r[7]], r
        assert r[10] >= since and r[11] == (a.mc.cluster_id,), r
        by_entry[(r[7], r[8])].add((r[0], r[9], r[10], r[11]))
    assert all(len(v) == 1 for v in by_entry.values())
    seqids = [next(iter(v))[:2] for v in by_entry.values()]
    assert len(set(seqids)) == len(seqids)


def log_rows(url: str) -> list[Row]:
    """Every row of the change log, read as one dataset (hive partitioning)."""
    t = ds.dataset(url, partitioning="hive").to_table()
    cols = {n: t.column(n).to_pylist() for n in t.column_names if n != "write_time"}
    write_times = t.column("write_time").cast(pa.int64()).to_pylist()
    names = ["table", "row", "family", "qualifier", "timestamp", "type", "value", "wal", "offset", "seqid"]
    return [(*(cols[n][i] for n in names), write_times[i], tuple(cols["cluster_ids"][i])) for i in range(t.num_rows)]


def files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file())


def assert_log_equals(url: str, expected: list[Written]) -> list[Row]:
    """The log holds ``expected``, each cell once; returns its rows."""
    got = log_rows(url)
    dupes = [r for r, n in collections.Counter(got).items() if n > 1]
    assert not dupes, f"{len(dupes)} rows twice in the log, e.g. {dupes[:2]}"
    assert collections.Counter(cells_in(got, expected)) == collections.Counter(expected)
    return got


def test_the_log_equals_the_workload_cell_for_cell(
    a: Cluster, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a.table().put(b"before", {b"r:a": b"old"})  # written before the subscription's start time
    written = time.time()
    wait_until(lambda: time.time() > written + 0.002, what="a later millisecond")
    add(a, "log1", str(tmp_path / "log"), "--start-time", "now", "--filter", "sep_listeners:skip_rows")
    url = f"file://{tmp_path / 'log'}"
    capsys.readouterr()
    assert main([*a.cli_flags(), "subscription", "show", "log1", "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["parquet"] == url and info["listener"] is None and info["threads"] is None
    workload(a)
    assert main([*a.cli_flags(), "ship", "--peer", "log1"]) == 0, capsys.readouterr().err
    expected = [w for w in workload_written() if not w[1].startswith(b"skip")]  # the filter drops them
    got = assert_log_equals(url, expected)
    assert_positions_are_whole_entries(a, got, since=info["start_time"])
    assert {r[0] for r in got} == {"t", "ns:a"} and {r[2] for r in got} == {b"r"}  # family l is scope 0
    assert b"before" not in {r[1] for r in got} and not any(r[1].startswith(b"skip") for r in got)
    assert {r[5] for r in got} == {"Put", "Delete", "DeleteColumn", "DeleteFamily", "DeleteFamilyVersion"}
    d1 = sorted((r[3], r[4], r[5]) for r in got if r[0] == "ns:a" and r[1] == b"d1" and r[5] != "Put")
    assert d1 == [(b"a", 101, "Delete"), (b"b", 102, "DeleteColumn")]
    assert {r[11] for r in got} == {(a.mc.cluster_id,)}
    # hive layout as Spark writes it; each file in WAL order; no temporary file left
    dirs = {p.parent.relative_to(tmp_path / "log").as_posix() for p in files(tmp_path / "log")}
    assert {d.split("/")[0] for d in dirs} == {"table=t", "table=ns%3Aa"}
    assert all(d.split("/")[1].startswith("date=") for d in dirs)
    for path in files(tmp_path / "log"):
        assert path.name.startswith("part-") and path.suffix == ".parquet", path
        t = ds.dataset(str(path)).to_table()
        assert t.schema.equals(SCHEMA)
        pos = list(zip(t.column("wal").to_pylist(), t.column("offset").to_pylist(), strict=True))
        assert pos == sorted(pos)
    # shipping again changes nothing
    assert main([*a.cli_flags(), "ship", "--peer", "log1"]) == 0
    assert log_rows(url) == got


def test_killed_and_rerun_the_log_has_every_cell_once(a: Cluster, tmp_path: Path) -> None:
    root = tmp_path / "log"
    add(a, "log2", str(root))
    conn = a.conn()
    tables = [conn.table(TABLE), conn.table(NS_TABLE)]
    for i in range(600):  # one entry each, the tables alternating: a batch spans two partitions
        tables[i % 2].put(b"row-%04d" % i, {b"r:q": b"v%d" % i, b"l:q": b"local"})
    conn.close()
    env = {
        **os.environ,
        "WALSHIP_ZK": a.zk_hosts,
        "WALSHIP_ZNODE_PARENT": a.parent,
        "WALSHIP_WAL_ROOT": str(a.mc.data_dir),
        "WALSHIP_SOURCE_THRIFT2": a.thrift2_address(),
    }
    cmd = [
        sys.executable,
        "-m",
        "walship.cli",
        "--zk-session-timeout",
        "2",
        "ship",
        "--peer",
        "log2",
        "--batch-entries",
        "2",
    ]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_until(
            lambda: len(files(root)) >= 40 or proc.poll() is not None,
            timeout=120,
            interval=0.005,
            what="20 batches in place",
        )
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    assert proc.returncode == -signal.SIGKILL, "the shipper finished before it was killed: make the workload larger"
    partial = log_rows(f"file://{root}")
    assert 0 < len(partial) < 600
    done = subprocess.run([*cmd, "--lock-wait", "60"], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr[-2000:]
    summary = json.loads(done.stdout)
    assert summary["status"] == "ok" and "busy" not in summary["queue_states"], done.stdout
    written: list[Written] = [
        (("t", "ns:a")[i % 2], b"row-%04d" % i, b"r", b"q", None, "Put", b"v%d" % i) for i in range(600)
    ]
    got = assert_log_equals(f"file://{root}", written)
    assert_positions_are_whole_entries(a, got)
    hidden = [p for p in files(root) if p.name.startswith((".", "_"))]
    assert hidden == [], hidden


# -- the writer and compaction, on entries built here (the sink is the real one) -----------------

WAL = "rs-1.example.net%2C16020%2C1600000000000.1600000000123"
DAY1 = 1_767_225_599_000  # 2025-12-31T23:59:59Z
DAY2 = DAY1 + 1000  # 2026-01-01T00:00:00Z


def entries(n: int, *, write_time: int = DAY1, table: bytes = TABLE, first: int = 0) -> list[FilteredEntry]:
    """``n`` entries of 100 bytes each from offset ``first``: a Put and a DeleteFamilyVersion."""
    out = []
    for i in range(first, first + n):
        key = WalKey(b"region", table, 1000 + i, write_time + i, ())
        cells = (
            Cell(b"row-%03d" % i, b"r", b"q", 10 + i, CellType.Put, b"v%d" % i),
            Cell(b"row-%03d" % i, b"r", b"", 5, CellType.DeleteFamilyVersion),
        )
        out.append(FilteredEntry(WalEntry(key, cells, 100 * i, 100 * i + 100), cells, (uuid.UUID(int=7),)))
    return out


def sink(url: str, name: str = "log") -> Any:
    peer = PeerConfig(
        name,
        "zk:2181:/sub",
        configuration={
            "walship.sink.protocol": "changelog",
            "walship.subscription": "true",
            "walship.changelog.url": url,
        },
    )
    return create_sink(peer, SinkContext("/nonexistent-wal-root"))


def cells_of(batch: list[FilteredEntry]) -> list[tuple[int, bytes, str]]:
    return sorted((fe.entry.offset, c.row, CellType(c.type).name) for fe in batch for c in fe.cells)


def log_cells(url: str) -> list[tuple[int, bytes, str]]:
    return sorted((r[8], r[1], r[5]) for r in log_rows(url))


def test_a_batch_read_further_replaces_the_shorter_one(tmp_path: Path) -> None:
    url = f"file://{tmp_path}/log"
    s = sink(url)
    batch = entries(5)
    s.apply(batch[:3], WAL)  # a crash before the position moved past it, then the WAL grew
    part = tmp_path / "log" / "table=t" / "date=2025-12-31"
    (first,) = files(part)
    assert first.name.endswith(f"-{0:020d}-{300:020d}.parquet")
    stale = part / f".{first.name.rsplit('-', 1)[0]}-{'9' * 20}.parquet.dead.tmp"
    stale.write_bytes(b"a write the crash cut short")
    stats = s.apply(batch, WAL)  # the same first offset, a larger last one
    assert stats.cells == 10 and stats.calls == 1
    (second,) = files(part)
    assert second.name.endswith(f"-{0:020d}-{500:020d}.parquet")
    assert second.name.rsplit("-", 2)[0] == first.name.rsplit("-", 2)[0]  # same server, queue and WAL
    assert log_cells(url) == cells_of(batch)
    s.apply(batch, WAL)  # shipped twice: the same file again
    assert files(part) == [second] and log_cells(url) == cells_of(batch)
    # one batch over two days and two tables: one file per partition, all of one name
    more = entries(2, first=5) + entries(2, first=7, write_time=DAY2) + entries(1, first=9, table=NS_TABLE)
    s.apply(more, WAL)
    names = {p.relative_to(tmp_path / "log").parent.as_posix(): p.name for p in files(tmp_path / "log")}
    assert set(names) == {"table=t/date=2025-12-31", "table=t/date=2026-01-01", "table=ns%3Aa/date=2025-12-31"}
    assert len({n for d, n in names.items() if d != "table=t/date=2025-12-31"}) == 1
    assert log_cells(url) == cells_of(batch + more)
    # another queue (subscription) on the same WAL and offsets: other files, nothing replaced
    sink(url, "other").apply(batch[:3], WAL)
    assert len(files(part)) == 3


def compact(url: str, date: str, capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    capsys.readouterr()
    assert main(["changelog", "compact", url, "--date", date, "--json"]) == 0
    doc: dict[str, Any] = json.loads(capsys.readouterr().out)
    return doc


def test_compaction_merges_a_day_idempotently(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = f"file://{tmp_path}/log"
    s = sink(url)
    old = entries(9)
    for lo in range(0, 9, 3):  # batches of 3 entries...
        s.apply(old[lo : lo + 3], WAL)
    s.apply(entries(4, first=9, write_time=DAY2), WAL)
    s.apply(entries(2, first=20, table=NS_TABLE), WAL)
    s.apply(old[:5], WAL)  # ...then, rerun with other limits: 0-500 replaces 0-300 but overlaps 300-600
    every = cells_of(old + entries(4, first=9, write_time=DAY2) + entries(2, first=20, table=NS_TABLE))
    assert len(log_cells(url)) == len(every) + 4  # entries 3 and 4 twice: the case left to compaction
    day1 = tmp_path / "log" / "table=t" / "date=2025-12-31"
    inputs = {p.name: p.read_bytes() for p in files(day1)}
    doc = compact(url, "2025-12-31", capsys)
    assert doc["date"] == "2025-12-31" and [p["table"] for p in doc["partitions"]] == ["ns:a", "t"]
    t = next(p for p in doc["partitions"] if p["table"] == "t")
    assert t["action"] == "merged" and t["inputs"] == sorted(inputs) and t["duplicates_dropped"] == 4
    assert t["rows"] == 18
    assert next(p for p in doc["partitions"] if p["table"] == "ns:a")["action"] == "unchanged"  # one file
    (merged,) = files(day1)
    assert merged.name == t["output"] and log_cells(url) == every
    merged_rows = ds.dataset(str(merged)).to_table()
    offsets = merged_rows.column("offset").to_pylist()
    assert offsets == sorted(offsets)  # WAL order, cells in order
    meta = merged_rows.schema.metadata
    assert json.loads(meta[b"walship.changelog.inputs"]) == sorted(inputs)
    assert len(files(tmp_path / "log" / "table=t" / "date=2026-01-01")) == 1  # another day: untouched
    # a second run changes nothing
    before = {p: p.stat().st_mtime_ns for p in files(tmp_path / "log")}
    doc = compact(url, "2025-12-31", capsys)
    assert {p["action"] for p in doc["partitions"]} == {"unchanged"}
    assert {p: p.stat().st_mtime_ns for p in files(tmp_path / "log")} == before
    # a crash between writing the merged file and deleting its inputs (put one back, and an
    # interrupted run's temporary file): the next run finishes the deletion
    name = sorted(inputs)[0]
    (day1 / name).write_bytes(inputs[name])
    (day1 / ".compact-0123456789abcdef.parquet.dead.tmp").write_bytes(b"cut short")
    assert len(log_cells(url)) > len(every)
    doc = compact(url, "2025-12-31", capsys)
    t = next(p for p in doc["partitions"] if p["table"] == "t")
    assert t["action"] == "cleaned" and sorted(t["leftovers_removed"]) == sorted(
        [name, ".compact-0123456789abcdef.parquet.dead.tmp"]
    )
    assert files(day1) == [merged] and log_cells(url) == every
    # later batches of that day merge with the compacted file; a batch shipped again that it
    # holds already is dropped, not doubled
    late = entries(2, first=30)
    s.apply(late, WAL)
    s.apply(old[6:9], WAL)
    doc = compact(url, "2025-12-31", capsys)
    t = next(p for p in doc["partitions"] if p["table"] == "t")
    again = next(n for n in inputs if n.endswith(f"-{600:020d}-{900:020d}.parquet"))
    assert t["action"] == "merged" and t["leftovers_removed"] == [again] and t["inputs"][0] == merged.name
    assert len(files(day1)) == 1 and log_cells(url) == sorted(every + cells_of(late))
    capsys.readouterr()
    assert main(["changelog", "compact", url, "--date", "2026-01-01"]) == 0
    out = capsys.readouterr().out
    assert "table=t date=2026-01-01: unchanged, one file (8 rows)" in out


def test_spark_reads_the_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    url = f"file://{tmp_path}/log"
    s = sink(url)
    s.apply(entries(3), WAL)
    s.apply(entries(2, first=3, table=NS_TABLE, write_time=DAY2), WAL)
    from pyspark.sql import SparkSession

    monkeypatch.setenv("SPARK_LOCAL_IP", "127.0.0.1")
    # py4j logs at INFO from a finalizer as the interpreter exits, after the log streams closed
    logging.getLogger("py4j").setLevel(logging.WARNING)
    spark = (
        SparkSession.builder.master("local[1]")
        .appName("walship-changelog-test")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "1")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    try:
        df = spark.read.parquet(url)
        counts = df.groupBy("table", "date").count().collect()  # the partition values, decoded
        assert sorted((r["table"], str(r["date"]), r["count"]) for r in counts) == [
            ("ns:a", "2026-01-01", 4),
            ("t", "2025-12-31", 6),
        ]
        types = dict(df.dtypes)
        assert types["write_time"] == "timestamp" and types["cluster_ids"] == "array<string>"
        assert types["row"] == "binary" and types["offset"] == "bigint"
    finally:
        spark.stop()


def test_bad_input_is_one_clear_line(
    a: Cluster, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    base = [*a.cli_flags(), "subscription", "add"]
    url = str(tmp_path / "log")
    for args, needle in (
        (["s1", "--parquet", url, "--threads", "4"], "--threads does not apply to a change log"),
        (["s1", "--parquet", url, "--payload-column", "r:p"], "--payload-column does not apply to a change log"),
        (["s1", "--parquet", "nosuch://bucket/log"], "--parquet"),
        (["s1", "--parquet", " "], "empty change log URL"),
        (["s1", "--parquet", url, "--filter", "nosuch_module:f"], "walship.sep.filter"),
        (["s1", "--parquet", url, "--start-time", "yesterday"], "--start-time"),
    ):
        capsys.readouterr()
        assert main([*base, *args]) == 1, args
        err = capsys.readouterr().err
        assert needle in err and "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    with pytest.raises(SystemExit):  # argparse: one of --listener and --parquet, not both
        main([*base, "s1", "--parquet", url, "--listener", "sep_listeners:JsonLinesListener"])
    # a plain path becomes an absolute file URL; list and show name it
    monkeypatch.chdir(tmp_path)
    assert main([*base, "s1", "--parquet", "rel/log"]) == 0
    capsys.readouterr()
    assert main([*a.cli_flags(), "subscription", "list", "--json"]) == 0
    (info,) = json.loads(capsys.readouterr().out)
    assert info["parquet"] == f"file://{tmp_path}/rel/log" and info["listener"] is None
    assert main([*a.cli_flags(), "subscription", "list"]) == 0
    assert f"parquet file://{tmp_path}/rel/log" in capsys.readouterr().out
    assert main([*a.cli_flags(), "subscription", "show", "s1"]) == 0
    assert f"file://{tmp_path}/rel/log" in capsys.readouterr().out
    # compaction
    log = tmp_path / "log2"
    part = log / f"table={escape_path_name('ns:a')}" / "date=2026-01-01"
    part.mkdir(parents=True)
    (part / f"part-{'0' * 16}-{0:020d}-{100:020d}.parquet").write_bytes(b"not parquet at all")
    (part / f"part-{'0' * 16}-{100:020d}-{200:020d}.parquet").write_bytes(b"nor this")
    for args, needle in (
        ([f"file://{tmp_path}/nosuch", "--date", "2026-01-01"], f"{tmp_path}/nosuch: no such directory"),
        ([str(log), "--date", "2026-13-01"], "invalid --date '2026-13-01'"),
        ([str(log), "--date", "yesterday"], "invalid --date 'yesterday'"),
        ([str(log), "--date", "2026-01-01"], f"{0:020d}-{100:020d}.parquet: not a Parquet file"),
    ):
        capsys.readouterr()
        assert main(["changelog", "compact", *args]) == 1, args
        err = capsys.readouterr().err
        assert needle in err and "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    for p in files(part):
        p.unlink()
    (part / "notes.txt").write_text("mine")
    assert main(["changelog", "compact", str(log), "--date", "2026-01-01"]) == 1
    assert "notes.txt: not a file of the change log" in capsys.readouterr().err
