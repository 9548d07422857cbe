"""HBase 2.6 on a local file system (``hbase.wal.dir=file://...``): its region servers write
WALs through HBase's HFileSystem, which turns Hadoop's checksum files off on a local file
system, so no ``.<name>.crc`` lies beside its WALs (the minicluster's ``--wal-checksums``
covers WAL roots that have them: ``test_checksum_files.py``). walship's cleaner, run on the
real archive, deletes the WALs walship shipped and keeps every one a queue holds."""

from __future__ import annotations

import os
import posixpath

import pytest
from real_hbase import layout, managed_peer, queued_wals, table_on_both, unique, wait_queues_hold_current_wals
from replication_helpers import contents, ship
from waiting import wait_until

from walship.replicate import WalStore
from walship.replicate.cleaner import clean
from walship.zk import ReplicationQueues, zk_client
from walship_testing.harness import HBaseProcess

pytestmark = pytest.mark.integration


def archive(hb: HBaseProcess) -> set[str]:
    return {posixpath.basename(p) for p, _, _ in WalStore(hb.wal_root).list_archive()}


def test_walships_cleaner_on_a_real_local_archive(
    real_multiwal: HBaseProcess, real_hbase: tuple[HBaseProcess, HBaseProcess]
) -> None:
    hb, (_, b_hb) = real_multiwal, real_hbase
    a, b = table_on_both(hb, b_hb, "lfs")
    table = a.table_name.decode()
    with managed_peer(a, b, unique("lfs")) as peer:
        wait_queues_hold_current_wals(a, peer)
        conn = a.conn()
        for i in range(30):
            conn.table(table).put(b"row%02d" % i, {b"r:q": b"v%d" % i})
        conn.close()
        rolled = {w for wals in queued_wals(a, peer).values() for w in wals}
        hb.call("roll")
        hb.call("flush")  # every region: a rolled WAL is archived once nothing in it is unflushed
        wait_until(lambda: bool(rolled & archive(hb)), what="a WAL of the peer's queue archived")
        crc = [f for _, _, files in os.walk(hb.data_dir) for f in files if f.endswith(".crc") and "WAL" in f]
        assert crc == [], crc[:5]  # HBase 2.6 writes no checksum files beside its WALs
        assert ship(a, peer).status == "ok"
        assert len(contents(b)) == 30
        with zk_client(a.zk_hosts) as client:
            held = ReplicationQueues(client, layout(a)).all_wals()
            before = archive(hb)
            result = clean(client, layout(a), WalStore(hb.wal_root), ttl=0)
        left = archive(hb)
        assert result.deleted_files and not set(result.deleted_files) & held
        assert not set(result.deleted_files) & left
        assert held & before <= left  # every archived WAL a queue holds is kept
        kept = held | {f".{wal}.crc" for wal in held}  # a held WAL's checksum file stays with it
        assert set(result.deleted_files) >= before - kept  # ttl 0: the rest goes
