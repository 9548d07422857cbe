"""The Thrift options of a peer's configuration and of the source (walship.thrift.options):
SASL GSSAPI's levels and principal, HTTP mode and its SPNEGO principal, the combinations
HBase's Thrift servers never run, and what a sink says when SASL is asked without a login."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import asdict

import pytest

from walship.errors import ConfigError, InvalidPeerConfigError
from walship.peer import PeerConfig
from walship.security import kerberos
from walship.security.kerberos import KerberosIdentity
from walship.sinks.base import SinkContext
from walship.sinks.registry import create_sink
from walship.thrift.conn import ThriftOptions

IDENTITY = KerberosIdentity("walship@EXAMPLE.COM")


def options(**conf: str) -> ThriftOptions:
    return ThriftOptions.of(PeerConfig("7", "zk:2181:/hbase", configuration=conf))


@pytest.fixture
def logged_in(monkeypatch: pytest.MonkeyPatch) -> Iterator[KerberosIdentity]:
    monkeypatch.setattr(kerberos, "_active", IDENTITY)
    yield IDENTITY


def test_defaults_speak_no_sasl_nor_http() -> None:
    o = options()
    assert (o.qops, o.principal, o.http, o.spnego_principal, o.sasl) == ((), "hbase/_HOST", False, "HTTP/_HOST", False)
    assert o.describe() == "buffered/binary"


def test_qop_levels_in_sasls_or_hbases_names_strongest_first() -> None:
    assert options(**{"walship.sink.thrift.security.qop": "auth-conf"}).qops == ("auth-conf",)
    assert options(**{"walship.sink.thrift.security.qop": "privacy"}).qops == ("auth-conf",)
    o = options(**{"walship.sink.thrift.security.qop": "auth, auth-conf"})
    assert o.qops == ("auth-conf", "auth") and o.sasl
    assert o.describe() == "buffered/binary over SASL auth-conf or auth"
    one = options(**{"walship.sink.thrift.security.qop": "auth-int", "walship.sink.thrift.ssl": "true"})
    assert one.describe() == "buffered/binary over SASL auth-int over TLS"


def test_principals_are_checked() -> None:
    o = options(**{"walship.sink.thrift.kerberos.principal": "hbase/_HOST@EXAMPLE.COM"})
    assert o.principal == "hbase/_HOST@EXAMPLE.COM"
    with pytest.raises(InvalidPeerConfigError, match=r"peer 7: walship.sink.thrift.kerberos.principal"):
        options(**{"walship.sink.thrift.kerberos.principal": "hbase /x"})
    with pytest.raises(InvalidPeerConfigError, match=r"peer 7: walship.sink.thrift.spnego.principal"):
        options(**{"walship.sink.thrift.spnego.principal": "/h"})


@pytest.mark.parametrize(
    ("conf", "words"),
    [
        ({"walship.sink.thrift.security.qop": "secret"}, r"peer 7: walship.sink.thrift.security.qop 'secret'"),
        ({"walship.sink.thrift.http": "yes"}, r"peer 7: walship.sink.thrift.http must be one of true, false"),
        (
            {"walship.sink.thrift.security.qop": "auth", "walship.sink.thrift.transport": "framed"},
            r"SASL over its buffered transport only",
        ),
        (
            {"walship.sink.thrift.http": "true", "walship.sink.thrift.protocol": "compact"},
            r"HTTP server speaks the binary protocol only",
        ),
        (
            {"walship.sink.thrift.http": "true", "walship.sink.thrift.transport": "framed"},
            r"no framed transport",
        ),
    ],
)
def test_bad_values_name_the_peer_and_key(conf: dict[str, str], words: str) -> None:
    with pytest.raises(InvalidPeerConfigError, match=words):
        options(**conf)


def test_http_mode_describes_spnego_when_logged_in(logged_in: KerberosIdentity) -> None:
    o = options(**{"walship.sink.thrift.http": "true", "walship.sink.thrift.security.qop": "auth"})
    assert o.http and not o.sasl  # the HTTP server authenticates each request: no SASL
    assert o.describe() == "HTTP with SPNEGO"
    assert options(**{"walship.sink.thrift.http": "true", "walship.sink.thrift.ssl": "true"}).describe() == (
        "HTTPS with SPNEGO"
    )


def test_http_mode_without_login_is_plain_http() -> None:
    o = options(**{"walship.sink.thrift.http": "true"})
    assert o.identity("peer 7") is None and o.describe() == "HTTP"


def test_sasl_without_login_is_a_configuration_error_naming_the_key() -> None:
    o = options(**{"walship.sink.thrift.security.qop": "auth"})
    with pytest.raises(InvalidPeerConfigError) as err:
        o.identity("peer 7")
    assert "peer 7: walship.sink.thrift.security.qop=auth" in str(err.value) and "--principal" in str(err.value)


@pytest.mark.parametrize("protocol", ["thrift1", "thrift2"])
def test_a_sink_asked_for_sasl_without_login_fails_at_once(protocol: str) -> None:
    key = "walship.sink.thrift2" if protocol == "thrift2" else "walship.sink.thrift"
    p = PeerConfig(
        "7",
        "zk:2181:/hbase",
        configuration={"walship.sink.protocol": protocol, key: "h:9090", "walship.sink.thrift.security.qop": "auth"},
    )
    with pytest.raises(InvalidPeerConfigError, match=r"peer 7: walship.sink.thrift.security.qop=auth .*--principal"):
        create_sink(p, SinkContext(wal_root=""))


def test_a_sink_logged_in_takes_sasl(logged_in: KerberosIdentity) -> None:
    p = PeerConfig(
        "7",
        "zk:2181:/hbase",
        configuration={
            "walship.sink.protocol": "thrift2",
            "walship.sink.thrift2": "h:9090",
            "walship.sink.thrift.security.qop": "auth-conf",
        },
    )
    sink = create_sink(p, SinkContext(wal_root=""))
    try:
        assert sink.options.qops == ("auth-conf",)  # type: ignore[attr-defined]
    finally:
        sink.close()


def test_options_survive_a_job_descriptions_json(logged_in: KerberosIdentity) -> None:
    o = options(
        **{"walship.sink.thrift.security.qop": "auth,auth-int", "walship.sink.thrift.kerberos.principal": "hb/_HOST"}
    )
    assert ThriftOptions(**json.loads(json.dumps(asdict(o)))) == o


def test_the_source_speaks_sasl_at_every_level_when_logged_in(logged_in: KerberosIdentity) -> None:
    o = ThriftOptions.for_source({})
    assert o.qops == ("auth-conf", "auth-int", "auth") and o.principal == "hbase/_HOST" and not o.http
    env = {"WALSHIP_THRIFT_PRINCIPAL": "hbase/_HOST@EXAMPLE.COM", "WALSHIP_SOURCE_THRIFT_QOP": "integrity"}
    o = ThriftOptions.for_source(env)
    assert o.qops == ("auth-int",) and o.principal == "hbase/_HOST@EXAMPLE.COM"
    assert ThriftOptions.for_source({"WALSHIP_SOURCE_THRIFT_QOP": "none"}).qops == ()
    http = ThriftOptions.for_source({"WALSHIP_SOURCE_THRIFT_HTTP": "true"})
    assert http.http and not http.sasl and http.describe() == "HTTP with SPNEGO"


def test_the_source_without_login_is_plain() -> None:
    assert ThriftOptions.for_source({}) == ThriftOptions()
    assert ThriftOptions.for_source({"WALSHIP_SOURCE_THRIFT_HTTP": "TRUE"}).http


@pytest.mark.parametrize(
    ("env", "name"),
    [
        ({"WALSHIP_SOURCE_THRIFT_HTTP": "sometimes"}, "WALSHIP_SOURCE_THRIFT_HTTP"),
        ({"WALSHIP_SOURCE_THRIFT_QOP": "secret"}, "WALSHIP_SOURCE_THRIFT_QOP"),
        ({"WALSHIP_THRIFT_PRINCIPAL": "h base"}, "WALSHIP_THRIFT_PRINCIPAL"),
    ],
)
def test_the_sources_bad_settings_name_the_variable(
    logged_in: KerberosIdentity, env: dict[str, str], name: str
) -> None:
    with pytest.raises(ConfigError, match=name):
        ThriftOptions.for_source(env)
