"""HBase's RPC framing (walship.rpc.wire) and how an answer's exception becomes an error."""

from __future__ import annotations

import socket
import struct

import pytest

from walship.errors import RemoteHBaseError
from walship.protos import Replication_pb2, RPC_pb2
from walship.rpc.connection import remote_error
from walship.rpc.wire import (
    RpcProtocolError,
    connection_header,
    preamble,
    read_delimited,
    read_frame,
    request_frame,
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
