"""Low-latency tailing: follow the current WAL of every queue of a peer (or of several peers,
reading each WAL once for all of them) and ship new entries within a second or two.

The tailer takes each queue's ZooKeeper lock and keeps it for its whole run, so the micro-batch
shipper (``walship_replicate``) skips those queues and says so, and a queue is never shipped by
two at once. It looks for new queues (and claims dead servers' ones) every ``rediscover``
seconds, rides out a peer outage (or a subscription's listener that refuses a batch) by backing
off and retrying from the committed position (nothing is lost, nothing skipped), and ends after
``duration`` seconds, releasing its locks so that the next run takes over.

When a pass found nothing new it waits for the next one at most ``idle_sleep`` seconds, and
less as soon as a WAL grows: meanwhile it lists the WAL folders of the servers whose queues it
holds every ``probe_interval`` seconds (a listing each, no ZooKeeper read) and starts the next
pass once a file there grew or appeared since the last pass began. So a write waits for a
listing, not for the idle sleep, and the idle sleep is only the net for what a listing does not
show (a rolled WAL's grace running out): probed, it is a second by default, so an idle tailer
passes once a second, not ten times (a pass that left a serial peer waiting for another
queue's progress is followed by the short sleep, as without the probe). WALs on a local disk
are probed by default; on HDFS a listing shows a WAL being written only as its blocks
complete, so there the tailer waits ``idle_sleep`` (0.1 s by default), as it always did (unless
given a ``probe_interval``), and spares the NameNode the listings.

Each rediscovery re-reads the peer: a peer changed meanwhile (``walship peer set``) gets a new
filter chain and sink, built between two passes, when every batch read has been applied and its
position committed, so positions carry over as they are (nothing lost, nothing shipped twice).

Example::

    summary = Tailer(client, ZnodeLayout("/hbase"), WalStore("/data/hbase"), "1", duration=600).run()
"""

from __future__ import annotations

import contextlib
import logging
import math
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from fsspec.implementations.local import LocalFileSystem
from kazoo.client import KazooClient, KazooState

from walship import defaults
from walship.errors import (
    BarrierUnavailableError,
    ConfigError,
    SinkUnavailableError,
    SubscriberError,
    WalshipError,
    ZkUnavailableError,
)
from walship.peer import PeerConfig
from walship.replicate.batcher.filters import EntryFilter
from walship.replicate.batcher.member import Feed, KnownPositions, group_key
from walship.replicate.peerplan import split_peer_ids
from walship.replicate.shipper import Shipper
from walship.replicate.summary import TailSummary
from walship.replicate.walprobe import PROBE_INTERVAL, Listing, WalProbe
from walship.replicate.walstore import WalStore
from walship.sinks.base import Sink
from walship.zk import QueueId, ZnodeLayout
from walship.zk.locks import Holder, read_holder, release_lock, try_lock

__all__ = ["PROBE_INTERVAL", "TailSummary", "Tailer"]

log = logging.getLogger(__name__)

#: Queue errors a tailer rides out (backing off, keeping the queue): the peer or ZooKeeper
#: away, a subscriber that did not take a batch yet, or (serial peers) the source's Thrift2
#: server, which the barriers are read from.
_RETRIED = (SinkUnavailableError, ZkUnavailableError, SubscriberError, BarrierUnavailableError)


@dataclass
class _Tailed:
    """A tailed peer: its configuration as last read, and the filter chain and sink built from it."""

    peer: PeerConfig
    entry_filter: EntryFilter
    sink: Sink


