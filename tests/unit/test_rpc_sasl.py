"""HBase's SASL framing on the RPC connection (walship.rpc.sasl), without a KDC.

The server side here writes the bytes HBase 2.6's server writes (``ServerRpcConnection.
doRawSaslReply``: a 4-byte status, then a ``BytesWritable`` or two ``WritableUtils`` strings;
``SaslWrapHandler``: a 4-byte length and the wrapped token); the SASL mechanism is a stand-in
with GSSAPI's shape (three client tokens, two server answers, the third unanswered) whose
"wrapping" is visible, so what is checked is the framing around the tokens, not Kerberos.
The real GSSAPI exchange is tested against a Kerberized HBase (tests/integration/test_secure_master.py).
"""

from __future__ import annotations

import socket
import struct
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pytest

from walship.errors import ConfigError, SaslAuthError
from walship.protos import RPC_pb2
from walship.rpc.auth import SimpleAuth, default_auth
from walship.rpc.sasl import (
    SWITCH_TO_SIMPLE_AUTH,
    KerberosAuth,
    SaslChannel,
    SaslServerError,
    read_sasl_reply,
    read_writable_string,
    sasl_token,
)
from walship.rpc.wire import RpcProtocolError, read_exact
from walship.security import kerberos
from walship.security.kerberos import KerberosIdentity

IDENTITY = KerberosIdentity("walship@EXAMPLE.COM")


def success(token: bytes) -> bytes:
    """``doRawSaslReply(SUCCESS, new BytesWritable(token))``."""
    return struct.pack(">ii", 0, len(token)) + token


def error(exception_class: str, message: str) -> bytes:
    """``doRawSaslReply(ERROR, null, class, message)``: ``WritableUtils.writeString`` twice."""
    out = struct.pack(">i", 1)
    for text in (exception_class, message):
        data = text.encode()
        out += struct.pack(">i", len(data)) + data
    return out


class Bytes:
    """A readable of fixed bytes (``recv`` returns at most what is asked)."""

    def __init__(self, data: bytes) -> None:
        self.data = data

    def recv(self, count: int, /) -> bytes:
        out, self.data = self.data[:count], self.data[count:]
        return out


def test_a_client_token_is_its_length_then_the_token() -> None:
    assert sasl_token(b"ab") == b"\x00\x00\x00\x02ab"
    assert sasl_token(b"") == b"\x00\x00\x00\x00"


def test_a_success_answer_gives_the_servers_token() -> None:
    assert read_sasl_reply(Bytes(b"\x00\x00\x00\x00\x00\x00\x00\x03abc"), "m1:16000") == b"abc"
    assert read_sasl_reply(Bytes(success(b"")), "m1:16000") == b""


def test_minus_88_asks_for_simple() -> None:
    assert read_sasl_reply(Bytes(struct.pack(">ii", 0, SWITCH_TO_SIMPLE_AUTH)), "m1:16000") is None


def test_an_error_answer_carries_hbases_class_and_message() -> None:
    data = error("javax.security.sasl.SaslException", "GSS initiate failed")
    with pytest.raises(SaslServerError) as caught:
        read_sasl_reply(Bytes(data), "m1:16000")
    assert caught.value.exception_class == "javax.security.sasl.SaslException"
    assert caught.value.message == "GSS initiate failed"


def test_a_null_writable_string_reads_as_empty() -> None:
    assert read_writable_string(Bytes(struct.pack(">i", -1)), "m1") == ""
    with pytest.raises(RpcProtocolError, match="SASL error string of -2 bytes"):
        read_writable_string(Bytes(struct.pack(">i", -2)), "m1")


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (struct.pack(">i", 2), "SASL status 2"),
        (struct.pack(">ii", 0, -1), "challenge of -1 bytes"),
        (struct.pack(">ii", 0, 2 * 1024 * 1024), "challenge of 2097152 bytes"),
        (struct.pack(">ii", 0, 5) + b"ab", "closed the connection"),
        (b"\x00\x00", "closed the connection"),
    ],
)
def test_answers_hbase_never_sends_are_named(data: bytes, message: str) -> None:
    with pytest.raises(RpcProtocolError, match=message):
        read_sasl_reply(Bytes(data), "the master at m1:16000")


class FakeMechanism:
    """GSSAPI's shape: an initial token, a token for the first challenge, and the chosen layer
    for the second; "wraps" as ``W`` + data."""

    def __init__(self, qop: bytes = b"auth-conf", fail: Exception | None = None) -> None:
        self.qop = qop
        self.fail = fail
        self.challenges: list[bytes | None] = []
        self.complete = False
        self.disposed = False

    def process(self, challenge: bytes | None = None) -> bytes:
        if self.fail is not None and challenge is not None:
            raise self.fail
        self.challenges.append(challenge)
        step = len(self.challenges)
        if step == 3:
            self.complete = True
            return b"layer:" + (challenge or b"")
        return [b"ap-req", b""][step - 1]

    def wrap(self, data: bytes) -> bytes:
        return b"W" + data

    def unwrap(self, data: bytes) -> bytes:
        assert data.startswith(b"W")
        return data[1:]

    def dispose(self) -> None:
        self.disposed = True


