"""A peer's Thrift servers as one: calls go to one of them picked at random, a failed one is
left for another, with exponential backoff between rounds; refusals (the server's own errors),
authentication refusals (:class:`~walship.errors.SaslAuthError`) and a server speaking another
kind of connection than configured (:class:`~walship.thrift.sasl.SecurityMismatchError`) are
not retried. Shared by the Thrift1 and Thrift2 sinks.
"""

from __future__ import annotations

import contextlib
import logging
import random
import time
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from thriftpy2.transport import TTransportException

from walship.errors import SaslAuthError, SinkError, SinkUnavailableError
from walship.thrift.conn import (
    THRIFT_HTTP_KEY,
    THRIFT_PROTOCOL_KEY,
    THRIFT_QOP_KEY,
    THRIFT_SSL_KEY,
    THRIFT_TRANSPORT_KEY,
    TRANSPORT_ERRORS,
    SecurityMismatchError,
    ThriftOptions,
    describe_error,
)
from walship.thrift.encoded import EncodedCall

__all__ = ["RetryCounts", "ServerPool"]

log = logging.getLogger(__name__)


class RetryCounts(Protocol):
    """Where a call counts its retries and its last back-off (a sink's batch statistics)."""

    retries: int
    last_backoff: tuple[float, str] | None


class ServerPool:
    """Calls on one of a peer's Thrift servers, failing over between them.

    :param opener: ``opener(host, port)`` -> an open connection with ``close()``.
    :param refusals: the server's own exceptions: a call raising one is not retried.
    :param service: what the servers are, for messages (``Thrift``, ``Thrift2``).
    :param retries: rounds over all servers before giving up.
    :param first: connect to the server at this index of ``servers`` (modulo their number)
        first, then to the others in a random order; ``None``: all in a random order.
    """

    def __init__(
        self,
        peer_id: str,
        servers: Sequence[tuple[str, int]],
        options: ThriftOptions,
        opener: Callable[[str, int], Any],
        refusals: tuple[type[BaseException], ...],
        *,
        service: str = "Thrift",
        retries: int = 6,
        backoff: float = 0.2,
        first: int | None = None,
    ) -> None:
        self.peer_id = peer_id
        self.first = first
        self.servers = list(servers)
        self.options = options
        self.opener = opener
        self.refusals = refusals
        self.service = service
        self.retries = retries
        self.backoff = backoff
        self._conn: Any = None
        self.server: tuple[str, int] | None = None

    def names(self) -> str:
        return ", ".join(f"{h}:{p}" for h, p in self.servers)

    def connection(self) -> Any:
        """The open connection, opening one on a random answering server if needed.

        :raises SinkUnavailableError: no server answered.
        """
        if self._conn is None:
            choices = list(self.servers)
            random.shuffle(choices)
            if self.first is not None:
                preferred = self.servers[self.first % len(self.servers)]
                choices.remove(preferred)
                choices.insert(0, preferred)
            last: Exception | None = None
            for host, port in choices:
                try:
                    conn = self.opener(host, port)
                except SecurityMismatchError:
                    raise  # not another server's turn: the call fails with it
                except TRANSPORT_ERRORS as exc:
                    last = exc
                    log.warning(
                        "peer %s: %s server %s:%d (%s) unreachable: %s",
                        self.peer_id,
                        self.service,
                        host,
                        port,
                        self.options.describe(),
                        describe_error(exc),
                    )
                    continue
                self._conn, self.server = conn, (host, port)
                break
            if self._conn is None:
                raise SinkUnavailableError(
                    f"peer {self.peer_id}: no {self.service} server answered ({self.names()}, "
                    f"{self.options.describe()}): {describe_error(last)}"
                )
        return self._conn

    def connected(self) -> bool:
        """Whether a connection is open."""
        return self._conn is not None

    def drop(self) -> None:
        if self._conn is not None:
            with contextlib.suppress(Exception):
                self._conn.close()
        self._conn = None

    def send_call(self, call: EncodedCall, what: str, stats: RetryCounts) -> Any:
        """Send the encoded call to an answering server and return its answer, retried on
        another after a transport error, with backoff.

        :param what: what the call does, for a refusal's message (e.g. ``edits to table t``).
        :raises SinkError: the server refused (one of ``refusals``), or speaks another kind of
            connection than configured (SASL, HTTP, plain): not retried.
        :raises SaslAuthError: the server refused walship's principal: not retried.
        :raises SinkUnavailableError: no server answered within the retries.
        """
        delay = self.backoff
        last: Exception | None = None
        for attempt in range(self.retries * max(1, len(self.servers))):
            try:
                return self.connection().client.send_encoded(call)
            except self.refusals as exc:
                raise SinkError(f"peer {self.peer_id} refused {what}: {describe_error(exc)}") from None
            except SaslAuthError as exc:  # not transient: the run fails with it
                self.drop()
                raise SaslAuthError(f"peer {self.peer_id}: {exc}") from None
            except SecurityMismatchError as exc:
                self.drop()
                raise SinkError(f"peer {self.peer_id}: {exc}") from None
            except SinkUnavailableError:
                if attempt + 1 >= self.retries:
                    raise
                stats.retries += 1
            except TRANSPORT_ERRORS as exc:
                last = exc
                log.warning(
                    "peer %s: %s call to %s failed (%s); retrying",
                    self.peer_id,
                    self.service,
                    self.server,
                    describe_error(exc),
                )
                self.drop()
                stats.retries += 1
                stats.last_backoff = (
                    min(delay, 10.0),
                    f"{self.service} call to {self.server} failed: {describe_error(exc)}",
                )
            time.sleep(min(delay, 10.0))
            delay *= 2
        raise SinkUnavailableError(
            f"peer {self.peer_id}: gave up after {self.retries} rounds over {self.service} servers {self.names()} "
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
            f"; the server closed the connection: does it expect TLS ({THRIFT_SSL_KEY}), SASL ({THRIFT_QOP_KEY}), "
            f"HTTP ({THRIFT_HTTP_KEY}) or another transport ({THRIFT_TRANSPORT_KEY}) or protocol "
            f"({THRIFT_PROTOCOL_KEY})?"
            if closed
            else ""
        )
        return f": last error: {describe_error(exc)}{hint}"
