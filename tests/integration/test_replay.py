"""Backlog replay: windows, repeats, gaps; through the library, the command and the DAG."""

from __future__ import annotations

import datetime as dt
import json
import time
from collections.abc import Callable, Iterable
from dataclasses import replace
from pathlib import Path

import happybase
import pytest
from airflow_env import AIRFLOW_MARKS, task_failures
from fixtures_spark_wal import HOUR, ms, write_hourly_wals
from kazoo.client import KazooClient

from walship.cli import main
from walship.errors import ReplayGapError, ReplicationError
from walship.peer import PeerConfig
from walship.replicate.cleaner import clean, last_run
from walship.replicate.replay import find_gaps, replay
from walship.replicate.walstore import WalStore
from walship.servername import ServerName
from walship.wal import build_wal_name
from walship.zk import ReplicationPeers, ReplicationQueues, ZnodeLayout, ensure_cluster_id
from walship_testing.minicluster import AdminClient
from walship_testing.minicluster.process import MiniClusterProcess

pytestmark = [
    pytest.mark.integration,
    *AIRFLOW_MARKS,
]

SRC = ZnodeLayout("/src")
SERVER = ServerName("rs1.example.com", 16020, 1)
H0 = dt.datetime(2026, 11, 20, 10, tzinfo=dt.UTC)


@pytest.fixture
def source(
    zk: KazooClient, zk_hosts: str, minicluster_factory: Callable[..., MiniClusterProcess], tmp_path: Path
) -> tuple[Path, MiniClusterProcess]:
    """WALs of three hours (a new WAL each hour, all archived but the last), 10 edits an hour."""
    b = minicluster_factory("B")
    conn = happybase.Connection(*b.thrift)
    conn.create_table("t", {"r": {"max_versions": 5}})
    conn.close()
    AdminClient(b.admin).set_scope("t", "r", 1)
    ensure_cluster_id(zk, SRC)
    host, port = b.thrift
    hostport, _, chroot = zk_hosts.partition("/")
    ReplicationPeers(zk, SRC).add(
        PeerConfig("1", f"{hostport}:/{chroot}/hbase-b", configuration={"walship.sink.thrift": f"{host}:{port}"})
    )
    root = tmp_path / "src"
    write_hourly_wals(root, SERVER, H0, lambda h, i: b"h%d-%02d" % (h, i), lambda h, i: b"v%d-%d" % (h, i))
    return root, b


def rows(b: MiniClusterProcess) -> dict[bytes, dict[bytes, list[tuple[bytes, int]]]]:
    """Every cell on the peer: row -> column -> every version (value, timestamp)."""
    conn = happybase.Connection(*b.thrift)
    t = conn.table("t")
    out = {row: {c: t.cells(row, c, versions=5, include_timestamp=True) for c in sorted(d)} for row, d in t.scan()}
    conn.close()
    return out


def written(pairs: Iterable[tuple[int, int]]) -> dict[bytes, dict[bytes, list[tuple[bytes, int]]]]:
    """What the source's edits of hour ``h``, minute ``i`` for each pair put on a peer."""
    return {b"h%d-%02d" % (h, i): {b"r:q": [(b"v%d-%d" % (h, i), ms(H0 + h * HOUR) + i * 60_000)]} for h, i in pairs}


def test_replays_exactly_the_window_without_touching_queues(
    zk: KazooClient, source: tuple[Path, MiniClusterProcess]
) -> None:
    root, b = source
    report = replay(zk, SRC, WalStore(str(root)), "1", H0 + HOUR, H0 + 2 * HOUR)
    assert report.entries_in_window == 10 and report.entries_shipped == 10 and report.gaps == []
    assert rows(b) == written((1, i) for i in range(10))
    assert ReplicationQueues(zk, SRC).list_queues() == []
    five = dt.timedelta(minutes=5)
    again = replay(zk, SRC, WalStore(str(root)), "1", H0 + five, H0 + 2 * HOUR)  # overlapping the first
    assert again.entries_shipped == 15
    assert rows(b) == written([(0, i) for i in range(5, 10)] + [(1, i) for i in range(10)])


def test_a_gap_fails_naming_the_span_unless_allowed(zk: KazooClient, source: tuple[Path, MiniClusterProcess]) -> None:
    root, b = source
    (root / "oldWALs" / build_wal_name(SERVER, ms(H0))).unlink()  # the first hour's WAL is gone
    with pytest.raises(ReplicationError, match=r"no WAL covers 2026-11-20T09:30:00\+00:00 to 2026-11-20T10:30:00"):
        replay(zk, SRC, WalStore(str(root)), "1", H0 - HOUR / 2, H0 + HOUR / 2)
    assert rows(b) == {}
    end = H0 + HOUR + dt.timedelta(minutes=5, seconds=30)
    report = replay(zk, SRC, WalStore(str(root)), "1", H0 - HOUR / 2, end, allow_gaps=True)
    assert report.gaps == [["2026-11-20T09:30:00+00:00", "2026-11-20T11:00:00+00:00"]]
    assert report.entries_shipped == 6  # what is there: the first minutes of hour 1
    assert rows(b) == written((1, i) for i in range(6))


