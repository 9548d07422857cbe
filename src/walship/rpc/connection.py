"""One connection to an HBase RPC server (the master), for one service, carrying calls one at a
time: the preamble, the authentication method's exchange, the ``ConnectionHeader``, then a
frame a call and a frame its answer (see :mod:`walship.rpc.wire`).

An answer that carries an exception becomes :class:`~walship.errors.RemoteHBaseError`, naming
HBase's exception class and its message (the first line of the server's stack trace); a
connection that cannot be made, or that breaks, becomes
:class:`~walship.errors.MasterUnavailableError` naming the address.

Example::

    with RpcConnection("m1", 16000, "MasterService", SimpleAuth()) as conn:
        reply = conn.call("ListReplicationPeers", ListReplicationPeersRequest(),
                          ListReplicationPeersResponse)
"""

from __future__ import annotations

import contextlib
import logging
import socket
import threading
from types import TracebackType
from typing import TypeVar

from google.protobuf.message import DecodeError, Message

from walship.errors import MasterUnavailableError, RemoteHBaseError, SaslAuthError
from walship.protos import RPC_pb2
from walship.rpc.auth import Authentication, Channel
from walship.rpc.wire import (
    CONNECTION_CALL_ID,
    RpcProtocolError,
    connection_header,
    exchange_frame,
    exchanges_compiled,
    preamble,
    read_frame,
    request_parts,
    split_response,
    split_response_cells,
)

__all__ = ["RpcConnection", "remote_error"]

log = logging.getLogger(__name__)

M = TypeVar("M", bound=Message)

#: Call ids of an answer about the connection, not a call: HBase's -1 (and 0, which no call uses).
_CONNECTION_IDS = frozenset({0, CONNECTION_CALL_ID})

#: HBase's answer, at connection level, to a SIMPLE client of a server with Kerberos on
#: (``ServerRpcConnection.processPreamble``), and to a user the server does not authorize.
ACCESS_DENIED = "org.apache.hadoop.hbase.security.AccessDeniedException"

#: Seconds a connect or a call's answer may take (each call carries it to the server, in
#: milliseconds, as HBase's client sends its operation timeout).
DEFAULT_TIMEOUT = 60.0


def remote_error(exception: RPC_pb2.ExceptionResponse, server: str, call: str) -> RemoteHBaseError:
    """The error an answer's ``ExceptionResponse`` means: HBase's class, and its message (the
    stack trace's first line, less the class name HBase puts before it)."""
    class_name = exception.exception_class_name or "java.io.IOException"
    first = (exception.stack_trace or "").strip().splitlines()[0] if exception.stack_trace.strip() else ""
    message = first[len(class_name) + 1 :].strip() if first.startswith(class_name + ":") else first
    short = class_name.rsplit(".", 1)[-1]
    return RemoteHBaseError(
        f"{call} on {server}: {short}: {message or '(no message)'}",
        exception_class=class_name,
        remote_message=message,
        do_not_retry=exception.do_not_retry,
    )


