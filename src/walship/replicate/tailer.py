"""Low-latency tailing: follow the current WAL of every queue of a peer and ship new entries
within a second or two.

The tailer takes each queue's ZooKeeper lock and keeps it for its whole run, so the micro-batch
shipper (``walship_replicate``) skips those queues and says so, and a queue is never shipped by
two at once. It polls each held queue every ``idle_sleep`` seconds when nothing is new, looks
for new queues (and claims dead servers' ones) every ``rediscover`` seconds, rides out a peer
outage by backing off and retrying from the committed position (nothing is lost, nothing
skipped), and ends after ``duration`` seconds, releasing its locks so that the next run takes
over.

Each rediscovery re-reads the peer: a peer changed meanwhile (``walship peer set``) gets a new
filter chain and sink, built between two passes, when every batch read has been applied and its
position committed, so positions carry over as they are (nothing lost, nothing shipped twice).

Example::

    summary = Tailer(client, ZnodeLayout("/hbase"), WalStore("/data/hbase"), "1", duration=600).run()
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from kazoo.client import KazooClient, KazooState

from walship import defaults
from walship.errors import SinkUnavailableError, WalshipError, ZkUnavailableError
from walship.replicate.filters import EntryFilter
from walship.replicate.shipper import SUMMED_FIELDS, QueueSummary, Shipper
from walship.replicate.walstore import WalStore
from walship.sinks.base import Sink
from walship.zk import PeerConfig, ZnodeLayout
from walship.zk.client import KAZOO_ERRORS, translate
from walship.zk.locks import Holder, read_holder

__all__ = ["TailSummary", "Tailer"]

log = logging.getLogger(__name__)


@dataclass
class TailSummary:
    peer_id: str
    status: str = "ok"  # ok | disabled | error
    seconds: float = 0.0
    passes: int = 0
    queues: dict[str, dict[str, int]] = field(default_factory=dict)
    skipped_busy: list[str] = field(default_factory=list)
    outages: int = 0
    claimed: list[dict[str, str]] = field(default_factory=list)
    claim_failures: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    max_age_of_last_shipped_op_ms: int | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    def add(self, qs: QueueSummary) -> None:
        key = f"{qs.server}/{qs.queue_id}"
        agg = self.queues.setdefault(key, dict.fromkeys(SUMMED_FIELDS, 0))
        for k in SUMMED_FIELDS:
            agg[k] += int(getattr(qs, k))
        if qs.age_of_last_shipped_op_ms is not None:
            self.max_age_of_last_shipped_op_ms = max(
                self.max_age_of_last_shipped_op_ms or 0, qs.age_of_last_shipped_op_ms
            )


class Tailer:
    """Tails the queues of one peer for ``duration`` seconds (see the module docstring)."""

    def __init__(
        self,
        client: KazooClient,
        layout: ZnodeLayout,
        walstore: WalStore,
        peer_id: str,
        *,
        duration: float = defaults.TAIL_DURATION,
        idle_sleep: float = defaults.TAIL_IDLE_SLEEP,
        rediscover: float = defaults.TAIL_REDISCOVER,
        max_backoff: float = 5.0,
        shipper: Shipper | None = None,
        run_id: str | None = None,
        stop: threading.Event | None = None,
    ) -> None:
        self.client = client
        self.layout = layout
        self.peer_id = peer_id
        self.duration = duration
        self.idle_sleep = idle_sleep
        self.rediscover = rediscover
        self.max_backoff = max_backoff
        self.shipper = shipper or Shipper(client, layout, walstore, holder=Holder.here(f"tail-{peer_id}", run_id))
        self.stop = stop or threading.Event()  # set it to end the run early (a signal, a test)
        self._locks: dict[tuple[str, str], Any] = {}
        self._session_lost = False
        client.add_listener(self._on_state)

    def _on_state(self, state: str) -> None:
        if state == KazooState.LOST:
            self._session_lost = True  # our locks are gone: stop before someone else ships too

    def _take_new_queues(self, summary: TailSummary) -> None:
        for q in self.shipper.planner.peer_queues(self.peer_id):
            key = (q.server, str(q.queue_id))
            if key in self._locks:
                continue
            lock = self.client.Lock(self.layout.queue_lock(*key), identifier=self.shipper.holder.encode())
            if lock.acquire(blocking=False):
                self._locks[key] = lock
                log.info("tailing queue %s/%s", *key)
            else:
                name = f"{key[0]}/{key[1]}"
                if name not in summary.skipped_busy:
                    summary.skipped_busy.append(name)
                    holder = read_holder(self.client, self.layout, *key)
                    who = holder.describe() if holder else "another shipper"
                    log.info("queue %s is being shipped by %s; not tailing it", name, who)

    def _release(self, key: tuple[str, str]) -> None:
        lock = self._locks.pop(key, None)
        if lock is not None:
            with contextlib.suppress(*KAZOO_ERRORS):
                lock.release()

    def _discover(self, summary: TailSummary) -> PeerConfig | None:
        """Re-read the peer, claim dead servers' queues, lock new queues; ``None`` while the
        peer is disabled.

        :raises ZkUnavailableError: ZooKeeper did not answer.
        """
        try:
            peer = self.shipper.peers.get(self.peer_id)
            peer.check_ownership()
            if not peer.enabled:
                return None
            result = self.shipper.planner.failover()
            summary.claimed.extend(result.claimed)
            summary.claim_failures.extend(result.failures)
            self._take_new_queues(summary)
        except KAZOO_ERRORS as exc:
            raise translate(exc, f"tailing peer {self.peer_id}") from exc
        return peer

    def _rebuild(self, old: PeerConfig | None, peer: PeerConfig, sink: Sink | None) -> tuple[EntryFilter, Sink]:
        """The filter chain and sink for ``peer``; the old sink is closed (also on failure).

        Called between passes only, when no batch is in flight: each pass applies and commits
        every batch it reads, so positions carry over as they are.
        """
        try:
            entry_filter = self.shipper.planner.entry_filter(peer)
            new_sink = self.shipper.sink_factory(peer)
        finally:
            if sink is not None:
                with contextlib.suppress(Exception):  # a sink that fails to close loses nothing
                    sink.close()
        if old is not None:
            log.info("peer %s changed: filter and sink rebuilt from its new configuration", self.peer_id)
        return entry_filter, new_sink

    def run(self) -> TailSummary:
        summary = TailSummary(self.peer_id)
        t0 = time.monotonic()
        deadline = t0 + self.duration
        next_discovery = t0
        backoff = self.idle_sleep
        peer: PeerConfig | None = None
        entry_filter: EntryFilter | None = None
        sink: Sink | None = None
        try:
            while time.monotonic() < deadline and not self._session_lost and not self.stop.is_set():
                now = time.monotonic()
                if now >= next_discovery:
                    try:
                        fresh = self._discover(summary)
                    except ZkUnavailableError as exc:
                        # ZooKeeper away: ride it out, as a peer outage, from the committed positions
                        summary.outages += 1
                        log.warning("%s; retrying in %.1f s", exc, backoff)
                        time.sleep(min(backoff, max(0.0, deadline - time.monotonic())))
                        backoff = min(backoff * 2, self.max_backoff)
                        continue
                    if fresh is None:
                        summary.status = "disabled"
                        time.sleep(min(self.rediscover, max(0.0, deadline - time.monotonic())))
                        next_discovery = time.monotonic()
                        continue
                    summary.status = "ok" if not summary.errors else "error"
                    if fresh != peer or entry_filter is None or sink is None:
                        # new, or changed (`peer set`): every batch of the last pass is applied and
                        # its position committed, so the new filter and sink start where it ended
                        try:
                            entry_filter, sink = self._rebuild(peer, fresh, sink)
                        except WalshipError as exc:
                            if peer is None:
                                raise  # at the start, as before: the run fails, naming why
                            summary.errors.append(
                                f"peer {self.peer_id} changed and its new configuration cannot be used: {exc}; "
                                "stopped tailing at the committed positions"
                            )
                            summary.status = "error"
                            sink = None  # _rebuild closed the old one
                            break
                        peer = fresh
                    next_discovery = now + self.rediscover
                assert peer is not None and entry_filter is not None and sink is not None
                summary.passes += 1
                shipped = 0
                outage = False
                for key in list(self._locks):
                    qs = self.shipper.ship_held_queue(peer, key[0], key[1], entry_filter, sink, flush_progress=False)
                    summary.add(qs)
                    shipped += qs.entries_read
                    if qs.status == "moved" or qs.queue_removed:
                        self._release(key)
                    elif qs.status == "error":
                        if isinstance(qs.exception, SinkUnavailableError | ZkUnavailableError):
                            outage = True
                            continue
                        summary.errors.append(qs.error or "")
                        summary.status = "error"
                        self._release(key)  # stop tailing it; the error stands in the summary
                if outage:
                    summary.outages += 1
                    log.warning(
                        "peer %s unreachable; retrying in %.1f s from the committed positions", self.peer_id, backoff
                    )
                    time.sleep(min(backoff, max(0.0, deadline - time.monotonic())))
                    backoff = min(backoff * 2, self.max_backoff)
                    continue
                backoff = self.idle_sleep
                if not shipped:
                    time.sleep(self.idle_sleep)
        finally:
            self.shipper.flush_progress()
            for key in list(self._locks):
                self._release(key)
            if sink is not None:
                sink.close()
            self.client.remove_listener(self._on_state)
        if self._session_lost:
            summary.errors.append("ZooKeeper session lost: stopped tailing (the locks went with it)")
            summary.status = "error"
        summary.seconds = time.monotonic() - t0
        return summary
