"""HBase's master RPC with Kerberos (SASL GSSAPI), on real Kerberized HBase 2.6 (the
``secure_hbase`` stack): walship, logged in as its principal, adds a peer through the master
and reads it back (HBase's own Admin reads it too); on a cluster started with
``hbase.rpc.protection=privacy`` every frame travels encrypted; a SIMPLE client, a server
principal the KDC does not know, one the master holds no key for and a protection level the
master does not offer are each refused in one line naming the principal and the master."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import pytest
from real_hbase import unique
from secure_hbase import SUPERUSERS, SecureStack

from walship import security
from walship.errors import RemoteHBaseError, SaslAuthError
from walship.peer import PeerConfig
from walship.rpc.auth import SimpleAuth
from walship.rpc.master import MasterAdmin
from walship.rpc.peers import MasterPeers, peer_admin
from walship.rpc.sasl import KerberosAuth, SaslChannel
from walship.security.kerberos import KerberosIdentity
from walship.zk import zk_client
from walship.zk.layout import ZnodeLayout
from walship.zk.master import read_master
from walship_testing.harness import HBaseProcess
from walship_testing.harness.process import SecureHarness

pytestmark = pytest.mark.integration


def login(stack: SecureStack, monkeypatch: pytest.MonkeyPatch, name: str, keytab: Any) -> KerberosIdentity:
    """Log the process in as ``name`` (its keytab), every variable it sets restored afterwards."""
    for key, value in stack.client_env(keytab).items():
        monkeypatch.setenv(key, value)
    for key in ("WALSHIP_HBASE_PRINCIPAL", "WALSHIP_RPC_PROTECTION"):
        monkeypatch.delenv(key, raising=False)
    return security.login(KerberosIdentity(f"{name}@{stack.realm}", str(keytab)))


@pytest.fixture
def walship(secure_hbase: SecureStack, monkeypatch: pytest.MonkeyPatch) -> Iterator[KerberosIdentity]:
    """walship's principal, logged in for the test."""
    identity = login(secure_hbase, monkeypatch, "walship", secure_hbase.walship_keytab)
    yield identity
    security.logout()


@pytest.fixture(scope="module")
def private(secure_hbase: SecureStack, tmp_path_factory: pytest.TempPathFactory) -> Iterator[HBaseProcess]:
    """A third Kerberized cluster on the stack's KDC and ZooKeeper, with
    ``hbase.rpc.protection=privacy`` and Thrift servers at ``auth-conf`` (the stack's two use
    ``authentication`` and ``auth``)."""
    stack = secure_hbase
    secure = SecureHarness(stack.krb5_conf, stack.realm, stack.service_keytab, superusers=SUPERUSERS)
    hb = HBaseProcess(
        "SP", tmp_path_factory.mktemp("secure-private") / "SP", zk=stack.zk_hosts, znode_parent="/hbase-sp",
        regionservers=1, conf={"hbase.rpc.protection": "privacy", "hbase.thrift.security.qop": "auth-conf"},
        secure=secure,
    )  # fmt: skip
    hb.start()
    try:
        yield hb
    finally:
        hb.stop()


def master_address(hb: HBaseProcess) -> str:
    with zk_client(hb.zk_hosts) as client:
        found = read_master(client, ZnodeLayout(hb.znode_parent))
    assert found is not None
    return found.address


def hbase_peer(hb: HBaseProcess, peer_id: str) -> dict[str, Any] | None:
    """The peer as HBase's own Admin lists it, or None."""
    peers = [p for p in hb.call("list_peers") if p["peer"] == peer_id]
    return peers[0] if peers else None


def refusal(hb: HBaseProcess, auth: Any = None) -> str:
    """The error listing ``hb``'s peers gives, checked to be one line."""
    with (
        zk_client(hb.zk_hosts) as client,
        MasterAdmin(client, ZnodeLayout(hb.znode_parent), auth=auth) as admin,
        pytest.raises(SaslAuthError) as caught,
    ):
        admin.list_peers()
    message = str(caught.value)
    assert "\n" not in message and "Traceback" not in message
    return message


def test_a_peer_added_through_the_kerberized_master_reads_back(
    secure_hbase: SecureStack, walship: KerberosIdentity
) -> None:
    source, peer_cluster = secure_hbase.sb, secure_hbase.sa
    peer = unique("krb")
    with zk_client(source.zk_hosts) as client:
        peers = peer_admin(client, ZnodeLayout(source.znode_parent))
        assert isinstance(peers, MasterPeers)
        auth = peers.admin.auth
        assert isinstance(auth, KerberosAuth) and auth.identity == walship
        try:
            peers.add(PeerConfig(peer, peer_cluster.cluster_key, enabled=False, bandwidth=1234))
            got = peers.get(peer)
            assert (got.cluster_key, got.enabled, got.bandwidth) == (peer_cluster.cluster_key, False, 1234)
            assert peer in peers.ids()
            # the cluster runs with hbase.rpc.protection=authentication: nothing is wrapped
            assert auth.negotiated_qop == "auth" and auth.user == walship.principal
            seen = hbase_peer(source, peer)
            assert seen is not None and seen["state"] == "DISABLED" and seen["cluster_key"] == peer_cluster.cluster_key
        finally:
            if peers.exists(peer):
                peers.remove(peer)
            peers.close()
    assert hbase_peer(source, peer) is None


