"""Kerberos (SASL GSSAPI) for HBase's RPC, as HBase 2.6's client speaks it to a master with
``hbase.security.authentication=kerberos``.

After the preamble (``HBas``, 0, 81 for KERBEROS) the client and the server swap SASL tokens
(HBase's ``HBaseSaslRpcClient.saslConnect``, ``NettyHBaseSaslRpcClientHandler``; the server's
``NettyHBaseSaslRpcServerHandler``, ``ServerRpcConnection.doRawSaslReply``):

* the client sends each token as a 4-byte big-endian length and the token, the first one
  unasked (GSSAPI's AP-REQ);
* the server answers each token it has an answer for with a 4-byte status, then
  ``SUCCESS`` (0): a 4-byte length and its token, or the length -88
  (``SaslUtil.SWITCH_TO_SIMPLE_AUTH``: a server without security asks for SIMPLE);
  ``ERROR`` (1): HBase's exception class and its message as two ``WritableUtils`` strings
  (a 4-byte length, UTF-8), and it closes the connection;
* GSSAPI takes three client tokens (AP-REQ; an empty one once the context is made; the
  chosen security layer, wrapped) and two server answers (AP-REP; the offered security layers,
  wrapped); the server answers the last client token with nothing.

With the protection level the two agreed on (SASL's QOP: HBase's ``hbase.rpc.protection``)
above ``auth``, every byte after the exchange, from the ``ConnectionHeader`` on, travels
wrapped (``SaslWrapHandler``/``SaslUnwrapHandler``): each write wrapped whole, sent as a
4-byte length and the wrapped token; each such frame read unwrapped into a stream.

Example::

    auth = KerberosAuth(walship.security.active(), "hbase/_HOST", ("auth-conf",))
    with RpcConnection("m1.example.com", 16000, "MasterService", auth) as conn: ...
"""

from __future__ import annotations

import logging
import re
import socket
import struct
import threading
from collections.abc import Callable, Sequence
from typing import Any

from walship.errors import KerberosLoginError, MasterUnavailableError, SaslAuthError
from walship.protos import RPC_pb2
from walship.rpc.wire import AUTH_KERBEROS, MAX_FRAME, Readable, RpcProtocolError, read_exact
from walship.security.kerberos import KerberosIdentity, server_name
from walship.security.sasl import QOPS, gss_words, sasl_client

__all__ = [
    "DEFAULT_SERVER_PRINCIPAL",
    "MAX_CHALLENGE",
    "SASL_ERROR",
    "SASL_SUCCESS",
    "SWITCH_TO_SIMPLE_AUTH",
    "KerberosAuth",
    "SaslChannel",
    "SaslServerError",
    "read_sasl_reply",
    "read_writable_string",
    "sasl_token",
]

log = logging.getLogger(__name__)

#: HBase's ``SaslStatus``.
SASL_SUCCESS = 0
SASL_ERROR = 1
#: The length a server without security answers the first token with (``SaslUtil``).
SWITCH_TO_SIMPLE_AUTH = -88
#: The largest challenge, class name or message HBase's client reads (``SaslChallengeDecoder``).
MAX_CHALLENGE = 1024 * 1024
#: The master's principal when ``WALSHIP_HBASE_PRINCIPAL`` is not set (HBase's
#: ``hbase.master.kerberos.principal``, ``_HOST`` the master's host name).
DEFAULT_SERVER_PRINCIPAL = "hbase/_HOST"

#: A SASL client's maker: ``(identity, principal pattern, host, qops) -> SASLClient``.
SaslFactory = Callable[[KerberosIdentity, str, str, Sequence[str]], Any]


class SaslServerError(Exception):
    """The server's SASL ``ERROR``: HBase's exception class and its message."""

    def __init__(self, exception_class: str, message: str) -> None:
        super().__init__(f"{exception_class}: {message}")
        self.exception_class = exception_class
        self.message = message


def sasl_token(token: bytes) -> bytes:
    """A client token as HBase's client sends it: its 4-byte length, then the token."""
    return struct.pack(">I", len(token)) + token


