"""Serial peers' last pushed sequence ids on a real ZooKeeper server: HBase's znode layout and
encoding, written in one multi with the queue's position, only forward, never half."""

from __future__ import annotations

import threading

import pytest
from conftest import server_name, wal_name
from kazoo.client import KazooClient

from walship.errors import ConfigError, QueueNotFoundError
from walship.peer import PeerConfig
from walship.zk import ReplicationPeers, ReplicationQueues, ZnodeLayout
from walship.zk.encoding import decode_position
from walship.zk.lastpushed import NO_SEQNUM, LastPushedIds

R1 = "0123456789abcdef0123456789abcdef"
R2 = "fedcba9876543210fedcba9876543210"


def _queue(zk: KazooClient, layout: ZnodeLayout, peer: str = "1") -> tuple[ReplicationQueues, str, str]:
    server = server_name(1)
    wal = wal_name(server, 1700000000000)
    queues = ReplicationQueues(zk, layout)
    queues.add_wal(server, wal, [peer])
    return queues, server, wal


def test_ids_live_where_hbase_keeps_them(zk: KazooClient, layout: ZnodeLayout) -> None:
    queues, server, wal = _queue(zk, layout)
    queues.set_position(server, "1", wal, 100, last_pushed={R1: 41, R2: 7})
    path = f"/hbase/replication/regions/01/23/{R1[4:]}-1"
    data, _ = zk.get(path)
    assert data[:4] == b"PBUF" and decode_position(data, path) == 41
    assert LastPushedIds(zk, layout).get(R2, "1") == 7
    assert LastPushedIds(zk, layout).get(R1, "2") == NO_SEQNUM
    assert queues.wals(server, "1")[0].position == 100


def test_ids_only_move_forward(zk: KazooClient, layout: ZnodeLayout) -> None:
    queues, server, wal = _queue(zk, layout)
    ids = LastPushedIds(zk, layout)
    queues.set_position(server, "1", wal, 100, last_pushed={R1: 50})
    queues.set_position(server, "1", wal, 200, last_pushed={R1: 40, R2: 3})  # R1 older: kept at 50
    assert (ids.get(R1, "1"), ids.get(R2, "1")) == (50, 3)
    assert queues.wals(server, "1")[0].position == 200


def test_a_gone_queue_writes_no_id(zk: KazooClient, layout: ZnodeLayout) -> None:
    """The position and the ids are one multi: a WAL znode that is gone (the queue was
    claimed) leaves the ids where they were."""
    queues, server, wal = _queue(zk, layout)
    queues.remove_wals(server, "1", [wal])
    with pytest.raises(QueueNotFoundError, match="does not exist"):
        queues.set_position(server, "1", wal, 100, last_pushed={R1: 9})
    assert LastPushedIds(zk, layout).get(R1, "1") == NO_SEQNUM


def test_racing_queues_keep_the_highest(zk: KazooClient, layout: ZnodeLayout) -> None:
    """Two queues of one peer (a region's ranges in two servers' WALs) write one region's id
    at once, by compare-and-set: whatever the interleaving, the highest id stays."""
    a = server_name(1)
    b = server_name(2)
    queues = ReplicationQueues(zk, layout)
    wal_a, wal_b = wal_name(a, 1700000000000), wal_name(b, 1700000000001)
    queues.add_wal(a, wal_a, ["1"])
    queues.add_wal(b, wal_b, ["1"])
    start = threading.Barrier(2)

    def ship(server: str, wal: str, ids: range) -> None:
        start.wait()
        for pos, seq in enumerate(ids, 1):
            queues.set_position(server, "1", wal, pos, last_pushed={R1: seq})

    threads = [
        threading.Thread(target=ship, args=(a, wal_a, range(1, 200, 2))),
        threading.Thread(target=ship, args=(b, wal_b, range(2, 201, 2))),
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert LastPushedIds(zk, layout).get(R1, "1") == 200


def test_removing_the_peer_removes_its_ids(zk: KazooClient, layout: ZnodeLayout) -> None:
    peers = ReplicationPeers(zk, layout)
    for pid in ("1", "2"):
        peers.add(PeerConfig(pid, "zk:2181:/hbase-b", serial=True))
    for pid in ("1", "2"):
        queues, server, wal = _queue(zk, layout, pid)
        queues.set_position(server, pid, wal, 10, last_pushed={R1: 5, R2: 6})
    peers.remove("1")
    ids = LastPushedIds(zk, layout)
    assert (ids.get(R1, "1"), ids.get(R2, "1")) == (NO_SEQNUM, NO_SEQNUM)
    assert (ids.get(R1, "2"), ids.get(R2, "2")) == (5, 6)


def test_a_bad_region_name_is_named(layout: ZnodeLayout) -> None:
    with pytest.raises(ConfigError, match="'abc'"):
        layout.last_pushed("abc", "1")
