"""SASL under Thrift (walship.thrift.sasl, walship.thrift.probe), without a KDC: the framing
around the tokens, and what a connection says when the server speaks another kind of it.

The server's side here is the bytes Apache Thrift's ``TSaslServerTransport`` (HBase's Thrift
servers' transport with ``hbase.thrift.security.qop``) writes: negotiation messages of a status
byte (START 1, OK 2, BAD 3, ERROR 4, COMPLETE 5), a 4-byte big-endian length and the payload;
then frames of a 4-byte length and the (wrapped) payload; ``BAD "Unsupported mechanism type
..."`` to a ``START`` naming a mechanism it does not offer; and nothing at all to a call
without SASL (in the Apache Thrift of HBase 2.6, ``NegotiationStatus.byValue`` throws before
any answer, and the connection is left open). The SASL client is a stand-in with GSSAPI's
shape (an initial token, an empty answer to the server's mutual-authentication token, a last
answer to the security-layer challenge) whose "wrapping" is visible. The real exchange with a
Kerberized HBase is tests/integration/test_secure_thrift.py's.
"""

from __future__ import annotations

import socket
import struct
from collections.abc import Iterator
from typing import Any

import pytest
from thriftpy2.protocol import TBinaryProtocol
from thriftpy2.thrift import TMessageType
from thriftpy2.transport import TBufferedTransport, TMemoryBuffer, TSocket, TTransportException

from walship.errors import SaslAuthError
from walship.thrift.encoded import EncodingClient
from walship.thrift.hbase2 import hbase2, table_name
from walship.thrift.sasl import AnswerCheck, SaslClientTransport, SecurityMismatchError

START, OK, BAD, ERROR, COMPLETE = 1, 2, 3, 4, 5


def message(status: int, payload: bytes) -> bytes:
    """A negotiation message as ``TSaslTransport.sendSaslMessage`` writes it."""
    return bytes([status]) + struct.pack(">i", len(payload)) + payload


def frame(payload: bytes) -> bytes:
    """A data frame as ``TSaslTransport.flush`` writes it (``writeLength`` + payload)."""
    return struct.pack(">i", len(payload)) + payload


class StandIn:
    """pure-sasl's client interface with GSSAPI's three steps; ``wrap`` is visible."""

    def __init__(self, qop: bytes = b"auth", fail: BaseException | None = None) -> None:
        self.complete = False
        self.qop = b"auth"
        self._qop = qop
        self._fail = fail
        self.challenges: list[bytes | None] = []
        self.disposed = False

    def process(self, challenge: bytes | None = None) -> bytes:
        self.challenges.append(challenge)
        if self._fail is not None:
            raise self._fail
        step = len(self.challenges)
        if step == 1:
            return b"ap-req"
        if step == 2:
            return b""  # the server's AP-REP taken: nothing to say
        self.complete = True
        self.qop = self._qop
        return b"layer:" + self._qop

    def wrap(self, data: bytes) -> bytes:
        return b"W" + data[::-1]

    def unwrap(self, data: bytes) -> bytes:
        assert data[:1] == b"W"
        return data[1:][::-1]

    def dispose(self) -> None:
        self.disposed = True


@pytest.fixture
def pair() -> Iterator[tuple[Any, socket.socket]]:
    """A thriftpy2 socket (the client's) and the server's end."""
    client, server = socket.socketpair()
    server.settimeout(5)
    yield TSocket(sock=client, socket_timeout=2000), server
    client.close()
    server.close()


def received(server: socket.socket, size: int) -> bytes:
    out = b""
    while len(out) < size:
        chunk = server.recv(size - len(out))
        assert chunk, f"the client sent {out!r}, then closed"
        out += chunk
    return out


def negotiated(sock: Any, server: socket.socket, qop: bytes = b"auth") -> SaslClientTransport:
    server.sendall(message(OK, b"ap-rep") + message(OK, b"security layer") + message(COMPLETE, b""))
    sasl = SaslClientTransport(sock, StandIn(qop), server=SERVER, who=WHO, target=TARGET)
    sasl.negotiate(2.0)
    expected = (
        message(START, b"GSSAPI") + message(OK, b"ap-req") + message(OK, b"") + message(COMPLETE, b"layer:" + qop)
    )
    assert received(server, len(expected)) == expected
    return sasl


