"""HBase 2.6 on a local file system (``hbase.wal.dir=file://...``): its region servers write
WALs through HBase's HFileSystem, which turns Hadoop's checksum files off on a local file
system, so a ``.<name>.crc`` beside one of its WALs is rare (one was seen beside a WAL of a
second WAL group; the minicluster's ``--wal-checksums`` covers WAL roots that have them all:
``test_checksum_files.py``). walship's cleaner, run on the real archive, deletes the WALs
walship shipped, with their checksum files if any, and keeps every one a queue holds."""

from __future__ import annotations

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
        gone = before - kept  # ttl 0: the rest goes, each WAL with its checksum file
        sums = {f for f in gone if f.startswith(".") and f.endswith(".crc")}
        assert set(result.deleted_files) >= gone - sums
        assert not sums & left and result.checksum_files_deleted >= len(sums), (sums, left)
