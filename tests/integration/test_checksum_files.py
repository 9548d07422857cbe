"""WALs on a Hadoop local file system carry a checksum file ``.<name>.crc`` beside them. The
minicluster started with ``--wal-checksums`` writes them as Hadoop does: queues, replay, status
and a restart after a crash never take one for a WAL, and the cleaner deletes a WAL's checksum
file with it (and one whose WAL is gone), never one whose WAL it keeps."""

from __future__ import annotations

import datetime as dt
import os
import struct
import zlib
from collections.abc import Callable
from pathlib import Path

import pytest
from replication_helpers import add_peer, contents, make_cluster, ship
from waiting import wait_until

from walship.replicate import WalStore
from walship.replicate.cleaner import clean
from walship.replicate.replay import replay
from walship.status import collect_status
from walship.wal.names import is_checksum_file
from walship.zk import ReplicationQueues, ZnodeLayout, zk_client
from walship_testing.minicluster import AdminClient
from walship_testing.minicluster.process import MiniClusterProcess

pytestmark = pytest.mark.integration


def checksums_match(wal: Path) -> bool:
    """The checksum file beside ``wal`` is Hadoop's: ``crc\\0``, 512, a CRC-32 per 512 bytes."""
    crc = (wal.parent / f".{wal.name}.crc").read_bytes()
    data = wal.read_bytes()
    sums = [zlib.crc32(data[i : i + 512]) for i in range(0, len(data), 512)]
    return crc == b"crc\x00" + struct.pack(">i", 512) + b"".join(struct.pack(">I", s) for s in sums)


def test_checksum_files_are_never_wals_and_go_with_their_wal(
    minicluster_factory: Callable[..., MiniClusterProcess], zk_hosts: str
) -> None:
    a = make_cluster(minicluster_factory, zk_hosts, "A", regionservers=1, wal_checksums=True, roll_order="hbase")
    b = make_cluster(minicluster_factory, zk_hosts, "B", regionservers=1)
    add_peer(a, b)
    data, admin = Path(a.mc.wal_root), AdminClient(a.mc.admin)
    begin = dt.datetime.now(dt.UTC)
    table = a.table()
    for i in range(20):
        table.put(b"row%02d" % i, {b"r:q": b"v%d" % i})
    admin.roll()  # in HBase's order the old WAL is closed a moment later, and archived at the next roll
    server_dir = next((data / "WALs").iterdir())
    wait_until(lambda: any(is_checksum_file(p.name) for p in server_dir.iterdir()), what="a closed WAL's .crc")
    for i in range(20, 40):
        table.put(b"row%02d" % i, {b"r:q": b"v%d" % i})
    admin.roll()
    archived = [p for p in (data / "oldWALs").iterdir() if not is_checksum_file(p.name)]
    assert archived and all(checksums_match(p) for p in archived)  # it moved with its checksum file

    with zk_client(a.zk_hosts) as client:
        queues = ReplicationQueues(client, ZnodeLayout(a.parent)).list_queues("1")
        assert not any(is_checksum_file(w.name) for q in queues for w in q.wals)
        assert ship(a).status == "ok"
        assert contents(b) == contents(a, b"r") and len(contents(b)) == 40
        store = WalStore(a.mc.wal_root)
        status = collect_status(client, ZnodeLayout(a.parent), store, "1", probe_timeout=0).to_json()
        assert all(q["last_error"] is None for q in status["peers"][0]["queues"]), status
        report = replay(client, ZnodeLayout(a.parent), store, "1", begin, dt.datetime.now(dt.UTC))
        assert report.not_wals == [] and len(report.wals_read) >= 2
        assert not any(is_checksum_file(w) for w in report.wals_read)

        # a checksum file whose WAL is gone (deleted by hand), and an old one of a WAL still here
        orphan = data / "oldWALs" / ".gone%2C16020%2C1.1700000000000.crc"
        orphan.write_bytes(b"crc\x00" + struct.pack(">i", 512))
        os.utime(orphan, (1_700_000_000, 1_700_000_000))
        result = clean(client, ZnodeLayout(a.parent), store, ttl=0)
    left = {p.name for p in (data / "oldWALs").iterdir()}
    assert result.not_wal == []
    assert sorted(result.deleted_files) == sorted(p.name for p in archived)
    assert result.checksum_files_deleted == len(archived) + 1  # theirs, and the orphan
    assert left == set(), left

    # a crash leaves a closed WAL and its checksum file under WALs/: the restart replays the
    # WAL, moves both to the archive, and loses nothing
    wait_until(lambda: any(is_checksum_file(p.name) for p in server_dir.iterdir()), what="a closed WAL's .crc")
    a.mc.kill()
    a.mc.start()
    assert len(contents(a, b"r")) == 40
    moved = {p.name for p in (data / "oldWALs").iterdir()}
    assert any(is_checksum_file(n) for n in moved)
    assert all(n[1:-4] in moved for n in moved if is_checksum_file(n))
