"""Thrift transports, protocols and TLS, as HBase's Thrift server offers them (``-f``, ``-c``,
``hbase.thrift.ssl.enabled``): a minicluster that accepts only one mode, one that serves TLS,
and replication into each with the peer's ``walship.sink.thrift.*`` settings."""

from __future__ import annotations

import datetime
import ipaddress
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import happybase
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from replication_helpers import TABLE, Cluster, add_peer, contents, make_cluster, ship
from thriftpy2.transport import TTransportException
from waiting import wait_until

from walship.cli import main
from walship.errors import InvalidPeerConfigError, MiniClusterError
from walship.peer import PeerConfig
from walship.replicate import PeerSummary, Shipper, WalStore
from walship.sinks.base import SinkContext
from walship.sinks.hbase import ThriftSink
from walship.sinks.registry import validate_sink_config
from walship.thrift.conn import ThriftOptions
from walship.thrift.conn1 import open_connection
from walship.zk import ReplicationQueues, ZnodeLayout, zk_client
from walship_testing.minicluster import AdminClient
from walship_testing.minicluster.process import MiniClusterProcess

pytestmark = pytest.mark.integration

Factory = Callable[..., MiniClusterProcess]

TRANSPORT = "walship.sink.thrift.transport"
PROTOCOL = "walship.sink.thrift.protocol"
SSL = "walship.sink.thrift.ssl"
SSL_CA = "walship.sink.thrift.ssl.ca"
SSL_VERIFY = "walship.sink.thrift.ssl.verify"


# -- certificates ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Tls:
    ca: Path  # the CA's certificate
    cert: Path  # the server's certificate for 127.0.0.1, signed by the CA
    key: Path  # the server's private key
    other_ca: Path  # a CA that signed nothing here


def _name(cn: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def _certificate(
    subject: str, key: ec.EllipticCurvePrivateKey, issuer: str, issuer_key: ec.EllipticCurvePrivateKey, *, ca: bool
) -> x509.Certificate:
    now = datetime.datetime.now(datetime.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(subject))
        .issuer_name(_name(issuer))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    )
    if ca:
        builder = builder.add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        ).add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
    else:
        builder = (
            builder.add_extension(
                x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False
            )
            .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(issuer_key.public_key()), critical=False)
        )
    return builder.sign(issuer_key, hashes.SHA256())