def test_with_privacy_every_frame_is_encrypted(
    private: HBaseProcess, secure_hbase: SecureStack, walship: KerberosIdentity
) -> None:
    peer = unique("conf")
    with zk_client(private.zk_hosts) as client:
        peers = peer_admin(client, ZnodeLayout(private.znode_parent))
        assert isinstance(peers, MasterPeers)
        try:
            peers.add(PeerConfig(peer, secure_hbase.sb.cluster_key, enabled=False))
            assert [p.peer_id for p in peers.admin.list_peers(peer)] == [peer]
            assert isinstance(peers.admin.auth, KerberosAuth) and peers.admin.auth.negotiated_qop == "auth-conf"
            conn = peers.admin._conn
            assert conn is not None and isinstance(conn.channel, SaslChannel) and conn.channel.qop == "auth-conf"
            seen = hbase_peer(private, peer)
            assert seen is not None and seen["cluster_key"] == secure_hbase.sb.cluster_key
        finally:
            if peers.exists(peer):
                peers.remove(peer)
            peers.close()


def test_a_level_the_master_does_not_offer_is_refused_in_one_line(
    private: HBaseProcess, walship: KerberosIdentity, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WALSHIP_RPC_PROTECTION", "authentication,integrity")
    message = refusal(private)
    address = master_address(private)
    assert message == (
        f"the master at {address} and principal {walship.principal} share no protection level: walship accepts "
        "auth-int, auth (WALSHIP_RPC_PROTECTION), the master offers auth-conf"
    )


def test_a_simple_client_is_told_the_master_requires_kerberos(secure_hbase: SecureStack) -> None:
    hb = secure_hbase.sb
    message = refusal(hb, SimpleAuth("walship"))
    assert message.startswith(f"the master at {master_address(hb)} requires Kerberos: give --principal")
    assert "AccessDeniedException: Authentication is required" in message


def test_a_server_principal_the_kdc_does_not_know_is_named(
    secure_hbase: SecureStack, walship: KerberosIdentity, monkeypatch: pytest.MonkeyPatch
) -> None:
    hb = secure_hbase.sb
    monkeypatch.setenv("WALSHIP_HBASE_PRINCIPAL", "nothbase/_HOST")
    message = refusal(hb)
    address = master_address(hb)
    host = address.rsplit(":", 1)[0].lower()
    assert message.startswith(
        f"the master at {address} as principal {walship.principal}: the KDC does not know the server principal "
        f"nothbase/{host} ("
    )
    assert "WALSHIP_HBASE_PRINCIPAL" in message


def test_a_server_principal_the_master_holds_no_key_for_is_refused_by_the_master(
    secure_hbase: SecureStack, walship: KerberosIdentity, monkeypatch: pytest.MonkeyPatch
) -> None:
    # HTTP/<host> is known to the KDC (SPNEGO) but is not the master's: HBase answers SASL ERROR
    hb = secure_hbase.sb
    monkeypatch.setenv("WALSHIP_HBASE_PRINCIPAL", "HTTP/_HOST")
    message = refusal(hb)
    address = master_address(hb)
    host = address.rsplit(":", 1)[0].lower()
    assert message.startswith(
        f"the master at {address} refused principal {walship.principal} (server principal HTTP/{host}): "
    )
    assert "SaslException" in message or "GSSException" in message, message


def test_a_principal_without_grants_is_refused_by_hbases_access_controller(
    secure_hbase: SecureStack, monkeypatch: pytest.MonkeyPatch
) -> None:
    hb = secure_hbase.sb
    intruder = login(secure_hbase, monkeypatch, "intruder", secure_hbase.intruder_keytab)
    try:
        with zk_client(hb.zk_hosts) as client, MasterAdmin(client, ZnodeLayout(hb.znode_parent)) as admin:
            with pytest.raises(RemoteHBaseError) as caught:
                admin.list_peers()
            assert isinstance(admin.auth, KerberosAuth) and admin.auth.user == intruder.principal
    finally:
        security.logout()
    message = str(caught.value)
    assert "\n" not in message and caught.value.short_class == "AccessDeniedException"
    assert "intruder" in message and master_address(hb) in message


def test_a_thrift_server_at_auth_conf_gets_every_frame_encrypted(
    private: HBaseProcess, walship: KerberosIdentity, caplog: pytest.LogCaptureFixture
) -> None:
    from walship.thrift.conn import ThriftOptions, open_thrift2
    from walship.thrift.hbase2 import hbase2 as T

    table = unique("enc")
    private.call("create_table", table=table, families={"r": {"scope": 1}})
    host = private.service_host or "localhost"
    caplog.set_level(logging.DEBUG, logger="walship.thrift.sasl")
    with open_thrift2(host, private.thrift2[1], ThriftOptions.for_source()) as c:
        c.client.put(table.encode(), T.TPut(row=b"r1", columnValues=[T.TColumnValue(b"r", b"q", b"secret", 1)]))
        got = c.client.get(table.encode(), T.TGet(row=b"r1"))
    assert [(cv.value, cv.timestamp) for cv in got.columnValues] == [(b"secret", 1)]
    negotiated = [
        r.getMessage() for r in caplog.records if r.name == "walship.thrift.sasl" and "SASL GSSAPI as" in r.getMessage()
    ]
    assert negotiated and all(m.endswith(": auth-conf") for m in negotiated), negotiated
