"""The minicluster's master: HBase's RPC and MasterService's replication peer calls, as HBase
2.6's master answers them, over real TCP connections to minicluster processes.

Peers change through :class:`walship.rpc.MasterAdmin` and the znodes are what HBase's master
procedures write (read back with :class:`walship.zk.ReplicationPeers` and protobuf alone); each
refusal comes back with HBase's exception class and message (synchronously to a client naming
no version, as HBase's latch answers walship's client; through ``getProcedureResult`` to a 2.x
client); bad preambles get HBase's fatal answers while other connections go on; a removed
peer's queues go; a serial peer's regions reopen and get their last pushed ids; a table modified
through the master keeps its column families; the master registers in ``<parent>/master`` and
goes when the cluster stops.
"""

from __future__ import annotations

import socket
import struct
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import pytest
from google.protobuf.message import Message
from kazoo.client import KazooClient
from replication_helpers import Cluster, current_wals_enqueued, make_cluster, raw_peer
from waiting import wait_until

from walship.errors import ProcedureFailedError, RemoteHBaseError
from walship.peer import PeerConfig
from walship.protos import HBase_pb2, Master_pb2, Replication_pb2, RPC_pb2
from walship.rpc import MasterAdmin, SimpleAuth, connection, wire
from walship.rpc.connection import RpcConnection
from walship.rpc.tables import MasterTables
from walship.rpc.wire import connection_header, read_exact, read_frame, request_frame, split_response
from walship.serial import BarrierReader
from walship.zk import ReplicationPeers, ReplicationQueues, ZnodeLayout
from walship.zk.lastpushed import NO_SEQNUM, LastPushedIds
from walship.zk.master import read_master
from walship_testing.minicluster import AdminClient
from walship_testing.minicluster.process import MiniClusterProcess

pytestmark = pytest.mark.integration

M = TypeVar("M", bound=Message)
DNRIOE = "org.apache.hadoop.hbase.DoNotRetryIOException"
NOT_FOUND = "org.apache.hadoop.hbase.ReplicationPeerNotFoundException"
CONNECTION_CALL_ID = 0xFFFFFFFF  # HBase's call id -1 as the uint32 field carries it


@pytest.fixture
def source(minicluster_factory: Callable[..., MiniClusterProcess], zk_hosts: str) -> Cluster:
    """Cluster A with table t (family r scoped 1, l scoped 0)."""
    return make_cluster(minicluster_factory, zk_hosts, "A")


@pytest.fixture
def layout(source: Cluster) -> ZnodeLayout:
    return ZnodeLayout(source.parent)


@pytest.fixture
def admin(zk: KazooClient, layout: ZnodeLayout) -> Iterator[MasterAdmin]:
    with MasterAdmin(zk, layout, timeout=20.0, procedure_timeout=30.0) as master_admin:
        yield master_admin


def peer_key(source: Cluster, parent: str = "/hbase-b") -> str:
    """A cluster key on the test's ensemble, at a parent no cluster runs at."""
    hostport, _, chroot = source.zk_hosts.partition("/")
    return f"{hostport}:/{chroot}{parent}"


def address(mc: MiniClusterProcess) -> tuple[str, int]:
    host, port = mc.master.rsplit(":", 1)
    return host, int(port)


# -- raw HBase RPC, for what walship's client never sends -------------------------------------------


def raw_connection(mc: MiniClusterProcess, preamble: bytes) -> socket.socket:
    sock = socket.create_connection(address(mc), timeout=10)
    sock.sendall(preamble)
    return sock


def answer(sock: socket.socket) -> tuple[RPC_pb2.ResponseHeader, bytes | None]:
    return split_response(read_frame(sock, "the master"), "the master")


def closed(sock: socket.socket) -> bool:
    """The server closed the connection (the next read is the end)."""
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True


