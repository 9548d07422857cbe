"""ZooKeeper lost in the middle of the work: what reaches the caller is walship's
ZkUnavailableError, naming what was being done, never one of kazoo's exceptions. Each test has a
ZooKeeper server of its own and stops it partway: the scope audit (the walship_scope task's
work), the SEP DAG's wait for subscriptions, and a Spark ship task's peer lookup."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from walship.errors import ZkUnavailableError
from walship.peer import MANAGED_KEY, PeerConfig
from walship.zk import ReplicationPeers, ZnodeLayout, connect, ensure_cluster_id, zk_client
from walship.zk.localserver import LocalZooKeeper, free_port

pytestmark = pytest.mark.integration

LAYOUT = ZnodeLayout("/hbase")


@pytest.fixture
def own_zk(tmp_path: Path) -> Iterator[LocalZooKeeper]:
    zk = LocalZooKeeper(tmp_path / "zk", free_port())
    zk.start()
    try:
        yield zk
    finally:
        zk.stop()


def with_peer(zk: LocalZooKeeper) -> None:
    with zk_client(zk.hosts) as client:
        ensure_cluster_id(client, LAYOUT)
        config = {MANAGED_KEY: "true", "walship.sink.thrift": "127.0.0.1:9"}
        ReplicationPeers(client, LAYOUT).add(PeerConfig("1", "127.0.0.1:2181:/b", configuration=config))


def test_the_scope_audit_says_zookeeper_is_unavailable(own_zk: LocalZooKeeper) -> None:
    from walship.scope import run_audit

    with_peer(own_zk)
    client = connect(own_zk.hosts, timeout=3)
    try:
        own_zk.stop()  # after the connection: the audit's reads find it gone
        with pytest.raises(ZkUnavailableError, match="replication peers: .*ZooKeeper unavailable"):
            run_audit(client, LAYOUT, {})
    finally:
        client.stop()
        client.close()


def test_the_sep_dag_waiting_for_subscriptions_says_zookeeper_is_unavailable(own_zk: LocalZooKeeper) -> None:
    from walship.sep.subscriptions import Subscriptions
    from walship_airflow.sep import await_subscriptions

    client = connect(own_zk.hosts, timeout=3)
    try:
        subscriptions = Subscriptions(client, LAYOUT, own_zk.hosts)
        looked: list[float] = []

        def lose_zookeeper(seconds: float) -> None:  # the wait between two looks
            looked.append(seconds)
            own_zk.stop()

        with pytest.raises(ZkUnavailableError, match="ZooKeeper unavailable"):
            await_subscriptions(subscriptions, "", wait=60, poll=1, sleep=lose_zookeeper)
        assert looked == [1]  # the first look found none; the second found ZooKeeper gone
    finally:
        client.stop()
        client.close()


def test_a_spark_ship_task_looking_up_its_peer_says_zookeeper_is_unavailable(
    own_zk: LocalZooKeeper, monkeypatch: pytest.MonkeyPatch
) -> None:
    from walship.replicate import source
    from walship.spark.ship import ShipJob, ship_partition

    with_peer(own_zk)
    connected = source.zk_client

    @contextlib.contextmanager
    def then_lost(*args: Any, **kwargs: Any) -> Iterator[Any]:
        with connected(*args, **kwargs) as client:
            own_zk.stop()  # the task is connected; its first read finds ZooKeeper gone
            yield client

    monkeypatch.setattr(source, "zk_client", then_lost)
    job = ShipJob(zk=own_zk.hosts, znode_parent="/hbase", wal_root="/nonexistent", peer_id="1")
    with pytest.raises(ZkUnavailableError, match="replication peers: get 1: ZooKeeper unavailable"):
        list(ship_partition(job, iter([[("rs1.example.com,16020,1", "1")]])))
