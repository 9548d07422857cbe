"""HBase's RPC framing (walship.rpc.wire) and how an answer's exception becomes an error."""

from __future__ import annotations

import socket
import struct
import threading
from collections.abc import Callable

import pytest

from walship.errors import RemoteHBaseError
from walship.protos import Replication_pb2, RPC_pb2
from walship.rpc.connection import remote_error
from walship.rpc.wire import (
    MAX_FRAME,
    RpcProtocolError,
    connection_header,
    exchange_frame,
    exchanges_compiled,
    preamble,
    read_delimited,
    read_frame,
    request_frame,
    request_parts,
    response_frame,
    split_request,
    split_response,
)


def test_the_preamble_is_hbas_the_version_and_the_auth_byte() -> None:
    assert preamble(80) == b"HBas\x00\x50"
    assert preamble(81)[-1] == 81


def test_the_connection_header_carries_its_length() -> None:
    header = RPC_pb2.ConnectionHeader(service_name="MasterService")
    header.user_info.effective_user = "hbase"
    data = connection_header(header)
    (length,) = struct.unpack(">I", data[:4])
    assert length == len(data) - 4
    assert RPC_pb2.ConnectionHeader.FromString(data[4:]) == header


def test_a_call_frame_splits_back_into_its_header_and_request() -> None:
    request = Replication_pb2.AddReplicationPeerRequest(peer_id="7")
    request.peer_config.clusterkey = "zk:2181:/hbase-b"
    request.peer_state.state = Replication_pb2.ReplicationState.DISABLED
    header = RPC_pb2.RequestHeader(call_id=3, method_name="AddReplicationPeer", request_param=True)
    frame = request_frame(header, request)
    (length,) = struct.unpack(">I", frame[:4])
    assert length == len(frame) - 4
    got_header, param = split_request(frame[4:], "test")
    assert got_header == header
    assert Replication_pb2.AddReplicationPeerRequest.FromString(param) == request


def test_an_answer_with_an_exception_has_no_body() -> None:
    header = RPC_pb2.ResponseHeader(call_id=5)
    header.exception.exception_class_name = "org.apache.hadoop.hbase.ReplicationPeerNotFoundException"
    header.exception.stack_trace = "org.apache.hadoop.hbase.ReplicationPeerNotFoundException: 9\n\tat x.y(z.java:1)"
    got, body = split_response(response_frame(header, None)[4:], "test")
    assert body is None and got.exception.exception_class_name.endswith("NotFoundException")
    error = remote_error(got.exception, "m1:16000", "RemoveReplicationPeer")
    assert isinstance(error, RemoteHBaseError)
    assert error.short_class == "ReplicationPeerNotFoundException" and error.remote_message == "9"
    assert str(error) == "RemoveReplicationPeer on m1:16000: ReplicationPeerNotFoundException: 9"


def test_an_answer_splits_into_its_header_and_response() -> None:
    reply = Replication_pb2.AddReplicationPeerResponse(proc_id=42)
    got, body = split_response(response_frame(RPC_pb2.ResponseHeader(call_id=1), reply)[4:], "test")
    assert got.call_id == 1 and Replication_pb2.AddReplicationPeerResponse.FromString(body or b"").proc_id == 42


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"\x80", "does not parse at byte 0"),
        (b"\x05ab", "a message of 5 bytes at byte 0 runs past the frame's 3"),
        (b"", "does not parse at byte 0"),
    ],
)
def test_a_bad_length_is_named(data: bytes, message: str) -> None:
    with pytest.raises(RpcProtocolError, match=message):
        read_delimited(data, 0, "master m1:16000")


def test_a_frame_cut_short_names_the_peer() -> None:
    left, right = socket.socketpair()
    with left, right:
        left.sendall(struct.pack(">I", 10) + b"abc")
        left.shutdown(socket.SHUT_WR)
        with pytest.raises(RpcProtocolError, match=r"master m1:16000 closed the connection \(3 of 10 bytes read\)"):
            read_frame(right, "master m1:16000")