def factory(mech: FakeMechanism, seen: list[Any]) -> Callable[[KerberosIdentity, str, str, Sequence[str]], Any]:
    def make(identity: KerberosIdentity, pattern: str, host: str, qops: Sequence[str]) -> Any:
        seen.append((identity, pattern, host, tuple(qops)))
        return mech

    return make


@pytest.fixture
def pair() -> Iterator[tuple[socket.socket, socket.socket]]:
    client, server = socket.socketpair()
    client.settimeout(10)
    server.settimeout(10)
    yield client, server
    client.close()
    server.close()


def serve(server: socket.socket, script: Callable[[socket.socket], None]) -> threading.Thread:
    thread = threading.Thread(target=script, args=(server,), daemon=True)
    thread.start()
    return thread


def read_token(sock: socket.socket) -> bytes:
    (length,) = struct.unpack(">I", read_exact(sock, 4, "client"))
    return read_exact(sock, length, "client")


def test_the_exchange_goes_as_hbases_client_does(pair: tuple[socket.socket, socket.socket]) -> None:
    client, server = pair
    got: list[bytes] = []

    def hbase(sock: socket.socket) -> None:
        got.append(read_token(sock))  # the initial response, unasked
        sock.sendall(success(b"ap-rep"))
        got.append(read_token(sock))  # empty: the context is made
        sock.sendall(success(b"layers"))
        got.append(read_token(sock))  # the chosen layer; the server answers nothing
        # from here both ways are wrapped: a 4-byte length and the token
        got.append(read_token(sock))
        sock.sendall(sasl_token(b"Wanswer-one") + sasl_token(b"Wtwo"))

    mech = FakeMechanism(b"auth-conf")
    seen: list[Any] = []
    auth = KerberosAuth(IDENTITY, "hbase/_HOST@EXAMPLE.COM", ("auth-conf", "auth"), sasl_factory=factory(mech, seen))
    thread = serve(server, hbase)
    channel = auth.negotiate(client, "M1.Example.com:16000")
    assert isinstance(channel, SaslChannel) and channel.qop == "auth-conf"
    assert seen == [(IDENTITY, "hbase/_HOST@EXAMPLE.COM", "m1.example.com", ("auth-conf", "auth"))]
    assert mech.challenges == [None, b"ap-rep", b"layers"]
    channel.sendall(b"\x00\x00\x00\x02hd")
    assert read_exact(channel, 10, "server") == b"answer-one"
    assert channel.recv(100) == b"two"
    thread.join(10)
    assert got == [b"ap-req", b"", b"layer:layers", b"W\x00\x00\x00\x02hd"]
    assert auth.negotiated_qop == "auth-conf"
    assert auth.user_info().effective_user == "walship@EXAMPLE.COM"
    assert not mech.disposed
    channel.close()
    assert mech.disposed
    with pytest.raises(RpcProtocolError, match="SASL context is closed"):
        channel.sendall(b"late")


def test_auth_leaves_the_socket_unwrapped(pair: tuple[socket.socket, socket.socket]) -> None:
    client, server = pair

    def hbase(sock: socket.socket) -> None:
        read_token(sock)
        sock.sendall(success(b"ap-rep"))
        read_token(sock)
        sock.sendall(success(b"layers"))
        read_token(sock)

    mech = FakeMechanism(b"auth")
    auth = KerberosAuth(IDENTITY, sasl_factory=factory(mech, []))
    thread = serve(server, hbase)
    assert auth.negotiate(client, "m1:16000") is client
    thread.join(10)
    assert auth.negotiated_qop == "auth" and mech.disposed


def test_a_refusal_is_one_line_naming_the_principal_the_master_and_hbases_words(
    pair: tuple[socket.socket, socket.socket],
) -> None:
    client, server = pair

    def hbase(sock: socket.socket) -> None:
        read_token(sock)
        sock.sendall(error("javax.security.sasl.SaslException", "GSS initiate failed\n\tcaused by: Checksum failed"))
        sock.close()

    mech = FakeMechanism()
    auth = KerberosAuth(IDENTITY, "hbase/_HOST", sasl_factory=factory(mech, []))
    serve(server, hbase)
    with pytest.raises(SaslAuthError) as caught:
        auth.negotiate(client, "m1:16000")
    message = str(caught.value)
    assert "\n" not in message
    assert "the master at m1:16000 refused principal walship@EXAMPLE.COM" in message
    assert "server principal hbase/m1" in message
    assert "SaslException: GSS initiate failed caused by: Checksum failed" in message
    assert mech.disposed


