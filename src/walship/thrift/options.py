"""How to speak to a cluster's HBase Thrift servers: :class:`ThriftOptions`, from a peer's
configuration (:meth:`ThriftOptions.of`, the keys below) or, for the source cluster, from
walship's login and environment (:meth:`ThriftOptions.for_source`). The keys are described in
:mod:`walship.thrift.conn`, which re-exports everything here.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from walship.errors import ConfigError, InvalidPeerConfigError
from walship.peer import PeerConfig
from walship.security.kerberos import KerberosIdentity, active, server_name
from walship.security.sasl import QOPS, parse_qop
from walship.thrift import PROTOCOLS, TRANSPORTS

__all__ = [
    "DEFAULT_PRINCIPAL",
    "DEFAULT_SPNEGO_PRINCIPAL",
    "ENV_SOURCE_HTTP",
    "ENV_SOURCE_QOP",
    "ENV_SPNEGO_PRINCIPAL",
    "ENV_THRIFT_PRINCIPAL",
    "MAX_CONNECTIONS",
    "THRIFT_CONNECTIONS_KEY",
    "THRIFT_HTTP_KEY",
    "THRIFT_PRINCIPAL_KEY",
    "THRIFT_PROTOCOL_KEY",
    "THRIFT_QOP_KEY",
    "THRIFT_SPNEGO_PRINCIPAL_KEY",
    "THRIFT_SSL_CA_KEY",
    "THRIFT_SSL_KEY",
    "THRIFT_SSL_VERIFY_KEY",
    "THRIFT_TRANSPORT_KEY",
    "ThriftOptions",
    "connections_of",
]

#: Peer configuration keys: how to speak to the peer's Thrift servers.
THRIFT_TRANSPORT_KEY = "walship.sink.thrift.transport"
THRIFT_PROTOCOL_KEY = "walship.sink.thrift.protocol"
THRIFT_SSL_KEY = "walship.sink.thrift.ssl"
THRIFT_SSL_CA_KEY = "walship.sink.thrift.ssl.ca"
THRIFT_SSL_VERIFY_KEY = "walship.sink.thrift.ssl.verify"
#: SASL GSSAPI on the binary transport: the protection levels accepted (HBase's
#: ``hbase.thrift.security.qop``), and the servers' principal (``hbase.thrift.kerberos.principal``).
THRIFT_QOP_KEY = "walship.sink.thrift.security.qop"
THRIFT_PRINCIPAL_KEY = "walship.sink.thrift.kerberos.principal"
#: HTTP mode (HBase's ``hbase.regionserver.thrift.http``), and its SPNEGO principal
#: (``hbase.thrift.spnego.principal``).
THRIFT_HTTP_KEY = "walship.sink.thrift.http"
THRIFT_SPNEGO_PRINCIPAL_KEY = "walship.sink.thrift.spnego.principal"
#: Peer configuration key: how many connections a sink spreads a large batch's calls over, each
#: carrying the rows whose key hashes to it, in WAL order (as HBase's replication source spreads
#: a batch over threads by region, up to one for each sink region server it picked). Default:
#: one for each of the peer's Thrift servers the sink names.
THRIFT_CONNECTIONS_KEY = "walship.sink.thrift.connections"
MAX_CONNECTIONS = 64
DEFAULT_PRINCIPAL = "hbase/_HOST"
DEFAULT_SPNEGO_PRINCIPAL = "HTTP/_HOST"
#: The source cluster's Thrift servers (:meth:`ThriftOptions.for_source`): their principal,
#: SPNEGO principal, HTTP mode, and the protection levels walship accepts when logged in
#: (default: all three; ``none``: no SASL).
ENV_THRIFT_PRINCIPAL = "WALSHIP_THRIFT_PRINCIPAL"
ENV_SPNEGO_PRINCIPAL = "WALSHIP_THRIFT_SPNEGO_PRINCIPAL"
ENV_SOURCE_HTTP = "WALSHIP_SOURCE_THRIFT_HTTP"
ENV_SOURCE_QOP = "WALSHIP_SOURCE_THRIFT_QOP"
_BOOLEANS = {"true": True, "false": False}


def _choice(peer: PeerConfig, key: str, allowed: Sequence[str], default: str) -> str:
    raw = peer.configuration.get(key)
    if raw is None:
        return default
    value = raw.strip().lower()
    if value not in allowed:
        raise InvalidPeerConfigError(f"peer {peer.peer_id}: {key} must be one of {', '.join(allowed)}, got {raw!r}")
    return value


def _flag(peer: PeerConfig, key: str, default: bool) -> bool:
    return _BOOLEANS[_choice(peer, key, tuple(_BOOLEANS), "true" if default else "false")]


def _principal(raw: str | None, default: str, what: str) -> str:
    """A server principal pattern (``service[/host][@REALM]``), checked.

    :raises ConfigError: not one (names ``what``).
    """
    value = (raw or "").strip() or default
    try:
        server_name(value, "host")
    except ConfigError as exc:
        raise ConfigError(f"{what}: {exc}") from None
    return value


@dataclass(frozen=True)
class ThriftOptions:
    """How to speak to a cluster's Thrift servers (see :mod:`walship.thrift.conn`)."""

    transport: str = "buffered"
    protocol: str = "binary"
    ssl: bool = False
    #: PEM file of the CAs to trust (``None``: the system's)
    ca: str | None = None
    #: check that the server's certificate names the host
    verify: bool = True
    #: SASL GSSAPI protection levels accepted, strongest first (empty: no SASL)
    qops: tuple[str, ...] = ()
    #: the Thrift servers' principal (``_HOST``: the host walship connects to)
    principal: str = DEFAULT_PRINCIPAL
    #: Thrift over HTTP POST (SPNEGO when walship is logged in to Kerberos)
    http: bool = False
    #: the HTTP servers' SPNEGO principal
    spnego_principal: str = DEFAULT_SPNEGO_PRINCIPAL

    def __post_init__(self) -> None:
        # a job description carries the options as JSON (a list for the levels)
        object.__setattr__(self, "qops", tuple(self.qops))

    @classmethod
    def of(cls, peer: PeerConfig) -> ThriftOptions:
        """The options in the peer's configuration.

        :raises InvalidPeerConfigError: a value out of its allowed set (the message names the
            key, the peer and the allowed values), a CA file that does not exist, or a
            combination HBase's servers never run (SASL over the framed transport; HTTP with
            the compact protocol or the framed transport).
        """
        conf = peer.configuration
        ca = conf.get(THRIFT_SSL_CA_KEY) or None
        if ca is not None and not Path(ca).is_file():
            raise InvalidPeerConfigError(f"peer {peer.peer_id}: {THRIFT_SSL_CA_KEY}: no such file: {ca}")
        raw_qop = conf.get(THRIFT_QOP_KEY)
        try:
            qops = parse_qop(raw_qop, THRIFT_QOP_KEY) if raw_qop is not None and raw_qop.strip() else ()
            principal = _principal(conf.get(THRIFT_PRINCIPAL_KEY), DEFAULT_PRINCIPAL, THRIFT_PRINCIPAL_KEY)
            spnego = _principal(
                conf.get(THRIFT_SPNEGO_PRINCIPAL_KEY), DEFAULT_SPNEGO_PRINCIPAL, THRIFT_SPNEGO_PRINCIPAL_KEY
            )
        except ConfigError as exc:
            raise InvalidPeerConfigError(f"peer {peer.peer_id}: {exc}") from None
        options = cls(
            transport=_choice(peer, THRIFT_TRANSPORT_KEY, TRANSPORTS, "buffered"),
            protocol=_choice(peer, THRIFT_PROTOCOL_KEY, PROTOCOLS, "binary"),
            ssl=_flag(peer, THRIFT_SSL_KEY, False),
            ca=ca,
            verify=_flag(peer, THRIFT_SSL_VERIFY_KEY, True),
            qops=qops,
            principal=principal,
            http=_flag(peer, THRIFT_HTTP_KEY, False),
            spnego_principal=spnego,
        )
        options._check_combination(peer.peer_id)
        return options

    def _check_combination(self, peer_id: str) -> None:
        """:raises InvalidPeerConfigError: a combination no HBase Thrift server speaks."""
        if self.http:
            if self.protocol != "binary":
                raise InvalidPeerConfigError(
                    f"peer {peer_id}: {THRIFT_HTTP_KEY}=true with {THRIFT_PROTOCOL_KEY}={self.protocol}: HBase's "
                    "Thrift HTTP server speaks the binary protocol only"
                )
            if self.transport != "buffered":
                raise InvalidPeerConfigError(
                    f"peer {peer_id}: {THRIFT_HTTP_KEY}=true with {THRIFT_TRANSPORT_KEY}={self.transport}: Thrift over "
                    "HTTP has no framed transport (remove the key)"
                )
        elif self.qops and self.transport == "framed":
            raise InvalidPeerConfigError(
                f"peer {peer_id}: {THRIFT_QOP_KEY} with {THRIFT_TRANSPORT_KEY}=framed: HBase's Thrift server speaks "
                "SASL over its buffered transport only (it refuses to start with both)"
            )

    @classmethod
    def for_source(cls, environ: Mapping[str, str] | None = None) -> ThriftOptions:
        """How to speak to the source cluster's Thrift servers: buffered, binary, plain; SASL
        GSSAPI (any protection level, or those of ``WALSHIP_SOURCE_THRIFT_QOP``; ``none``: no
        SASL) to the principal ``WALSHIP_THRIFT_PRINCIPAL`` (default ``hbase/_HOST``) when
        walship is logged in to Kerberos; HTTP when ``WALSHIP_SOURCE_THRIFT_HTTP=true`` (SPNEGO
        to ``WALSHIP_THRIFT_SPNEGO_PRINCIPAL``, default ``HTTP/_HOST``, when logged in).

        :raises ConfigError: a value of those that is not one (names the variable).
        """
        env = os.environ if environ is None else environ
        raw_http = env.get(ENV_SOURCE_HTTP, "").strip().lower() or "false"
        if raw_http not in _BOOLEANS:
            raise ConfigError(f"{ENV_SOURCE_HTTP} must be true or false, got {env.get(ENV_SOURCE_HTTP)!r}")
        http = _BOOLEANS[raw_http]
        qops: tuple[str, ...] = ()
        if active() is not None and not http:
            raw_qop = env.get(ENV_SOURCE_QOP, "").strip()
            if raw_qop.lower() != "none":
                qops = parse_qop(raw_qop, ENV_SOURCE_QOP) if raw_qop else QOPS[::-1]
        return cls(
            qops=qops,
            principal=_principal(env.get(ENV_THRIFT_PRINCIPAL), DEFAULT_PRINCIPAL, ENV_THRIFT_PRINCIPAL),
            http=http,
            spnego_principal=_principal(env.get(ENV_SPNEGO_PRINCIPAL), DEFAULT_SPNEGO_PRINCIPAL, ENV_SPNEGO_PRINCIPAL),
        )

    @property
    def sasl(self) -> bool:
        """Whether connections speak SASL GSSAPI (levels given, not HTTP)."""
        return bool(self.qops) and not self.http

    def identity(self, who: str) -> KerberosIdentity | None:
        """The Kerberos identity connections authenticate as (``None``: none is needed, or,
        for HTTP, none is logged in).

        :param who: whose servers, for the message (``peer 1``, ``the source cluster``).
        :raises InvalidPeerConfigError: SASL is asked for and walship is not logged in.
        """
        identity = active()
        if identity is None and self.sasl:
            raise InvalidPeerConfigError(
                f"{who}: {THRIFT_QOP_KEY}={','.join(self.qops)} asks for SASL GSSAPI (Kerberos), but walship is not "
                "logged in: give --principal (and --keytab), or set WALSHIP_PRINCIPAL"
            )
        return identity

    def describe(self) -> str:
        """E.g. ``framed/compact over TLS``, ``buffered/binary over SASL auth-conf``,
        ``HTTPS with SPNEGO``."""
        if self.http:
            scheme = "HTTPS" if self.ssl else "HTTP"
            return f"{scheme} with SPNEGO" if active() is not None else scheme
        text = f"{self.transport}/{self.protocol}"
        if self.sasl:
            levels = self.qops if len(self.qops) < 2 else (", ".join(self.qops[:-1]) + f" or {self.qops[-1]}",)
            text += f" over SASL {levels[0]}"
        return text + (" over TLS" if self.ssl else "")


def connections_of(peer: PeerConfig, servers: int) -> int:
    """The peer's ``walship.sink.thrift.connections``; by default one for each of its
    ``servers`` Thrift servers (at most :data:`MAX_CONNECTIONS`).

    :raises InvalidPeerConfigError: not a whole number from 1 to 64 (the message names the
        peer and the key).
    """
    raw = peer.configuration.get(THRIFT_CONNECTIONS_KEY)
    if raw is None:
        return max(1, min(servers, MAX_CONNECTIONS))
    try:
        value = int(raw.strip())
    except ValueError:
        value = 0
    if not 1 <= value <= MAX_CONNECTIONS:
        raise InvalidPeerConfigError(
            f"peer {peer.peer_id}: {THRIFT_CONNECTIONS_KEY} must be a whole number from 1 to {MAX_CONNECTIONS}, "
            f"got {raw!r}"
        )
    return value
