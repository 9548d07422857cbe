"""A batch's calls sent in order from one background thread, while the sink builds the next.

A Thrift sink spends its time in two ways: building the call's Thrift objects (CPU, in Python)
and waiting for the peer to apply it (the socket, no GIL held). :class:`InOrderCalls` overlaps
the two: :meth:`InOrderCalls.send` hands a call to the pool's sender thread and returns at
once, so the caller builds the next call while this one is at the server. The calls still
reach the peer one at a time and in the order sent, over the one connection, so the peer sees
exactly what a synchronous loop would send.

* At most ``ahead`` calls wait behind the one at the server (memory stays bounded).
* After a call failed, no later call of the batch is sent; the next :meth:`send` (or the end of
  the ``with`` block) raises that call's error, so a batch is applied whole or shipped again.
* Leaving the ``with`` block waits for every call sent: a sink returns only when its calls are
  done (or raises), never with a call still running on its connection.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from types import TracebackType
from typing import Any, Self

from walship.sinks.base import ApplyStats
from walship.thrift.encoded import EncodedCall

__all__ = ["AHEAD", "InOrderCalls", "Sender"]

log = logging.getLogger(__name__)

#: Calls built and waiting behind the one at the server.
AHEAD = 2


class Sender:
    """The one thread that sends a sink's calls (started on first use, stopped by :meth:`close`).

    :param send_call: ``send_call(call, what, stats)`` sends one encoded call, retrying as the
        sink does (a :meth:`~walship.thrift.pool.ServerPool.send_call`).
    """

    def __init__(self, send_call: Callable[[EncodedCall, str, ApplyStats], Any], name: str) -> None:
        self.send_call = send_call
        self.name = name
        self._executor: ThreadPoolExecutor | None = None

    def executor(self) -> ThreadPoolExecutor:
        if self._executor is None:
            self._executor = ThreadPoolExecutor(1, thread_name_prefix=self.name)
        return self._executor

    def batch(self, stats: ApplyStats, ahead: int = AHEAD) -> InOrderCalls:
        """The calls of one batch, counted in ``stats``."""
        return InOrderCalls(self, stats, ahead)

    def close(self) -> None:
        if self._executor is not None:
            self._executor.shutdown(wait=True)
            self._executor = None


class InOrderCalls:
    """One batch's calls, sent in order by a :class:`Sender` (use as a context manager)."""

    def __init__(self, sender: Sender, stats: ApplyStats, ahead: int) -> None:
        self.sender = sender
        self.stats = stats
        self.ahead = max(0, ahead)
        self._pending: deque[Future[None]] = deque()
        self._failed = False
        #: when the first of its calls failed (monotonic seconds), and how
        self.failure: tuple[float, BaseException] | None = None

    def _run(self, call: EncodedCall, what: str) -> None:
        if self._failed:
            return  # a call before failed: nothing after it may reach the peer
        try:
            self.sender.send_call(call, what, self.stats)
        except BaseException as exc:
            self._failed = True
            self.failure = (time.monotonic(), exc)
            raise

    def _reap(self, keep: int) -> None:
        """Wait until at most ``keep`` calls are pending; raise the first failed call's error."""
        while len(self._pending) > keep or (self._pending and self._pending[0].done()):
            self._pending.popleft().result()

    def send(self, call: EncodedCall, what: str) -> None:
        """Send the encoded call after the calls before it; return once it is queued.

        :raises SinkError: an earlier call of the batch failed (its error).
        """
        self._reap(self.ahead)
        self._pending.append(self.sender.executor().submit(self._run, call, what))
        self.stats.calls += 1

    def wait(self) -> None:
        """Wait for every call sent.

        :raises SinkError: a call failed (the first failure's error).
        """
        self._reap(0)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        if kind is None:
            self.wait()
            return
        # the caller failed while building: send nothing more, and let what is at the server end
        self._failed = True
        for future in self._pending:
            future.cancel()
        for future in self._pending:
            if not future.cancelled():
                try:
                    future.result()
                except BaseException as err:  # the caller's own error is the one that propagates
                    log.debug("a call of the failed batch also failed: %s", err)
        self._pending.clear()
