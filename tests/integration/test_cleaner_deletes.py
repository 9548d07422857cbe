"""The cleaner deletes what it decided to delete together: on a remote file system (fsspec's
memory one standing in for HDFS) with several deletes in flight, and a file another cleaner
deleted meanwhile is not counted as deleted by this one."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from kazoo.client import KazooClient

from walship.peer import PeerConfig
from walship.replicate.cleaner import clean
from walship.replicate.walstore import WalStore
from walship.servername import ServerName
from walship.wal import build_wal_name
from walship.zk import ReplicationPeers, ReplicationQueues, ZnodeLayout

pytestmark = pytest.mark.integration

SERVER = ServerName("rs1.example.com", 16020, 1)
TTL = 600.0


def test_remote_archive(zk: KazooClient, layout: ZnodeLayout, memory_root: str) -> None:
    ReplicationPeers(zk, layout).add(PeerConfig("1", "zk:2181:/b"))
    store = WalStore(memory_root)
    names = [build_wal_name(SERVER, ts) for ts in range(1, 41)]
    for name in names:
        store.fs.pipe_file(f"{store.base}/oldWALs/{name}", b"x" * 10)
    store.fs.pipe_file(f"{store.base}/oldWALs/README", b"not a WAL")
    kept = names[-3:]
    for name in kept:
        ReplicationQueues(zk, layout).add_wal(str(SERVER), name)
    later = float(store.fs.info(f"{store.base}/oldWALs/README")["created"].timestamp()) + 10 * TTL
    report = clean(zk, layout, store, ttl=TTL, now=later)
    assert report.deleted_files == names[:-3] and report.deleted.bytes == 370
    assert report.kept_referenced.files == 3 and len(report.not_wal) == 1
    assert sorted(p.rsplit("/", 1)[-1] for p in store.fs.ls(f"{store.base}/oldWALs", detail=False)) == sorted(
        [*kept, "README"]
    )


def test_a_file_deleted_meanwhile_is_not_counted(
    zk: KazooClient, layout: ZnodeLayout, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    archive = tmp_path / "oldWALs"
    archive.mkdir()
    old = 2_000_000_000.0 - 10 * TTL
    names = [build_wal_name(SERVER, ts) for ts in (1, 2, 3)]
    for name in names:
        (archive / name).write_bytes(b"x" * 10)
        os.utime(archive / name, (old, old))
    store = WalStore(str(tmp_path))
    listed = store.list_archive()
    (archive / names[1]).unlink()  # another cleaner, between the listing and the delete
    monkeypatch.setattr(store, "list_archive", lambda: listed)
    report = clean(zk, layout, store, ttl=TTL, now=2_000_000_000.0)
    assert report.deleted_files == [names[0], names[2]] and report.deleted.files == 2
    assert list(archive.iterdir()) == []
