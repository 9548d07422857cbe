"""What the Thrift1 and Thrift2 sinks share: the peer's servers from its configuration, the
connections a batch's calls go over, the checks of the configuration and the endpoints the
registry reports. Each sink names its service, its configuration key, how to open a connection
and what counts as the server's refusal.

A batch's calls go over up to ``walship.sink.thrift.connections`` connections at once (by
default one for each of the peer's Thrift servers; a stream each: a
:class:`~walship.thrift.pool.ServerPool` that fails over between the servers, starting on a
server of its own, and a :class:`~walship.sinks.inorder.Sender` that keeps its calls in
order), as HBase's replication source spreads a batch over threads, one for each sink server
it picked. A sink puts every cell of a row in the same
stream (:meth:`PooledSink.stream_of`), so each row's edits reach the peer in WAL order; rows
are independent (cells keep their timestamps), so the streams need no order between them. A
batch gets one stream for each :data:`CELLS_PER_STREAM` cells it holds, up to the setting: a
small batch is one stream's calls, as it always was."""

from __future__ import annotations

import logging
import random
from collections.abc import Iterable
from contextlib import ExitStack
from typing import Any, ClassVar

from walship.errors import ConfigError, InvalidPeerConfigError
from walship.peer import PeerConfig
from walship.sinks.base import ApplyStats, SinkContext
from walship.sinks.inorder import InOrderCalls, Sender
from walship.thrift.conn import ThriftOptions, connections_of
from walship.thrift.encoded import EncodedCall, sending
from walship.thrift.pool import ServerPool

__all__ = ["CELLS_PER_STREAM", "INLINE_CELLS", "PooledSink"]

log = logging.getLogger(__name__)

#: A batch is spread over one more connection for each this many cells (about a call's worth).
CELLS_PER_STREAM = 1000

#: A batch of fewer cells is sent from the caller's own thread: its calls are few and small (a
#: tailer's), and handing each to the sender thread and back costs more CPU than the call itself
#: (``benchmarks/sink_calls.py``), for little overlap to gain.
INLINE_CELLS = CELLS_PER_STREAM


