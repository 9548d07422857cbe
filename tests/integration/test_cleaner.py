"""The log cleaner against random queue states and files, and with ZooKeeper stopped."""

from __future__ import annotations

import json
import os
import time
import uuid
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kazoo.client import KazooClient
from waiting import wait_until

from walship import defaults
from walship.cli import main
from walship.errors import WalshipError
from walship.peer import PeerConfig
from walship.replicate.cleaner import clean
from walship.replicate.walstore import WalStore
from walship.servername import ServerName
from walship.wal import build_wal_name
from walship.zk import ReplicationPeers, ReplicationQueues, ZnodeLayout, connect, zk_client
from walship.zk.localserver import LocalZooKeeper, free_port

pytestmark = pytest.mark.integration

NOW = 2_000_000_000.0
TTL = 600.0
SERVERS = [ServerName(f"rs{i}.example.com", 16020, 1) for i in range(3)]


def touch(path: Path, mtime: float, size: int = 10) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"x" * size)
    os.utime(path, (mtime, mtime))


file_spec = st.tuples(
    st.sampled_from(["wal", "wal", "wal", "junk"]),
    st.integers(0, 2),  # server
    st.integers(1, 10**6),  # WAL timestamp
    st.sampled_from(["young", "old", "ttl-edge"]),
    st.sampled_from(["none", "peer1", "peer2", "recovered"]),  # which queue references it
)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(file_spec, min_size=1, max_size=25, unique_by=lambda f: (f[0], f[1], f[2])), st.booleans())
def test_never_deletes_what_it_must_keep(
    zk_server: LocalZooKeeper,
    tmp_path_factory: pytest.TempPathFactory,
    files: list[tuple[str, int, int, str, str]],
    live_wal_dir: bool,
) -> None:
    root = tmp_path_factory.mktemp("walroot")
    chroot = f"/cleaner-{uuid.uuid4().hex}"
    with zk_client(zk_server.hosts) as c:
        c.ensure_path(chroot)
    client = connect(zk_server.hosts + chroot)
    layout = ZnodeLayout("/hbase")
    try:
        peers = ReplicationPeers(client, layout)
        peers.add(PeerConfig("1", "zk:2181:/b"))
        peers.add(PeerConfig("2", "zk:2181:/c", enabled=False))
        queues = ReplicationQueues(client, layout)
        expect_kept, expect_deleted = set(), set()
        for kind, server, ts, age, ref in files:
            s = SERVERS[server]
            name = build_wal_name(s, ts) if kind == "wal" else f"notes-{server}-{ts}.txt"
            mtime = {"young": NOW - 10, "old": NOW - 10 * TTL, "ttl-edge": NOW - TTL}[age]
            touch(root / "oldWALs" / name, mtime)
            if kind == "wal" and ref != "none":
                qid = {"peer1": "1", "peer2": "2", "recovered": f"1-{SERVERS[(server + 1) % 3]}"}[ref]
                client.create(layout.wal(str(s), qid, name), b"", makepath=True)
            deletable = kind == "wal" and ref == "none" and age == "old"
            (expect_deleted if deletable else expect_kept).add(name)
        live = root / "WALs" / str(SERVERS[0]) / build_wal_name(SERVERS[0], 99)
        if live_wal_dir:
            touch(live, NOW - 100 * TTL)  # an old file under WALs/: never touched
        report = clean(client, layout, WalStore(str(root)), ttl=TTL, now=NOW)
        remaining = {p.name for p in (root / "oldWALs").iterdir()}
        assert remaining == expect_kept
        assert set(report.deleted_files) == expect_deleted
        assert report.deleted.files == len(expect_deleted)
        assert len(report.not_wal) == sum(1 for f in files if f[0] == "junk")
        assert not live_wal_dir or live.exists()
        assert queues.all_wals() <= remaining  # every referenced WAL is still there
    finally:
        client.stop()
        client.close()
        client.close()


def test_dry_run_deletes_nothing(zk: KazooClient, layout: ZnodeLayout, tmp_path: Path) -> None:
    touch(tmp_path / "oldWALs" / build_wal_name(SERVERS[0], 5), NOW - 10 * TTL, size=123)
    report = clean(zk, layout, WalStore(str(tmp_path)), ttl=TTL, now=NOW, dry_run=True)
    assert report.deleted.files == 1 and report.deleted.bytes == 123
    assert len(list((tmp_path / "oldWALs").iterdir())) == 1


def test_warns_about_a_disabled_peer_holding_bytes(zk: KazooClient, layout: ZnodeLayout, tmp_path: Path) -> None:
    ReplicationPeers(zk, layout).add(PeerConfig("9", "zk:2181:/b", enabled=False))
    for ts in range(3):
        name = build_wal_name(SERVERS[0], ts)
        touch(tmp_path / "oldWALs" / name, NOW - 10 * TTL, size=1000)
        ReplicationQueues(zk, layout).add_wal(str(SERVERS[0]), name)
    report = clean(zk, layout, WalStore(str(tmp_path)), ttl=TTL, now=NOW, disabled_peer_limit=2500)
    assert report.kept_referenced.files == 3 and report.deleted.files == 0
    assert report.warnings and "disabled peer 9 holds 3,000 bytes" in report.warnings[0]


def test_zookeeper_down_deletes_nothing(tmp_path: Path) -> None:
    server = LocalZooKeeper(tmp_path / "zk", free_port())
    server.start()
    try:
        client = connect(server.hosts)
    finally:
        server.stop()  # ZooKeeper goes away: nothing may be deleted
    old = tmp_path / "root" / "oldWALs" / build_wal_name(SERVERS[0], 5)
    touch(old, NOW - 10 * TTL)
    wait_until(lambda: not client.connected, what="the client to see ZooKeeper stopped")
    try:
        with pytest.raises(WalshipError, match="nothing deleted"):
            clean(client, ZnodeLayout("/hbase"), WalStore(str(tmp_path / "root")), ttl=TTL, now=NOW)
    finally:
        client.stop()
        client.close()
        client.close()
    assert old.exists()
    code = main(["--zk", server.hosts, "--zk-timeout", "1", "--wal-root", str(tmp_path / "root"), "clean"])
    assert code == 1 and old.exists()


def test_clean_command(zk_hosts: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    expired = build_wal_name(SERVERS[1], 1)
    young = build_wal_name(SERVERS[1], 2)
    touch(tmp_path / "oldWALs" / expired, time.time() - defaults.CLEAN_TTL - 60)
    touch(tmp_path / "oldWALs" / young, time.time() - defaults.CLEAN_TTL + 600)  # within the default TTL: a day
    touch(tmp_path / "oldWALs" / "README", time.time() - 3600)
    g = ["--zk", zk_hosts, "--wal-root", str(tmp_path)]
    assert main([*g, "clean", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "would delete 1 files" in out and "not a WAL, left alone" in out
    assert main([*g, "clean", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["deleted_files"] == [expired]
    assert {p.name for p in (tmp_path / "oldWALs").iterdir()} == {"README", young}
