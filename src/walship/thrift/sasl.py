"""SASL GSSAPI under Thrift, as HBase's Thrift1 and Thrift2 servers speak it when
``hbase.thrift.security.qop`` is set: Apache Thrift's ``TSaslServerTransport`` straight over the
socket (or TLS), never framed (HBase refuses to start with both), the protocol over it.

Apache Thrift's ``TSaslTransport`` frames the negotiation as messages of a status byte
(:data:`START` 1, :data:`OK` 2, :data:`BAD` 3, :data:`ERROR` 4, :data:`COMPLETE` 5), a 4-byte
big-endian length and the payload. The client sends ``START`` carrying the mechanism's name
(``GSSAPI``) and, at once, its initial token (``OK``, or ``COMPLETE`` when the mechanism is
done); then each ``OK`` of the server carries a challenge the client answers, until the client
is done (its last answer ``COMPLETE``) and the server says ``COMPLETE``. ``BAD`` and ``ERROR``
carry the refusing side's words. Afterwards every flush is one frame: a 4-byte length and the
payload, wrapped (signed, or signed and encrypted) when the levels agreed on are ``auth-int``
or ``auth-conf``.

* :class:`SaslClientTransport`: the client side, over a connected thriftpy2 socket, with
  ``walship.security.sasl.sasl_client``'s pure-sasl client; the protocol speaks through a
  buffered transport over it (:func:`walship.thrift.conn.open_transport`).
* :class:`AnswerCheck`: under a connection without SASL, the server's first answer checked:
  an HTTP server's answer becomes a :class:`SecurityMismatchError` that says which setting to
  change; so does a first answer that does not come from a SASL server (HBase 2.6's neither
  answers nor closes a connection that does not negotiate: :mod:`walship.thrift.probe` asks).
  A SASL client's negotiation that is not answered asks likewise whether the server is plain.
"""

from __future__ import annotations

import contextlib
import logging
import struct
from collections.abc import Callable
from typing import Any

from thriftpy2.transport import TTransportException

from walship.errors import SaslAuthError
from walship.security.sasl import gss_words
from walship.thrift.options import ENV_SOURCE_HTTP, THRIFT_HTTP_KEY, THRIFT_PRINCIPAL_KEY, THRIFT_QOP_KEY
from walship.thrift.probe import answers_thrift, sasl_refusal

__all__ = [
    "BAD",
    "COMPLETE",
    "ERROR",
    "OK",
    "START",
    "AnswerCheck",
    "SaslClientTransport",
    "SecurityMismatchError",
    "sasl_message",
]

log = logging.getLogger(__name__)

START, OK, BAD, ERROR, COMPLETE = 1, 2, 3, 4, 5
STATUS_NAMES = {START: "START", OK: "OK", BAD: "BAD", ERROR: "ERROR", COMPLETE: "COMPLETE"}
MECHANISM = b"GSSAPI"
_HEADER = struct.Struct(">BI")
_LENGTH = struct.Struct(">I")
#: the largest negotiation message taken (Apache Thrift's limit)
MAX_NEGOTIATION = 104_857_600
#: a new connection to the same server, for a probe (:mod:`walship.thrift.probe`)
Reopen = Callable[[], Any]


class SecurityMismatchError(TTransportException):
    """The server speaks another kind of connection than asked: SASL to a client without it,
    HTTP to a binary one, something else to a SASL client. Not transient: the callers turn it
    into their refusal (a sink's :class:`~walship.errors.SinkError`), not a retry."""

    def __init__(self, message: str) -> None:
        super().__init__(type=TTransportException.UNKNOWN, message=message)

    def __str__(self) -> str:
        return str(self.message)


def sasl_message(status: int, payload: bytes) -> bytes:
    """A negotiation message as ``TSaslTransport`` writes it."""
    return _HEADER.pack(status, len(payload)) + payload


def _read_exactly(trans: Any, size: int) -> bytes:
    """``size`` bytes of ``trans`` (a thriftpy2 socket: EOF raises ``TTransportException``)."""
    out = b""
    while len(out) < size:
        chunk = trans.read(size - len(out))
        if not chunk:
            raise TTransportException(type=TTransportException.END_OF_FILE, message="the connection was closed")
        out += chunk
    return out