def test_a_master_without_security_is_refused_unless_fallback_is_allowed(
    pair: tuple[socket.socket, socket.socket],
) -> None:
    client, server = pair

    def hbase(sock: socket.socket) -> None:
        read_token(sock)
        sock.sendall(struct.pack(">ii", 0, SWITCH_TO_SIMPLE_AUTH))

    serve(server, hbase)
    auth = KerberosAuth(IDENTITY, sasl_factory=factory(FakeMechanism(), []))
    with pytest.raises(SaslAuthError, match=r"the master at m1:16000 does not use Kerberos .* leave --principal out"):
        auth.negotiate(client, "m1:16000")


def test_fallback_to_simple_goes_on_unwrapped(pair: tuple[socket.socket, socket.socket]) -> None:
    client, server = pair

    def hbase(sock: socket.socket) -> None:
        read_token(sock)
        sock.sendall(struct.pack(">ii", 0, SWITCH_TO_SIMPLE_AUTH))

    thread = serve(server, hbase)
    mech = FakeMechanism()
    auth = KerberosAuth(IDENTITY, fallback_allowed=True, sasl_factory=factory(mech, []))
    assert auth.negotiate(client, "m1:16000") is client
    thread.join(10)
    assert mech.disposed and auth.negotiated_qop is None


def test_no_common_protection_level_names_both_sides(pair: tuple[socket.socket, socket.socket]) -> None:
    client, server = pair

    def hbase(sock: socket.socket) -> None:
        read_token(sock)
        sock.sendall(success(b"ap-rep"))

    serve(server, hbase)
    # pure-sasl's words when the server's offer and the client's levels do not meet
    fail = Exception(
        "Your requested quality of protection is one of (auth), the server is offering (auth-conf), "
        "and GSSAPI supports (auth, auth-int, auth-conf)"
    )
    auth = KerberosAuth(IDENTITY, qops=("auth",), sasl_factory=factory(FakeMechanism(fail=fail), []))
    with pytest.raises(SaslAuthError) as caught:
        auth.negotiate(client, "m1:16000")
    assert str(caught.value) == (
        "the master at m1:16000 and principal walship@EXAMPLE.COM share no protection level: walship accepts "
        "auth (WALSHIP_RPC_PROTECTION), the master offers auth-conf"
    )


def test_a_master_that_closes_mid_exchange_is_unavailable(pair: tuple[socket.socket, socket.socket]) -> None:
    from walship.errors import MasterUnavailableError

    client, server = pair

    def hbase(sock: socket.socket) -> None:
        read_token(sock)
        sock.close()

    serve(server, hbase)
    auth = KerberosAuth(IDENTITY, sasl_factory=factory(FakeMechanism(), []))
    with pytest.raises(MasterUnavailableError, match=r"SASL GSSAPI\) to the master at m1:16000 as principal walship@"):
        auth.negotiate(client, "m1:16000")


def test_the_server_principal_takes_the_masters_host_lower_cased() -> None:
    assert KerberosAuth(IDENTITY).server_principal("M1.Example.COM") == "hbase/m1.example.com"
    assert KerberosAuth(IDENTITY, "hbase/_HOST@R.COM").server_principal("m1") == "hbase/m1@R.COM"
    assert KerberosAuth(IDENTITY, "hbase/fixed.host@R.COM").server_principal("m1") == "hbase/fixed.host@R.COM"


def test_default_auth_is_simple_without_a_login(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kerberos, "_active", None)
    assert isinstance(default_auth({}), SimpleAuth)


def test_default_auth_is_kerberos_as_the_logged_in_principal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kerberos, "_active", IDENTITY)
    auth = default_auth({})
    assert isinstance(auth, KerberosAuth)
    assert (auth.identity, auth.principal_pattern, auth.qops) == (
        IDENTITY,
        "hbase/_HOST",
        ("auth-conf", "auth-int", "auth"),
    )
    auth = default_auth({"WALSHIP_HBASE_PRINCIPAL": "hbase/_HOST@R.COM", "WALSHIP_RPC_PROTECTION": "privacy"})
    assert isinstance(auth, KerberosAuth)
    assert (auth.principal_pattern, auth.qops) == ("hbase/_HOST@R.COM", ("auth-conf",))
    with pytest.raises(ConfigError, match="WALSHIP_RPC_PROTECTION 'secret'"):
        default_auth({"WALSHIP_RPC_PROTECTION": "secret"})
    with pytest.raises(ConfigError, match="server principal"):
        default_auth({"WALSHIP_HBASE_PRINCIPAL": "/h"})


