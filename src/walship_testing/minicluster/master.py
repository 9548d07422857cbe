"""The minicluster's master: HBase's RPC on a TCP port, serving ``MasterService``'s replication
peer calls (:mod:`walship_testing.minicluster.masterservice`), registered as the active master in
``<parent>/master``, so that walship's :class:`~walship.rpc.MasterAdmin`, the demo, the tests
and a real HBase cluster go through one code path.

A connection goes as on HBase 2.6's ``NettyRpcServer`` (``ServerRpcConnection``):

* the six-byte preamble. ``HBas``, version 0 and the SIMPLE byte (80) go on; KERBEROS (81) or
  DIGEST (82) are told to switch to SIMPLE (the raw SASL reply ``SUCCESS``,
  ``SWITCH_TO_SIMPLE_AUTH``), as a server without security tells them, and the client's first
  SASL frame is skipped; any other byte gets ``BadAuthException``, another version
  ``WrongVersionException``, other magic ``FatalConnectionException``
  (``Expected HEADER=HBas but received HEADER=...``), each answered with call id -1 and the
  connection closed. ``Securi`` gets ``SecurityNotEnabledException`` and a preamble is read
  again; ``Regist`` gets the cluster id and the connection closes.
* the ``ConnectionHeader``: a service other than ``MasterService`` closes the connection
  without an answer (HBase's ``UnknownServiceException`` is only logged).
* calls, answered in order. A method the service does not have, or a request header without
  a parameter, gets HBase's ``DoNotRetryIOException`` (``... is unable to read call parameter
  from client ...; java.lang.UnsupportedOperationException: <method>``); a call the master
  refuses gets HBase's exception (:class:`~walship.errors.MasterCallError`): its class, its
  stack trace (first line ``<class>: <message>``, then ``Caused by:`` lines), do-not-retry.

Example::

    master = MasterServer(cluster, "127.0.0.1", 0)
    master.start()                 # listening, then registered in <parent>/master
    print(master.address.address)  # 127.0.0.1:41234
    master.stop()                  # unregistered, connections closed
"""

from __future__ import annotations

import contextlib
import logging
import socket
import socketserver
import struct
import threading
import time

from google.protobuf import text_format, wrappers_pb2
from google.protobuf.message import DecodeError, Message

from walship.errors import MasterCallError, MiniClusterError, ZkError
from walship.protos import HBase_pb2, RPC_pb2
from walship.rpc.wire import (
    AUTH_DIGEST,
    AUTH_KERBEROS,
    AUTH_SIMPLE,
    CONNECTION_CALL_ID,
    MAGIC,
    RPC_VERSION,
    RpcProtocolError,
    delimited,
    read_exact,
    read_frame,
    response_frame,
    split_request,
)
from walship.zk.master import MasterAddress, become_active_master, resign_master
from walship_testing.minicluster.masterservice import SERVICE, MasterService, has_minimum_version
from walship_testing.minicluster.peerchecks import DNRIOE
from walship_testing.minicluster.procedures import ProcedureExecutor
from walship_testing.minicluster.view import MasterView

__all__ = ["MasterServer"]

log = logging.getLogger(__name__)

_IPC = "org.apache.hadoop.hbase.ipc"
#: ``SaslStatus.SUCCESS`` and ``SaslUtil.SWITCH_TO_SIMPLE_AUTH``: a server without security
#: tells a SASL client to go on with SIMPLE.
_SWITCH_TO_SIMPLE = struct.pack(">ii", 0, -88)
_REGISTRY_PREAMBLE = b"Regist"
_SECURITY_PREAMBLE = b"Securi"


def _binary(data: bytes) -> str:
    """HBase's ``Bytes.toStringBinary``."""
    return "".join(chr(b) if 32 <= b <= 126 and b != 92 else f"\\x{b:02X}" for b in data)


def _answer(sock: socket.socket, call_id: int, error: MasterCallError, stack_trace: str | None = None) -> None:
    """An answer carrying HBase's exception."""
    exception = RPC_pb2.ExceptionResponse(
        exception_class_name=error.exception_class,
        stack_trace=stack_trace if stack_trace is not None else error.stack_trace,
        do_not_retry=error.do_not_retry,
    )
    sock.sendall(response_frame(RPC_pb2.ResponseHeader(call_id=call_id, exception=exception), None))


