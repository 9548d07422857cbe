"""``walship verify``: source A and peer B over Thrift2, compared row by row, then repaired.

Table t: family r (scope 1, 5 versions) is compared; family l (scope 0) never is.
"""

from __future__ import annotations

import datetime
import json
from pathlib import Path
from typing import Any

import pytest
from fixtures_spark_wal import spark_submit
from real_hbase import BACKENDS
from replication_helpers import Cluster, ship

from walship.cli import main
from walship.thrift.conn import open_thrift2
from walship.thrift.hbase2 import hbase2
from walship.verify import MASKED_REASON, MASKED_REMEDY, VerifyJob, plan, run_split
from walship_testing.harness import HBaseProcess

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def sink_protocol() -> str:
    """Verify reads the peer over Thrift2: peer 1 ships over Thrift2 (``walship.sink.thrift2``)."""
    return "thrift2"


def global_flags(a: Cluster) -> list[str]:
    return [
        "--zk",
        a.zk_hosts,
        "--znode-parent",
        a.parent,
        "--wal-root",
        a.mc.wal_root,
        "--source-thrift2",
        a.thrift2_address(),
    ]


def run_verify(
    a: Cluster, capsys: pytest.CaptureFixture[str], *flags: str, peer: str = "1"
) -> tuple[int, dict[str, Any]]:
    code = main([*global_flags(a), "verify", "--peer", peer, "--recompare-sleep", "0", "--json", *flags])
    out = capsys.readouterr().out
    return code, json.loads(out)


def iso(ms: int) -> str:
    return datetime.datetime.fromtimestamp(ms / 1000, datetime.UTC).isoformat()


def write_rows(c: Cluster, rows: dict[bytes, dict[bytes, bytes]], ts: int) -> None:
    conn = c.conn()
    t = conn.table(c.table_name)
    for row, data in rows.items():
        t.put(row, data, timestamp=ts)
    conn.close()


def scan_all(c: Cluster, family: bytes = b"r") -> list[tuple[bytes, list[tuple[bytes, bytes, int, bytes]]]]:
    """Every row and every version of ``family``, through a Thrift2 scanner."""
    host, port = c.mc.thrift2
    with open_thrift2(host, port) as conn:
        tscan = hbase2.TScan(columns=[hbase2.TColumn(family=family)], maxVersions=100)
        results = conn.client.getScannerResults(c.table_name, tscan, 100_000)
    return [
        (bytes(r.row), sorted((cv.family, cv.qualifier, cv.timestamp, cv.value) for cv in r.columnValues))
        for r in results
    ]


def counters(good: int, src: int = 0, peer: int = 0, diff: int = 0, flight: int = 0) -> dict[str, int]:
    return {
        "GOODROWS": good,
        "BADROWS": src + peer + diff,
        "ONLY_IN_SOURCE_TABLE_ROWS": src,
        "ONLY_IN_PEER_TABLE_ROWS": peer,
        "CONTENT_DIFFERENT_ROWS": diff,
        "IN_FLIGHT_ROWS": flight,
    }


ROWS = {f"row{i:02d}".encode(): {b"r:q": f"v{i}".encode(), b"l:q": b"local"} for i in range(20)}


@pytest.mark.parametrize("backend", BACKENDS)
def test_after_a_clean_replication_every_row_is_good(
    ab: tuple[Cluster, Cluster], capsys: pytest.CaptureFixture[str]
) -> None:
    a, _ = ab
    write_rows(a, ROWS, 1000)
    write_rows(a, {b"row00": {b"r:q": b"second"}}, 2000)
    write_rows(a, {b"local-only": {b"l:q": b"x"}}, 1000)  # scope 0: never compared
    ship(a)
    code, out = run_verify(a, capsys)
    assert code == 0
    assert out["counters"] == counters(good=20)
    assert out["bad_rows"] == []
    assert out["tables"] == [a.table_name.decode()]
    assert out["splits"] == 1  # the table's one region

    code = main([*global_flags(a), "verify", "--peer", "1", "--recompare-sleep", "0"])
    text = capsys.readouterr().out
    assert code == 0
    assert "GOODROWS" in text and "BADROWS" in text and "OK: no bad rows" in text


