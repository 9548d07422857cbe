"""Managed peers: HBase keeps their queues and WALs but never ships them; walship has its own
switch, refuses a managed peer HBase would ship too, and adopts peers HBase ships."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest
from replication_helpers import Cluster, contents, make_cluster
from waiting import wait_until

from walship.cli import main
from walship.errors import DoubleShippingError, PeerError
from walship.peer import PeerConfig
from walship.zk import ReplicationPeers, ReplicationQueues, ZnodeLayout, zk_client
from walship.zk.encoding import encode_peer_state
from walship_testing.minicluster import AdminClient
from walship_testing.minicluster.process import MiniClusterProcess

pytestmark = pytest.mark.integration

Factory = Callable[..., MiniClusterProcess]


@pytest.fixture
def ab(minicluster_factory: Factory, zk_hosts: str, capsys: pytest.CaptureFixture[str]) -> tuple[Cluster, Cluster]:
    a = make_cluster(minicluster_factory, zk_hosts, "A")
    b = make_cluster(minicluster_factory, zk_hosts, "B")
    code = main([*a.cli_flags(), "peer", "add", "1", "--cluster-key", b.cluster_key,
                 "--config", f"walship.sink.thrift={b.thrift_address()}"])  # fmt: skip
    assert code == 0, capsys.readouterr().err
    return a, b


def test_a_managed_peer_is_disabled_for_hbase_and_still_gets_every_new_wal(
    ab: tuple[Cluster, Cluster], capsys: pytest.CaptureFixture[str]
) -> None:
    a, b = ab
    layout = ZnodeLayout(a.parent)
    with zk_client(a.zk_hosts) as client:
        assert client.get(layout.peer_state("1"))[0] == encode_peer_state(False)  # HBase reads nothing for it
        assert client.get(layout.walship_peer_state("1"))[0] == encode_peer_state(True)
        rolled = AdminClient(a.mc.admin).roll()
        assert rolled
        current = {rs["name"]: rs["wal"] for rs in AdminClient(a.mc.admin).info()["regionservers"]}
        queues = ReplicationQueues(client, layout)
        # as HBase does for a DISABLED peer: the new WALs are enqueued on roll all the same
        wait_until(
            lambda: all(wal in {w.name for w in queues.wals(server, "1")} for server, wal in current.items()),
            what="the rolled-to WALs in the managed peer's queues",
        )
    a.table().put(b"r1", {b"r:q": b"v"})
    capsys.readouterr()
    assert main([*a.cli_flags(), "ship", "--peer", "1"]) == 0
    assert json.loads(capsys.readouterr().out)["status"] == "ok"
    assert contents(b) == contents(a, b"r") != {}


def test_walships_switch_pauses_a_managed_peer(ab: tuple[Cluster, Cluster], capsys: pytest.CaptureFixture[str]) -> None:
    a, b = ab
    assert main([*a.cli_flags(), "peer", "disable", "1"]) == 0
    a.table().put(b"r1", {b"r:q": b"v"})
    capsys.readouterr()
    assert main([*a.cli_flags(), "ship", "--peer", "1"]) == 0
    assert json.loads(capsys.readouterr().out)["status"] == "disabled"
    assert contents(b) == {}
    assert main([*a.cli_flags(), "peer", "enable", "1"]) == 0
    assert main([*a.cli_flags(), "ship", "--peer", "1"]) == 0
    assert contents(b) == contents(a, b"r") != {}


def test_a_managed_peer_hbase_would_ship_too_is_refused(
    ab: tuple[Cluster, Cluster], capsys: pytest.CaptureFixture[str]
) -> None:
    a, b = ab
    with zk_client(a.zk_hosts) as client:  # someone ran enable_peer '1' in the HBase shell
        client.set(ZnodeLayout(a.parent).peer_state("1"), encode_peer_state(True))
    a.table().put(b"r1", {b"r:q": b"v"})
    capsys.readouterr()
    for argv in (["ship", "--peer", "1"], ["tail", "--peer", "1", "--duration", "2"]):
        assert main([*a.cli_flags(), *argv]) == 1
        err = capsys.readouterr().err
        assert "peer 1 is managed by walship but its HBase peer-state is ENABLED" in err
        assert "disable_peer '1'" in err and "Traceback" not in err
    assert contents(b) == {}  # walship shipped nothing
    assert main([*a.cli_flags(), "peer", "show", "1", "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert (shown["managed"], shown["state"], shown["hbase_peer_state"]) == (True, "ENABLED", "ENABLED")


def test_a_peer_hbase_ships_is_adopted(
    minicluster_factory: Factory, zk_hosts: str, capsys: pytest.CaptureFixture[str]
) -> None:
    a = make_cluster(minicluster_factory, zk_hosts, "A")
    b = make_cluster(minicluster_factory, zk_hosts, "B")
    layout = ZnodeLayout(a.parent)
    with zk_client(a.zk_hosts) as client:  # as HBase's add_peer (or an earlier walship) wrote it
        ReplicationPeers(client, layout).add(
            PeerConfig("1", b.cluster_key, configuration={"walship.sink.thrift": b.thrift_address()})
        )
    a.table().put(b"before", {b"r:q": b"1"})
    assert main([*a.cli_flags(), "ship", "--peer", "1"]) == 0  # an unmanaged peer keeps working
    assert main([*a.cli_flags(), "peer", "adopt", "1"]) == 0
    assert "adopted peer 1: managed by walship (ENABLED)" in capsys.readouterr().out
    with zk_client(a.zk_hosts) as client:
        peer = ReplicationPeers(client, layout).get("1")
        assert peer.managed and peer.enabled and not peer.hbase_enabled
        assert client.get(layout.peer_state("1"))[0] == encode_peer_state(False)
        with pytest.raises(PeerError, match="peer 1 is managed by walship already"):
            ReplicationPeers(client, layout).adopt("1")
        client.set(layout.peer_state("1"), encode_peer_state(True))
        with pytest.raises(DoubleShippingError):
            ReplicationPeers(client, layout).get("1").check_ownership()
        client.set(layout.peer_state("1"), encode_peer_state(False))
    a.table().put(b"after", {b"r:q": b"2"})
    capsys.readouterr()
    assert main([*a.cli_flags(), "ship", "--peer", "1"]) == 0
    assert set(contents(b)) == {b"before", b"after"}