def _linger_close(sock: socket.socket) -> None:
    """Close after a fatal answer without losing it: no more writes, what the client sent
    meanwhile read and dropped (closing with unread bytes would reset the connection)."""
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_WR)
        sock.settimeout(1.0)
        while sock.recv(65536):
            pass


class _Connection(socketserver.BaseRequestHandler):
    """One client connection (see the module docstring)."""

    server: _RpcServer
    request: socket.socket

    def setup(self) -> None:
        self.server.track(self.request, True)
        host, port = self.client_address[0], self.client_address[1]
        self.peer = f"{host}:{port}"
        self.version: HBase_pb2.VersionInfo | None = None

    def finish(self) -> None:
        self.server.track(self.request, False)

    def handle(self) -> None:
        sock = self.request
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            if not self._preamble(sock) or not self._header(sock):
                return
            while True:
                self._call(sock, read_frame(sock, f"client {self.peer}"))
        except (OSError, RpcProtocolError) as exc:
            log.debug("connection from %s closed: %s", self.peer, exc)

    # -- the preamble and the header -----------------------------------------------------------

    def _fatal(self, sock: socket.socket, error: MasterCallError) -> bool:
        log.warning("%s", error.message)
        _answer(sock, CONNECTION_CALL_ID, error, error.message)
        _linger_close(sock)
        return False

    def _preamble(self, sock: socket.socket) -> bool:
        what = f"client {self.peer}"
        while True:
            data = read_exact(sock, 6, what)
            if data == _REGISTRY_PREAMBLE:
                cluster_id = str(self.server.master.host.cluster_id or "")
                header = RPC_pb2.ResponseHeader(call_id=CONNECTION_CALL_ID)
                # GetConnectionRegistryResponse{cluster_id = 1}: the wire form of a StringValue
                body = delimited(header) + delimited(wrappers_pb2.StringValue(value=cluster_id))
                sock.sendall(struct.pack(">I", len(body)) + body)
                _linger_close(sock)
                return False
            if data == _SECURITY_PREAMBLE:
                error = MasterCallError(f"{_IPC}.SecurityNotEnabledException", None, do_not_retry=False)
                _answer(sock, CONNECTION_CALL_ID, error, "security is not enabled")
                continue
            break
        if data[:4] != MAGIC:
            message = f"Expected HEADER={_binary(MAGIC)} but received HEADER={_binary(data[:4])} from {self.peer}"
            return self._fatal(sock, MasterCallError(f"{_IPC}.FatalConnectionException", message, do_not_retry=True))
        version, auth = data[4], data[5]
        signed = auth - 256 if auth > 127 else auth
        message = (
            f"serverVersion={RPC_VERSION}, clientVersion={version}, authMethod={signed}, authName=unknown "
            f"from {self.peer}"
        )
        if version != RPC_VERSION:
            return self._fatal(sock, MasterCallError(f"{_IPC}.WrongVersionException", message, do_not_retry=True))
        if auth not in (AUTH_SIMPLE, AUTH_KERBEROS, AUTH_DIGEST):
            return self._fatal(sock, MasterCallError(f"{_IPC}.BadAuthException", message, do_not_retry=True))
        if auth != AUTH_SIMPLE:
            sock.sendall(_SWITCH_TO_SIMPLE)
            read_frame(sock, what)  # the client's first SASL message, which HBase skips
        return True

    def _header(self, sock: socket.socket) -> bool:
        header = RPC_pb2.ConnectionHeader()
        try:
            header.ParseFromString(read_frame(sock, f"client {self.peer}"))
        except DecodeError as exc:
            log.warning("connection from %s: the connection header does not parse: %s", self.peer, exc)
            return False
        if header.service_name != SERVICE.name:
            log.warning("connection from %s for service %r: unknown service, closed", self.peer, header.service_name)
            return False
        self.version = header.version_info if header.HasField("version_info") else None
        user = header.user_info.effective_user if header.HasField("user_info") else None
        log.debug("connection from %s, version=%s, user=%s", self.peer, self.version and self.version.version, user)
        return True

    # -- calls -----------------------------------------------------------------------------------

    def _unreadable(self, sock: socket.socket, call_id: int, error: MasterCallError, detail: str) -> None:
        """HBase's answer to a call it cannot read: its message names the listener and the client."""
        where = f"/{self.server.master.address.address} is unable to read call parameter from client "
        _answer(sock, call_id, error, f"{where}{self.client_address[0]}; {detail}")

    def _call(self, sock: socket.socket, frame: bytes) -> None:
        header, param = split_request(frame, f"client {self.peer}")
        call_id = header.call_id
        if not header.request_param:
            shown = text_format.MessageToString(header, as_one_line=True)
            message = f"Invalid request header: {shown}, should have param set in it"
            return self._unreadable(sock, call_id, MasterCallError(DNRIOE, message, do_not_retry=True), message)
        method = MasterService.method(header.method_name)
        if method is None:
            detail = f"java.lang.UnsupportedOperationException: {header.method_name}"
            return self._unreadable(sock, call_id, MasterCallError(DNRIOE, detail, do_not_retry=True), detail)
        request = MasterService.request(method)
        try:
            request.ParseFromString(param)
        except DecodeError as exc:
            name = "org.apache.hbase.thirdparty.com.google.protobuf.InvalidProtocolBufferException"
            if not request.IsInitialized() or "required" in str(exc):
                name = "org.apache.hbase.thirdparty.com.google.protobuf.UninitializedMessageException"
            return self._unreadable(sock, call_id, MasterCallError(name, str(exc), do_not_retry=False), str(exc))
        try:
            reply: Message = self.server.master.service.call(method, request, modern=self._modern)
        except MasterCallError as exc:
            log.info("%s from %s: %s", header.method_name, self.peer, exc)
            return _answer(sock, call_id, exc)
        except Exception as exc:  # a bug: answered as HBase answers an unexpected throwable
            log.exception("%s from %s failed", header.method_name, self.peer)
            return _answer(sock, call_id, MasterCallError("java.io.IOException", str(exc), do_not_retry=False))
        sock.sendall(response_frame(RPC_pb2.ResponseHeader(call_id=call_id), reply))

    @property
    def _modern(self) -> bool:
        """The client has HBase's procedure support (2.0 or later): no latch on procedures."""
        return has_minimum_version(self.version, 2, 0)


