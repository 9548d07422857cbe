"""The minicluster's Thrift servers: one threaded server per port, for any thriftpy2 service
(HBase's ``Hbase``, Thrift1, or ``THBaseService``, Thrift2) and its handler.

One port serves the buffered and the framed transport, with the binary or the compact
protocol: the first bytes of a connection tell which (a binary message starts ``0x80``, a
compact one ``0x82``; a frame starts with its length). Like HBase's Thrift server started with
``-f`` (framed) or ``-c`` (compact), a server may accept only one transport or one protocol:
other connections are closed, with a warning naming what they spoke. With a certificate it
serves TLS (HBase's ``hbase.thrift.ssl.enabled``); the transport and the protocol are then
told from the decrypted stream.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import ssl
import struct
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from thriftpy2.protocol import TCompactProtocolFactory, TCyBinaryProtocolFactory
from thriftpy2.thrift import TProcessor
from thriftpy2.transport import TCyBufferedTransport, TCyFramedTransport, TSocket, TTransportException

from walship.errors import ConfigError
from walship.thrift import PROTOCOLS, TRANSPORTS
from walship.thrift.hbase1 import Hbase_thrift
from walship_testing.minicluster.thrift1 import HbaseHandler

__all__ = ["PROTOCOLS", "TRANSPORTS", "HbaseHandler", "ThriftServer", "server_tls_context"]

log = logging.getLogger(__name__)

#: Bytes a client connection reads at once.
READ_BUFFER = 1 << 20

_HANDSHAKE_TIMEOUT = 30.0
_HEADER_TIMEOUT = 5.0
_TLS_RECORD_HANDSHAKE = 0x16


def server_tls_context(cert: str | Path | None, key: str | Path | None) -> ssl.SSLContext | None:
    """The TLS context of a Thrift server from PEM files (``None`` without a certificate).

    The key may be inside the certificate file (then ``key`` is ``None``).

    :raises ConfigError: a key without a certificate, a missing or unreadable file, a key that
        does not match the certificate; the message names the flag.
    """
    if cert is None:
        if key is not None:
            raise ConfigError("--thrift-ssl-key needs --thrift-ssl-cert (the server's certificate, PEM)")
        return None
    for flag, path in (("--thrift-ssl-cert", cert), ("--thrift-ssl-key", key)):
        if path is not None and not Path(path).is_file():
            raise ConfigError(f"{flag}: no such file: {path}")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        context.load_cert_chain(str(cert), str(key) if key is not None else None)
    except (ssl.SSLError, OSError) as exc:
        flags = "--thrift-ssl-cert/--thrift-ssl-key" if key is not None else "--thrift-ssl-cert"
        raise ConfigError(f"{flags}: cannot load the certificate and its key ({cert}): {exc}") from None
    return context


def _check_mode(name: str, value: str | None, allowed: Sequence[str]) -> str | None:
    if value is not None and value not in allowed:
        raise ConfigError(f"--thrift-{name} must be one of {', '.join(allowed)}, got {value!r}")
    return value


class _PrefixedSocket:
    """A socket whose first reads return bytes already read (the bytes that told the
    transport and the protocol), for :class:`TSocket`, which only calls these methods."""

    def __init__(self, sock: socket.socket, prefix: bytes) -> None:
        self.sock = sock
        self.prefix = prefix

    def recv(self, size: int) -> bytes:
        if self.prefix:
            out, self.prefix = self.prefix[:size], self.prefix[size:]
            return out
        return self.sock.recv(size)

    def sendall(self, data: bytes) -> None:
        self.sock.sendall(data)

    def settimeout(self, timeout: float | None) -> None:
        self.sock.settimeout(timeout)

    def shutdown(self, how: int) -> None:
        self.sock.shutdown(how)

    def close(self) -> None:
        self.sock.close()


def _read_up_to(sock: socket.socket, size: int) -> bytes:
    """Up to ``size`` bytes: fewer only at the end of the stream or on a timeout."""
    out = b""
    while len(out) < size:
        try:
            chunk = sock.recv(size - len(out))
        except TimeoutError:
            break
        if not chunk:
            break
        out += chunk
    return out


class ThriftServer:
    """A threaded Thrift server on one port, serving one thriftpy2 service with its handler.

    Example::

        ThriftServer(HbaseHandler(cluster), "127.0.0.1", 9090).start()  # Thrift1
        ThriftServer(THBaseHandler(cluster), "127.0.0.1", 9091, service=hbase2.THBaseService).start()

    :param handler: an object with a method per call of ``service``.
    :param service: the thriftpy2 service (default: Thrift1's ``Hbase``).
    :param transport: accept only this transport (``buffered`` or ``framed``, as HBase's
        ``-f``); ``None`` accepts both.
    :param protocol: accept only this protocol (``binary`` or ``compact``, as HBase's ``-c``);
        ``None`` accepts both.
    :param tls: serve TLS with this server context (see :func:`server_tls_context`); the
        transport and the protocol are then told from the decrypted stream.
    """

    def __init__(
        self,
        handler: object,
        host: str,
        port: int,
        *,
        service: Any = None,
        transport: str | None = None,
        protocol: str | None = None,
        tls: ssl.SSLContext | None = None,
    ) -> None:
        self.transport, self.protocol = self.check_modes(transport, protocol)
        self.tls = tls
        self.service = Hbase_thrift.Hbase if service is None else service
        self.processor = TProcessor(self.service, handler)
        self._name = self.service.__name__
        self.sock = socket.create_server((host, port), backlog=128, reuse_port=False)
        self.address = self.sock.getsockname()[:2]
        self._stopping = threading.Event()
        self._clients: set[socket.socket] = set()
        self._clients_lock = threading.Lock()
        self._thread: threading.Thread | None = None

    @staticmethod
    def check_modes(transport: str | None, protocol: str | None) -> tuple[str | None, str | None]:
        """:raises ConfigError: a transport or protocol the server does not know (names the flag)."""
        return _check_mode("transport", transport, TRANSPORTS), _check_mode("protocol", protocol, PROTOCOLS)

    @property
    def modes(self) -> str:
        """What the server accepts, e.g. ``framed/compact`` or ``buffered|framed/binary|compact``."""
        return f"{self.transport or '|'.join(TRANSPORTS)}/{self.protocol or '|'.join(PROTOCOLS)}"

    def start(self) -> None:
        self._thread = threading.Thread(target=self._accept_loop, name=f"{self._name}-accept", daemon=True)
        self._thread.start()

    def _accept_loop(self) -> None:
        while not self._stopping.is_set():
            try:
                conn, addr = self.sock.accept()
            except OSError:
                return
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            with self._clients_lock:
                self._clients.add(conn)
            threading.Thread(target=self._serve, args=(conn, addr), name=f"{self._name}-client", daemon=True).start()

    def _track(self, old: socket.socket, new: socket.socket) -> None:
        with self._clients_lock:
            self._clients.discard(old)
            self._clients.add(new)

    def _handshake(self, conn: socket.socket, peer: str) -> socket.socket | None:
        """The TLS socket over ``conn`` once the handshake is done (``None`` when it failed)."""
        assert self.tls is not None
        tls = self.tls.wrap_socket(conn, server_side=True, do_handshake_on_connect=False)
        self._track(conn, tls)  # wrap_socket detached conn: stop() must shut the TLS socket
        tls.settimeout(_HANDSHAKE_TIMEOUT)
        try:
            tls.do_handshake()
        except ssl.SSLError as exc:
            hint = " (a client speaking plain Thrift to this TLS port?)" if "WRONG_VERSION" in str(exc).upper() else ""
            log.warning("Thrift connection from %s: TLS handshake failed: %s%s", peer, exc, hint)
            self._untrack_and_close(tls)
            return None
        except (OSError, ValueError) as exc:
            log.info("Thrift connection from %s: TLS handshake failed: %s", peer, exc)
            self._untrack_and_close(tls)
            return None
        tls.settimeout(None)
        return tls

    def _untrack_and_close(self, sock: socket.socket) -> None:
        with self._clients_lock:
            self._clients.discard(sock)
        with contextlib.suppress(OSError):
            sock.close()

    def _serve(self, conn: socket.socket, addr: Any) -> None:
        peer = f"{addr[0]}:{addr[1]}" if isinstance(addr, tuple) and len(addr) >= 2 else str(addr)
        sock: socket.socket | None = conn
        try:
            if self.tls is not None:
                sock = self._handshake(conn, peer)
            if sock is not None:
                self._serve_stream(sock, peer)
        except (TTransportException, ConnectionError, OSError, struct.error):
            pass
        except Exception:
            log.exception("Thrift connection from %s failed", peer)
        finally:
            with self._clients_lock:
                self._clients.discard(conn)
                if sock is not None:
                    self._clients.discard(sock)
            for s in (sock, conn):
                if s is not None:
                    with contextlib.suppress(OSError):
                        s.close()

    def _serve_stream(self, sock: socket.socket, peer: str) -> None:
        """Tell the transport and the protocol from the first bytes, then serve calls."""
        head = _read_up_to(sock, 1)
        if not head:
            return
        if self.tls is None and head[0] == _TLS_RECORD_HANDSHAKE:
            log.warning(
                "Thrift connection from %s refused: it starts a TLS handshake; this port serves plain Thrift", peer
            )
            return
        framed = head[0] not in (0x80, 0x82)
        proto_byte = head[0]
        if framed:  # the protocol's first byte follows the 4-byte frame length
            sock.settimeout(_HEADER_TIMEOUT)
            head += _read_up_to(sock, 4)
            sock.settimeout(None)
            proto_byte = head[4] if len(head) >= 5 else 0x80
        seen_transport = "framed" if framed else "buffered"
        seen_protocol = "compact" if proto_byte == 0x82 else "binary"
        if (self.transport and seen_transport != self.transport) or (self.protocol and seen_protocol != self.protocol):
            log.warning(
                "Thrift connection from %s refused: it speaks %s/%s; this server accepts only %s",
                peer,
                seen_transport,
                seen_protocol,
                self.modes,
            )
            return
        tsock = TSocket(sock=_PrefixedSocket(sock, head))
        # a large buffer reads a call in few pieces: each read lets another client's thread
        # take the interpreter, and waiting to get it back costs up to a switch interval
        trans = (TCyFramedTransport if framed else TCyBufferedTransport)(tsock, buf_size=READ_BUFFER)
        proto_factory = TCompactProtocolFactory() if seen_protocol == "compact" else TCyBinaryProtocolFactory()
        iprot = proto_factory.get_protocol(trans)
        oprot = proto_factory.get_protocol(trans)
        while not self._stopping.is_set():
            self.processor.process(iprot, oprot)

    def stop(self) -> None:
        self._stopping.set()
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)  # wakes the accept loop: the port is free at once
        with contextlib.suppress(OSError):
            self.sock.close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        with self._clients_lock:
            clients = list(self._clients)
        for c in clients:
            try:
                c.shutdown(socket.SHUT_RDWR)
                c.close()
            except OSError:
                pass