@pytest.mark.parametrize("backend", BACKENDS)
def test_each_counter_then_repair_until_identical(
    ab: tuple[Cluster, Cluster], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    a, b = ab
    write_rows(a, ROWS, 1000)
    ship(a)
    # on the peer only: two changed rows, two deleted rows, three extra rows
    write_rows(b, {b"row03": {b"r:q": b"changed"}}, 1000)  # same timestamp, other value
    write_rows(b, {b"row04": {b"r:q": b"newer"}}, 1500)  # a version the source lacks
    conn = b.conn()
    conn.table(b.table_name).delete(b"row05")
    conn.table(b.table_name).delete(b"row06")
    conn.close()
    write_rows(b, {b"zz1": {b"r:q": b"p"}, b"zz2": {b"r:q": b"p"}, b"zz3\x00\xff": {b"r:q": b"p"}}, 1000)
    # on the source, not shipped yet: in flight, not bad
    write_rows(a, {b"new1": {b"r:q": b"n"}, b"new2": {b"r:q": b"n"}}, 3000)

    report = tmp_path / "report"
    code, out = run_verify(a, capsys, "--report", str(report))
    assert code == 1
    assert out["counters"] == counters(good=16, src=2, peer=3, diff=2, flight=2)
    assert sorted(out["bad_rows"]) == ["row03", "row04", "row05", "row06", "zz1", "zz2", "zz3\\x00\\xFF"]
    lines = [json.loads(line) for line in (report / "bad_rows.jsonl").read_text().splitlines()]
    kinds = {line["row"]: line["kind"] for line in lines}
    assert kinds == {
        "row03": "CONTENT_DIFFERENT_ROWS",
        "row04": "CONTENT_DIFFERENT_ROWS",
        "row05": "ONLY_IN_SOURCE_TABLE_ROWS",
        "row06": "ONLY_IN_SOURCE_TABLE_ROWS",
        "zz1": "ONLY_IN_PEER_TABLE_ROWS",
        "zz2": "ONLY_IN_PEER_TABLE_ROWS",
        "zz3\\x00\\xFF": "ONLY_IN_PEER_TABLE_ROWS",
    }
    by_row = {line["row"]: line for line in lines}
    assert by_row["row03"]["different"] == [
        {"family": "r", "qualifier": "q", "timestamp": 1000, "source_value": "v3", "peer_value": "changed"}
    ]
    assert by_row["row04"]["only_in_peer"] == [{"family": "r", "qualifier": "q", "timestamp": 1500, "value": "newer"}]
    assert by_row["row05"]["only_in_source"] == [{"family": "r", "qualifier": "q", "timestamp": 1000, "value": "v5"}]

    # repair: the deleted rows are masked by the peer's delete markers
    code, out = run_verify(a, capsys, "--repair", "--report", str(report))
    assert code == 1
    assert out["found"] == counters(good=16, src=2, peer=3, diff=2, flight=2)
    assert out["counters"]["BADROWS"] == 2 and out["counters"]["ONLY_IN_SOURCE_TABLE_ROWS"] == 2
    assert out["counters"]["REPAIRED_ROWS"] == 5 and out["counters"]["IN_FLIGHT_ROWS"] == 2
    unrepaired = {r["row"]: r for r in out["repair"] if not r["repaired"]}
    assert set(unrepaired) == {"row05", "row06"}
    assert unrepaired["row05"]["reason"] == MASKED_REASON and unrepaired["row05"]["remedy"] == MASKED_REMEDY
    audit = [json.loads(line) for line in (report / "repair.jsonl").read_text().splitlines()]
    assert len(audit) == 7 and sum(r["repaired"] for r in audit) == 5
    assert "new1" not in {r["row"] for r in audit}  # in flight: never touched

    # the remedy: major-compact the peer's table, then repair again
    if isinstance(b.mc, HBaseProcess):
        # HBase 2.6's Thrift1 majorCompact runs a minor compaction: flush and major-compact as
        # the shell's flush and major_compact do (the compaction is done when the call returns)
        b.mc.call("major_compact", table=b.table_name.decode())
    else:
        conn = b.conn()
        conn.compact_table(b.table_name, major=True)
        conn.close()
    code, out = run_verify(a, capsys, "--repair")
    assert code == 0, out
    assert out["counters"]["BADROWS"] == 0 and out["counters"]["REPAIRED_ROWS"] == 2

    ship(a)
    code, out = run_verify(a, capsys)
    assert code == 0
    assert out["counters"] == counters(good=22)
    assert scan_all(a) == scan_all(b)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_cell_masked_on_the_peer_is_reported_unrepaired(
    ab: tuple[Cluster, Cluster], capsys: pytest.CaptureFixture[str]
) -> None:
    a, b = ab
    write_rows(a, {b"m": {b"r:q": b"at100"}, b"ok": {b"r:q": b"fine"}}, 100)
    ship(a)
    host, port = b.mc.thrift2
    with open_thrift2(host, port) as conn:
        conn.client.deleteSingle(
            b.table_name,
            hbase2.TDelete(
                row=b"m",
                columns=[hbase2.TColumn(family=b"r", qualifier=b"q", timestamp=200)],
                deleteType=hbase2.TDeleteType.DELETE_COLUMNS,
            ),
        )
    code, out = run_verify(a, capsys, "--repair")
    assert code == 1
    assert out["counters"] == {**counters(good=1, src=1), "REPAIRED_ROWS": 0}
    (line,) = out["repair"]
    assert line["row"] == "m" and not line["repaired"]
    assert line["reason"] == "masked by a delete marker on the peer"
    assert line["remedy"] == "flush and major-compact the peer table, then repair again"
    # no new timestamps were written: the peer still cannot show the cell, and has no other
    assert [r for r in scan_all(b) if r[0] == b"m"] == []

    code = main([*global_flags(a), "verify", "--peer", "1", "--recompare-sleep", "0", "--repair"])
    text = capsys.readouterr().out
    assert code == 1 and "masked by a delete marker on the peer" in text and "major-compact" in text


def test_time_range_and_row_prefix_restrict_the_comparison(
    ab: tuple[Cluster, Cluster], capsys: pytest.CaptureFixture[str]
) -> None:
    a, b = ab
    write_rows(a, {b"a1": {b"r:q": b"x"}, b"a2": {b"r:q": b"x"}, b"b1": {b"r:q": b"x"}}, 1000)
    write_rows(a, {b"a3": {b"r:q": b"y"}, b"b2": {b"r:q": b"y"}}, 5000)
    ship(a)
    write_rows(b, {b"a1": {b"r:q": b"peer"}}, 1000)  # differs at 1000
    write_rows(b, {b"b2": {b"r:q": b"peer"}}, 5000)  # differs at 5000
    write_rows(b, {b"a9": {b"r:q": b"peer"}}, 6000)  # only on the peer, at 6000

    _, out = run_verify(a, capsys)
    assert out["counters"] == counters(good=3, diff=2, peer=1)
    code, out = run_verify(a, capsys, "--start-time", iso(0), "--end-time", iso(5000))
    assert code == 1 and out["counters"] == counters(good=2, diff=1)
    assert out["bad_rows"] == ["a1"]
    code, out = run_verify(a, capsys, "--start-time", iso(5000), "--end-time", iso(6000))
    assert out["counters"] == counters(good=1, diff=1) and out["bad_rows"] == ["b2"]
    code, out = run_verify(a, capsys, "--row-prefix", "b")
    assert out["counters"] == counters(good=1, diff=1) and out["bad_rows"] == ["b2"]
    code, out = run_verify(a, capsys, "--row-prefix", "a", "--end-time", iso(5000), "--families", "r", "--table", "t")
    assert out["counters"] == counters(good=1, diff=1) and out["bad_rows"] == ["a1"]
    code, out = run_verify(a, capsys, "--row-prefix", "a3", "--row-prefix", "b1")
    assert code == 0 and out["counters"] == counters(good=2)


@pytest.mark.parametrize(
    ("flags", "peer", "expected"),
    [
        ([], "9", "peer 9 does not exist"),
        (["--table", "nope"], "1", "--table nope: no such table"),
        (["--families", "zz"], "1", "--families: unknown family zz"),
        (["--families", "l"], "1", "family l of table t is not replicated to peer 1 (REPLICATION_SCOPE 0)"),
        (["--start-time", "2024-01-02T00:00:00Z", "--end-time", "2024-01-01T00:00:00Z"], "1", "--start-time"),
        (["--start-time", "2024-01-01T00:00:00Z", "--end-time", "2024-01-01T00:00:00Z"], "1", "empty or reversed"),
        (["--start-time", "yesterday"], "1", "--start-time: not an ISO time"),
        (["--versions", "0"], "1", "--versions: must be 1 to 2147483647"),
        (["--versions", "x"], "1", "--versions: not an integer"),
        (["--recompare-sleep", "-1"], "1", "--recompare-sleep"),
    ],
)
def test_bad_input_is_refused_naming_the_flag(
    ab: tuple[Cluster, Cluster], capsys: pytest.CaptureFixture[str], flags: list[str], peer: str, expected: str
) -> None:
    a, _ = ab
    code = main([*global_flags(a), "verify", "--peer", peer, *flags])
    err = capsys.readouterr().err
    assert code == 1
    assert expected in err, err
    assert "Traceback" not in err


def test_a_peer_without_thrift2_servers_is_refused(
    ab: tuple[Cluster, Cluster], capsys: pytest.CaptureFixture[str]
) -> None:
    from replication_helpers import add_peer

    a, b = ab
    add_peer(a, b, peer_id="2", protocol="thrift1")
    code = main([*global_flags(a), "verify", "--peer", "2"])
    err = capsys.readouterr().err
    assert code == 1 and "need walship.sink.thrift2" in err
    code = main([*global_flags(a)[:-2], "verify", "--peer", "1"])
    err = capsys.readouterr().err
    assert code == 1 and "--source-thrift2" in err


def test_the_spark_job_counts_as_the_command_does(
    ab: tuple[Cluster, Cluster], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    a, b = ab
    write_rows(a, ROWS, 1000)
    ship(a)
    write_rows(b, {b"row01": {b"r:q": b"changed"}, b"zz": {b"r:q": b"p"}}, 1000)
    write_rows(a, {b"new": {b"r:q": b"n"}}, 3000)
    _, expected = run_verify(a, capsys)
    assert expected["counters"] == counters(good=19, diff=1, peer=1, flight=1)

    # the same splits through the library's split function, then through spark-submit
    job = VerifyJob(
        zk=a.zk_hosts,
        znode_parent=a.parent,
        wal_root=str(a.mc.data_dir),
        source_thrift2=a.thrift2_address(),
        peer_id="1",
        recompare_sleep=0,
    )
    job, splits = plan(job)
    assert sum(run_split(job, s).counters.bad for s in splits) == 2

    done = spark_submit(
        "verify.py",
        [
            "--job",
            job.to_json(),
        ],
        tmp_path,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    # spark-submit passes the Python driver's log (stderr) on its stdout: the summary is the JSON line
    summary = json.loads([line for line in done.stdout.splitlines() if line.startswith('{"')][-1])
    assert summary["counters"] == expected["counters"]
    assert sorted(summary["bad_rows"]) == sorted(expected["bad_rows"]) == ["row01", "zz"]
    assert summary["splits"] == expected["splits"]


@pytest.mark.parametrize("backend", BACKENDS)
def test_in_flight_only_when_the_unshipped_edits_explain_the_whole_difference(
    ab: tuple[Cluster, Cluster], capsys: pytest.CaptureFixture[str]
) -> None:
    a, b = ab
    write_rows(a, ROWS, 1000)
    ship(a)
    # unshipped on the source: a new version of row01, and of row02 ...
    write_rows(a, {b"row01": {b"r:q": b"next"}, b"row02": {b"r:q": b"next"}}, 2000)
    # ... and a single-version delete of row07's only version: the peer still shows it
    with open_thrift2(*a.mc.thrift2) as conn:
        conn.client.deleteSingle(
            a.table_name,
            hbase2.TDelete(
                row=b"row07",
                columns=[hbase2.TColumn(family=b"r", qualifier=b"q", timestamp=1000)],
                deleteType=hbase2.TDeleteType.DELETE_COLUMN,
            ),
        )
    # ... but row02 is also damaged on the peer, in a way no unshipped edit explains
    write_rows(b, {b"row02": {b"r:z": b"stray"}}, 1000)
    code, out = run_verify(a, capsys)
    assert code == 1
    assert out["counters"] == counters(good=17, diff=1, flight=2)
    assert out["bad_rows"] == ["row02"]
    ship(a)  # once shipped, row02 differs only by the stray cell
    code, out = run_verify(a, capsys)
    assert out["counters"] == counters(good=18, diff=1) and out["bad_rows"] == ["row02"]  # row07 is gone on both
