"""Apply filtered edits to a peer HBase cluster through its Thrift1 servers (sink ``thrift1``).

* Servers come from the peer's ``walship.sink.thrift``; one is picked at random, a failed one
  is left for another, with exponential backoff between rounds.
* Cells keep their timestamps: Thrift1 takes one timestamp per call, so edits are grouped by
  (table, cluster ids, timestamp) and each group is one ``mutateRowsTs`` call. Visibility in
  HBase depends on timestamps, not on the order of calls, so the regrouping changes nothing;
  within a group the order of the WAL is kept (the last put of a cell wins, as on HBase).
* Every call carries ``_cs.id`` = the edit's cluster ids plus the source's, so the peer writes
  them into its own WAL and the edit never comes back (no loops).
* Put, DeleteColumn and DeleteFamily are exact over Thrift1. A single-version Delete and a
  DeleteFamilyVersion cannot be expressed: ``walship.incompatible`` says what happens —
  ``fail`` (default), ``skip`` (counted) or ``deadletter`` (written durably, see
  :mod:`walship.sinks.deadletter`, before the batch counts as applied). Cell tags cannot be
  sent either; they are counted as dropped.
* The servers' transport, protocol and TLS come from the peer's configuration, as HBase's
  Thrift server is started (``-f``, ``-c``, ``hbase.thrift.ssl.enabled``):
  ``walship.sink.thrift.transport`` = ``buffered`` (default) | ``framed``,
  ``walship.sink.thrift.protocol`` = ``binary`` (default) | ``compact``,
  ``walship.sink.thrift.ssl`` = ``false`` (default) | ``true``, with
  ``walship.sink.thrift.ssl.ca`` (a PEM file of the CAs to trust; default: the system's) and
  ``walship.sink.thrift.ssl.verify`` = ``true`` (default) | ``false`` (check that the
  certificate names the host; the certificate itself is always verified).
"""

from __future__ import annotations

import contextlib
import logging
import random
import socket
import ssl
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import happybase
from happybase.connection import THRIFT_PROTOCOLS, THRIFT_TRANSPORTS
from thriftpy2.thrift import TApplicationException, TClient
from thriftpy2.transport import TSSLSocket, TTransportException

from walship.clusterids import encode_cluster_ids
from walship.errors import (
    ConfigError,
    IncompatibleEditError,
    InvalidPeerConfigError,
    SinkError,
    SinkUnavailableError,
)
from walship.sinks.base import INCOMPATIBLE_KEY, ApplyStats, FilteredEntry, SinkContext
from walship.sinks.deadletter import DeadLetter, DeadLetterStore
from walship.thrift import PROTOCOLS, TRANSPORTS
from walship.thrift.hbase1 import Hbase_thrift
from walship.wal.model import CellType
from walship.zk.peers import PeerConfig, parse_host_ports

__all__ = [
    "SINK_THRIFT_KEY",
    "THRIFT_PROTOCOL_KEY",
    "THRIFT_SSL_CA_KEY",
    "THRIFT_SSL_KEY",
    "THRIFT_SSL_VERIFY_KEY",
    "THRIFT_TRANSPORT_KEY",
    "ThriftOptions",
    "ThriftSink",
    "open_connection",
    "thrift_servers",
]

log = logging.getLogger(__name__)

#: Peer configuration key naming the peer's Thrift servers: ``host:port[,host:port...]``.
SINK_THRIFT_KEY = "walship.sink.thrift"
SINK_KEY_HINT = f"{SINK_THRIFT_KEY}=host:port[,host:port...] configuration"
#: Peer configuration keys: how to speak to the peer's Thrift servers.
THRIFT_TRANSPORT_KEY = "walship.sink.thrift.transport"
THRIFT_PROTOCOL_KEY = "walship.sink.thrift.protocol"
THRIFT_SSL_KEY = "walship.sink.thrift.ssl"
THRIFT_SSL_CA_KEY = "walship.sink.thrift.ssl.ca"
THRIFT_SSL_VERIFY_KEY = "walship.sink.thrift.ssl.verify"
_BOOLEANS = {"true": True, "false": False}
_INCOMPATIBLE = (int(CellType.Delete), int(CellType.DeleteFamilyVersion))
_ROWS_PER_CALL = 5000
_TRANSPORT_ERRORS = (TTransportException, TApplicationException, ConnectionError, socket.timeout, OSError, EOFError)