SERVER, WHO, TARGET = "h1:9090", "walship@EXAMPLE.COM", "hbase/h1"


def reply(api: str, **result: Any) -> bytes:
    """A THBaseService reply as the server's binary protocol writes it."""
    buf = TMemoryBuffer()  # type: ignore[no-untyped-call]
    proto = TBinaryProtocol(buf)
    proto.write_message_begin(api, TMessageType.REPLY, 0)
    getattr(hbase2.THBaseService, api + "_result")(**result).write(proto)
    proto.write_message_end()
    return bytes(buf.getvalue())


def call_bytes(api: str, **args: Any) -> bytes:
    buf = TMemoryBuffer()  # type: ignore[no-untyped-call]
    proto = TBinaryProtocol(buf)
    proto.write_message_begin(api, TMessageType.CALL, 0)
    call = getattr(hbase2.THBaseService, api + "_args")()
    for name, value in args.items():
        setattr(call, name, value)
    call.write(proto)
    proto.write_message_end()
    return bytes(buf.getvalue())


def test_negotiation_is_apache_thrifts_client_side(pair: tuple[Any, socket.socket]) -> None:
    sock, server = pair
    sasl = negotiated(sock, server)
    assert sasl.is_open() and sasl.qop == "auth"


def test_a_call_is_one_frame_and_an_answer_may_span_frames(pair: tuple[Any, socket.socket]) -> None:
    sock, server = pair
    sasl = negotiated(sock, server)
    client = EncodingClient(hbase2.THBaseService, "binary", TBufferedTransport(sasl, buf_size=1 << 20))  # type: ignore[no-untyped-call]
    answer = reply("tableExists", success=True)
    server.sendall(frame(answer[:7]) + frame(b"") + frame(answer[7:]))  # an empty frame is passed over
    assert client.tableExists(table_name("t")) is True
    sent = call_bytes("tableExists", tableName=table_name("t"))
    assert received(server, 4 + len(sent)) == frame(sent)


def test_frames_are_wrapped_once_auth_conf_is_agreed(pair: tuple[Any, socket.socket]) -> None:
    sock, server = pair
    sasl = negotiated(sock, server, b"auth-conf")
    assert sasl.qop == "auth-conf"
    client = EncodingClient(hbase2.THBaseService, "binary", TBufferedTransport(sasl, buf_size=1 << 20))  # type: ignore[no-untyped-call]
    answer = reply("tableExists", success=False)
    server.sendall(frame(b"W" + answer[::-1]))
    assert client.tableExists(table_name("t")) is False
    sent = call_bytes("tableExists", tableName=table_name("t"))
    assert received(server, 5 + len(sent)) == frame(b"W" + sent[::-1])


def test_the_servers_refusal_names_principal_and_server(pair: tuple[Any, socket.socket]) -> None:
    sock, server = pair
    server.sendall(message(BAD, b"GSS initiate failed"))
    stand_in = StandIn()
    with pytest.raises(SaslAuthError) as err:
        SaslClientTransport(sock, stand_in, server=SERVER, who=WHO, target=TARGET).negotiate(2.0)
    text = str(err.value)
    assert "GSS initiate failed" in text and WHO in text and TARGET in text and SERVER in text
    assert "\n" not in text and "walship.sink.thrift.kerberos.principal" in text
    assert stand_in.disposed  # and the socket closed
    assert server.recv(100).startswith(message(START, b"GSSAPI"))


def test_error_status_is_a_refusal_too(pair: tuple[Any, socket.socket]) -> None:
    sock, server = pair
    server.sendall(message(ERROR, b"Unsupported mechanism type GSSAPI"))
    with pytest.raises(SaslAuthError, match="Unsupported mechanism type GSSAPI"):
        SaslClientTransport(sock, StandIn(), server=SERVER, who=WHO, target=TARGET).negotiate(2.0)


