"""HBase's RPC framing, as HBase 2.x's ``NettyRpcConnection`` and ``ServerRpcConnection`` speak
it: what goes over the socket, for the client (:mod:`walship.rpc.connection`) and for the
minicluster's master alike.

A connection opens with a six-byte preamble, ``HBas``, the RPC version (0) and the
authentication method's byte (80 SIMPLE, 81 KERBEROS, 82 DIGEST); a SASL exchange, when the
method has one, comes next; then the ``ConnectionHeader``: a 4-byte big-endian length and the
message. Each call is a frame: a 4-byte big-endian length, then the varint-delimited
``RequestHeader`` and the varint-delimited request, and for a call with cells (a region
server's ``Multi``) their cell block, its length in the header's ``cell_block_meta``. Each
answer is a frame of the varint-delimited ``ResponseHeader`` and, unless the header carries an
exception, the varint-delimited response (and the cells of a scan's results).

Example::

    sock.sendall(preamble(AUTH_SIMPLE) + connection_header(header))
    sock.sendall(request_frame(RequestHeader(call_id=1, method_name="ListReplicationPeers",
                                             request_param=True), ListReplicationPeersRequest()))
    header, body = split_response(read_frame(sock, "master m1:16000"))
"""

from __future__ import annotations

import logging
import socket
import struct
from typing import Protocol

from google.protobuf.message import DecodeError, Message

from walship.errors import MasterError
from walship.protos import RPC_pb2

try:
    from walship.rpc import _exchange
except ImportError:  # an install without a C compiler: Python's socket methods carry each call
    _exchange = None  # type: ignore[assignment]

__all__ = [
    "AUTH_DIGEST",
    "AUTH_KERBEROS",
    "AUTH_SIMPLE",
    "CONNECTION_CALL_ID",
    "MAGIC",
    "MAX_FRAME",
    "RPC_VERSION",
    "Readable",
    "RpcProtocolError",
    "connection_header",
    "delimited",
    "exchange_frame",
    "exchanges_compiled",
    "preamble",
    "read_delimited",
    "read_exact",
    "read_frame",
    "request_frame",
    "request_parts",
    "response_frame",
    "split_request",
    "split_response",
    "split_response_cells",
]

log = logging.getLogger(__name__)

MAGIC = b"HBas"
RPC_VERSION = 0
#: The preamble's authentication bytes (HBase's ``AuthMethod.code``).
AUTH_SIMPLE = 80
AUTH_KERBEROS = 81
AUTH_DIGEST = 82
#: The call id of an answer about the connection itself (a refused preamble or header): HBase's
#: ``setCallId(-1)``, which the ``uint32`` field carries as 0xFFFFFFFF.
CONNECTION_CALL_ID = 0xFFFFFFFF
#: The largest frame either side accepts (HBase's ``hbase.ipc.max.request.size`` default, 256 MiB).
MAX_FRAME = 256 * 1024 * 1024


class Readable(Protocol):
    """What frames are read from: a socket, or a channel that unwraps SASL frames."""

    def recv(self, count: int, /) -> bytes: ...


class RpcProtocolError(MasterError):
    """Bytes on an RPC connection that are not HBase's framing (names the peer and what)."""


def preamble(auth: int) -> bytes:
    """``HBas``, the version, the authentication byte."""
    return MAGIC + bytes([RPC_VERSION, auth])


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        bits = value & 0x7F
        value >>= 7
        if value:
            out.append(bits | 0x80)
        else:
            out.append(bits)
            return bytes(out)


def delimited(message: Message) -> bytes:
    """The message with its varint length before it (protobuf's ``writeDelimitedTo``)."""
    data = message.SerializeToString()
    return _varint(len(data)) + data


def read_delimited(data: bytes, offset: int, what: str) -> tuple[bytes, int]:
    """The delimited message's bytes at ``offset`` and the offset after it.

    :raises RpcProtocolError: a length that runs past the frame (names ``what``).
    """
    shift = value = 0
    pos = offset
    while True:
        if pos >= len(data) or shift > 28:
            raise RpcProtocolError(f"{what}: a message length that does not parse at byte {offset} of the frame")
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            break
        shift += 7
    end = pos + value
    if end > len(data):
        raise RpcProtocolError(f"{what}: a message of {value} bytes at byte {offset} runs past the frame's {len(data)}")
    return data[pos:end], end


def _parse(message: Message, data: bytes, what: str) -> None:
    try:
        message.ParseFromString(data)
    except DecodeError as exc:
        raise RpcProtocolError(f"{what}: not a {message.DESCRIPTOR.name}: {exc}") from None