def _pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> Tls:
    """A self-signed CA, and a server certificate for 127.0.0.1 it signed."""
    d = tmp_path_factory.mktemp("tls")
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = _certificate("walship test CA", ca_key, "walship test CA", ca_key, ca=True)
    server_key = ec.generate_private_key(ec.SECP256R1())
    server = _certificate("127.0.0.1", server_key, "walship test CA", ca_key, ca=False)
    other_key = ec.generate_private_key(ec.SECP256R1())
    other = _certificate("another CA", other_key, "another CA", other_key, ca=True)
    files = Tls(d / "ca.pem", d / "server.pem", d / "server.key", d / "other-ca.pem")
    files.ca.write_bytes(_pem(ca))
    files.cert.write_bytes(_pem(server))
    files.key.write_bytes(
        server_key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    files.key.chmod(0o600)
    files.other_ca.write_bytes(_pem(other))
    return files


# -- clusters that need another transport, protocol or TLS ---------------------------------------------


@dataclass
class SpeakingCluster(Cluster):
    """A cluster whose Thrift port speaks ``options`` (happybase alone has no TLS)."""

    options: ThriftOptions = field(default_factory=ThriftOptions)

    def conn(self) -> happybase.Connection:
        return open_connection(*self.mc.thrift, self.options)


def make_speaking_cluster(
    factory: Factory, zk_hosts: str, name: str, options: ThriftOptions, **kwargs: Any
) -> SpeakingCluster:
    """As :func:`replication_helpers.make_cluster`, over ``options``."""
    c = SpeakingCluster(factory(name, **kwargs), zk_hosts, options=options)
    conn = c.conn()
    conn.create_table(TABLE, {"r": {"max_versions": 5}, "l": {"max_versions": 5}})
    AdminClient(c.mc.admin).set_scope(TABLE.decode(), "r", 1)
    conn.close()
    return c


def write_rows(a: Cluster) -> None:
    conn = a.conn()
    t = conn.table(TABLE)
    for ts in (100, 200, 300):
        t.put(b"row1", {b"r:a": b"a%d" % ts, b"r:b": b"b%d" % ts, b"l:x": b"local"}, timestamp=ts)
    with t.batch() as batch:
        for i in range(50):
            batch.put(b"row-%02d" % i, {b"r:q": b"v%d" % i, b"l:q": b"local"})
    t.delete(b"row1", columns=[b"r:a"], timestamp=200)
    conn.close()


def positions(c: Cluster, peer_id: str = "1") -> dict[tuple[str, str, str], int]:
    with zk_client(c.zk_hosts) as client:
        queues = ReplicationQueues(client, ZnodeLayout(c.parent)).list_queues(peer_id)
        return {(q.server, str(q.queue_id), w.name): w.position for q in queues for w in q.wals}


def ship_impatiently(source: Cluster, peer_id: str = "1") -> PeerSummary:
    """One pass whose sink gives up after one round (the default waits ~13 s between rounds)."""
    with zk_client(source.zk_hosts) as client:
        store = WalStore(str(source.mc.data_dir))

        def sink(peer: PeerConfig) -> ThriftSink:
            return ThriftSink(peer, SinkContext(store.root), retries=1, backoff=0.01, timeout_ms=5000)

        return Shipper(client, ZnodeLayout(source.parent), store, sink_factory=sink).ship_peer(peer_id)


def server_log(mc: MiniClusterProcess) -> str:
    return (mc.data_dir.parent / f"{mc.name}.minicluster.log").read_text()


# -- the peer's settings ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({TRANSPORT: "http"}, f"peer 1: {TRANSPORT} must be one of buffered, framed, got 'http'"),
        ({PROTOCOL: "json"}, f"peer 1: {PROTOCOL} must be one of binary, compact, got 'json'"),
        ({SSL: "yes"}, f"peer 1: {SSL} must be one of true, false, got 'yes'"),
        ({SSL: "true", SSL_VERIFY: "0"}, f"peer 1: {SSL_VERIFY} must be one of true, false, got '0'"),
        ({SSL: "true", SSL_CA: "/no/such/ca.pem"}, f"peer 1: {SSL_CA}: no such file: /no/such/ca.pem"),
    ],
)
def test_invalid_thrift_settings_are_refused(config: dict[str, str], message: str) -> None:
    peer = PeerConfig("1", "zk:2181:/hbase", configuration={"walship.sink.thrift": "h:9090", **config})
    with pytest.raises(InvalidPeerConfigError) as info:
        validate_sink_config(peer)
    assert str(info.value) == message


def test_valid_thrift_settings(tls: Tls) -> None:
    config = {TRANSPORT: "Framed", PROTOCOL: "compact", SSL: "TRUE", SSL_CA: str(tls.ca), SSL_VERIFY: "false"}
    peer = PeerConfig("1", "zk:2181:/hbase", configuration={"walship.sink.thrift": "h:9090", **config})
    validate_sink_config(peer)
    assert ThriftOptions.of(peer) == ThriftOptions("framed", "compact", True, str(tls.ca), False)
    assert ThriftOptions.of(PeerConfig("2", "zk:2181:/hbase")) == ThriftOptions("buffered", "binary", False, None, True)


# -- a server that accepts one transport and one protocol ---------------------------------------------


def test_a_framed_compact_server_refuses_every_other_mode(minicluster_factory: Factory) -> None:
    b = minicluster_factory("B", thrift_transport="framed", thrift_protocol="compact")
    assert b.ready["thrift_modes"] == "framed/compact"
    host, port = b.thrift
    good = happybase.Connection(host, port, transport="framed", protocol="compact")
    good.create_table("t", {"f": {}})
    good.table("t").put(b"r", {b"f:q": b"v"})
    assert good.table("t").row(b"r") == {b"f:q": b"v"}
    for transport, protocol in (("buffered", "binary"), ("framed", "binary"), ("buffered", "compact")):
        bad = happybase.Connection(host, port, transport=transport, protocol=protocol)
        with pytest.raises((TTransportException, ConnectionError)):
            bad.tables()
        bad.close()
        wait_until(
            lambda t=transport, p=protocol: (
                f"refused: it speaks {t}/{p}; this server accepts only framed/compact" in server_log(b)
            ),
            what=f"the minicluster's warning about {transport}/{protocol}",
        )
    assert good.tables() == [b"t"]  # refusing others does not disturb a good client
    good.close()