def test_a_gap_names_how_long_archived_wals_are_kept(zk: KazooClient, source: tuple[Path, MiniClusterProcess]) -> None:
    """Before any cleaner run the gap names the default TTL; after one, that run's TTL and time,
    and HBase's own cleaner's setting."""
    root, _ = source
    walstore = WalStore(str(root))
    (root / "oldWALs" / build_wal_name(SERVER, ms(H0))).unlink()
    with pytest.raises(ReplayGapError) as before:
        replay(zk, SRC, walstore, "1", H0, H0 + HOUR)
    assert "walship clean keeps archived WALs --ttl seconds (default 86400)" in str(before.value)
    assert "hbase.master.logcleaner.ttl" in str(before.value)
    started = int(time.time() * 1000)
    clean(zk, SRC, walstore, ttl=2 * 86400.0)
    run = last_run(zk, SRC)
    assert run is not None and run["ttl"] == 172800.0 and run["ran_at"] >= started
    with pytest.raises(ReplayGapError) as after:
        replay(zk, SRC, walstore, "1", H0, H0 + HOUR)
    assert "walship clean keeps archived WALs 172800 s (its last run: 20" in str(after.value)
    clean(zk, SRC, walstore, ttl=3 * 86400.0, dry_run=True)  # a dry run deletes nothing and records nothing
    assert last_run(zk, SRC) == run


def test_find_gaps() -> None:
    assert find_gaps([(0, 10), (20, 30)], 5, 25) == [(10, 20)]
    assert find_gaps([(0, 10)], 0, 10) == []
    assert find_gaps([], 3, 4) == [(3, 4)]
    assert find_gaps([(5, 10)], 0, 20) == [(0, 5), (10, 20)]


def test_replay_command(
    zk_hosts: str, source: tuple[Path, MiniClusterProcess], capsys: pytest.CaptureFixture[str]
) -> None:
    root, b = source
    g = ["--zk", zk_hosts, "--znode-parent", "/src", "--wal-root", str(root)]
    assert main([*g, "replay", "--peer", "1", "--from", "2026-11-20T12:00:00Z", "--to", "2026-11-20T12:05:30Z"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["entries_shipped"] == 6
    assert rows(b) == written((2, i) for i in range(6))
    assert main([*g, "replay", "--peer", "1", "--from", "2026-11-20T08:00:00Z", "--to", "2026-11-20T09:00:00Z"]) == 1
    assert "no WAL covers 2026-11-20T08:00:00+00:00 to 2026-11-20T09:00:00+00:00" in capsys.readouterr().err


def test_a_replay_into_a_serial_peer_says_what_order_it_does_not_keep(
    zk: KazooClient, zk_hosts: str, source: tuple[Path, MiniClusterProcess], capsys: pytest.CaptureFixture[str]
) -> None:
    root, b = source
    ReplicationPeers(zk, SRC).modify("1", lambda p: replace(p, serial=True))
    g = ["--zk", zk_hosts, "--znode-parent", "/src", "--wal-root", str(root)]
    assert main([*g, "replay", "--peer", "1", "--from", "2026-11-20T12:00:00Z", "--to", "2026-11-20T12:05:30Z"]) == 0
    out, err = capsys.readouterr()
    (warning,) = json.loads(out)["warnings"]
    assert "peer 1 is serial" in warning and "out of order" in warning
    assert err.strip() == f"walship: warning: {warning}"
    assert rows(b) == written((2, i) for i in range(6))  # replayed all the same


def test_replay_dag_windows_repeats_and_gaps(
    dagbag: object,
    zk_hosts: str,
    source: tuple[Path, MiniClusterProcess],
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
) -> None:
    root, b = source
    hostport, _, chroot = zk_hosts.partition("/")
    monkeypatch.setenv(
        "AIRFLOW_CONN_WALSHIP_SOURCE",
        json.dumps(
            {
                "conn_type": "walship",
                "host": f"{hostport}/{chroot}",
                "extra": {"znode_parent": "/src", "wal_root": str(root)},
            }
        ),
    )
    dag = dagbag.dags["walship_replay"]  # type: ignore[attr-defined]
    windows = []
    for h in range(3):  # three hourly windows, as a backfill creates them
        # a manual run at T replays the hour that ended at T
        run = dag.test(logical_date=H0 + (h + 1) * HOUR, run_conf={"peer_id": "1"})
        assert run.state == "success"
        windows.append((run.data_interval_start, run.data_interval_end))
        assert run.data_interval_end - run.data_interval_start == HOUR
    assert rows(b) == written((h, i) for h in range(3) for i in range(10))
    run = dag.test(logical_date=H0 + 2 * HOUR, run_conf={"peer_id": "1"})  # the same window again
    assert run.state == "success" and rows(b) == written((h, i) for h in range(3) for i in range(10))
    (root / "oldWALs" / build_wal_name(SERVER, ms(H0))).unlink()
    assert windows[0][0] == H0
    capfd.readouterr()
    failed = dag.test(logical_date=H0 + HOUR, run_conf={"peer_id": "1"})
    assert failed.state == "failed"
    (reason,) = task_failures(capfd.readouterr().out)  # failed for the gap, and only for it
    assert reason.startswith("walship.errors.ReplayGapError: ") and "for peer 1: no WAL covers" in reason
    assert f"{H0.isoformat()} to {(H0 + HOUR).isoformat()}" in reason and "allow gaps" in reason
    allowed = dag.test(logical_date=H0 + HOUR, run_conf={"peer_id": "1", "allow_gaps": True})
    assert allowed.state == "success"