def open_master(mc: MiniClusterProcess, *, version: str | None = None, auth: int = 80) -> socket.socket:
    """A MasterService connection; ``version``: the HBase version the ConnectionHeader names."""
    sock = raw_connection(mc, b"HBas\x00" + bytes([auth]))
    header = RPC_pb2.ConnectionHeader(service_name="MasterService")
    header.user_info.effective_user = "tester"
    if version is not None:
        header.version_info.CopyFrom(
            HBase_pb2.VersionInfo(version=version, url="u", revision="r", user="u", date="d", src_checksum="c")
        )
    sock.sendall(connection_header(header))
    return sock


def call(sock: socket.socket, call_id: int, method: str, request: Message, reply: type[M]) -> M:
    header = RPC_pb2.RequestHeader(call_id=call_id, method_name=method, request_param=True)
    sock.sendall(request_frame(header, request))
    got, body = answer(sock)
    assert got.call_id == call_id
    assert not got.HasField("exception"), got.exception
    return reply.FromString(body or b"")


# -- registration ------------------------------------------------------------------------------------


def test_the_master_registers_in_zookeeper_and_goes_when_the_cluster_stops(
    source: Cluster, zk: KazooClient, layout: ZnodeLayout
) -> None:
    master = read_master(zk, layout)
    assert master is not None and master.address == source.mc.master
    assert master.start_code > 0
    _, stat = zk.get(layout.master)
    assert stat.ephemeralOwner != 0  # on the cluster's session
    assert AdminClient(source.mc.admin).info()["endpoints"]["master"] == source.mc.master
    source.mc.stop()
    assert read_master(zk, layout) is None


def test_a_master_killed_and_started_again_takes_its_znode_back_at_once(
    minicluster_factory: Callable[..., MiniClusterProcess],
    zk: KazooClient,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Its old session (a minute) still holds the znode: HBase's "master was restarted?"
    path deletes it, as it names the same address, instead of waiting the session out."""
    monkeypatch.setenv("WALSHIP_ZK_SESSION_TIMEOUT", "60")
    mc = minicluster_factory("A")
    layout = ZnodeLayout(mc.znode_parent)
    before = read_master(zk, layout)
    assert before is not None
    mc.kill()
    assert read_master(zk, layout) == before  # the dead session's znode
    mc.start(timeout=25)
    after = read_master(zk, layout)
    assert after is not None and after.address == before.address and after.start_code > before.start_code


def test_a_client_finds_a_master_that_moved(
    minicluster_factory: Callable[..., MiniClusterProcess], zk: KazooClient, zk_hosts: str
) -> None:
    """The cluster's master goes and comes back at another address (as a backup master taking
    over): the same admin's next call reads <parent>/master again and reaches it."""
    mc = minicluster_factory("A")
    layout = ZnodeLayout(mc.znode_parent)
    admin = MasterAdmin(zk, layout)
    try:
        assert admin.list_peers() == []
        first = read_master(zk, layout)
        mc.stop()
        mc.master_port = 0  # a free port: another address
        mc.start(timeout=25)
        moved = read_master(zk, layout)
        assert first is not None and moved is not None and moved.address != first.address
        assert admin.list_peers() == []  # the dead connection dropped, the new master found
        assert admin._master == moved
    finally:
        admin.close()


# -- peers through the master ----------------------------------------------------------------------


