"""Connections to a peer's HBase Thrift servers, shared by the Thrift1 and Thrift2 sinks.

* :class:`ThriftOptions` (:mod:`walship.thrift.options`): the transport, protocol, TLS and
  authentication a peer's Thrift servers speak, from its configuration, as HBase's Thrift
  servers are started (``-f``, ``-c``, ``hbase.thrift.ssl.enabled``,
  ``hbase.thrift.security.qop``, ``hbase.regionserver.thrift.http``); the same keys apply to
  both services:
  ``walship.sink.thrift.transport`` = ``buffered`` (default) | ``framed``,
  ``walship.sink.thrift.protocol`` = ``binary`` (default) | ``compact``,
  ``walship.sink.thrift.ssl`` = ``false`` (default) | ``true``, with
  ``walship.sink.thrift.ssl.ca`` (a PEM file of the CAs to trust; default: the system's) and
  ``walship.sink.thrift.ssl.verify`` = ``true`` (default) | ``false`` (check that the
  certificate names the host; the certificate itself is always verified);
  ``walship.sink.thrift.security.qop`` = ``auth`` | ``auth-int`` | ``auth-conf`` (or a comma
  list of those walship accepts; HBase's ``authentication``, ``integrity``, ``privacy`` too):
  SASL GSSAPI (Kerberos) on the buffered transport, as the logged-in principal (``--principal``;
  not logged in: a configuration error), to the servers' principal
  ``walship.sink.thrift.kerberos.principal`` (default ``hbase/_HOST``; ``_HOST`` is the host
  as the sink's server list names it, the realm the host's), the frames signed (``auth-int``)
  or encrypted (``auth-conf``) as the server chooses among those accepted;
  ``walship.sink.thrift.http`` = ``false`` (default) | ``true``: Thrift over HTTP ``POST``
  (binary; HTTPS with ``walship.sink.thrift.ssl``), with SPNEGO to
  ``walship.sink.thrift.spnego.principal`` (default ``HTTP/_HOST``) when walship is logged in
  to Kerberos (the ``qop`` key is then not used: the HTTP server authenticates each request).
  The source cluster's servers: :meth:`ThriftOptions.for_source` (SASL when logged in).
* :func:`open_transport`: a connection's transport, opened (SASL negotiated, see
  :mod:`walship.thrift.sasl`; HTTP in :mod:`walship.thrift.http`).
* :func:`open_thrift2` (THBaseService); Thrift1's, a happybase connection, is
  :func:`walship.thrift.conn1.open_connection` (happybase and Thrift1's IDL are loaded only
  where Thrift1 is spoken).
* :class:`ThriftSession`: one connection to the first answering of a cluster's servers, for
  reading and changing its tables (``walship scope``, ``walship verify``); its errors are the
  caller's own.

A server that refuses walship's principal raises :class:`~walship.errors.SaslAuthError`; one
that speaks another kind of connection (SASL, plain, HTTP) than asked,
:class:`~walship.thrift.sasl.SecurityMismatchError`: neither is transient, and the callers
(the sinks' :class:`~walship.thrift.pool.ServerPool`, :class:`ThriftSession`) fail with them
rather than retry.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import ssl
from collections.abc import Callable, Sequence
from typing import Any, ClassVar, Self, TypeVar

from thriftpy2.protocol.exc import TProtocolException
from thriftpy2.thrift import TApplicationException
from thriftpy2.transport import TBufferedTransport, TFramedTransport, TSocket, TSSLSocket, TTransportException

from walship.errors import SaslAuthError

try:
    from thriftpy2.protocol.cybin import ProtocolError as CyProtocolError  # type: ignore[attr-defined]
except ImportError:  # thriftpy2 without its compiled protocol

    class CyProtocolError(Exception):  # type: ignore[no-redef]
        """Never raised: the compiled protocol is not there."""


from walship.thrift.encoded import EncodingClient
from walship.thrift.hbase2 import hbase2
from walship.thrift.options import (
    MAX_CONNECTIONS,
    THRIFT_CONNECTIONS_KEY,
    THRIFT_HTTP_KEY,
    THRIFT_PRINCIPAL_KEY,
    THRIFT_PROTOCOL_KEY,
    THRIFT_QOP_KEY,
    THRIFT_SPNEGO_PRINCIPAL_KEY,
    THRIFT_SSL_CA_KEY,
    THRIFT_SSL_KEY,
    THRIFT_SSL_VERIFY_KEY,
    THRIFT_TRANSPORT_KEY,
    ThriftOptions,
    connections_of,
)
from walship.thrift.probe import PROBE_TIMEOUT_MS
from walship.thrift.sasl import AnswerCheck, SaslClientTransport, SecurityMismatchError

__all__ = [
    "MAX_CONNECTIONS",
    "THRIFT2_REFUSALS",
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
    "TRANSPORT_CLASSES",
    "TRANSPORT_ERRORS",
    "SecurityMismatchError",
    "Thrift2Client",
    "ThriftOptions",
    "ThriftSession",
    "connections_of",
    "describe_error",
    "open_socket",
    "open_thrift2",
    "open_transport",
    "thrift_transport",
]

log = logging.getLogger(__name__)

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


def open_transport(host: str, port: int, options: ThriftOptions, timeout_ms: int) -> Any:
    """The transport a connection to ``host:port`` speaks through, opened: HTTP (SPNEGO when
    logged in), SASL GSSAPI negotiated (under a buffered transport), or the buffered or framed
    transport over the socket (its first answer checked: :class:`~walship.thrift.sasl.AnswerCheck`).

    :raises InvalidPeerConfigError: SASL asked for, and walship not logged in to Kerberos.
    :raises SaslAuthError: the server refused walship's principal (names it and the server).
    :raises SecurityMismatchError: the server answered SASL negotiation with what is not SASL,
        or it answers a plain call when SASL negotiation got no answer.
    :raises TTransportException: the server cannot be reached, the TLS handshake failed, or
        the server closed the connection or timed out during SASL negotiation.
    """
    server = f"{host}:{port}"
    identity = options.identity(f"Thrift server {server}")

    def reopen() -> Any:
        """A new socket to the server, for a probe of what it speaks (:mod:`walship.thrift.probe`)."""
        return open_socket(host, port, options, min(timeout_ms or PROBE_TIMEOUT_MS, PROBE_TIMEOUT_MS))

    if options.http:
        from walship.thrift.http import HttpTransport  # requests, only where HTTP is spoken

        http = HttpTransport(host, port, options, timeout_ms, identity, reopen)
        return TRANSPORT_CLASSES["buffered"](http, buf_size=WRITE_BUFFER)
    sock = open_socket(host, port, options, timeout_ms)
    if not options.sasl:
        return thrift_transport(options, AnswerCheck(sock, server, reopen))
    assert identity is not None  # options.identity raised otherwise: SASL needs a principal
    from walship.security.kerberos import server_name
    from walship.security.sasl import sasl_client  # pure-sasl and pykerberos: only with Kerberos

    target = "/".join(server_name(options.principal, host))
    try:
        client = sasl_client(identity, options.principal, host, options.qops)
    except SaslAuthError as exc:
        sock.close()
        raise SaslAuthError(f"Thrift server {server}: {exc}") from None
    sasl = SaslClientTransport(
        sock, client, server=server, who=identity.principal, target=target, reopen=reopen, protocol=options.protocol
    )
    sasl.negotiate(timeout_ms / 1000 if timeout_ms else None)
    # HBase's SASL server is never framed; the buffered transport gives the compiled protocol
    # the transport it needs and writes a call in one frame
    return TRANSPORT_CLASSES["buffered"](sasl, buf_size=WRITE_BUFFER)


def open_thrift2(
    host: str, port: int, options: ThriftOptions | None = None, *, timeout_ms: int = 30_000
) -> Thrift2Client:
    """A connection to one Thrift2 (THBaseService) server, opened, speaking ``options``.

    :raises TTransportException: the server cannot be reached or the TLS handshake failed.
    :raises SaslAuthError, SecurityMismatchError, InvalidPeerConfigError: see :func:`open_transport`.
    """
    options = options or ThriftOptions()
    transport = open_transport(host, port, options, timeout_ms)
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
            except SaslAuthError as exc:
                raise SaslAuthError(f"{label}: {exc}") from None
            except SecurityMismatchError as exc:
                raise self.refused(f"{label}: {exc} ({hint})") from None
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
        except SaslAuthError as exc:  # SPNEGO, refused for a request
            raise SaslAuthError(f"{self.label}: {exc}") from None
        except SecurityMismatchError as exc:
            raise self.refused(f"{self.label}: could not {what}: {exc} ({self.hint})") from None
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