def thrift_servers(peer: PeerConfig) -> list[tuple[str, int]]:
    """The peer's Thrift servers from ``walship.sink.thrift`` (empty when not set)."""
    spec = peer.configuration.get(SINK_THRIFT_KEY)
    return parse_host_ports(spec, f"{SINK_THRIFT_KEY} of peer {peer.peer_id}") if spec else []


def _choice(peer: PeerConfig, key: str, allowed: Sequence[str], default: str) -> str:
    raw = peer.configuration.get(key)
    if raw is None:
        return default
    value = raw.strip().lower()
    if value not in allowed:
        raise InvalidPeerConfigError(f"peer {peer.peer_id}: {key} must be one of {', '.join(allowed)}, got {raw!r}")
    return value


def _flag(peer: PeerConfig, key: str, default: bool) -> bool:
    return _BOOLEANS[_choice(peer, key, tuple(_BOOLEANS), "true" if default else "false")]


@dataclass(frozen=True)
class ThriftOptions:
    """How to speak to a peer's Thrift servers (see the module's description)."""

    transport: str = "buffered"
    protocol: str = "binary"
    ssl: bool = False
    #: PEM file of the CAs to trust (``None``: the system's)
    ca: str | None = None
    #: check that the server's certificate names the host
    verify: bool = True

    @classmethod
    def of(cls, peer: PeerConfig) -> ThriftOptions:
        """The options in the peer's configuration.

        :raises InvalidPeerConfigError: a value out of its allowed set (the message names the
            key, the peer and the allowed values), or a CA file that does not exist.
        """
        ca = peer.configuration.get(THRIFT_SSL_CA_KEY) or None
        if ca is not None and not Path(ca).is_file():
            raise InvalidPeerConfigError(f"peer {peer.peer_id}: {THRIFT_SSL_CA_KEY}: no such file: {ca}")
        return cls(
            transport=_choice(peer, THRIFT_TRANSPORT_KEY, TRANSPORTS, "buffered"),
            protocol=_choice(peer, THRIFT_PROTOCOL_KEY, PROTOCOLS, "binary"),
            ssl=_flag(peer, THRIFT_SSL_KEY, False),
            ca=ca,
            verify=_flag(peer, THRIFT_SSL_VERIFY_KEY, True),
        )

    def describe(self) -> str:
        """E.g. ``framed/compact over TLS``."""
        return f"{self.transport}/{self.protocol}{' over TLS' if self.ssl else ''}"


def _describe(exc: BaseException | None) -> str:
    """An error's own words (thriftpy2's exceptions print as their repr)."""
    message = getattr(exc, "message", None)
    return message if isinstance(message, str) and message else str(exc)


def _tls_socket(host: str, port: int, options: ThriftOptions, timeout_ms: int) -> Any:
    """A thriftpy2 TLS socket to ``host:port``, connected (the handshake done).

    :raises TTransportException: the server cannot be reached, or the handshake failed (the
        message says why, e.g. a certificate that the CA did not sign).
    """
    tsock = TSSLSocket(  # type: ignore[no-untyped-call]
        host, port, socket_timeout=timeout_ms, connect_timeout=timeout_ms, cafile=options.ca, validate=True
    )
    context: ssl.SSLContext = tsock.ssl_context
    if options.ca is None:
        context.load_default_certs(ssl.Purpose.SERVER_AUTH)
    context.check_hostname = options.verify
    timeout = timeout_ms / 1000 if timeout_ms else None
    try:
        raw = socket.create_connection((host, port), timeout=timeout)
    except OSError as exc:
        raise TTransportException(
            type=TTransportException.NOT_OPEN, message=f"could not connect to {host}:{port}: {exc}"
        ) from None
    try:
        tls = context.wrap_socket(raw, server_hostname=host)
    except (ssl.SSLError, ssl.CertificateError, OSError) as exc:
        raw.close()
        hint = f" (check {THRIFT_SSL_CA_KEY})" if isinstance(exc, ssl.SSLCertVerificationError) else ""
        raise TTransportException(
            type=TTransportException.NOT_OPEN, message=f"TLS handshake with {host}:{port} failed: {exc}{hint}"
        ) from None
    tls.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    tsock.set_handle(tls)  # type: ignore[no-untyped-call]
    return tsock