def test_peers_change_through_the_master_as_hbase_writes_them(
    source: Cluster, zk: KazooClient, layout: ZnodeLayout, admin: MasterAdmin
) -> None:
    peers = ReplicationPeers(zk, layout)
    key = peer_key(source)
    config = PeerConfig("1", key, table_cfs={"t": ("r",)}, configuration={"walship.sink.thrift": "b:9090", "k": "v"})
    admin.add_peer("1", config.to_proto(), enabled=False)
    # the region servers took the peer before the procedure finished: no wait
    assert current_wals_enqueued(source, ReplicationQueues(zk, layout), "1")
    stored = peers.get("1")
    assert stored.cluster_key == key and stored.table_cfs == {"t": ("r",)} and not stored.replicate_all
    assert stored.configuration == {"walship.sink.thrift": "b:9090", "k": "v"}
    assert peers.hbase_enabled("1") is False
    pb, _ = raw_peer(zk, layout, "1")
    assert pb == config.to_proto()
    assert admin.get_peer_config("1") == pb
    [listed] = admin.list_peers()
    assert (listed.peer_id, listed.enabled, listed.config) == ("1", False, pb)
    assert admin.list_peers("2|3") == [] and [p.peer_id for p in admin.list_peers("1")] == ["1"]

    updated = PeerConfig("1", key, table_cfs={"t": None}, bandwidth=1000, configuration={"k": "w"})
    admin.update_peer_config("1", updated.to_proto())
    stored = peers.get("1")
    assert stored.table_cfs == {"t": None} and stored.bandwidth == 1000
    # HBase keeps every configuration key: an update overlays the old map with the new one
    assert stored.configuration == {"walship.sink.thrift": "b:9090", "k": "w"}

    admin.enable_peer("1")
    assert peers.hbase_enabled("1") and admin.is_peer_enabled("1")
    admin.disable_peer("1")
    assert not peers.hbase_enabled("1") and not admin.is_peer_enabled("1")

    AdminClient(source.mc.admin).roll()  # queues with a rolled WAL and the new one
    assert ReplicationQueues(zk, layout).list_queues("1")
    admin.remove_peer("1")
    assert not peers.exists("1") and admin.list_peers() == []
    assert ReplicationQueues(zk, layout).list_queues("1") == []


def _replicate_all_with_tables(key: str) -> Replication_pb2.ReplicationPeer:
    pb = PeerConfig("3", key, table_cfs={"t": None}).to_proto()
    pb.replicate_all = True
    return pb


def _excludes_without_replicate_all(key: str) -> Replication_pb2.ReplicationPeer:
    pb = PeerConfig("3", key, exclude_namespaces=frozenset({"ns"})).to_proto()
    pb.replicate_all = False
    return pb


def _conflicting(key: str) -> Replication_pb2.ReplicationPeer:
    pb = PeerConfig("3", key, table_cfs={"ns1:t": None}).to_proto()
    pb.namespaces.append(b"ns1")
    return pb