class _RpcServer(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True
    block_on_close = False

    def __init__(self, address: tuple[str, int], master: MasterServer) -> None:
        self.master = master
        self._open: set[socket.socket] = set()
        self._open_lock = threading.Lock()
        super().__init__(address, _Connection)

    def track(self, sock: socket.socket, live: bool) -> None:
        with self._open_lock:
            if live:
                self._open.add(sock)
            else:
                self._open.discard(sock)

    def drop_connections(self) -> None:
        with self._open_lock:
            open_socks, self._open = list(self._open), set()
        for sock in open_socks:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)


class MasterServer:
    """The master of the cluster ``host``: its RPC server on ``bind_host:port`` (0: a free one),
    bound when made; :meth:`start` serves and registers it.

    :raises MiniClusterError: the port cannot be bound.
    """

    def __init__(self, host: MasterView, bind_host: str = "127.0.0.1", port: int = 0) -> None:
        self.host = host
        self.executor = ProcedureExecutor()
        self.service = MasterService(host, self.executor)
        try:
            self._server = _RpcServer((bind_host, port), self)
        except OSError as exc:
            self.executor.stop()
            raise MiniClusterError(f"cannot serve the master on {bind_host}:{port}: {exc.strerror or exc}") from None
        bound_port = int(self._server.server_address[1])
        self.address = MasterAddress(bind_host, bound_port, start_code=int(time.time() * 1000))
        self._thread: threading.Thread | None = None
        self._registered = False

    def start(self, *, register_timeout: float = 60.0) -> None:
        """Serve, then register as the active master on the cluster's ZooKeeper session.

        :raises ZkError: another master stayed registered for ``register_timeout`` seconds.
        """
        self._thread = threading.Thread(target=self._server.serve_forever, name="master-rpc", daemon=True)
        self._thread.start()
        if self.host.zk is None:
            raise MiniClusterError("the cluster is not running: its master cannot register")
        become_active_master(self.host.zk, self.host.layout, self.address, timeout=register_timeout)
        self._registered = True
        log.info("master %s serving MasterService, registered at %s", self.address.server_name, self.host.layout.master)

    def stop(self) -> None:
        """Unregister (if still registered as this master), stop serving, close connections."""
        if self._registered and self.host.zk is not None:
            with contextlib.suppress(ZkError):
                resign_master(self.host.zk, self.host.layout, self.address)
            self._registered = False
        if self._thread is not None:
            self._server.shutdown()
            self._thread = None
        self._server.server_close()
        self._server.drop_connections()
        self.executor.stop()
        log.info("master %s stopped", self.address.server_name)