class Tailer:
    """Tails the queues of one peer, or of several (``peer_id`` a list or ``1,2,subs``: queues
    over the same WALs share one read of each WAL), for ``duration`` seconds (see the module
    docstring). With no peer (``""``) it tails every peer walship ships (enabled, managed,
    subscriptions among them), re-read at each rediscovery: a peer added meanwhile is picked
    up, one removed or disabled is let go."""

    def __init__(
        self,
        client: KazooClient,
        layout: ZnodeLayout,
        walstore: WalStore,
        peer_id: str | Sequence[str],
        *,
        duration: float = defaults.TAIL_DURATION,
        idle_sleep: float | None = None,
        rediscover: float = defaults.TAIL_REDISCOVER,
        probe_interval: float | None = None,
        max_backoff: float = 5.0,
        shipper: Shipper | None = None,
        run_id: str | None = None,
        stop: threading.Event | None = None,
        source_thrift2: str | None = None,
        gather: float = defaults.TAIL_GATHER,
    ) -> None:
        ids = split_peer_ids(peer_id) if isinstance(peer_id, str) else list(dict.fromkeys(peer_id))
        if not all(ids):
            raise ConfigError(f"tail: expected peer ids, got {peer_id!r}")
        self.client = client
        self.layout = layout
        self.every = not ids  # every peer walship ships, as they come and go
        self.peer_ids = ids
        self.peer_id = ",".join(ids)
        if not (math.isfinite(duration) and duration > 0):
            raise ConfigError(f"tail: the duration must be a finite number of seconds > 0, got {duration!r}")
        for name, value in (("idle sleep", idle_sleep), ("rediscover", rediscover), ("gather", gather)):
            if value is not None and not (math.isfinite(value) and value >= 0):
                raise ConfigError(f"tail: the {name} must be a finite number of seconds >= 0, got {value!r}")
        self.duration = duration
        self.rediscover = rediscover
        self.gather = gather
        if probe_interval is not None and probe_interval < 0:
            raise ConfigError(f"tail: the probe interval must be >= 0 seconds, got {probe_interval}")
        self.max_backoff = max_backoff
        self._owns_shipper = shipper is None
        self.shipper = shipper or Shipper(
            client,
            layout,
            walstore,
            holder=Holder.here(f"tail-{self.peer_id or 'every-peer'}", run_id),
            source_thrift2=source_thrift2,
        )
        if probe_interval is None:
            local = isinstance(self.shipper.walstore.fs, LocalFileSystem)
            probe_interval = PROBE_INTERVAL if local else 0.0
        self.probe_interval = probe_interval  # 0: no probe, wait idle_sleep after an idle pass
        self.probe = WalProbe(self.shipper.walstore, probe_interval)
        if idle_sleep is None:
            idle_sleep = defaults.TAIL_PROBED_IDLE_SLEEP if probe_interval else defaults.TAIL_IDLE_SLEEP
        self.idle_sleep = idle_sleep
        #: the first wait after a peer or ZooKeeper outage (doubling up to ``max_backoff``)
        self.first_backoff = min(idle_sleep, defaults.TAIL_IDLE_SLEEP)
        self.stop = stop or threading.Event()  # set it to end the run early (a signal, a test)
        self.idle = threading.Event()  # set while it waits after a pass that found nothing new
        self._locks: dict[tuple[str, str], Any] = {}
        self._known: KnownPositions = {}  # the held queues' positions, as this tailer wrote them
        self._tailed: dict[str, _Tailed] = {}
        self._session_lost = False
        client.add_listener(self._on_state)

    def _on_state(self, state: str) -> None:
        if state == KazooState.LOST:
            self._session_lost = True  # our locks are gone: stop before someone else ships too

    def _take_new_queues(self, summary: TailSummary) -> None:
        listed = self.shipper.planner.queues_of(self.peer_ids)
        for q in (q for queues in listed.values() for q in queues):
            key = (q.server, str(q.queue_id))
            if key in self._locks:
                continue
            lock = try_lock(self.client, self.layout, *key, self.shipper.holder)
            if lock is not None:
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
        self._known.pop(key, None)
        if lock is not None:
            release_lock(lock)

    def _discover(self, summary: TailSummary) -> dict[str, PeerConfig]:
        """Re-read the peers, claim dead servers' queues, lock new queues; the enabled peers
        (none while every peer is disabled).

        :raises ZkUnavailableError: ZooKeeper did not answer.
        """
        plan = self.shipper.planner.plan(self._current_peer_ids(), list_queues=False, missing_ok=self.every)
        if plan.failover is not None:
            summary.claimed.extend(plan.failover.claimed)
            summary.claim_failures.extend(plan.failover.failures)
            self._take_new_queues(summary)
        return {peer.peer_id: peer for peer in plan.enabled}

    def _current_peer_ids(self) -> list[str]:
        """The peers to tail now: those named, or (tailing every peer) those walship ships
        now; the queues and sink of a peer that left are let go."""
        if not self.every:
            return self.peer_ids
        ids = self.shipper.planner.shipped_peer_ids()
        gone = set(self.peer_ids) - set(ids)
        for key in [k for k in self._locks if QueueId.parse(k[1]).peer_id in gone]:
            self._release(key)
        for peer_id in sorted(gone):
            tailed = self._tailed.pop(peer_id, None)
            if tailed is not None:
                with contextlib.suppress(Exception):
                    tailed.sink.close()
            log.info("peer %s is no longer shipped by walship (removed or disabled): not tailing it", peer_id)
        for peer_id in sorted(set(ids) - set(self.peer_ids)):
            log.info("peer %s: tailing it from now on", peer_id)
        self.peer_ids = ids
        return ids

    def _rebuild(self, peer: PeerConfig) -> None:
        """The filter chain and sink for ``peer``, new or changed; the old sink is closed (also
        on failure, when the peer is no longer tailed).

        Called between passes only, when no batch is in flight: each pass applies and commits
        every batch it reads, so positions carry over as they are.
        """
        old = self._tailed.pop(peer.peer_id, None)
        try:
            entry_filter = self.shipper.planner.entry_filter(peer)
            sink = self.shipper.open_sink(peer)
        finally:
            if old is not None:
                with contextlib.suppress(Exception):  # a sink that fails to close loses nothing
                    old.sink.close()
        if old is not None:
            log.info("peer %s changed: filter and sink rebuilt from its new configuration", peer.peer_id)
        self._tailed[peer.peer_id] = _Tailed(peer, entry_filter, sink)

    def _refresh(self, enabled: dict[str, PeerConfig], summary: TailSummary, first: bool) -> bool:
        """Rebuild what changed; ``False`` when a changed peer cannot be used (the run stops)."""
        for peer_id, peer in enabled.items():
            tailed = self._tailed.get(peer_id)
            if tailed is not None and tailed.peer == peer:
                continue
            try:
                self._rebuild(peer)
            except WalshipError as exc:
                if first and tailed is None:
                    raise  # at the start, as before: the run fails, naming why
                summary.errors.append(
                    f"peer {peer_id} changed and its new configuration cannot be used: {exc}; "
                    "stopped tailing at the committed positions"
                )
                summary.status = "error"
                return False
        return True

    def _pass(self, enabled: dict[str, PeerConfig], summary: TailSummary) -> tuple[int, bool, bool]:
        """Ship every held queue of an enabled peer once: (entries read, whether to back off,
        whether a serial peer's queue waits for another's progress)."""
        groups: dict[tuple[str, tuple[str, ...]], list[Feed]] = {}
        for server, qid in self._locks:
            tailed = self._tailed.get(QueueId.parse(qid).peer_id)
            if tailed is None or tailed.peer.peer_id not in enabled:
                continue
            feed = Feed(tailed.peer, server, qid, tailed.entry_filter, tailed.sink)
            groups.setdefault(group_key(server, qid), []).append(feed)
        shipped = 0
        retry = waiting = False
        for key in sorted(groups):
            for qs in self.shipper.ship_held_group(groups[key], flush_progress=False, known=self._known):
                summary.add(qs)
                shipped += qs.entries_read
                waiting = waiting or qs.status == "waiting-serial"
                lock_key = (qs.server, qs.queue_id)
                if qs.status == "moved" or qs.queue_removed:
                    self._release(lock_key)
                elif qs.status == "error":
                    if isinstance(qs.exception, _RETRIED):
                        retry = True
                        continue
                    summary.errors.append(qs.error or "")
                    summary.status = "error"
                    self._release(lock_key)  # stop tailing it; the error stands in the summary
        return shipped, retry, waiting

    def _sleep(self, seconds: float, deadline: float) -> None:
        self.stop.wait(min(seconds, max(0.0, deadline - time.monotonic())))

    def _servers(self) -> list[str]:
        """The servers whose WAL folders the probe lists: those of the held queues (for a
        recovered queue, its claimer's: the dead server's WALs grow no more)."""
        return [server for server, _ in self._locks]

    def _idle(self, before: Listing | None, deadline: float, sleep: float) -> None:
        """After a pass that found nothing new: wait at most ``sleep`` seconds, less when a WAL
        grew or appeared since ``before`` (the listing taken as that pass began, so a write
        made during the pass ends the wait at once)."""
        self.idle.set()
        try:
            end = min(time.monotonic() + sleep, deadline)
            self.probe.wait_for_change(before, self._servers, end, self.stop)
        finally:
            self.idle.clear()

    def run(self) -> TailSummary:
        summary = TailSummary(self.peer_id)
        t0 = time.monotonic()
        deadline = t0 + self.duration
        next_discovery = t0
        backoff = self.first_backoff
        enabled: dict[str, PeerConfig] = {}
        first = True
        try:
            while time.monotonic() < deadline and not self._session_lost and not self.stop.is_set():
                now = time.monotonic()
                if now >= next_discovery:
                    try:
                        enabled = self._discover(summary)
                    except ZkUnavailableError as exc:
                        # ZooKeeper away: ride it out, as a peer outage, from the committed positions
                        summary.outages += 1
                        log.warning("%s; retrying in %.1f s", exc, backoff)
                        self._sleep(backoff, deadline)
                        backoff = min(backoff * 2, self.max_backoff)
                        continue
                    if not enabled:
                        summary.status = "disabled"
                        self._sleep(self.rediscover, deadline)
                        next_discovery = time.monotonic()
                        continue
                    summary.status = "ok" if not summary.errors else "error"
                    # new, or changed (`peer set`): every batch of the last pass is applied and its
                    # position committed, so a new filter and sink start where it ended
                    if not self._refresh(enabled, summary, first):
                        break
                    first = False
                    next_discovery = now + self.rediscover
                summary.passes += 1
                listing = self.probe.listing(self._servers()) if self.idle_sleep > 0 else None
                shipped, retry, waiting = self._pass(enabled, summary)
                if retry:
                    summary.outages += 1
                    log.warning(
                        "peer %s unreachable or refusing; retrying in %.1f s from the committed positions",
                        self.peer_id,
                        backoff,
                    )
                    self._sleep(backoff, deadline)
                    backoff = min(backoff * 2, self.max_backoff)
                    continue
                backoff = self.first_backoff
                if not shipped:
                    # the short sleep while a serial peer waits, or while probing fails (no change seen)
                    short = waiting or (self.probe_interval and listing is None)
                    sleep = min(self.idle_sleep, self.first_backoff) if short else self.idle_sleep
                    self._idle(listing, min(deadline, next_discovery), sleep)  # rediscovery on time
                elif shipped < defaults.TAIL_GATHER_ENTRIES and self.gather:
                    self._sleep(self.gather, deadline)  # let a fuller pass gather
        finally:
            if self.every:
                summary.peer_id = ",".join(self.peer_ids)
            self.shipper.flush_progress()
            for key in list(self._locks):
                self._release(key)
            for tailed in self._tailed.values():
                with contextlib.suppress(Exception):
                    tailed.sink.close()
            self._tailed.clear()
            if self._owns_shipper:
                self.shipper.close()
            self.client.remove_listener(self._on_state)
        if self._session_lost:
            summary.errors.append("ZooKeeper session lost: stopped tailing (the locks went with it)")
            summary.status = "error"
        summary.seconds = time.monotonic() - t0
        summary.wal_reads = self.shipper.read_stats.to_json()
        return summary