def test_replication_into_a_framed_compact_peer(minicluster_factory: Factory, zk_hosts: str) -> None:
    a = make_cluster(minicluster_factory, zk_hosts, "A")
    options = ThriftOptions(transport="framed", protocol="compact")
    b = make_speaking_cluster(
        minicluster_factory, zk_hosts, "B", options, thrift_transport="framed", thrift_protocol="compact"
    )
    add_peer(a, b, **{TRANSPORT: "framed", PROTOCOL: "compact"})
    write_rows(a)
    summary = ship(a)
    assert summary.status == "ok", summary.error
    assert summary.totals()["cells_shipped"] == 3 * 2 + 50 + 1  # write_rows' cells of r
    assert contents(b) == contents(a, b"r")
    assert contents(b)[b"row1"][b"r:a"] == [(b"a300", 300)]
    assert contents(b, b"l") == {}


def test_a_peer_speaking_the_wrong_mode_fails_and_moves_nothing(minicluster_factory: Factory, zk_hosts: str) -> None:
    a = make_cluster(minicluster_factory, zk_hosts, "A")
    options = ThriftOptions(transport="framed", protocol="compact")
    b = make_speaking_cluster(
        minicluster_factory, zk_hosts, "B", options, thrift_transport="framed", thrift_protocol="compact"
    )
    add_peer(a, b)  # buffered/binary, the defaults
    write_rows(a)
    before = positions(a)
    summary = ship_impatiently(a)
    assert summary.status == "error"
    assert summary.error is not None
    assert "(buffered/binary): last error: " in summary.error  # end of file, or reset: the server hung up
    assert "; the server closed the connection: does it expect TLS" in summary.error
    assert_failed_without_moving(summary, before, positions(a))
    assert contents(b) == {}


def assert_failed_without_moving(
    summary: PeerSummary, before: dict[tuple[str, str, str], int], after: dict[tuple[str, str, str], int]
) -> None:
    failed = [qs for qs in summary.queues if qs.status == "error"]
    assert failed
    assert sum(qs.entries_shipped for qs in summary.queues) == 0
    for qs in failed:
        mine = {k: v for k, v in after.items() if k[:2] == (qs.server, qs.queue_id)}
        assert mine == {k: v for k, v in before.items() if k[:2] == (qs.server, qs.queue_id)}


# -- TLS -----------------------------------------------------------------------------------------------


def test_replication_over_tls(minicluster_factory: Factory, zk_hosts: str, tls: Tls) -> None:
    a = make_cluster(minicluster_factory, zk_hosts, "A")
    options = ThriftOptions(ssl=True, ca=str(tls.ca))
    b = make_speaking_cluster(
        minicluster_factory, zk_hosts, "B", options, thrift_ssl_cert=tls.cert, thrift_ssl_key=tls.key
    )
    assert b.mc.ready["thrift_tls"] is True
    add_peer(a, b, **{SSL: "true", SSL_CA: str(tls.ca)})
    write_rows(a)
    summary = ship(a)
    assert summary.status == "ok", summary.error
    assert contents(b) == contents(a, b"r")
    assert contents(b)[b"row1"][b"r:a"] == [(b"a300", 300)]
    # the transport and protocol are told from the decrypted stream
    conn = open_connection(*b.mc.thrift, ThriftOptions("framed", "compact", True, str(tls.ca)))
    assert conn.tables() == [TABLE]
    conn.close()


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        ({SSL: "true"}, "certificate verify failed"),  # the system's CAs do not know ours
        ({SSL: "true", "other_ca": "yes"}, "certificate verify failed"),
        ({SSL: "false"}, "(buffered/binary): last error:"),
    ],
    ids=["no-ca", "wrong-ca", "plain"],
)
def test_tls_peers_that_cannot_connect_fail_and_move_nothing(
    minicluster_factory: Factory, zk_hosts: str, tls: Tls, config: dict[str, str], expected: str
) -> None:
    a = make_cluster(minicluster_factory, zk_hosts, "A")
    b = make_speaking_cluster(
        minicluster_factory,
        zk_hosts,
        "B",
        ThriftOptions(ssl=True, ca=str(tls.ca)),
        thrift_ssl_cert=tls.cert,
        thrift_ssl_key=tls.key,
    )
    if config.pop("other_ca", None):
        config[SSL_CA] = str(tls.other_ca)
    add_peer(a, b, **config)
    write_rows(a)
    before = positions(a)
    summary = ship_impatiently(a)
    assert summary.status == "error"
    assert summary.error is not None and expected in summary.error, summary.error
    if config[SSL] == "true":
        assert f"TLS handshake with {b.thrift_address()} failed" in summary.error
        assert f"check {SSL_CA}" in summary.error
    else:
        assert "does it expect TLS (walship.sink.thrift.ssl)" in summary.error
        wait_until(lambda: "TLS handshake failed" in server_log(b.mc), what="the minicluster's TLS warning")
    assert_failed_without_moving(summary, before, positions(a))
    assert contents(b) == {}