#: (case, the peer named, the call, HBase's exception class, its message); peer "1" exists DISABLED, "9" does not
REFUSALS: list[tuple[str, str, Callable[[MasterAdmin, str, str], Any], str, str]] = [
    ("add-existing", "1", lambda a, k, own: a.add_peer("1", PeerConfig("1", k).to_proto(), enabled=True),
     DNRIOE, "Replication peer 1 already exists"),
    ("add-dash", "a-b", lambda a, k, own: a.add_peer("a-b", PeerConfig("ab", k).to_proto(), enabled=True),
     DNRIOE, "Found invalid peer name: a-b"),
    ("add-bad-key", "3", lambda a, k, own: a.add_peer("3", Replication_pb2.ReplicationPeer(clusterkey="zk-b:2181"),
                                                 enabled=True),
     DNRIOE, "Invalid cluster key: zk-b:2181"),
    ("add-itself", "3", lambda a, k, own: a.add_peer("3", PeerConfig("3", own).to_proto(), enabled=True),
     DNRIOE, "Invalid cluster key: {own}, should not replicate to itself for HBaseInterClusterReplicationEndpoint"),
    ("add-all-and-tables", "3", lambda a, k, own: a.add_peer("3", _replicate_all_with_tables(k), enabled=True),
     DNRIOE, "Need clean namespaces or table-cfs config firstly when you want replicate all cluster"),
    ("add-excludes", "3", lambda a, k, own: a.add_peer("3", _excludes_without_replicate_all(k), enabled=True),
     DNRIOE, "Need clean exclude-namespaces or exclude-table-cfs config firstly when replicate_all flag is false"),
    ("add-conflict", "3", lambda a, k, own: a.add_peer("3", _conflicting(k), enabled=True),
     DNRIOE, "Table-cfs ns1:t is conflict with namespaces ns1 in peer config"),
    ("enable-missing", "9", lambda a, k, own: a.enable_peer("9"), NOT_FOUND, "9"),
    ("disable-missing", "9", lambda a, k, own: a.disable_peer("9"), NOT_FOUND, "9"),
    ("remove-missing", "9", lambda a, k, own: a.remove_peer("9"), NOT_FOUND, "9"),
    ("get-missing", "9", lambda a, k, own: a.get_peer_config("9"), NOT_FOUND, "9"),
    ("update-missing", "9", lambda a, k, own: a.update_peer_config("9", PeerConfig("9", k).to_proto()), NOT_FOUND, "9"),
    ("state-missing", "9", lambda a, k, own: a.is_peer_enabled("9"), "java.io.IOException",
     "Replication Peer of 9 does not exist."),
    ("disable-disabled", "1", lambda a, k, own: a.disable_peer("1"), DNRIOE, "Replication peer 1 has already been disabled"),
    ("update-key", "1", lambda a, k, own: a.update_peer_config("1", PeerConfig("1", "zk-c:2181:/hbase").to_proto()),
     DNRIOE, "Changing the cluster key on an existing peer is not allowed. Existing key '{key}' for peer 1 does "
     "not match new key 'zk-c:2181:/hbase'"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("case", "peer_id", "change", "exception_class", "message"), REFUSALS, ids=[r[0] for r in REFUSALS]
)
def test_hbases_refusals_come_back_with_its_class_and_message(
    source: Cluster,
    zk: KazooClient,
    layout: ZnodeLayout,
    admin: MasterAdmin,
    case: str,
    peer_id: str,
    change: Callable[[MasterAdmin, str, str], Any],
    exception_class: str,
    message: str,
) -> None:
    key = peer_key(source)
    admin.add_peer("1", PeerConfig("1", key).to_proto(), enabled=False)
    before = {p: ReplicationPeers(zk, layout).message(p) for p in ReplicationPeers(zk, layout).ids()}
    with pytest.raises(RemoteHBaseError) as caught:
        change(admin, key, source.cluster_key)
    assert caught.value.exception_class == exception_class
    assert caught.value.remote_message == message.format(own=source.cluster_key, key=key)
    assert f"peer {peer_id}" in str(caught.value)
    assert caught.value.do_not_retry == (exception_class != "java.io.IOException")
    # a refusal writes nothing
    after = {p: ReplicationPeers(zk, layout).message(p) for p in ReplicationPeers(zk, layout).ids()}
    assert after == before and ReplicationPeers(zk, layout).hbase_enabled("1") is False


def test_enabling_an_enabled_peer_is_refused(source: Cluster, admin: MasterAdmin) -> None:
    admin.add_peer("1", PeerConfig("1", peer_key(source)).to_proto(), enabled=True)
    with pytest.raises(RemoteHBaseError, match="peer 1: .*DoNotRetryIOException") as caught:
        admin.enable_peer("1")
    assert caught.value.remote_message == "Replication peer 1 has already been enabled"


def test_a_peer_id_whose_old_queues_remain_is_refused(
    source: Cluster, zk: KazooClient, layout: ZnodeLayout, admin: MasterAdmin
) -> None:
    """HBase's checkQueuesDeleted: a queue of an earlier peer "7" is still there."""
    server = AdminClient(source.mc.admin).info()["regionservers"][0]
    ReplicationQueues(zk, layout).add_wal(server["name"], server["wal"], ["7"])
    with pytest.raises(RemoteHBaseError) as caught:
        admin.add_peer("7", PeerConfig("7", peer_key(source)).to_proto(), enabled=False)
    assert caught.value.exception_class == DNRIOE
    assert caught.value.remote_message == f"undeleted queue for peerId: 7, replicator: {server['name']}, queueId: 7"
    assert not ReplicationPeers(zk, layout).exists("7")


def test_a_2x_client_gets_the_procedure_id_and_its_failure_from_get_procedure_result(
    source: Cluster, admin: MasterAdmin
) -> None:
    """HBase's latch holds only a client naming no version or one older than 2.0."""
    key = peer_key(source)
    admin.add_peer("1", PeerConfig("1", key).to_proto(), enabled=False)
    request = Replication_pb2.AddReplicationPeerRequest(peer_id="1", peer_config=PeerConfig("1", key).to_proto())
    request.peer_state.state = Replication_pb2.ReplicationState.ENABLED
    with open_master(source.mc, version="2.6.1") as sock:
        reply = call(sock, 1, "AddReplicationPeer", request, Replication_pb2.AddReplicationPeerResponse)
        assert reply.HasField("proc_id")
        State = Master_pb2.GetProcedureResultResponse.State

        def result(proc_id: int) -> Master_pb2.GetProcedureResultResponse:
            ask = Master_pb2.GetProcedureResultRequest(proc_id=proc_id)
            return call(sock, 2, "getProcedureResult", ask, Master_pb2.GetProcedureResultResponse)

        done = wait_until(lambda: (r := result(reply.proc_id)).state == State.FINISHED and r, what="the procedure")
        assert done.exception.generic_exception.class_name == DNRIOE
        assert done.exception.generic_exception.message == "Replication peer 1 already exists"
        assert result(reply.proc_id + 1000).state == State.NOT_FOUND
    with pytest.raises(ProcedureFailedError, match="DoNotRetryIOException: Replication peer 1 already exists"):
        admin.wait_procedure(reply.proc_id, "peer 1: AddPeerProcedure")


# -- tables ------------------------------------------------------------------------------------------


def test_a_table_modified_through_the_master_keeps_its_families_and_refuses_to_change_them(
    source: Cluster, admin: MasterAdmin
) -> None:
    """The minicluster's master changes a table's own values only: a ModifyTable that would
    change a family is refused, naming it (HBase would change it), and nothing changes."""
    table = source.table_name.decode()
    tables = MasterTables(admin)
    assert tables.set_read_only(table, True) is False
    before = tables.table_descriptor(table)
    changed = HBase_pb2.TableSchema()
    changed.CopyFrom(before)
    for family in changed.column_families:
        if family.name == b"r":
            for value in family.attributes:
                if value.first == b"VERSIONS":
                    value.second = b"7"
    sock = open_master(source.mc)
    request = Master_pb2.ModifyTableRequest(table_name=before.table_name, table_schema=changed)
    sock.sendall(
        request_frame(RPC_pb2.RequestHeader(call_id=1, method_name="ModifyTable", request_param=True), request)
    )
    header, _ = answer(sock)
    sock.close()
    assert header.exception.exception_class_name == DNRIOE and header.exception.do_not_retry
    assert f"table {table}: " in header.exception.stack_trace and "not its column families (asked to change r)" in (
        header.exception.stack_trace
    )
    assert tables.table_descriptor(table) == before and tables.is_read_only(table)
    assert tables.set_read_only(table, False) is True


# -- serial peers --------------------------------------------------------------------------------------


def _barriers(source: Cluster) -> dict[str, tuple[int, ...]]:
    [table] = [t for t in AdminClient(source.mc.admin).info()["tables"] if t["name"] == "t"]
    encoded = table["regions"]
    with BarrierReader(source.thrift2_address()) as reader:
        return {e: reader.region(source.table_name, b"", e).barriers for e in encoded}


def test_a_serial_peer_reopens_its_regions_and_starts_at_their_last_barrier(
    source: Cluster, zk: KazooClient, layout: ZnodeLayout, admin: MasterAdmin
) -> None:
    source.table().put(b"row", {b"r:q": b"v"})
    before = _barriers(source)
    config = PeerConfig("s", peer_key(source), table_cfs={"t": None}, serial=True)
    admin.add_peer("s", config.to_proto(), enabled=True)
    after = _barriers(source)
    ids = LastPushedIds(zk, layout)
    assert after
    for encoded, barriers in after.items():
        assert len(barriers) == len(before[encoded]) + 1  # reopened: one more open barrier
        assert ids.get(encoded, "s") == barriers[-1] - 1
    assert ReplicationPeers(zk, layout).hbase_enabled("s")  # enabled once its ids were set

    admin.update_peer_config("s", PeerConfig("s", peer_key(source), table_cfs={"t": None}).to_proto())
    assert all(ids.get(e, "s") == NO_SEQNUM for e in after)  # no longer serial: its ids go
    assert ReplicationPeers(zk, layout).hbase_enabled("s")

    admin.update_peer_config("s", config.to_proto())  # serial again: reopened, started anew
    again = _barriers(source)
    assert all(ids.get(e, "s") == again[e][-1] - 1 and again[e][-1] > after[e][-1] for e in after)

    admin.remove_peer("s")
    assert all(ids.get(e, "s") == NO_SEQNUM for e in after)


# -- the RPC protocol --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("preamble", "exception_class", "message"),
    [
        (b"XBas\x00\x50", "org.apache.hadoop.hbase.ipc.FatalConnectionException",
         "Expected HEADER=HBas but received HEADER=XBas from {client}"),
        (b"HBas\x01\x50", "org.apache.hadoop.hbase.ipc.WrongVersionException",
         "serverVersion=0, clientVersion=1, authMethod=80, authName=unknown from {client}"),
        (b"HBas\x00\x55", "org.apache.hadoop.hbase.ipc.BadAuthException",
         "serverVersion=0, clientVersion=0, authMethod=85, authName=unknown from {client}"),
        (b"HBas\x00\xa0", "org.apache.hadoop.hbase.ipc.BadAuthException",
         "serverVersion=0, clientVersion=0, authMethod=-96, authName=unknown from {client}"),
    ],
    ids=["magic", "version", "auth", "auth-signed"],
)  # fmt: skip
def test_a_bad_preamble_gets_hbases_fatal_answer_and_others_are_still_served(
    source: Cluster, admin: MasterAdmin, preamble: bytes, exception_class: str, message: str
) -> None:
    with raw_connection(source.mc, preamble) as sock:
        client = "{}:{}".format(*sock.getsockname()[:2])
        header, body = answer(sock)
        assert header.call_id == CONNECTION_CALL_ID and body is None
        assert header.exception.exception_class_name == exception_class
        assert header.exception.stack_trace == message.format(client=client)
        assert header.exception.do_not_retry
        assert closed(sock)
    admin.add_peer("1", PeerConfig("1", peer_key(source)).to_proto(), enabled=False)
    assert [p.peer_id for p in admin.list_peers()] == ["1"]