def read_writable_string(sock: Readable, what: str) -> str:
    """Hadoop's ``WritableUtils.readString``: a 4-byte length (-1: null, read as ``""``), UTF-8.

    :raises RpcProtocolError: a length below -1 or above :data:`MAX_CHALLENGE`.
    """
    (length,) = struct.unpack(">i", read_exact(sock, 4, what))
    if length == -1:
        return ""
    if length < 0 or length > MAX_CHALLENGE:
        raise RpcProtocolError(f"{what}: a SASL error string of {length} bytes")
    return read_exact(sock, length, what).decode("utf-8", "replace")


def read_sasl_reply(sock: Readable, what: str) -> bytes | None:
    """The server's answer to a client token (``HBaseSaslRpcClient.readStatus`` and the length
    after it): its token, or ``None`` when it asks for SIMPLE authentication.

    :raises SaslServerError: the server answered ``ERROR`` (its exception class and message).
    :raises RpcProtocolError: a status or length HBase never sends, or the connection closed.
    """
    (status,) = struct.unpack(">i", read_exact(sock, 4, what))
    if status == SASL_ERROR:
        exception_class = read_writable_string(sock, what)
        raise SaslServerError(exception_class or "javax.security.sasl.SaslException", read_writable_string(sock, what))
    if status != SASL_SUCCESS:
        raise RpcProtocolError(f"{what}: SASL status {status}, not SUCCESS (0) or ERROR (1)")
    (length,) = struct.unpack(">i", read_exact(sock, 4, what))
    if length == SWITCH_TO_SIMPLE_AUTH:
        return None
    if length < 0 or length > MAX_CHALLENGE:
        raise RpcProtocolError(f"{what}: a SASL challenge of {length} bytes")
    return read_exact(sock, length, what)


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


#: Words of a Kerberos failure that is about walship's own ticket, not the server.
_LOGIN_WORDS = (
    "no kerberos credentials",
    "no credentials cache",
    "credentials cache file",
    "can't find client principal",
    "ticket expired",
    "no key table entry",
)


def _no_ticket(who: str, where: str, reason: str) -> str:
    return f"{who} has no valid Kerberos ticket for {where} (give --keytab, or run kinit): {reason}"


def _is_login_problem(reason: str) -> bool:
    lower = reason.lower()
    return any(word in lower for word in _LOGIN_WORDS) or bool(re.search(r"client .*not found in kerberos", lower))


class SaslChannel:
    """The connection once SASL wraps it: :meth:`sendall` wraps each write whole and sends it
    as a 4-byte length and the wrapped token; :meth:`recv` reads such frames and unwraps them
    into a stream (HBase's ``SaslWrapHandler`` and ``SaslUnwrapHandler``)."""

    def __init__(self, sock: socket.socket, client: Any, qop: str, what: str) -> None:
        self.sock = sock
        self.client = client
        self.qop = qop
        self.what = what
        self._buffer = b""
        self._lock = threading.Lock()
        self._disposed = False

    def sendall(self, data: bytes, /) -> None:
        with self._lock:
            token = self._sasl("wrap", data)
        if len(token) > MAX_FRAME:
            raise RpcProtocolError(f"{self.what}: a wrapped frame of {len(token)} bytes, more than {MAX_FRAME}")
        self.sock.sendall(sasl_token(token))

    def recv(self, count: int, /) -> bytes:
        while not self._buffer:
            (length,) = struct.unpack(">I", read_exact(self.sock, 4, self.what))
            if length > MAX_FRAME:
                raise RpcProtocolError(f"{self.what}: a wrapped frame of {length} bytes, more than {MAX_FRAME}")
            token = read_exact(self.sock, length, self.what)
            with self._lock:
                self._buffer = self._sasl("unwrap", token)
        out, self._buffer = self._buffer[:count], self._buffer[count:]
        return out

    def _sasl(self, op: str, data: bytes) -> bytes:
        if self._disposed:
            raise RpcProtocolError(f"{self.what}: the SASL context is closed")
        try:
            result = getattr(self.client, op)(data)
        except Exception as exc:  # pykerberos' GSSError, pure-sasl's plain Exceptions
            raise RpcProtocolError(f"{self.what}: SASL {op} ({self.qop}) failed: {gss_words(exc)}") from None
        return bytes(result)

    def close(self) -> None:
        """Release the GSSAPI context (the socket is the connection's to close)."""
        with self._lock:
            if not self._disposed:
                self._disposed = True
                _dispose(self.client)