def open_connection(host: str, port: int, options: ThriftOptions | None = None, *, timeout_ms: int = 30_000) -> Any:
    """A :class:`happybase.Connection` to one Thrift server, opened, speaking ``options``.

    happybase has no TLS: for TLS the connection's transport and client are thriftpy2's, over
    a TLS socket (``connection.client`` and ``close()`` work as for any other).

    :raises TTransportException: the server cannot be reached or the TLS handshake failed.
    """
    options = options or ThriftOptions()
    if not options.ssl:
        return happybase.Connection(
            host,
            port,
            timeout=timeout_ms,
            autoconnect=True,
            transport=options.transport,
            protocol=options.protocol,
        )
    conn = happybase.Connection(
        host, port, timeout=timeout_ms, autoconnect=False, transport=options.transport, protocol=options.protocol
    )
    transport = THRIFT_TRANSPORTS[options.transport](_tls_socket(host, port, options, timeout_ms))
    conn.transport = transport
    conn.client = TClient(Hbase_thrift.Hbase, THRIFT_PROTOCOLS[options.protocol](transport, decode_response=False))
    return conn


class ThriftSink:
    """Applies batches of filtered entries to one peer.

    :param retries: rounds over all servers before giving up.
    """

    def __init__(
        self,
        peer: PeerConfig,
        context: SinkContext,
        *,
        timeout_ms: int = 30_000,
        retries: int = 6,
        backoff: float = 0.2,
    ) -> None:
        self.peer = peer
        self.options = ThriftOptions.of(peer)
        self.servers = thrift_servers(peer)
        if not self.servers:
            raise ConfigError(f"peer {peer.peer_id} has no Thrift servers: set its {SINK_KEY_HINT}")
        # replaying dead letters: every cell exactly, or fail; never skip nor dead-letter again
        self.mode = "fail" if context.replaying else peer.configuration.get(INCOMPATIBLE_KEY, "fail")
        self.timeout_ms = timeout_ms
        self.retries = retries
        self.backoff = backoff
        self.deadletters = DeadLetterStore.for_peer(peer, context.wal_root)
        self._conn: Any = None
        self._server: tuple[str, int] | None = None

    @classmethod
    def validate_config(cls, peer: PeerConfig) -> None:
        """:raises InvalidPeerConfigError: ``walship.sink.thrift`` is not ``host:port[,...]``
        (a peer may be added without it; shipping to it then says what is missing), a
        transport, protocol or TLS setting out of its allowed values, or a CA file that does
        not exist."""
        thrift_servers(peer)
        ThriftOptions.of(peer)

    @classmethod
    def endpoints(cls, peer: PeerConfig) -> list[tuple[str, int]]:
        """The peer's Thrift servers (``walship.sink.thrift``)."""
        return thrift_servers(peer)

    # -- connections ---------------------------------------------------------------------------

    def _client(self) -> Any:
        if self._conn is None:
            choices = list(self.servers)
            random.shuffle(choices)
            last: Exception | None = None
            for host, port in choices:
                try:
                    conn = open_connection(host, port, self.options, timeout_ms=self.timeout_ms)
                except _TRANSPORT_ERRORS as exc:
                    last = exc
                    log.warning(
                        "peer %s: Thrift server %s:%d (%s) unreachable: %s",
                        self.peer.peer_id,
                        host,
                        port,
                        self.options.describe(),
                        _describe(exc),
                    )
                    continue
                self._conn, self._server = conn, (host, port)
                break
            if self._conn is None:
                raise SinkUnavailableError(
                    f"peer {self.peer.peer_id}: no Thrift server answered ({self._names()}, "
                    f"{self.options.describe()}): {_describe(last)}"
                )
        return self._conn.client

    def _names(self) -> str:
        return ", ".join(f"{h}:{p}" for h, p in self.servers)

    def _drop_connection(self) -> None:
        if self._conn is not None:
            with contextlib.suppress(Exception):
                self._conn.close()
        self._conn = None

    def close(self) -> None:
        self._drop_connection()

    def _call(self, table: bytes, rows: list[Any], ts: int, attributes: dict[bytes, bytes], stats: ApplyStats) -> None:
        delay = self.backoff
        last: Exception | None = None
        for attempt in range(self.retries * max(1, len(self.servers))):
            try:
                self._client().mutateRowsTs(table, rows, ts, attributes)
                return
            except (Hbase_thrift.IOError, Hbase_thrift.IllegalArgument) as exc:
                raise SinkError(
                    f"peer {self.peer.peer_id} refused edits to table {table.decode(errors='replace')}: {exc.message}"
                ) from None
            except SinkUnavailableError:
                if attempt + 1 >= self.retries:
                    raise
                stats.retries += 1
            except _TRANSPORT_ERRORS as exc:
                last = exc
                log.warning(
                    "peer %s: Thrift call to %s failed (%s); retrying", self.peer.peer_id, self._server, _describe(exc)
                )
                self._drop_connection()
                stats.retries += 1
                stats.last_backoff = (min(delay, 10.0), f"Thrift call to {self._server} failed: {_describe(exc)}")
            time.sleep(min(delay, 10.0))
            delay *= 2
        raise SinkUnavailableError(
            f"peer {self.peer.peer_id}: gave up after {self.retries} rounds over {self._names()} "
            f"({self.options.describe()}){self._explain(last)}"
        )

    def _explain(self, exc: Exception | None) -> str:
        """The last error of a call, and what a connection closed at once may mean."""
        if exc is None:
            return ""
        closed = isinstance(exc, (ConnectionError, EOFError)) or (
            isinstance(exc, TTransportException) and exc.type == TTransportException.END_OF_FILE
        )
        hint = (
            f"; the server closed the connection: does it expect TLS ({THRIFT_SSL_KEY}) or another transport "
            f"({THRIFT_TRANSPORT_KEY}) or protocol ({THRIFT_PROTOCOL_KEY})?"
            if closed
            else ""
        )
        return f": last error: {_describe(exc)}{hint}"

    # -- applying --------------------------------------------------------------------------------

    def apply(self, entries: Sequence[FilteredEntry], wal: str) -> ApplyStats:
        """Apply entries in order (grouped for Thrift1 as described above).

        :raises IncompatibleEditError: an inexpressible cell under ``walship.incompatible=fail``
            (checked before anything of the batch is applied).
        :raises SinkError: the peer refused the edits (e.g. an unknown table).
        :raises SinkUnavailableError: no server answered.
        """
        stats = ApplyStats()
        if self.mode == "fail":
            for fe in entries:
                for cell in fe.cells:
                    if cell.type in _INCOMPATIBLE:
                        raise IncompatibleEditError(
                            f"{wal} at byte offset {fe.entry.offset}: a {CellType(cell.type).name} cell of table "
                            f"{fe.entry.key.table.decode(errors='replace')} cannot be applied over Thrift1 "
                            f"(peer {self.peer.peer_id}, {INCOMPATIBLE_KEY}=fail; set skip or deadletter to go on)"
                        )
        groups: dict[tuple[bytes, tuple[uuid.UUID, ...], int], dict[bytes, list[Any]]] = {}
        letters: list[DeadLetter] = []
        for fe in entries:
            table = fe.entry.key.table
            for i, cell in enumerate(fe.cells):
                if cell.type in _INCOMPATIBLE:
                    if self.mode == "deadletter":
                        reason = f"Thrift1 cannot express a {CellType(cell.type).name} cell"
                        letters.append(DeadLetter.of(self.peer.peer_id, wal, fe, i, reason))
                        stats.deadlettered += 1
                    else:
                        stats.incompatible_skipped += 1
                    continue
                if cell.tags:
                    stats.tags_dropped += 1
                rows = groups.setdefault((table, fe.cluster_ids, cell.timestamp), {})
                muts = rows.setdefault(cell.row, [])
                if cell.type == CellType.Put:
                    muts.append(
                        Hbase_thrift.Mutation(
                            isDelete=False, column=cell.family + b":" + cell.qualifier, value=cell.value
                        )
                    )
                elif cell.type == CellType.DeleteColumn:
                    muts.append(Hbase_thrift.Mutation(isDelete=True, column=cell.family + b":" + cell.qualifier))
                else:  # DeleteFamily
                    muts.append(Hbase_thrift.Mutation(isDelete=True, column=cell.family))
                stats.cells += 1
        # durable before the batch counts as applied (and so before the position moves)
        written = self.deadletters.write(wal, letters)
        for (table, cluster_ids, ts), rows in groups.items():
            batch = [Hbase_thrift.BatchMutation(row=r, mutations=m) for r, m in rows.items()]
            attributes = {b"_cs.id": encode_cluster_ids(cluster_ids)}
            for i in range(0, len(batch), _ROWS_PER_CALL):
                self._call(table, batch[i : i + _ROWS_PER_CALL], ts, attributes, stats)
                stats.calls += 1
        if stats.incompatible_skipped or stats.deadlettered:
            log.warning(
                "peer %s: %s: %d incompatible cells skipped, %d dead-lettered to %s",
                self.peer.peer_id,
                wal,
                stats.incompatible_skipped,
                stats.deadlettered,
                written or "-",
            )
        return stats