def test_hostname_verification(minicluster_factory: Factory, tls: Tls) -> None:
    b = minicluster_factory("B", thrift_ssl_cert=tls.cert, thrift_ssl_key=tls.key)
    port = b.thrift[1]
    # the certificate names 127.0.0.1, not localhost
    with pytest.raises(TTransportException, match="certificate verify failed: Hostname mismatch"):
        open_connection("localhost", port, ThriftOptions(ssl=True, ca=str(tls.ca)))
    conn = open_connection("localhost", port, ThriftOptions(ssl=True, ca=str(tls.ca), verify=False))
    assert conn.tables() == []
    conn.close()


def test_plain_clients_on_a_tls_port_and_tls_clients_on_a_plain_port(minicluster_factory: Factory, tls: Tls) -> None:
    b = minicluster_factory("B", thrift_ssl_cert=tls.cert, thrift_ssl_key=tls.key)
    plain = happybase.Connection(*b.thrift)
    with pytest.raises((TTransportException, ConnectionError)):
        plain.tables()
    plain.close()
    wait_until(
        lambda: "(a client speaking plain Thrift to this TLS port?)" in server_log(b), what="the TLS port's warning"
    )
    a = minicluster_factory("A")
    with pytest.raises((TTransportException, ConnectionError)):
        open_connection(*a.thrift, ThriftOptions(ssl=True, ca=str(tls.ca)), timeout_ms=5000)
    wait_until(lambda: "it starts a TLS handshake; this port serves plain Thrift" in server_log(a), what="warning")
    # both still serve their own clients
    conn = open_connection(*b.thrift, ThriftOptions(ssl=True, ca=str(tls.ca)))
    assert conn.tables() == []
    conn.close()


# -- bad options of `walship minicluster start` ----------------------------------------------------------


def start_args(tmp_path: Path, *extra: str) -> list[str]:
    return [
        "minicluster", "start", "--name", "X", "--data-dir", str(tmp_path / "x"), "--zk", "127.0.0.1:1",
        "--znode-parent", "/x", "--thrift-port", "0", "--admin-port", "0", *extra,
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--thrift-ssl-key", "KEY"], "walship: --thrift-ssl-key needs --thrift-ssl-cert"),
        (["--thrift-ssl-cert", "/no/such/cert.pem"], "walship: --thrift-ssl-cert: no such file: /no/such/cert.pem"),
        (["--thrift-ssl-cert", "CERT", "--thrift-ssl-key", "/no/key.pem"], "walship: --thrift-ssl-key: no such file"),
        (["--thrift-ssl-cert", "CA"], "walship: --thrift-ssl-cert: cannot load the certificate and its key"),
    ],
    ids=["key-without-cert", "missing-cert", "missing-key", "cert-without-key"],
)
def test_bad_tls_options_are_one_line_errors(
    tmp_path: Path, tls: Tls, capsys: pytest.CaptureFixture[str], extra: list[str], message: str
) -> None:
    files = {"KEY": str(tls.key), "CERT": str(tls.cert), "CA": str(tls.ca)}
    args = start_args(tmp_path, *[files.get(x, x) for x in extra])
    assert main(args) == 1
    err = capsys.readouterr().err
    assert err.startswith(message)
    assert len(err.strip().splitlines()) == 1
    assert not (tmp_path / "x").exists()  # refused before anything started


def test_bad_tls_options_in_a_child_process(tmp_path: Path, tls: Tls, minicluster_factory: Factory) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "walship.cli", *start_args(tmp_path, "--thrift-ssl-key", str(tls.key))],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 1
    assert proc.stderr == "walship: --thrift-ssl-key needs --thrift-ssl-cert (the server's certificate, PEM)\n"
    with pytest.raises(MiniClusterError, match="did not start: --thrift-ssl-cert: no such file: /nope.pem"):
        minicluster_factory("Y", thrift_ssl_cert="/nope.pem")
