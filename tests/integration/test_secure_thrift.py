"""walship's Thrift clients on Kerberized HBase 2.6 (the ``secure_hbase`` stack): SASL GSSAPI on
the binary transport of HBase's Thrift1 and Thrift2 servers (``hbase.thrift.security.qop``),
Thrift2 over HTTP with SPNEGO (``hbase.regionserver.thrift.http``), the source's Thrift2 session
when walship is logged in, and each refusal in one line: a principal the server does not run
as, a server without SASL spoken to with it (the plain ``real_hbase`` peer), a SASL server
spoken to without it, SPNEGO refused, and a principal HBase's AccessController refuses."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from real_hbase import unique
from secure_hbase import SecureStack

from walship import security
from walship.errors import SaslAuthError, SinkError, SinkUnavailableError
from walship.peer import PeerConfig
from walship.scope import open_source
from walship.security.kerberos import KerberosIdentity
from walship.sinks.base import FilteredEntry, SinkContext
from walship.sinks.hbase2 import Thrift2Sink
from walship.sinks.registry import create_sink
from walship.thrift.conn import ThriftOptions, open_thrift2
from walship.thrift.hbase2 import hbase2
from walship.wal import Cell, CellType, WalEntry, WalKey
from walship_testing.harness import HBaseProcess

pytestmark = pytest.mark.integration

ORIGIN = (uuid.UUID(int=45),)
SASL = {"walship.sink.thrift.security.qop": "auth-conf,auth-int,auth"}


def log_in(stack: SecureStack, monkeypatch: pytest.MonkeyPatch, name: str, keytab: Path) -> KerberosIdentity:
    """walship logged in as ``name`` from ``keytab`` (the environment restored afterwards)."""
    for key, value in stack.client_env(keytab).items():
        monkeypatch.setenv(key, value)
    return security.login(KerberosIdentity(f"{name}@{stack.realm}", str(keytab)))


@pytest.fixture
def walship_login(secure_hbase: SecureStack, monkeypatch: pytest.MonkeyPatch) -> Iterator[KerberosIdentity]:
    yield log_in(secure_hbase, monkeypatch, "walship", secure_hbase.walship_keytab)
    security.logout()


@pytest.fixture
def krb5_only(secure_hbase: SecureStack, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The stack's krb5.conf, and nobody logged in."""
    monkeypatch.setenv("KRB5_CONFIG", str(secure_hbase.krb5_conf))
    security.logout()
    yield


def address(stack: SecureStack, server: tuple[str, int] | None) -> str:
    """A server of the stack as a sink names it: the host of its principals (``_HOST``)."""
    assert server is not None
    return f"{stack.service_host}:{server[1]}"


def entry(table: bytes, seq: int, *cells: Cell) -> FilteredEntry:
    key = WalKey(b"0" * 32, table, seq, 1_000)
    return FilteredEntry(WalEntry(key, cells, 0, 40 * len(cells)), cells, ORIGIN)


def batch(table: bytes) -> list[FilteredEntry]:
    """Puts of three rows, then a column delete of r1 and a family delete of r2."""
    put = int(CellType.Put)
    return [
        entry(table, 1, Cell(b"r1", b"r", b"a", 100, put, b"a1"), Cell(b"r1", b"r", b"b", 100, put, b"b1")),
        entry(table, 2, Cell(b"r2", b"r", b"a", 100, put, b"a2"), Cell(b"r3", b"r", b"a", 100, put, b"a3")),
        entry(table, 3, Cell(b"r1", b"r", b"b", 200, int(CellType.DeleteColumn))),
        entry(table, 4, Cell(b"r2", b"r", b"", 200, int(CellType.DeleteFamily))),
    ]


def new_table(hb: HBaseProcess, prefix: str) -> bytes:
    table = unique(prefix)
    hb.call("create_table", table=table, families={"r": {"scope": 1, "versions": 5}})
    return table.encode()