def _echo_server(listener: socket.socket, answer: Callable[[bytes], bytes], got: list[bytes]) -> None:
    """Accept one connection, read one whole call frame (slowly, to make the client's send wait
    on a full socket buffer), then write ``answer(frame)`` in small pieces and close."""
    conn, _ = listener.accept()
    with conn:
        head = b""
        while len(head) < 4:
            head += conn.recv(4 - len(head))
        (length,) = struct.unpack(">I", head)
        body = bytearray()
        while len(body) < length:
            body += conn.recv(min(65536, length - len(body)))
        got.append(bytes(body))
        data = answer(bytes(body))
        for i in range(0, len(data), 7):
            conn.sendall(data[i : i + 7])


def _round_trip(
    parts: tuple[bytes, ...], answer: Callable[[bytes], bytes], timeout: float | None = 10.0
) -> tuple[bytes | None, list[bytes], BaseException | None]:
    with socket.create_server(("127.0.0.1", 0)) as listener:
        got: list[bytes] = []
        server = threading.Thread(target=_echo_server, args=(listener, answer, got), daemon=True)
        server.start()
        with socket.create_connection(listener.getsockname(), timeout=timeout) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
            try:
                frame: bytes | None = exchange_frame(sock, parts, "region server r1:16020")
                error = None
            except (OSError, RpcProtocolError) as exc:
                frame, error = None, exc
        server.join(timeout=30)
        return frame, got, error


needs_exchange = pytest.mark.skipif(not exchanges_compiled(), reason="the compiled _exchange is not built")


@needs_exchange
def test_the_compiled_round_trip_sends_every_part_in_order_and_reads_the_whole_answer() -> None:
    header = RPC_pb2.RequestHeader(call_id=9, method_name="Multi", request_param=True)
    block = bytes(range(256)) * 8192  # 2 MiB: many sends on a small socket buffer
    header.cell_block_meta.length = len(block)
    parts = request_parts(header, b"\x01\x02\x03", block)
    assert b"".join(parts) == request_frame(header, b"\x01\x02\x03", block)
    reply = RPC_pb2.ResponseHeader(call_id=9)
    answer = response_frame(reply, RPC_pb2.CellBlockMeta(length=0))
    frame, got, error = _round_trip(parts, lambda body: answer)
    assert error is None
    assert got == [request_frame(header, b"\x01\x02\x03", block)[4:]]
    assert frame == answer[4:]
    assert split_response(frame, "test")[0].call_id == 9


@needs_exchange
def test_the_compiled_round_trip_names_a_server_that_closed_early_or_sent_too_much() -> None:
    parts = (struct.pack(">I", 3) + b"abc",)
    frame, _, error = _round_trip(parts, lambda body: struct.pack(">I", 10) + b"abc")
    assert frame is None and isinstance(error, RpcProtocolError)
    assert "region server r1:16020 closed the connection before its answer was whole" in str(error)
    frame, _, error = _round_trip(parts, lambda body: struct.pack(">I", MAX_FRAME + 1))
    assert isinstance(error, RpcProtocolError)
    assert f"a frame of {MAX_FRAME + 1} bytes, more than {MAX_FRAME}" in str(error)


@needs_exchange
def test_the_compiled_round_trip_times_out_as_the_sockets_timeout_says() -> None:
    with (
        socket.create_server(("127.0.0.1", 0)) as listener,
        socket.create_connection(listener.getsockname(), timeout=0.2) as sock,
    ):
        conn, _ = listener.accept()  # reads nothing, answers nothing
        with conn, pytest.raises(TimeoutError):
            exchange_frame(sock, (struct.pack(">I", 3) + b"abc",), "region server r1:16020")


@needs_exchange
def test_the_compiled_round_trip_reports_a_reset_connection_by_its_errno() -> None:
    with (
        socket.create_server(("127.0.0.1", 0)) as listener,
        socket.create_connection(listener.getsockname(), timeout=10) as sock,
    ):
        conn, _ = listener.accept()
        conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        conn.close()  # an RST
        with pytest.raises((ConnectionResetError, BrokenPipeError)):
            exchange_frame(sock, (b"x" * (8 << 20),), "region server r1:16020")