class PooledSink:
    """The construction of a sink that calls one of a peer's Thrift servers.

    :param retries: rounds over all servers before giving up.
    """

    #: ``Thrift`` or ``Thrift2``: what the servers are, in messages and thread names.
    service: ClassVar[str]
    #: The peer configuration key listing the servers.
    servers_key: ClassVar[str]
    #: The server's own exceptions: a call raising one is not retried.
    refusals: ClassVar[tuple[type[BaseException], ...]]

    @staticmethod
    def servers_of(peer: PeerConfig) -> list[tuple[str, int]]:
        """The peer's servers from its configuration (empty when not set)."""
        raise NotImplementedError

    @staticmethod
    def opener(host: str, port: int, options: ThriftOptions, *, timeout_ms: int) -> Any:
        """An open connection with ``close()``."""
        raise NotImplementedError

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
        self.options.identity(f"peer {peer.peer_id}")  # SASL without a login: fail now, naming the key
        servers = self.servers_of(peer)
        if not servers:
            raise ConfigError(
                f"peer {peer.peer_id} has no {self.service} servers: set its {self.servers_key}=host:port[,host:port...] "
                "configuration"
            )
        self.connections = connections_of(peer, len(servers))
        self._servers = servers
        self._timeout_ms = timeout_ms
        self._retries = retries
        self._backoff = backoff
        #: the open streams: a server pool and the sender of its calls, opened as batches need them
        self._streams: list[tuple[ServerPool, Sender]] = []
        #: stream i connects first to server (first + i) of the list: the streams spread over the
        #: servers, and the sinks of many processes spread from a random start
        self._first = random.randrange(len(servers))
        self.configure(context)

    def configure(self, context: SinkContext) -> None:
        """What a sink sets up beyond its connections (nothing here)."""

    # -- streams -----------------------------------------------------------------------------

    def streams_for(self, cells: int) -> int:
        """How many streams a batch of ``cells`` cells is spread over."""
        return max(1, min(self.connections, cells // CELLS_PER_STREAM))

    @staticmethod
    def stream_of(row: bytes, streams: int) -> int:
        """The stream a row's cells go over (always the same one within a batch)."""
        return hash(row) % streams if streams > 1 else 0

    def _sender(self, i: int) -> Sender:
        """Stream ``i``'s sender, its pool opened on first use."""
        opener = self.opener
        options, timeout_ms = self.options, self._timeout_ms
        while len(self._streams) <= i:
            pool = ServerPool(
                self.peer.peer_id,
                self._servers,
                options,
                lambda host, port: opener(host, port, options, timeout_ms=timeout_ms),
                self.refusals,
                service=self.service,
                retries=self._retries,
                backoff=self._backoff,
                first=self._first + len(self._streams),
            )
            name = f"walship-{self.service.lower()}-{self.peer.peer_id}-{len(self._streams)}"
            self._streams.append((pool, Sender(pool.call, name)))
        return self._streams[i][1]

    def connected(self) -> list[tuple[str, int] | None]:
        """The server each open stream is connected to (``None``: not connected now)."""
        return [pool.server if pool.connected() else None for pool, _ in self._streams]

    def send(
        self, stats: ApplyStats, calls: Iterable[tuple[int, EncodedCall, str]], streams: int, *, cells: int
    ) -> None:
        """Send each ``(stream, call, what)`` over its stream: in order within a stream, the
        streams at once; return when every call is done, counting calls and retries in ``stats``.
        A batch of one stream and under :data:`INLINE_CELLS` ``cells`` is sent from this thread,
        each call built once the one before is done.

        :raises SinkError: a call was refused (the error of the failure that came first, of
            whichever stream; the batch is shipped again whole, no later call of that stream
            was sent).
        :raises SinkUnavailableError: no server answered.
        """
        if streams == 1 and cells < INLINE_CELLS:
            self._send_inline(stats, calls)
            return
        counts = [ApplyStats() for _ in range(streams)]  # each stream's thread counts its own retries
        batches: list[InOrderCalls] = []
        try:
            with ExitStack() as stack:
                batches.extend(stack.enter_context(self._sender(i).batch(counts[i])) for i in range(streams))
                for i, call, what in calls:
                    batches[i].send(sending(call), what)
        except Exception as exc:
            # several streams may have failed: the error is the one that came first
            failures = [batch.failure for batch in batches if batch.failure is not None]
            first = min(failures, key=lambda failure: failure[0])[1] if failures else exc
            if first is not exc and isinstance(first, Exception):
                raise first from None
            raise
        finally:
            for count in counts:
                stats.calls += count.calls
                stats.retries += count.retries
                stats.last_backoff = count.last_backoff or stats.last_backoff
        self._close_streams(streams)

    def _send_inline(self, stats: ApplyStats, calls: Iterable[tuple[int, EncodedCall, str]]) -> None:
        """The calls in order over the first stream, from this thread (its sender thread is
        idle: every batch waits for its calls); a call that failed raises, none after it is sent."""
        self._sender(0)
        pool = self._streams[0][0]
        for _, call, what in calls:
            stats.calls += 1
            pool.call(sending(call), what, stats)
        self._close_streams(1)

    def _close_streams(self, used: int) -> None:
        """Close the streams a batch did not need: a tail of small batches after a large one
        holds one connection, not the large batch's."""
        for pool, sender in self._streams[used:]:
            sender.close()
            pool.drop()
        del self._streams[used:]

    @classmethod
    def validate_config(cls, peer: PeerConfig) -> None:
        """:raises InvalidPeerConfigError: the servers' key is missing, empty or not
        ``host:port[,...]``, or a transport, protocol, TLS or connections setting is out of its
        allowed values (or names a CA file that does not exist)."""
        if not cls.servers_of(peer):
            raise InvalidPeerConfigError(
                f"peer {peer.peer_id}: {cls.servers_key} must name the peer's {cls.service} servers "
                "(host:port[,host:port...])"
            )
        ThriftOptions.of(peer)
        connections_of(peer, len(cls.servers_of(peer)))

    @classmethod
    def endpoints(cls, peer: PeerConfig) -> list[tuple[str, int]]:
        """The peer's servers (its ``servers_key``)."""
        return cls.servers_of(peer)

    def close(self) -> None:
        for pool, sender in self._streams:
            sender.close()
            pool.drop()
        self._streams.clear()