def refused_frame() -> bytes:
    """HBase's answer to a SIMPLE preamble on a server with Kerberos on
    (``processPreamble``: ``getErrorResponse("Authentication is required", AccessDeniedException)``)."""
    from walship.rpc.wire import response_frame

    header = RPC_pb2.ResponseHeader(call_id=0xFFFFFFFF)
    header.exception.exception_class_name = "org.apache.hadoop.hbase.security.AccessDeniedException"
    header.exception.stack_trace = (
        "org.apache.hadoop.hbase.security.AccessDeniedException: Authentication is required\n\tat x.y(Z.java:1)\n"
    )
    header.exception.do_not_retry = True
    return response_frame(header, None)


def test_a_simple_client_of_a_kerberized_master_is_told_to_give_a_principal() -> None:
    from walship.protos import Replication_pb2
    from walship.rpc.connection import RpcConnection

    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]

    def hbase() -> None:
        sock, _ = listener.accept()
        with sock:
            read_exact(sock, 6, "client")  # the preamble
            sock.sendall(refused_frame())  # then HBase closes the connection

    thread = threading.Thread(target=hbase, daemon=True)
    thread.start()
    with (
        pytest.raises(SaslAuthError) as caught,
        RpcConnection("127.0.0.1", port, "MasterService", SimpleAuth("alice"), timeout=10) as conn,
    ):
        conn.call(
            "ListReplicationPeers",
            Replication_pb2.ListReplicationPeersRequest(),
            Replication_pb2.ListReplicationPeersResponse,
        )
    thread.join(10)
    listener.close()
    assert str(caught.value) == (
        f"the master at 127.0.0.1:{port} requires Kerberos: give --principal "
        "(HBase's answer: AccessDeniedException: Authentication is required)"
    )


class RefusingChannel:
    """A connection whose server answered the preamble with a refusal and closed it before the
    call was written: the call's write fails, the refusal is still there to read."""

    def __init__(self, sent_ok: int) -> None:
        self.sent_ok = sent_ok
        self.unread = refused_frame()

    def sendall(self, data: bytes, /) -> None:
        if self.sent_ok <= 0:
            raise BrokenPipeError(32, "Broken pipe")
        self.sent_ok -= 1

    def recv(self, count: int, /) -> bytes:
        out, self.unread = self.unread[:count], self.unread[count:]
        return out


class RefusedAuth(SimpleAuth):
    def __init__(self, channel: RefusingChannel) -> None:
        super().__init__("alice")
        self.channel = channel

    def negotiate(self, sock: socket.socket, server: str) -> RefusingChannel:
        return self.channel


@pytest.mark.parametrize("sent_ok", [1, 0], ids=["the-call-write-fails", "the-header-write-fails"])
def test_a_refusal_read_after_a_broken_pipe_is_still_named(sent_ok: int) -> None:
    from walship.protos import Replication_pb2
    from walship.rpc.connection import RpcConnection

    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    refused = r"^the master at 127\.0\.0\.1:\d+ requires Kerberos: give --principal"
    try:
        with (
            pytest.raises(SaslAuthError, match=refused),
            RpcConnection("127.0.0.1", port, "MasterService", RefusedAuth(RefusingChannel(sent_ok))) as conn,
        ):
            conn.call(
                "ListReplicationPeers",
                Replication_pb2.ListReplicationPeersRequest(),
                Replication_pb2.ListReplicationPeersResponse,
            )
    finally:
        listener.close()


def test_pykerberos_errors_read_as_the_kerberos_librarys_words() -> None:
    import kerberos

    from walship.security.sasl import gss_words

    error = kerberos.GSSError(
        ("Unspecified GSS failure.  Minor code may provide more information", 851968),
        ("Server nothbase/localhost@EXAMPLE.COM not found in Kerberos database", -1765328377),
    )
    assert gss_words(error) == "Server nothbase/localhost@EXAMPLE.COM not found in Kerberos database"
    assert gss_words(kerberos.GSSError(("Miscellaneous failure", 851968), ("Unknown error", 0))) == (
        "Miscellaneous failure"
    )
    assert gss_words(Exception("Bad response\nfrom server")) == "Bad response from server"


def test_a_missing_ticket_is_a_login_error(pair: tuple[socket.socket, socket.socket]) -> None:
    from walship.errors import KerberosLoginError

    client, _ = pair

    def no_ticket(*args: Any) -> Any:
        raise SaslAuthError(
            "SASL GSSAPI as walship@EXAMPLE.COM to hbase/m1 cannot start: "
            "Can't find client principal walship@EXAMPLE.COM in cache collection"
        )

    with pytest.raises(KerberosLoginError) as caught:
        KerberosAuth(IDENTITY, sasl_factory=no_ticket).negotiate(client, "m1:16000")
    assert str(caught.value).startswith(
        "principal walship@EXAMPLE.COM has no valid Kerberos ticket for the master at m1:16000 (give --keytab, or "
        "run kinit): "
    )
