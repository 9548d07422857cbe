"""The connections a Thrift sink's batches go over: up to ``walship.sink.thrift.connections``
streams to the peer's servers, each a :class:`~walship.thrift.pool.ServerPool` that fails over
between the servers (starting on a server of its own) and a
:class:`~walship.sinks.inorder.Sender` that keeps its calls in order, as HBase's replication
source spreads a batch over threads, one for each sink server it picked.

Every cell of a row goes over the same stream (:meth:`PeerStreams.stream_of`), so each row's
edits reach the peer in WAL order; rows are independent (cells keep their timestamps), so the
streams need no order between them. A batch gets one stream for each :data:`CELLS_PER_STREAM`
cells it holds, up to the setting: a small batch is one stream's calls.

    sink.streams.send_calls(stats, calls, streams, cells=n)
        -> ServerPool.send_call(call, what, stats)        # retried, failed over
        -> EncodingClient.send_encoded(call)              # the bytes written to the peer
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable, Iterable
from contextlib import ExitStack
from typing import NamedTuple

from walship.sinks.base import ApplyStats
from walship.sinks.inorder import InOrderCalls, Sender
from walship.thrift.encoded import EncodedCall
from walship.thrift.pool import ServerPool

__all__ = ["CELLS_PER_STREAM", "INLINE_CELLS", "PeerStreams", "StreamCall"]

log = logging.getLogger(__name__)

#: A batch is spread over one more connection for each this many cells (about a call's worth).
CELLS_PER_STREAM = 1000

#: A batch of fewer cells is sent from the caller's own thread: its calls are few and small (a
#: tailer's), and handing each to the sender thread and back costs more CPU than the call itself
#: (``benchmarks/sink_calls.py``), for little overlap to gain.
INLINE_CELLS = CELLS_PER_STREAM


class StreamCall(NamedTuple):
    """One call of a batch: the stream it goes over, the call, and what it does (for messages)."""

    stream: int
    call: EncodedCall
    what: str


class PeerStreams:
    """The streams of one sink to one peer's servers, opened as batches need them.

    :param new_pool: ``new_pool(first)`` -> a :class:`~walship.thrift.pool.ServerPool` over the
        peer's servers that connects first to server ``first`` (modulo their number).
    :param servers: how many servers the peer has.
    :param connections: streams at most.
    :param name: the streams' sender threads are named after it (``walship-thrift-1``).
    """

    def __init__(self, new_pool: Callable[[int], ServerPool], *, servers: int, connections: int, name: str) -> None:
        self.new_pool = new_pool
        self.connections = connections
        self.name = name
        #: the open streams: a server pool and the sender of its calls
        self._streams: list[tuple[ServerPool, Sender]] = []
        #: stream i connects first to server (first + i) of the list: the streams spread over the
        #: servers, and the sinks of many processes spread from a random start
        self._first = random.randrange(servers)

    def streams_for(self, cells: int) -> int:
        """How many streams a batch of ``cells`` cells is spread over."""
        return max(1, min(self.connections, cells // CELLS_PER_STREAM))

    @staticmethod
    def stream_of(row: bytes, streams: int) -> int:
        """The stream a row's cells go over (always the same one within a batch)."""
        return hash(row) % streams if streams > 1 else 0

    def pool(self, i: int) -> ServerPool:
        """Stream ``i``'s server pool, opened (with its sender) on first use."""
        while len(self._streams) <= i:
            pool = self.new_pool(self._first + len(self._streams))
            self._streams.append((pool, Sender(pool.send_call, f"{self.name}-{len(self._streams)}")))
        return self._streams[i][0]

    def sender(self, i: int) -> Sender:
        """Stream ``i``'s sender thread."""
        self.pool(i)
        return self._streams[i][1]

    def connected(self) -> list[tuple[str, int] | None]:
        """The server each open stream is connected to (``None``: not connected now)."""
        return [pool.server if pool.connected() else None for pool, _ in self._streams]

    def send_calls(self, stats: ApplyStats, calls: Iterable[StreamCall], streams: int, *, cells: int) -> None:
        """Send each call over its stream: in order within a stream, the
        streams at once; return when every call is done, counting calls and retries in ``stats``.
        A batch of one stream and under :data:`INLINE_CELLS` ``cells`` is sent from this thread,
        each call built once the one before is done.

        :raises SinkError: a call was refused (the error of the failure that came first, of
            whichever stream; the batch is shipped again whole, no later call of that stream
            was sent).
        :raises SinkUnavailableError: no server answered.
        """
        if streams == 1 and cells < INLINE_CELLS:
            # from this thread, each call built once the one before is done (the sender thread
            # is idle: every batch waits for its calls); a call that failed raises, none after
            # it is sent
            pool = self.pool(0)
            for out in calls:
                stats.calls += 1
                pool.send_call(out.call, out.what, stats)
            self._close_streams(1)
            return
        counts = [ApplyStats() for _ in range(streams)]  # each stream's thread counts its own retries
        batches: list[InOrderCalls] = []
        try:
            with ExitStack() as stack:
                batches.extend(stack.enter_context(self.sender(i).batch(counts[i])) for i in range(streams))
                for out in calls:
                    batches[out.stream].send(out.call, out.what)
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

    def _close_streams(self, used: int) -> None:
        """Close the streams a batch did not need: a tail of small batches after a large one
        holds one connection, not the large batch's."""
        for pool, sender in self._streams[used:]:
            sender.close()
            pool.drop()
        del self._streams[used:]

    def close(self) -> None:
        self._close_streams(0)
