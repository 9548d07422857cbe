"""Connections to a peer's HBase Thrift servers, shared by the Thrift1 and Thrift2 sinks.

* :class:`ThriftOptions`: the transport, protocol and TLS a peer's Thrift servers speak, from
  its configuration, as HBase's Thrift servers are started (``-f``, ``-c``,
  ``hbase.thrift.ssl.enabled``); the same keys apply to both services:
  ``walship.sink.thrift.transport`` = ``buffered`` (default) | ``framed``,
  ``walship.sink.thrift.protocol`` = ``binary`` (default) | ``compact``,
  ``walship.sink.thrift.ssl`` = ``false`` (default) | ``true``, with
  ``walship.sink.thrift.ssl.ca`` (a PEM file of the CAs to trust; default: the system's) and
  ``walship.sink.thrift.ssl.verify`` = ``true`` (default) | ``false`` (check that the
  certificate names the host; the certificate itself is always verified).
* :func:`open_thrift2` (THBaseService); Thrift1's, a happybase connection, is
  :func:`walship.thrift.conn1.open_connection` (happybase and Thrift1's IDL are loaded only
  where Thrift1 is spoken).
* :class:`ThriftSession`: one connection to the first answering of a cluster's servers, for
  reading and changing its tables (``walship scope``, ``walship verify``); its errors are the
  caller's own.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import ssl
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Self, TypeVar

from thriftpy2.protocol.exc import TProtocolException
from thriftpy2.thrift import TApplicationException
from thriftpy2.transport import TBufferedTransport, TFramedTransport, TSocket, TSSLSocket, TTransportException

from walship.errors import InvalidPeerConfigError

try:
    from thriftpy2.protocol.cybin import ProtocolError as CyProtocolError  # type: ignore[attr-defined]
except ImportError:  # thriftpy2 without its compiled protocol

    class CyProtocolError(Exception):  # type: ignore[no-redef]
        """Never raised: the compiled protocol is not there."""


from walship.peer import PeerConfig
from walship.thrift import PROTOCOLS, TRANSPORTS
from walship.thrift.encoded import EncodingClient
from walship.thrift.hbase2 import hbase2

__all__ = [
    "MAX_CONNECTIONS",
    "THRIFT2_REFUSALS",
    "THRIFT_CONNECTIONS_KEY",
    "THRIFT_PROTOCOL_KEY",
    "THRIFT_SSL_CA_KEY",
    "THRIFT_SSL_KEY",
    "THRIFT_SSL_VERIFY_KEY",
    "THRIFT_TRANSPORT_KEY",
    "TRANSPORT_CLASSES",
    "TRANSPORT_ERRORS",
    "Thrift2Client",
    "ThriftOptions",
    "ThriftSession",
    "connections_of",
    "describe_error",
    "open_socket",
    "open_thrift2",
    "thrift_transport",
]

log = logging.getLogger(__name__)

#: Peer configuration keys: how to speak to the peer's Thrift servers.
THRIFT_TRANSPORT_KEY = "walship.sink.thrift.transport"
THRIFT_PROTOCOL_KEY = "walship.sink.thrift.protocol"
THRIFT_SSL_KEY = "walship.sink.thrift.ssl"
THRIFT_SSL_CA_KEY = "walship.sink.thrift.ssl.ca"
THRIFT_SSL_VERIFY_KEY = "walship.sink.thrift.ssl.verify"
#: Peer configuration key: how many connections a sink spreads a large batch's calls over, each
#: carrying the rows whose key hashes to it, in WAL order (as HBase's replication source spreads
#: a batch over threads by region, up to one for each sink region server it picked). Default:
#: one for each of the peer's Thrift servers the sink names.
THRIFT_CONNECTIONS_KEY = "walship.sink.thrift.connections"
MAX_CONNECTIONS = 64
_BOOLEANS = {"true": True, "false": False}
#: A call to a peer goes out in pieces of at most this many bytes.
WRITE_BUFFER = 4 << 20
#: A server that cannot be reached, or answers with what is not Thrift (a wrong port, another
#: protocol or transport: the compiled protocol's ProtocolError, the pure one's TProtocolException).
TRANSPORT_ERRORS: tuple[type[Exception], ...] = (
    TTransportException,
    TApplicationException,
    TProtocolException,
    CyProtocolError,
    ConnectionError,
    socket.timeout,
    OSError,
    EOFError,
)
T = TypeVar("T")
#: The transports' classes by name (the compiled ones where thriftpy2 has them, as happybase's).
TRANSPORT_CLASSES: dict[str, Any] = {"buffered": TBufferedTransport, "framed": TFramedTransport}
#: The server's own errors: a refusal of what was asked, not a failure to answer (Thrift1's:
#: :data:`walship.thrift.conn1.THRIFT1_REFUSALS`).
THRIFT2_REFUSALS: tuple[type[BaseException], ...] = (hbase2.TIOError, hbase2.TIllegalArgument)


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


@dataclass(frozen=True)
class ThriftOptions:
    """How to speak to a peer's Thrift servers (see the module's description)."""

    transport: str = "buffered"
    protocol: str = "binary"
    ssl: bool = False
    #: PEM file of the CAs to trust (``None``: the system's)
    ca: str | None = None
    #: check that the server's certificate names the host
    verify: bool = True

    @classmethod
    def of(cls, peer: PeerConfig) -> ThriftOptions:
        """The options in the peer's configuration.

        :raises InvalidPeerConfigError: a value out of its allowed set (the message names the
            key, the peer and the allowed values), or a CA file that does not exist.
        """
        ca = peer.configuration.get(THRIFT_SSL_CA_KEY) or None
        if ca is not None and not Path(ca).is_file():
            raise InvalidPeerConfigError(f"peer {peer.peer_id}: {THRIFT_SSL_CA_KEY}: no such file: {ca}")
        return cls(
            transport=_choice(peer, THRIFT_TRANSPORT_KEY, TRANSPORTS, "buffered"),
            protocol=_choice(peer, THRIFT_PROTOCOL_KEY, PROTOCOLS, "binary"),
            ssl=_flag(peer, THRIFT_SSL_KEY, False),
            ca=ca,
            verify=_flag(peer, THRIFT_SSL_VERIFY_KEY, True),
        )

    def describe(self) -> str:
        """E.g. ``framed/compact over TLS``."""
        return f"{self.transport}/{self.protocol}{' over TLS' if self.ssl else ''}"


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


def describe_error(exc: BaseException | None) -> str:
    """An error's own words: thriftpy2's exceptions print as their repr, and a refusal's
    message comes undecoded (bytes) over a connection that does not decode responses."""
    message = getattr(exc, "message", None)
    if isinstance(message, bytes) and message:
        return message.decode(errors="replace")
    return message if isinstance(message, str) and message else str(exc)


def _tls_socket(host: str, port: int, options: ThriftOptions, timeout_ms: int) -> Any:
    """A thriftpy2 TLS socket to ``host:port``, connected (the handshake done).

    :raises TTransportException: the server cannot be reached, or the handshake failed (the
        message says why, e.g. a certificate that the CA did not sign).
    """
    tsock = TSSLSocket(  # type: ignore[no-untyped-call]
        host, port, socket_timeout=timeout_ms, connect_timeout=timeout_ms, cafile=options.ca, validate=True
    )
    context: ssl.SSLContext = tsock.ssl_context
    if options.ca is None:
        context.load_default_certs(ssl.Purpose.SERVER_AUTH)
    context.check_hostname = options.verify
    timeout = timeout_ms / 1000 if timeout_ms else None
    try:
        raw = socket.create_connection((host, port), timeout=timeout)
    except OSError as exc:
        raise TTransportException(
            type=TTransportException.NOT_OPEN, message=f"could not connect to {host}:{port}: {exc}"
        ) from None
    try:
        tls = context.wrap_socket(raw, server_hostname=host)
    except (ssl.SSLError, ssl.CertificateError, OSError) as exc:
        raw.close()
        hint = f" (check {THRIFT_SSL_CA_KEY})" if isinstance(exc, ssl.SSLCertVerificationError) else ""
        raise TTransportException(
            type=TTransportException.NOT_OPEN, message=f"TLS handshake with {host}:{port} failed: {exc}{hint}"
        ) from None
    tls.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    tsock.set_handle(tls)  # type: ignore[no-untyped-call]
    return tsock


def open_socket(host: str, port: int, options: ThriftOptions, timeout_ms: int) -> Any:
    """A connected socket to ``host:port``: TLS or plain, as ``options`` say."""
    if options.ssl:
        return _tls_socket(host, port, options, timeout_ms)
    sock = TSocket(host, port, socket_timeout=timeout_ms, connect_timeout=timeout_ms)  # type: ignore[no-untyped-call]
    sock.open()  # type: ignore[no-untyped-call]
    return sock


def thrift_transport(options: ThriftOptions, sock: Any) -> Any:
    """The transport ``options`` name over ``sock``, writing a call in one piece: a buffered
    transport writes out whenever its buffer fills, and each write lets other threads take the
    interpreter while the peer waits for the rest of the call."""
    return TRANSPORT_CLASSES[options.transport](sock, buf_size=WRITE_BUFFER)


class Thrift2Client:
    """An open connection to one THBaseService server: ``client`` makes the calls."""

    def __init__(self, transport: Any, client: Any, address: tuple[str, int]) -> None:
        self.transport = transport
        self.client = client
        self.address = address

    def close(self) -> None:
        with contextlib.suppress(*TRANSPORT_ERRORS):
            self.transport.close()

    def __enter__(self) -> Thrift2Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_thrift2(
    host: str, port: int, options: ThriftOptions | None = None, *, timeout_ms: int = 30_000
) -> Thrift2Client:
    """A connection to one Thrift2 (THBaseService) server, opened, speaking ``options``.

    :raises TTransportException: the server cannot be reached or the TLS handshake failed.
    """
    options = options or ThriftOptions()
    transport = thrift_transport(options, open_socket(host, port, options, timeout_ms))
    return Thrift2Client(transport, EncodingClient(hbase2.THBaseService, options.protocol, transport), (host, port))


class ThriftSession:
    """One connection to a cluster's Thrift servers, the first of ``servers`` that answers;
    :meth:`call` turns a call's errors into the caller's own.

    A subclass names the servers and its errors in the class attributes below.

    :param label: who the servers are, for messages (``the source cluster``, ``peer 1``).
    :param hint: where they are configured, for messages (a flag, ``its walship.sink.thrift2``).
    :raises unavailable: no server answered.
    """

    #: what the servers are, for messages (``Thrift``, ``Thrift2``)
    service: ClassVar[str]
    #: ``opener(host, port, options, timeout_ms=...)``: Thrift1's ``open_connection`` (calls get
    #: the happybase connection) or :func:`open_thrift2` (calls get its client)
    opener: ClassVar[Callable[..., Any]]
    #: the server's own exceptions (Thrift1's ``THRIFT1_REFUSALS``, :data:`THRIFT2_REFUSALS`)
    refusals: ClassVar[tuple[type[BaseException], ...]]
    #: raised when the server refuses a call, or a call comes after :meth:`close`
    refused: ClassVar[type[Exception]]
    #: raised when no server answers, or a call fails on the way
    unavailable: ClassVar[type[Exception]]

    def __init__(
        self,
        servers: Sequence[tuple[str, int]],
        *,
        label: str,
        hint: str,
        options: ThriftOptions | None = None,
        timeout_ms: int = 30_000,
    ) -> None:
        self.label = label
        self.hint = hint
        self.options = options or ThriftOptions()
        #: the server answering, ``host:port``
        self.server = ""
        self._conn: Any = None
        last: BaseException | None = None
        for host, port in servers:
            try:
                self._conn = self.opener(host, port, self.options, timeout_ms=timeout_ms)
            except TRANSPORT_ERRORS as exc:
                log.debug("%s: %s server %s:%d unreachable: %s", label, self.service, host, port, describe_error(exc))
                last = exc
                continue
            self.server = f"{host}:{port}"
            break
        if self._conn is None:
            names = ", ".join(f"{h}:{p}" for h, p in servers)
            raise self.unavailable(
                f"{label}: no {self.service} server answered ({names or 'none given'}, {self.options.describe()}; "
                f"{hint})" + (f": {describe_error(last)}" if last else "")
            )

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def call(self, what: str, call: Callable[[Any], T]) -> T:
        """``call(client)``: a Thrift2 connection's client, or the happybase connection.

        :param what: what the call does, for messages (e.g. ``list its tables``).
        :raises refused: the server refused, or the connection is closed.
        :raises unavailable: the server did not answer, or does not know the call.
        """
        if self._conn is None:
            raise self.refused(f"{self.label}: the {self.service} connection is closed")
        client = self._conn.client if isinstance(self._conn, Thrift2Client) else self._conn
        try:
            return call(client)
        except self.refusals as exc:
            raise self.refused(
                f"{self.label}: {self.service} server {self.server} refused to {what}: {describe_error(exc)}"
            ) from None
        except TApplicationException as exc:
            raise self.unavailable(
                f"{self.label}: {self.server} could not {what}: {describe_error(exc)} (is it a {self.service} server, "
                f"and does it speak {self.options.describe()}? {self.hint})"
            ) from None
        except TRANSPORT_ERRORS as exc:
            raise self.unavailable(
                f"{self.label}: {self.service} server {self.server} failed to {what}: {describe_error(exc)} "
                f"({self.hint}, {self.options.describe()})"
            ) from None