class SaslClientTransport:
    """A SASL GSSAPI client transport over ``trans`` (a connected thriftpy2 socket), opened
    by :meth:`negotiate`; thriftpy2's transport interface (``read``, ``write``, ``flush``,
    ``open``, ``close``, ``is_open``) once open.

    :param client: a pure-sasl client (``process``, ``complete``, ``qop``, ``wrap``,
        ``unwrap``, ``dispose``) for the server's principal.
    :param server: the server, ``host:port``, for messages.
    :param who: walship's principal, for messages.
    :param target: the server's principal as asked for (``hbase/host``), for messages.
    :param reopen: a new connection to the server, to ask whether it is a plain Thrift server
        (in ``protocol``) when negotiation gets no answer.
    """

    def __init__(
        self,
        trans: Any,
        client: Any,
        *,
        server: str,
        who: str,
        target: str,
        reopen: Reopen | None = None,
        protocol: str = "binary",
    ) -> None:
        self._trans = trans
        self._reopen = reopen
        self._protocol = protocol
        self._client = client
        self.server = server
        self.who = who
        self.target = target
        #: the level agreed on (``auth``, ``auth-int``, ``auth-conf``), once negotiated
        self.qop: str | None = None
        self._wrap = False
        self._wbuf = bytearray(_LENGTH.size)
        self._rbuf = b""
        self._rpos = 0

    # -- negotiation -------------------------------------------------------------------------

    def negotiate(self, timeout_s: float | None = None) -> SaslClientTransport:
        """Authenticate (as Apache Thrift's ``TSaslClientTransport.open``); the socket is
        closed when it fails.

        :raises SaslAuthError: the server refused (``BAD``/``ERROR``: its words), the
            Kerberos library could not make a token for the server's principal (e.g. one the
            KDC does not know), or the two sides agree on no protection level.
        :raises SecurityMismatchError: the server answered with what is not SASL (e.g. HTTP).
        :raises TTransportException: the connection closed or timed out during negotiation
            (the message asks whether the server speaks SASL).
        """
        try:
            self._negotiate(timeout_s)
        except BaseException:
            self.close()
            raise
        qop = self._client.qop
        self.qop = qop.decode() if isinstance(qop, bytes) else str(qop)
        self._wrap = self.qop != "auth"
        log.debug("SASL GSSAPI as %s to %s at %s: %s", self.who, self.target, self.server, self.qop)
        return self

    def _negotiate(self, timeout_s: float | None) -> None:
        token = self._step(None)
        self._trans.write(sasl_message(START, MECHANISM) + sasl_message(self._status(), token))
        self._trans.flush()
        last: int | None = None
        while not self._client.complete:
            last, payload = self._receive(timeout_s)
            if last not in (OK, COMPLETE):
                raise self._refused(f"the server answered {STATUS_NAMES.get(last, last)} where OK was expected")
            response = self._step(payload)
            if last == COMPLETE:  # the server is done: no answer (as Apache Thrift's client)
                continue
            self._trans.write(sasl_message(self._status(), response))
            self._trans.flush()
        if last in (None, OK):
            status, _ = self._receive(timeout_s)
            if status != COMPLETE:
                raise self._refused(
                    f"the server answered {STATUS_NAMES.get(status, status)} where COMPLETE was expected"
                )

    def _plain_server(self) -> None:
        """:raises SecurityMismatchError: the server answers a plain call (it speaks no SASL)."""
        if self._reopen is not None and answers_thrift(self._reopen, self._protocol):
            raise SecurityMismatchError(
                f"Thrift server {self.server} speaks Thrift without SASL (it answered a call without it, not SASL "
                f"GSSAPI as {self.who} to {self.target}): remove {THRIFT_QOP_KEY} (for the source, "
                "WALSHIP_SOURCE_THRIFT_QOP=none), or set hbase.thrift.security.qop on the server"
            ) from None

    def _status(self) -> int:
        return COMPLETE if self._client.complete else OK

    def _step(self, challenge: bytes | None) -> bytes:
        try:
            return bytes(self._client.process(challenge) or b"")
        except Exception as exc:  # pykerberos' GSSError, pure-sasl's SASLProtocolException
            text = gss_words(exc)
            if "cannot contact any kdc" in text.lower():
                raise TTransportException(
                    type=TTransportException.NOT_OPEN,
                    message=f"SASL GSSAPI as {self.who} to {self.target} at {self.server}: {text}",
                ) from None
            raise self._refused(text, local=True) from None

    def _refused(self, why: str, *, local: bool = False) -> SaslAuthError:
        side = "failed" if local else "was refused by the server"
        if "quality of protection" in why:
            hint = f"the levels walship accepts: {THRIFT_QOP_KEY}; the server's: hbase.thrift.security.qop"
        else:
            hint = f"is {self.target} the principal the server runs as? {THRIFT_PRINCIPAL_KEY}, hbase.thrift.kerberos.principal"
        return SaslAuthError(
            f"SASL GSSAPI as {self.who} to {self.target} at Thrift server {self.server} {side}: {why} ({hint})"
        )

    def _receive(self, timeout_s: float | None) -> tuple[int, bytes]:
        """One negotiation message: ``BAD``/``ERROR`` raise, a status out of range is not SASL."""
        try:
            header = _read_exactly(self._trans, _HEADER.size)
            status, length = _HEADER.unpack(header)
            if status not in STATUS_NAMES or length > MAX_NEGOTIATION:
                raise SecurityMismatchError(
                    f"Thrift server {self.server} answered SASL GSSAPI (as {self.who} to {self.target}) with what is "
                    f"not SASL ({_first_bytes(header, self._trans)}): "
                    + (
                        f"it is in HTTP mode (set {THRIFT_HTTP_KEY}=true, for the source {ENV_SOURCE_HTTP}=true)"
                        if header.startswith(b"HTTP")
                        else f"does it speak SASL (hbase.thrift.security.qop, {THRIFT_QOP_KEY})?"
                    )
                )
            payload = _read_exactly(self._trans, length)
        except TimeoutError:
            self._plain_server()
            raise TTransportException(
                type=TTransportException.TIMED_OUT,
                message=f"Thrift server {self.server} did not answer SASL GSSAPI negotiation (as {self.who} to "
                f"{self.target}){f' within {timeout_s:g} s' if timeout_s else ''}: does it speak SASL "
                "(hbase.thrift.security.qop set)? A server without it waits for the rest of a call",
            ) from None
        except TTransportException as exc:
            if isinstance(exc, SecurityMismatchError) or exc.type != TTransportException.END_OF_FILE:
                raise
            self._plain_server()
            raise TTransportException(
                type=TTransportException.END_OF_FILE,
                message=f"Thrift server {self.server} closed the connection during SASL GSSAPI negotiation (as "
                f"{self.who} to {self.target}): does it speak SASL (hbase.thrift.security.qop set; not framed, "
                "not HTTP, the same protocol)?",
            ) from None
        if status in (BAD, ERROR):
            raise self._refused(payload.decode(errors="replace").strip() or STATUS_NAMES[status])
        return status, payload

    # -- thriftpy2's transport ---------------------------------------------------------------

    def is_open(self) -> bool:
        return self.qop is not None and bool(self._trans.is_open())

    def open(self) -> None:
        """Nothing to do on an open transport (:meth:`negotiate` opens it)."""
        if not self.is_open():
            raise TTransportException(
                type=TTransportException.NOT_OPEN, message=f"the SASL connection to {self.server} is closed"
            )

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self._trans.close()
        client, self._client = self._client, None
        if client is not None:
            with contextlib.suppress(Exception):
                client.dispose()
        self.qop = None

    def write(self, data: bytes) -> None:
        self._wbuf += data

    def flush(self) -> None:
        """The bytes written since the last flush, as one frame (wrapped when agreed on)."""
        if len(self._wbuf) == _LENGTH.size:
            return
        buf, self._wbuf = self._wbuf, bytearray(_LENGTH.size)
        if self._wrap:
            try:
                wrapped = bytes(self._client.wrap(bytes(memoryview(buf)[_LENGTH.size :])))
            except Exception as exc:
                raise TTransportException(
                    type=TTransportException.UNKNOWN, message=f"SASL wrap for {self.server} failed: {gss_words(exc)}"
                ) from None
            self._trans.write(_LENGTH.pack(len(wrapped)) + wrapped)
        else:
            _LENGTH.pack_into(buf, 0, len(buf) - _LENGTH.size)
            self._trans.write(buf)
        self._trans.flush()

    def read(self, size: int) -> bytes:
        """Up to ``size`` bytes of the current frame, reading (and unwrapping) the next when
        it is used up."""
        while self._rpos >= len(self._rbuf):
            self._read_frame()
        chunk = self._rbuf[self._rpos : self._rpos + size]
        self._rpos += len(chunk)
        return chunk

    def _read_frame(self) -> None:
        (length,) = _LENGTH.unpack(_read_exactly(self._trans, _LENGTH.size))
        payload = _read_exactly(self._trans, length)
        if self._wrap:
            try:
                payload = bytes(self._client.unwrap(payload))
            except Exception as exc:
                raise TTransportException(
                    type=TTransportException.UNKNOWN,
                    message=f"SASL unwrap of an answer of {self.server} failed: {gss_words(exc)}",
                ) from None
        self._rbuf, self._rpos = payload, 0