def test_a_kerberos_failure_here_is_one_line() -> None:
    import kerberos

    failure = kerberos.GSSError(
        ("Unspecified GSS failure.  Minor code may provide more information", 851968),
        ("Server nohbase/h1@EXAMPLE.COM not found in Kerberos database", -1765328377),
    )
    a, b = socket.socketpair()
    try:
        sasl = SaslClientTransport(TSocket(sock=a), StandIn(fail=failure), server=SERVER, who=WHO, target="nohbase/h1")
        with pytest.raises(SaslAuthError) as err:
            sasl.negotiate(2.0)
    finally:
        a.close()
        b.close()
    text = str(err.value)
    assert "Server nohbase/h1@EXAMPLE.COM not found in Kerberos database" in text
    assert "Unspecified" not in text and "failed:" in text and SERVER in text


def test_no_common_level_names_the_key() -> None:
    from puresasl import SASLProtocolException

    failure = SASLProtocolException(
        "Your requested quality of protection is one of (auth-conf), the server is offering (auth), and GSSAPI "
        "supports (auth, auth-int, auth-conf)"
    )
    a, b = socket.socketpair()
    try:
        with pytest.raises(SaslAuthError, match=r"walship.sink.thrift.security.qop"):
            SaslClientTransport(
                TSocket(sock=a), StandIn(fail=failure), server=SERVER, who=WHO, target=TARGET
            ).negotiate()
    finally:
        a.close()
        b.close()


def test_a_server_closing_at_once_asks_whether_it_speaks_sasl(pair: tuple[Any, socket.socket]) -> None:
    sock, server = pair
    server.shutdown(socket.SHUT_WR)  # the server's side: closed without a word
    with pytest.raises(TTransportException) as err:
        SaslClientTransport(sock, StandIn(), server=SERVER, who=WHO, target=TARGET).negotiate(2.0)
    assert err.value.type == TTransportException.END_OF_FILE
    assert "closed the connection during SASL GSSAPI negotiation" in str(err.value.message)
    assert not isinstance(err.value, SecurityMismatchError)  # a server may also just have gone: retried


def test_a_server_without_sasl_waits_and_the_timeout_says_so() -> None:
    a, b = socket.socketpair()
    try:
        sock = TSocket(sock=a, socket_timeout=200)
        a.settimeout(0.2)
        with pytest.raises(TTransportException) as err:
            SaslClientTransport(sock, StandIn(), server=SERVER, who=WHO, target=TARGET).negotiate(0.2)
    finally:
        a.close()
        b.close()
    assert err.value.type == TTransportException.TIMED_OUT
    assert "hbase.thrift.security.qop" in str(err.value.message) and "0.2 s" in str(err.value.message)


