"""Sink ``hbase``'s calls (:mod:`walship.sinks.regionservers`): a batch's mutations, the
``Multi`` call of each region they make, and the thread that sends a connection's calls one at
a time, in order, stopping at the first that fails.
"""

from __future__ import annotations

import queue
import threading
from dataclasses import dataclass, field
from typing import Final

from walship.errors import MasterUnavailableError, RemoteHBaseError
from walship.protos import Client_pb2
from walship.rpc.meta import RegionLocation
from walship.rpc.multi import ActionFailure, RegionServerClient, RowMutation, multi_call
from walship.rpc.wire import RpcProtocolError
from walship.sinks.compiled import FASTPATH

__all__ = ["IDS", "MUTATION", "SIZE", "TABLE", "Call", "Outcome", "Pending", "Sender"]

#: A mutation of the batch: its table, the mutation, its ``_cs.id`` and its share of its entry's
#: WAL bytes (a plain tuple: a batch makes one for every row).
Pending = tuple[bytes, RowMutation, bytes, float]
TABLE: Final = 0
MUTATION: Final = 1
IDS: Final = 2
SIZE: Final = 3


@dataclass
class Call:
    """A ``Multi`` call in the making: the region, the ``_cs.id`` its mutations share, the
    mutations and their WAL bytes, and the stream of the region's server it goes by."""

    region: RegionLocation
    cluster_ids: bytes
    items: list[Pending] = field(default_factory=list)
    size: float = 0.0
    stream: int = 0


@dataclass
class Outcome:
    """What a server's sender did: the first call that failed (``None``: all were applied), its
    failures, and the calls after it that were not sent."""

    failed: Call | None = None
    failures: list[ActionFailure] = field(default_factory=list)
    error: str = ""
    unsent: list[Call] = field(default_factory=list)
    calls: int = 0


class Sender:
    """A region server's calls, encoded by the caller's thread (:meth:`put`) and sent one at a
    time by a thread of their own (``inline``: by the caller's, as each is put), which stops at
    the first that fails (the calls after it are kept unsent)."""

    def __init__(self, client: RegionServerClient, outcome: Outcome, *, inline: bool = False) -> None:
        self._client = client
        self._outcome = outcome
        self._queue: queue.Queue[tuple[Call, Client_pb2.MultiRequest | bytes, bytes] | None] = queue.Queue(maxsize=2)
        self._thread: threading.Thread | None = None
        if not inline:
            self._thread = threading.Thread(target=self._run, name=f"sink-hbase-{client.server}", daemon=True)
            self._thread.start()

    def put(self, call: Call) -> None:
        if self._outcome.failed is not None:
            self._outcome.unsent.append(call)
            return
        mutations = [item[MUTATION] for item in call.items]
        if FASTPATH is not None:
            request: Client_pb2.MultiRequest | bytes
            request, block = FASTPATH.multi_call(call.region.name, mutations, call.cluster_ids)
        else:
            request, block = multi_call(call.region.name, mutations, call.cluster_ids)
        if self._thread is None:
            self._send(call, request, block)
        else:
            self._queue.put((call, request, block))

    def finish(self) -> None:
        if self._thread is not None:
            self._queue.put(None)
            self._thread.join()

    def _run(self) -> None:
        while (item := self._queue.get()) is not None:
            self._send(*item)

    def _send(self, call: Call, request: Client_pb2.MultiRequest | bytes, block: bytes) -> None:
        outcome = self._outcome
        if outcome.failed is not None:
            outcome.unsent.append(call)
            return
        try:
            body = self._client.send_raw(request, block)
            # the common answer, every mutation applied, is read without parsing it
            applied = FASTPATH is not None and FASTPATH.multi_applied(body, len(call.items))
            failed = [] if applied else self._client.failures_in(body, len(call.items))
        except (RemoteHBaseError, MasterUnavailableError, RpcProtocolError) as exc:  # an answer that does not parse too
            outcome.failed, outcome.error = call, str(exc)
            return
        outcome.calls += 1
        if failed:
            outcome.failed, outcome.failures = call, failed