def _first_bytes(head: bytes, trans: Any = None) -> str:
    """What the server sent first (``head``, and what ``trans`` has of the rest), for a
    message: its first line when it is text, else its first bytes in hex."""
    if trans is not None:
        with contextlib.suppress(Exception):
            head += trans.read(60)
    text = head[:64].decode("ascii", errors="replace")
    return repr(text.split("\r\n", 1)[0]) if text.isprintable() or "\r\n" in text else head[:16].hex(" ")


class AnswerCheck:
    """A connection's socket, under a transport that speaks no SASL: the server's first answer
    is checked. An HTTP server's answer, or none (within the timeout) from a server that
    answers SASL (:func:`~walship.thrift.probe.sasl_refusal`), raises
    :class:`SecurityMismatchError`; then what comes is passed on as it came.

    :param reopen: a new connection to the server, for the probe (``None``: no probe).
    """

    def __init__(self, sock: Any, server: str, reopen: Reopen | None = None) -> None:
        self._sock = sock
        self.server = server
        self._reopen = reopen
        self._checked = False

    def __getattr__(self, name: str) -> Any:
        return getattr(self._sock, name)

    def is_open(self) -> bool:
        return bool(self._sock.is_open())

    def open(self) -> None:
        self._sock.open()

    def close(self) -> None:
        self._sock.close()

    def write(self, data: bytes) -> None:
        self._sock.write(data)

    def flush(self) -> None:
        self._sock.flush()

    def read(self, size: int) -> bytes:
        if self._checked:
            out: bytes = self._sock.read(size)
            return out
        try:
            data: bytes = self._sock.read(size)
        except (TimeoutError, TTransportException) as exc:
            # HBase's SASL server leaves a plain call unanswered, or (as what it read for a SASL
            # header says) closes the connection: either way, ask it on a second one
            if isinstance(exc, TTransportException) and exc.type != TTransportException.END_OF_FILE:
                raise
            refusal = sasl_refusal(self._reopen) if self._reopen is not None else None
            if refusal is not None:
                raise SecurityMismatchError(
                    f"Thrift server {self.server} speaks SASL (it left a call without it unanswered or closed, and answered "
                    f"SASL: {refusal!r}): set {THRIFT_QOP_KEY} (auth, auth-int or auth-conf, as the server's "
                    "hbase.thrift.security.qop) and log in with --principal"
                ) from None
            raise
        self._checked = True
        if data.startswith(b"HTTP/"):
            raise SecurityMismatchError(
                f"Thrift server {self.server} answered in HTTP ({_first_bytes(data[:64])}): it is in HTTP "
                f"mode (hbase.regionserver.thrift.http): set {THRIFT_HTTP_KEY}=true (for the source {ENV_SOURCE_HTTP}=true)"
            )
        return data