def test_an_http_answer_to_negotiation_says_http_mode(pair: tuple[Any, socket.socket]) -> None:
    sock, server = pair
    server.sendall(b"HTTP/1.1 400 Illegal character CNTL=0x1\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
    with pytest.raises(SecurityMismatchError) as err:
        SaslClientTransport(sock, StandIn(), server=SERVER, who=WHO, target=TARGET).negotiate(2.0)
    assert "walship.sink.thrift.http=true" in str(err.value) and "HTTP/1.1 400" in str(err.value)


def plain_client(sock: Any, reopen: Any = None) -> Any:
    transport = TBufferedTransport(AnswerCheck(sock, SERVER, reopen), buf_size=1 << 20)  # type: ignore[no-untyped-call]
    return EncodingClient(hbase2.THBaseService, "binary", transport)


class Probed:
    """New connections to "the server" (socket pairs), each answering what it is given."""

    def __init__(self, *answers: bytes) -> None:
        self.answers = list(answers)
        self.sent: list[bytes] = []
        self._ends: list[socket.socket] = []

    def __call__(self) -> Any:
        client, server = socket.socketpair()
        client.settimeout(0.3)
        server.settimeout(2)
        server.sendall(self.answers.pop(0))
        self._ends += [client, server]
        self.last = server
        return TSocket(sock=client, socket_timeout=300)

    def received(self) -> bytes:
        return self.last.recv(100)

    def close(self) -> None:
        for end in self._ends:
            end.close()


def test_a_sasl_server_leaving_a_plain_call_unanswered_is_asked(pair: tuple[Any, socket.socket]) -> None:
    sock, _ = pair
    sock.sock.settimeout(0.3)
    probe = Probed(message(BAD, b"Unsupported mechanism type walship-probe"))
    try:
        with pytest.raises(SecurityMismatchError) as err:
            plain_client(sock, probe).tableExists(table_name("t"))
        assert probe.received() == message(START, b"walship-probe")
    finally:
        probe.close()
    text = str(err.value)
    assert "speaks SASL" in text and "walship.sink.thrift.security.qop" in text and SERVER in text
    assert "Unsupported mechanism type walship-probe" in text


def test_a_sasl_server_closing_on_a_plain_call_is_asked(pair: tuple[Any, socket.socket]) -> None:
    """HBase's SASL server may also close the connection, as what it read for a SASL header says."""
    sock, server_end = pair
    server_end.shutdown(socket.SHUT_WR)  # it reads the call, then closes without an answer
    probe = Probed(message(BAD, b"Unsupported mechanism type walship-probe"))
    try:
        with pytest.raises(SecurityMismatchError) as err:
            plain_client(sock, probe).tableExists(table_name("t"))
    finally:
        probe.close()
    assert "speaks SASL" in str(err.value) and "closed" in str(err.value)


def test_a_plain_server_closing_is_only_closed(pair: tuple[Any, socket.socket]) -> None:
    sock, server_end = pair
    server_end.shutdown(socket.SHUT_WR)  # it reads the call, then closes without an answer
    probe = Probed(b"")  # the probe's START is not answered either
    try:
        with pytest.raises(TTransportException) as err:
            plain_client(sock, probe).tableExists(table_name("t"))
    finally:
        probe.close()
    assert not isinstance(err.value, SecurityMismatchError)


def test_a_slow_plain_server_is_only_slow(pair: tuple[Any, socket.socket]) -> None:
    sock, _ = pair
    sock.sock.settimeout(0.3)
    probe = Probed(b"")  # the probe's START is not answered either
    try:
        with pytest.raises(TimeoutError):
            plain_client(sock, probe).tableExists(table_name("t"))
    finally:
        probe.close()


def test_a_plain_server_leaving_negotiation_unanswered_is_asked(pair: tuple[Any, socket.socket]) -> None:
    sock, _ = pair
    sock.sock.settimeout(0.3)
    # a plain server answers a call of an unknown method at once: TApplicationException UNKNOWN_METHOD
    probe = Probed(b"\x80\x01\x00\x03\x00\x00\x00\x0cwalshipProbe\x00\x00\x00\x00")
    try:
        sasl = SaslClientTransport(sock, StandIn(), server=SERVER, who=WHO, target=TARGET, reopen=probe)
        with pytest.raises(SecurityMismatchError) as err:
            sasl.negotiate(0.3)
        sent = probe.received()
    finally:
        probe.close()
    assert sent == b"\x80\x01\x00\x01\x00\x00\x00\x0cwalshipProbe\x00\x00\x00\x00\x00"  # thriftpy2's bytes of the call
    assert "speaks Thrift without SASL" in str(err.value) and "remove walship.sink.thrift.security.qop" in str(
        err.value
    )


def test_an_http_servers_answer_to_a_plain_call_says_http_mode(pair: tuple[Any, socket.socket]) -> None:
    sock, server = pair
    server.sendall(b"HTTP/1.1 400 Illegal character OTEXT=0x80\r\nConnection: close\r\n\r\n")
    with pytest.raises(SecurityMismatchError, match=r"walship.sink.thrift.http=true"):
        plain_client(sock).tableExists(table_name("t"))


def test_a_plain_answer_passes_unchanged(pair: tuple[Any, socket.socket]) -> None:
    sock, server = pair
    server.sendall(reply("tableExists", success=True) + reply("tableExists", success=False))
    client = plain_client(sock)
    assert client.tableExists(table_name("t")) is True
    assert client.tableExists(table_name("u")) is False