@pytest.fixture(params=["compiled", "python"])
def round_trip(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """How walship's client makes a call on a plain socket: the compiled round trip
    (``walship.rpc._exchange``, which ``make setup`` builds) or Python's socket methods (an
    install without it, and every SASL-wrapped channel)."""
    if request.param == "compiled":
        assert wire.exchanges_compiled(), "walship.rpc._exchange is not built: run make setup"
    else:
        monkeypatch.setattr(connection, "exchanges_compiled", lambda: False)
    return str(request.param)


def test_walships_client_makes_calls_the_same_by_either_round_trip(
    source: Cluster, admin: MasterAdmin, round_trip: str
) -> None:
    admin.add_peer("1", PeerConfig("1", peer_key(source)).to_proto(), enabled=False)
    host, port = address(source.mc)
    with RpcConnection(host, port, "MasterService", SimpleAuth("tester"), timeout=10) as conn:
        for _ in range(3):  # calls one after another on one connection
            reply = conn.call("ListReplicationPeers", Replication_pb2.ListReplicationPeersRequest(),
                              Replication_pb2.ListReplicationPeersResponse)  # fmt: skip
            assert [p.id for p in reply.peer_desc] == ["1"]
        with pytest.raises(RemoteHBaseError, match="ReplicationPeerNotFoundException"):
            conn.call("EnableReplicationPeer", Replication_pb2.EnableReplicationPeerRequest(peer_id="9"),
                      Replication_pb2.EnableReplicationPeerResponse)  # fmt: skip
        assert not conn.closed  # a refused call leaves the connection as it was


def test_walships_client_gets_the_fatal_answer_as_hbases_exception(source: Cluster, round_trip: str) -> None:
    class UnknownAuth(SimpleAuth):
        auth_byte = 0x55

    host, port = address(source.mc)
    conn = RpcConnection(host, port, "MasterService", UnknownAuth("tester"), timeout=10)
    with pytest.raises(RemoteHBaseError) as caught:
        conn.call("ListReplicationPeers", Replication_pb2.ListReplicationPeersRequest(),
                  Replication_pb2.ListReplicationPeersResponse)  # fmt: skip
    assert caught.value.short_class == "BadAuthException" and caught.value.do_not_retry
    assert conn.closed


def test_a_sasl_client_is_told_to_switch_to_simple(source: Cluster) -> None:
    """A server without security answers KERBEROS with SUCCESS + SWITCH_TO_SIMPLE_AUTH (-88)
    and skips the client's first SASL message."""
    with raw_connection(source.mc, b"HBas\x00\x51") as sock:
        assert read_exact(sock, 8, "the master") == struct.pack(">ii", 0, -88)
        sock.sendall(struct.pack(">I", 5) + b"token")
        sock.sendall(connection_header(RPC_pb2.ConnectionHeader(service_name="MasterService")))
        reply = call(sock, 1, "ListReplicationPeers", Replication_pb2.ListReplicationPeersRequest(),
                     Replication_pb2.ListReplicationPeersResponse)  # fmt: skip
        assert list(reply.peer_desc) == []


def test_an_unknown_method_gets_hbases_answer_and_the_connection_goes_on(source: Cluster) -> None:
    with open_master(source.mc) as sock:
        client = sock.getsockname()[0]
        sock.sendall(request_frame(RPC_pb2.RequestHeader(call_id=7, method_name="CreateTable", request_param=True),
                                   Replication_pb2.ListReplicationPeersRequest()))  # fmt: skip
        header, body = answer(sock)
        assert header.call_id == 7 and body is None
        assert header.exception.exception_class_name == DNRIOE and header.exception.do_not_retry
        assert header.exception.stack_trace == (
            f"/{source.mc.master} is unable to read call parameter from client {client}; "
            "java.lang.UnsupportedOperationException: CreateTable"
        )
        reply = call(sock, 8, "ListReplicationPeers", Replication_pb2.ListReplicationPeersRequest(),
                     Replication_pb2.ListReplicationPeersResponse)  # fmt: skip
        assert list(reply.peer_desc) == []


def test_another_service_is_closed_without_an_answer(source: Cluster) -> None:
    with raw_connection(source.mc, b"HBas\x00\x50") as sock:
        sock.sendall(connection_header(RPC_pb2.ConnectionHeader(service_name="ClientService")))
        assert closed(sock)


def test_a_failed_call_names_the_cause_in_its_stack_trace(source: Cluster) -> None:
    """HBase's answer carries the exception as ``StringUtils.stringifyException`` writes it."""
    request = Replication_pb2.AddReplicationPeerRequest(
        peer_id="3", peer_config=Replication_pb2.ReplicationPeer(clusterkey="zk-b:2181")
    )
    request.peer_state.state = Replication_pb2.ReplicationState.DISABLED
    with open_master(source.mc) as sock:
        sock.sendall(request_frame(RPC_pb2.RequestHeader(call_id=1, method_name="AddReplicationPeer",
                                                         request_param=True), request))  # fmt: skip
        header, _ = answer(sock)
    assert header.exception.stack_trace.splitlines() == [
        f"{DNRIOE}: Invalid cluster key: zk-b:2181",
        "Caused by: java.io.IOException: Cluster key passed zk-b:2181 is invalid, the format should be:"
        "hbase.zookeeper.quorum:hbase.zookeeper.property.clientPort:zookeeper.znode.parent",
    ]