class RpcConnection:
    """A connection to ``host:port`` for ``service`` (``MasterService``, or a region server's
    ``ClientService``), opened at once.

    Calls are serialized by a lock: one in flight at a time, each answer matched to its call id.

    :param timeout: seconds a connect or a call's answer may take.
    :param cell_codec: the Java class of the codec the calls' cell blocks are in (the
        ``ConnectionHeader``'s ``cell_block_codec_class``), for a connection that sends cells.
    :raises MasterUnavailableError: the connection cannot be made or set up.
    """

    def __init__(
        self,
        host: str,
        port: int,
        service: str,
        auth: Authentication,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        cell_codec: str | None = None,
    ) -> None:
        self.host = host
        self.port = port
        self.service = service
        self.auth = auth
        self.timeout = timeout
        self.server = f"{host}:{port}"
        self._lock = threading.Lock()
        self._next_id = 0
        self._closed = False
        self._channel: Channel | None = None
        try:
            self._sock = socket.create_connection((host, port), timeout=timeout)
        except OSError as exc:
            raise MasterUnavailableError(
                f"cannot connect to {service} at {self.server}: {exc.strerror or exc}"
            ) from None
        try:
            self._sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self._sock.sendall(preamble(auth.auth_byte))
            self._channel = auth.negotiate(self._sock, self.server)
            header = RPC_pb2.ConnectionHeader(service_name=service)
            if cell_codec is not None:
                header.cell_block_codec_class = cell_codec
            user = auth.user_info()
            if user is not None:
                header.user_info.CopyFrom(user)
            self._channel.sendall(connection_header(header))
        except OSError as exc:
            refusal = self._read_refusal() if isinstance(exc, (BrokenPipeError, ConnectionResetError)) else None
            self.close()
            if refusal is not None:
                raise refusal from None
            raise MasterUnavailableError(
                f"cannot set up a connection to {service} at {self.server}: {exc.strerror or exc}"
            ) from None
        except BaseException:
            self.close()
            raise
        log.debug("connected to %s at %s (%s)", service, self.server, auth.name)

    def call(self, method: str, request: Message | bytes, response_type: type[M], *, cellblock: bytes = b"") -> M:
        """Call ``method`` with ``request`` (and the cells of ``cellblock``, in the connection's
        ``cell_codec``) and wait for its answer.

        :raises RemoteHBaseError: the server answered with an exception.
        :raises MasterUnavailableError: the connection broke (it is closed: make a new one).
        """
        return self.call_cells(method, request, response_type, cellblock=cellblock)[0]

    def call_cells(
        self, method: str, request: Message | bytes, response_type: type[M], *, cellblock: bytes = b""
    ) -> tuple[M, bytes]:
        """:meth:`call`, with the cell block of the answer (a scan's results' cells); ``request``
        may be serialized already.

        :raises RemoteHBaseError: the server answered with an exception.
        :raises MasterUnavailableError: the connection broke (it is closed: make a new one).
        """
        body, cells = self.call_raw(method, request, cellblock=cellblock)
        response = response_type()
        try:
            response.ParseFromString(body)
        except DecodeError as exc:
            what = f"{self.service} at {self.server}"
            raise RpcProtocolError(f"{method} on {what}: the answer is not a {response_type.__name__}: {exc}") from None
        return response, cells

    def call_raw(self, method: str, request: Message | bytes, *, cellblock: bytes = b"") -> tuple[bytes, bytes]:
        """:meth:`call_cells`, the answer left unparsed: its bytes and its cell block.

        :raises RemoteHBaseError: the server answered with an exception.
        :raises MasterUnavailableError: the connection broke (it is closed: make a new one).
        """
        what = f"{self.service} at {self.server}"
        with self._lock:
            if self._closed:
                raise MasterUnavailableError(f"the connection to {what} is closed")
            self._next_id += 1
            call_id = self._next_id
            header = RPC_pb2.RequestHeader(
                call_id=call_id, method_name=method, request_param=True, timeout=int(self.timeout * 1000)
            )
            if cellblock:
                header.cell_block_meta.length = len(cellblock)
            channel = self._channel
            assert channel is not None
            parts = request_parts(header, request, cellblock)
            send_error: OSError | None = None
            frame: bytes | None = None
            try:
                try:
                    if channel is self._sock and exchanges_compiled():
                        # the round trip without the interpreter's lock: a busy thread beside
                        # this one delays it once, not at every send and receive
                        frame = exchange_frame(self._sock, parts, what)
                    else:
                        channel.sendall(b"".join(parts))
                except (BrokenPipeError, ConnectionResetError) as exc:
                    # a server that refused the connection (HBase answers a refused preamble with an
                    # error, then closes) may have answered before reading the call: read its answer
                    log.debug("%s: sending %s failed (%s); reading what the server answered", what, method, exc)
                    send_error = exc
                while True:
                    if frame is None:
                        frame = read_frame(channel, what)
                    reply, body, cells = split_response_cells(frame, what)
                    frame = None
                    if reply.call_id == call_id:
                        break
                    if reply.HasField("exception") and reply.call_id in _CONNECTION_IDS:
                        break  # a fatal error of the connection (HBase answers it with call id -1)
                    log.debug("%s: dropped an answer to call %d, waiting for %d", what, reply.call_id, call_id)
            except (OSError, RpcProtocolError) as exc:
                self._close_locked()
                failed = send_error or exc
                detail = failed.strerror if isinstance(failed, OSError) and failed.strerror else str(failed)
                raise MasterUnavailableError(f"{method} on {what}: {detail}") from None
        if reply.HasField("exception"):
            error = remote_error(reply.exception, self.server, method)
            if reply.call_id in _CONNECTION_IDS:
                self.close()
                if error.exception_class == ACCESS_DENIED:
                    raise self._access_denied(error) from None
            raise error
        return body or b"", cells

    def _read_refusal(self) -> Exception | None:
        """The answer of a server that refused the connection and closed it while we were still
        writing (HBase answers a refused preamble with call id -1), if it is there to read."""
        what = f"{self.service} at {self.server}"
        try:
            reply, _ = split_response(read_frame(self._channel or self._sock, what), what)
        except (OSError, RpcProtocolError):
            return None
        if not reply.HasField("exception") or reply.call_id not in _CONNECTION_IDS:
            return None
        error = remote_error(reply.exception, self.server, "the connection")
        return self._access_denied(error) if error.exception_class == ACCESS_DENIED else error

    def _access_denied(self, error: RemoteHBaseError) -> SaslAuthError:
        """The connection refused for who it is: a SIMPLE client of a server that requires
        Kerberos, or a principal the server does not authorize."""
        where = (
            f"the master at {self.server}" if self.service == "MasterService" else f"{self.service} at {self.server}"
        )
        said = f"HBase's answer: {error.short_class}: {error.remote_message or '(no message)'}"
        if self.auth.name == "SIMPLE":
            return SaslAuthError(f"{where} requires Kerberos: give --principal ({said})")
        user = self.auth.user_info()
        who = f"principal {user.effective_user}" if user is not None and user.effective_user else self.auth.name
        return SaslAuthError(f"{where} refused {who} ({said})")

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def channel(self) -> Channel | None:
        """What frames go over: the socket, or a SASL channel that wraps them."""
        return self._channel

    def _close_locked(self) -> None:
        if not self._closed:
            self._closed = True
            close = getattr(self._channel, "close", None)
            if self._channel is not self._sock and close is not None:
                with contextlib.suppress(Exception):
                    close()
            with contextlib.suppress(OSError):
                self._sock.close()

    def close(self) -> None:
        self._close_locked()

    def __enter__(self) -> RpcConnection:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
