"""Sink ``hbase``'s sender against an answer no region server would give: a ``Multi`` answer
that is not a ``MultiResponse`` fails its call by name (the calls after it kept to send
again), it does not end the sender's thread. Real HBase cannot be made to answer so: a
socket on 127.0.0.1 plays the region server for one call."""

from __future__ import annotations

import socket
import threading

from walship.protos import RPC_pb2
from walship.rpc.auth import SimpleAuth
from walship.rpc.meta import RegionLocation
from walship.rpc.multi import RegionServerClient, RowMutation
from walship.rpc.wire import _varint, delimited, read_exact, read_frame, split_request
from walship.sinks.regioncalls import Call, Outcome, Sender
from walship.wal import Cell, CellType


def _serve_one_garbled_answer(server: socket.socket, seen: list[str]) -> None:
    conn, _ = server.accept()
    with conn:
        read_exact(conn, 6, "test")  # the preamble
        read_frame(conn, "test")  # the connection header
        header, _ = split_request(read_frame(conn, "test"), "test")
        seen.append(header.method_name)
        body = delimited(RPC_pb2.ResponseHeader(call_id=header.call_id)) + _varint(2) + b"\x0a\xff"
        conn.sendall(len(body).to_bytes(4, "big") + body)
        conn.recv(1)  # until the client closes


def test_an_answer_that_does_not_parse_fails_the_call_by_name() -> None:
    server = socket.create_server(("127.0.0.1", 0))
    seen: list[str] = []
    serving = threading.Thread(target=_serve_one_garbled_answer, args=(server, seen), daemon=True)
    serving.start()
    port = server.getsockname()[1]
    region = RegionLocation(b"t,,1.abc.", b"", b"", "127.0.0.1", port, 1)
    cell = Cell(b"row", b"f", b"q", 1, CellType.Put, b"v")
    first, second = (Call(region, b"", [(b"t", RowMutation(b"row", False, (cell,)), b"", 1.0)]) for _ in range(2))
    outcome = Outcome()
    client = RegionServerClient("127.0.0.1", port, SimpleAuth())
    try:
        sender = Sender(client, outcome)
        sender.put(first)
        sender.put(second)
        sender.finish()
    finally:
        client.close()
        server.close()
    serving.join(10)
    assert seen == ["Multi"]
    assert outcome.failed is first and outcome.unsent == [second] and outcome.calls == 0
    assert "Multi on 127.0.0.1:" in outcome.error and "not a MultiResponse" in outcome.error