def rows(
    stack: SecureStack, table: bytes, options: ThriftOptions, server: tuple[str, int] | None = None
) -> dict[bytes, Any]:
    """The table's rows on SB (column -> value), read over Thrift2 with ``options``."""
    host, port = address(stack, server or stack.sb.thrift2).rsplit(":", 1)
    with open_thrift2(host, int(port), options) as conn:
        scanner = conn.client.openScanner(table, hbase2.TScan())
        try:
            results = conn.client.getScannerRows(scanner, 100)
        finally:
            conn.client.closeScanner(scanner)
    return {
        bytes(r.row): {bytes(c.family) + b":" + bytes(c.qualifier): bytes(c.value) for c in r.columnValues}
        for r in results
    }


APPLIED = {b"r1": {b"r:a": b"a1"}, b"r3": {b"r:a": b"a3"}}


def peer_config(protocol: str, servers: str, **conf: str) -> PeerConfig:
    key = "walship.sink.thrift2" if protocol == "thrift2" else "walship.sink.thrift"
    return PeerConfig(
        "45", "localhost:2181:/hbase-sb", configuration={"walship.sink.protocol": protocol, key: servers, **conf}
    )


def apply(peer: PeerConfig, entries: list[FilteredEntry]) -> None:
    sink = create_sink(peer, SinkContext(wal_root=""))
    try:
        sink.apply(entries, "a secure batch")
    finally:
        sink.close()


@pytest.mark.parametrize("protocol", ["thrift1", "thrift2"])
def test_sinks_apply_puts_and_deletes_over_sasl(
    secure_hbase: SecureStack, walship_login: KerberosIdentity, protocol: str
) -> None:
    table = new_table(secure_hbase.sb, "sasl")
    server = secure_hbase.sb.thrift if protocol == "thrift1" else secure_hbase.sb.thrift2
    peer = peer_config(protocol, address(secure_hbase, server), **SASL)
    assert ThriftOptions.of(peer).describe() == "buffered/binary over SASL auth-conf, auth-int or auth"
    apply(peer, batch(table))
    assert rows(secure_hbase, table, ThriftOptions(qops=("auth",))) == APPLIED


def test_thrift2_over_http_with_spnego(secure_hbase: SecureStack, walship_login: KerberosIdentity) -> None:
    table = new_table(secure_hbase.sb, "spnego")
    http = secure_hbase.sb.thrift2_http
    peer = peer_config("thrift2", address(secure_hbase, http), **{"walship.sink.thrift.http": "true"})
    assert ThriftOptions.of(peer).describe() == "HTTP with SPNEGO"
    apply(peer, batch(table))
    assert rows(secure_hbase, table, ThriftOptions(http=True), http) == APPLIED


def test_the_sources_thrift2_session_speaks_sasl_when_logged_in(
    secure_hbase: SecureStack, walship_login: KerberosIdentity, monkeypatch: pytest.MonkeyPatch
) -> None:
    table = new_table(secure_hbase.sa, "src").decode()
    with open_source(address(secure_hbase, secure_hbase.sa.thrift2), name="--source-thrift2", how="-") as source:
        assert source.options.describe() == "buffered/binary over SASL auth-conf, auth-int or auth"
        assert table in source.all_tables()
    monkeypatch.setenv("WALSHIP_SOURCE_THRIFT_HTTP", "true")
    with open_source(address(secure_hbase, secure_hbase.sa.thrift2_http), name="--source-thrift2", how="-") as source:
        assert source.options.describe() == "HTTP with SPNEGO"
        assert source.exists(table)


# -- refusals ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("principal", "words"),
    [
        ("HTTP/_HOST", "was refused by the server: GSS initiate failed"),  # the KDC knows it; the server runs as hbase/
        ("nohbase/_HOST", "not found in Kerberos database"),  # nobody runs as it
    ],
)
def test_a_principal_the_server_does_not_run_as_fails_the_batch_in_one_line(
    secure_hbase: SecureStack, walship_login: KerberosIdentity, principal: str, words: str
) -> None:
    server = address(secure_hbase, secure_hbase.sb.thrift2)
    peer = peer_config("thrift2", server, **SASL, **{"walship.sink.thrift.kerberos.principal": principal})
    with pytest.raises(SaslAuthError) as err:  # at once: no retry, not "unavailable"
        apply(peer, batch(b"t"))
    text = str(err.value)
    target = principal.replace("_HOST", secure_hbase.service_host)
    assert text.startswith("peer 45: SASL GSSAPI as walship@EXAMPLE.COM to " + target)
    assert server in text and words in text and "\n" not in text