def _dispose(client: Any) -> None:
    try:
        client.dispose()
    except Exception as exc:  # a context half made: nothing more to release
        log.debug("disposing of a SASL client: %s", exc)


class KerberosAuth:
    """KERBEROS: SASL GSSAPI as ``identity`` to the server principal ``principal_pattern``
    (``hbase/_HOST[@REALM]``, ``_HOST`` the master's host name, lower-cased as HBase's client
    does; MIT Kerberos canonicalizes it further as ``krb5.conf``'s ``dns_canonicalize_hostname``
    and ``rdns`` say, as HBase's reverse lookup does unless
    ``hbase.unsafe.client.kerberos.hostname.disable.reversedns``), accepting the protection
    levels ``qops`` (the strongest the server also offers is taken).

    :param fallback_allowed: a server without security may switch the connection to SIMPLE
        (HBase's ``hbase.ipc.client.fallback-to-simple-auth-allowed``; off, as there).
    """

    name = "KERBEROS"
    auth_byte = AUTH_KERBEROS

    def __init__(
        self,
        identity: KerberosIdentity,
        principal_pattern: str = DEFAULT_SERVER_PRINCIPAL,
        qops: Sequence[str] = QOPS,
        *,
        fallback_allowed: bool = False,
        sasl_factory: SaslFactory = sasl_client,
    ) -> None:
        self.identity = identity
        self.principal_pattern = principal_pattern
        self.qops = tuple(qops)
        self.fallback_allowed = fallback_allowed
        self._factory = sasl_factory
        #: the principal the last exchange authenticated (the ``ConnectionHeader``'s user)
        self.user = identity.principal
        #: the protection level of the last connection (``auth``, ``auth-int``, ``auth-conf``)
        self.negotiated_qop: str | None = None

    def user_info(self) -> RPC_pb2.UserInformation:
        """As HBase's ``GssSaslClientAuthenticationProvider``: the principal as the effective
        user (the name SASL authenticated, so the server sees no proxy user)."""
        return RPC_pb2.UserInformation(effective_user=self.user)

    def server_principal(self, host: str) -> str:
        """The server's principal for a master on ``host``: ``hbase/m1.example.com``."""
        service, server_host = server_name(self.principal_pattern, host.lower())
        realm = self.principal_pattern.partition("@")[2]
        return f"{service}/{server_host}" + (f"@{realm}" if realm else "")

    def negotiate(self, sock: socket.socket, server: str) -> socket.socket | SaslChannel:
        """Run SASL GSSAPI after the preamble; the channel wraps when the level is above ``auth``.

        :raises SaslAuthError: the server refused the principal, the KDC has no such server
            principal, the two sides share no protection level, or (without
            ``fallback_allowed``) the master does not use Kerberos.
        :raises KerberosLoginError: walship holds no valid ticket.
        :raises MasterUnavailableError: the connection closed during the exchange.
        """
        host = server.rsplit(":", 1)[0].strip("[]")
        target = self.server_principal(host)
        who = f"principal {self.identity.principal}"
        where = f"the master at {server}"
        try:
            client = self._factory(self.identity, self.principal_pattern, host.lower(), self.qops)
        except SaslAuthError as exc:
            reason = str(exc)
            if _is_login_problem(reason):
                raise KerberosLoginError(_no_ticket(who, where, reason)) from None
            raise SaslAuthError(f"{where} as {who}: {_one_line(reason)}") from None
        try:
            channel = self._exchange(sock, client, where, target)
        except BaseException:
            _dispose(client)
            raise
        if not isinstance(channel, SaslChannel):
            _dispose(client)  # ``auth`` or SIMPLE: nothing is wrapped from here
        return channel

    def _step(self, client: Any, challenge: bytes | None, where: str, target: str) -> bytes:
        """One ``SaslClient.evaluateChallenge``, its failures named."""
        try:
            return bytes(client.process(challenge))
        except Exception as exc:  # pykerberos' GSSError, pure-sasl's SASLProtocolException / Exception
            reason = gss_words(exc)
            who = f"principal {self.identity.principal}"
            if "quality of protection" in reason:
                offered = re.search(r"server is offering \(([^)]*)\)", reason)
                raise SaslAuthError(
                    f"{where} and {who} share no protection level: walship accepts {', '.join(self.qops)} "
                    f"(WALSHIP_RPC_PROTECTION), the master offers {offered.group(1) if offered else 'others'}"
                ) from None
            if _is_login_problem(reason):
                raise KerberosLoginError(_no_ticket(who, where, reason)) from None
            if re.search(r"server .*not found in kerberos", reason.lower()):
                raise SaslAuthError(
                    f"{where} as {who}: the KDC does not know the server principal {target} ({reason}); "
                    "is WALSHIP_HBASE_PRINCIPAL right (default hbase/_HOST)?"
                ) from None
            raise SaslAuthError(f"{where} as {who}: Kerberos to server principal {target} failed: {reason}") from None

    def _exchange(self, sock: socket.socket, client: Any, where: str, target: str) -> socket.socket | SaslChannel:
        """The tokens' exchange (``HBaseSaslRpcClient.saslConnect``) and the channel it leaves."""
        what = f"{where} (SASL GSSAPI)"
        who = f"principal {self.identity.principal}"
        try:
            token = self._step(client, None, where, target)  # getInitialResponse: GSSAPI's AP-REQ
            sock.sendall(sasl_token(token))
            steps = 0
            while not client.complete:
                challenge = read_sasl_reply(sock, what)
                if challenge is None:
                    return self._fallback(sock, where)
                token = self._step(client, challenge, where, target)
                sock.sendall(sasl_token(token))
                steps += 1
                if steps > 10:
                    raise RpcProtocolError(f"{what}: the exchange has not completed after {steps} tokens")
        except SaslServerError as exc:
            short = exc.exception_class.rsplit(".", 1)[-1]
            raise SaslAuthError(
                f"{where} refused {who} (server principal {target}): {short}: {_one_line(exc.message) or '(no message)'}"
            ) from None
        except (OSError, RpcProtocolError) as exc:
            detail = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            raise MasterUnavailableError(
                f"Kerberos (SASL GSSAPI) to {where} as {who} did not complete: {detail}"
            ) from None
        qop = client.qop.decode() if isinstance(client.qop, bytes) else str(client.qop or "auth")
        if qop not in self.qops:  # HBase's verifyNegotiatedQop
            raise SaslAuthError(f"{where} as {who}: negotiated protection {qop}, not one of {', '.join(self.qops)}")
        mech = getattr(client, "_chosen_mech", None)
        self.user = str(getattr(mech, "user", None) or self.identity.principal)
        self.negotiated_qop = qop
        log.debug("SASL GSSAPI to %s as %s (server principal %s): protection %s", where, self.user, target, qop)
        if qop == "auth":
            return sock
        return SaslChannel(sock, client, qop, what)

    def _fallback(self, sock: socket.socket, where: str) -> socket.socket:
        """The server asked for SIMPLE (it has no security): go on unprotected if allowed."""
        if not self.fallback_allowed:
            raise SaslAuthError(
                f"{where} does not use Kerberos (it asks for SIMPLE authentication), but walship logged in as "
                f"principal {self.identity.principal}: leave --principal out for this cluster"
            )
        log.warning("%s asks for SIMPLE authentication; going on without Kerberos", where)
        self.negotiated_qop = None
        return sock

    def __repr__(self) -> str:
        return (
            f"KerberosAuth(principal={self.identity.principal!r}, server={self.principal_pattern!r}, qops={self.qops})"
        )