def connection_header(header: RPC_pb2.ConnectionHeader) -> bytes:
    """The ``ConnectionHeader`` with its 4-byte length."""
    data = header.SerializeToString()
    return struct.pack(">I", len(data)) + data


def request_frame(header: RPC_pb2.RequestHeader, request: Message | bytes, cellblock: bytes = b"") -> bytes:
    """One call: its length, the delimited header, the delimited request (a message, or one
    already serialized), then its cell block (whose length the header's ``cell_block_meta``
    must give)."""
    return b"".join(request_parts(header, request, cellblock))


def request_parts(
    header: RPC_pb2.RequestHeader, request: Message | bytes, cellblock: bytes = b""
) -> tuple[bytes, bytes]:
    """:func:`request_frame` in two parts, to be sent one after the other: the frame's length,
    header and request, then the cell block (not copied)."""
    param = _varint(len(request)) + request if isinstance(request, bytes) else delimited(request)
    head = delimited(header)
    return b"".join((struct.pack(">I", len(head) + len(param) + len(cellblock)), head, param)), cellblock


def exchanges_compiled() -> bool:
    """Whether :func:`exchange_frame` is there (the compiled ``_exchange`` was built)."""
    return _exchange is not None


def exchange_frame(sock: socket.socket, parts: tuple[bytes, ...], what: str) -> bytes:
    """Send a call's parts on a plain socket and read the answer's frame, in one compiled round
    trip that holds no interpreter lock (only when :func:`exchanges_compiled`).

    :raises OSError: a send or a receive failed, or the socket's timeout passed without progress.
    :raises RpcProtocolError: the connection closed first, or the frame is too large (names
        ``what``).
    """
    assert _exchange is not None
    timeout = sock.gettimeout()
    answer = _exchange.exchange(sock.fileno(), parts, -1.0 if timeout is None else timeout, MAX_FRAME)
    if answer is None:
        raise RpcProtocolError(f"{what} closed the connection before its answer was whole")
    if isinstance(answer, int):
        raise _too_large(what, answer)
    return answer


def response_frame(header: RPC_pb2.ResponseHeader, response: Message | None) -> bytes:
    """One answer: its length, the delimited header and, without an exception, the response."""
    body = delimited(header) + (delimited(response) if response is not None else b"")
    return struct.pack(">I", len(body)) + body


def split_request(frame: bytes, what: str) -> tuple[RPC_pb2.RequestHeader, bytes]:
    """A call's header and its request's bytes."""
    data, end = read_delimited(frame, 0, what)
    header = RPC_pb2.RequestHeader()
    _parse(header, data, what)
    param = b""
    if header.request_param:
        param, end = read_delimited(frame, end, what)
    return header, param


def split_response(frame: bytes, what: str) -> tuple[RPC_pb2.ResponseHeader, bytes | None]:
    """An answer's header and, unless it carries an exception, its response's bytes."""
    header, body, _ = split_response_cells(frame, what)
    return header, body


def split_response_cells(frame: bytes, what: str) -> tuple[RPC_pb2.ResponseHeader, bytes | None, bytes]:
    """An answer's header, its response's bytes (``None`` with an exception) and its cell block
    (the bytes after the response; as many as the header's ``cell_block_meta`` says).

    :raises RpcProtocolError: a cell block of another length than the header gives.
    """
    data, end = read_delimited(frame, 0, what)
    header = RPC_pb2.ResponseHeader()
    _parse(header, data, what)
    if header.HasField("exception") or end == len(frame):
        return header, None, b""
    body, end = read_delimited(frame, end, what)
    cells = frame[end:]
    if len(cells) != header.cell_block_meta.length:
        raise RpcProtocolError(
            f"{what}: a cell block of {len(cells)} bytes after the response, the header says {header.cell_block_meta.length}"
        )
    return header, body, cells


def read_exact(sock: Readable, count: int, what: str) -> bytes:
    """``count`` bytes from the socket.

    :raises RpcProtocolError: the connection closed first (names ``what``).
    """
    chunks = []
    left = count
    while left:
        chunk = sock.recv(min(left, 1 << 20))
        if not chunk:
            raise RpcProtocolError(f"{what} closed the connection ({count - left} of {count} bytes read)")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def read_frame(sock: Readable, what: str) -> bytes:
    """A frame's bytes: a 4-byte length, then as many bytes."""
    (length,) = struct.unpack(">I", read_exact(sock, 4, what))
    if length > MAX_FRAME:
        raise _too_large(what, length)
    return read_exact(sock, length, what)


def _too_large(what: str, length: int) -> RpcProtocolError:
    return RpcProtocolError(f"{what}: a frame of {length} bytes, more than {MAX_FRAME}")