def test_the_source_refusing_the_principal_is_one_line(
    secure_hbase: SecureStack, walship_login: KerberosIdentity, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WALSHIP_THRIFT_PRINCIPAL", "HTTP/_HOST")
    server = address(secure_hbase, secure_hbase.sa.thrift2)
    with pytest.raises(SaslAuthError) as err:
        open_source(server, name="--source-thrift2", how="-")
    assert str(err.value).startswith("the source cluster: SASL GSSAPI as walship@EXAMPLE.COM to HTTP/localhost")
    assert server in str(err.value)


def test_a_sasl_server_spoken_to_without_sasl_fails_the_batch(secure_hbase: SecureStack, krb5_only: None) -> None:
    server = address(secure_hbase, secure_hbase.sb.thrift2)
    sink = Thrift2Sink(peer_config("thrift2", server), SinkContext(wal_root=""), timeout_ms=2000, retries=1)
    try:
        with pytest.raises(SinkError) as err:
            sink.apply(batch(b"t"), "a plain batch")
    finally:
        sink.close()
    assert not isinstance(err.value, SinkUnavailableError)  # not retried as a server away
    text = str(err.value)
    assert (
        text.startswith(f"peer 45: Thrift server {server} speaks SASL") and "walship.sink.thrift.security.qop" in text
    )


def test_a_server_without_sasl_spoken_to_with_sasl_fails_the_batch(
    real_hbase: tuple[HBaseProcess, HBaseProcess], secure_hbase: SecureStack, walship_login: KerberosIdentity
) -> None:
    _, b = real_hbase
    server = f"localhost:{b.thrift2[1]}"
    sink = Thrift2Sink(peer_config("thrift2", server, **SASL), SinkContext(wal_root=""), timeout_ms=2000, retries=1)
    try:
        with pytest.raises(SinkError) as err:
            sink.apply(batch(b"t"), "a SASL batch")
    finally:
        sink.close()
    assert not isinstance(err.value, SinkUnavailableError)
    text = str(err.value)
    assert text.startswith(f"peer 45: Thrift server {server} speaks Thrift without SASL")
    assert "walship@EXAMPLE.COM" in text and "remove walship.sink.thrift.security.qop" in text


def test_spnego_refused_is_one_line(
    secure_hbase: SecureStack, krb5_only: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    server = address(secure_hbase, secure_hbase.sb.thrift2_http)
    http = {"walship.sink.thrift.http": "true"}
    with pytest.raises(SaslAuthError) as err:  # nobody logged in: the server's 401
        apply(peer_config("thrift2", server, **http), batch(b"t"))
    assert str(err.value).startswith(f"peer 45: Thrift HTTP server {server} asks for Kerberos (SPNEGO; HTTP 401")
    log_in(secure_hbase, monkeypatch, "walship", secure_hbase.walship_keytab)
    try:
        wrong = {**http, "walship.sink.thrift.spnego.principal": "hbase/_HOST"}
        with pytest.raises(SaslAuthError) as err:
            apply(peer_config("thrift2", server, **wrong), batch(b"t"))
    finally:
        security.logout()
    text = str(err.value)
    assert text.startswith(
        f"peer 45: Thrift HTTP server {server} refused SPNEGO as walship@EXAMPLE.COM to hbase/localhost"
    )
    assert "HTTP 401" in text and "\n" not in text


def test_a_principal_hbase_refuses_is_the_servers_refusal(
    secure_hbase: SecureStack, monkeypatch: pytest.MonkeyPatch
) -> None:
    table = new_table(secure_hbase.sb, "intr")
    log_in(secure_hbase, monkeypatch, "intruder", secure_hbase.intruder_keytab)
    try:
        peer = peer_config("thrift2", address(secure_hbase, secure_hbase.sb.thrift2), **SASL)
        with pytest.raises(SinkError) as err:  # authenticated as intruder: HBase's AccessController says no
            apply(peer, batch(table))
    finally:
        security.logout()
    assert not isinstance(err.value, SinkUnavailableError)
    assert "peer 45 refused" in str(err.value) and "intruder" in str(err.value)
