"""The status model in Prometheus text format (prometheus-client), computed on each scrape,
and the Prometheus alert rules that go with it (:func:`alert_rules`, ``walship metrics rules``).

Per queue (labels ``peer``, ``server``, ``queue``): ``walship_queue_bytes``,
``walship_queue_wals``, ``walship_queue_lag_seconds``,
``walship_age_of_last_shipped_op_seconds``, ``walship_queue_waiting_serial``,
``walship_queue_stalled_seconds`` (seconds since the queue last made progress while it has a
backlog, 0 without one; :mod:`walship.status.collect`), ``walship_queue_stuck`` (1 when that
reached the threshold, ``--stuck-after``, and its peer is enabled),
``walship_last_ship_timestamp_seconds`` (when a batch of the queue was last applied and its
position committed, Unix time; NaN before any), and the counters
``walship_shipped_cells_total``, ``walship_shipped_bytes_total`` (the WAL bytes of what the
peer was sent, estimated) and ``walship_bulk_loads_total`` (bulk loads seen in the queue's
WALs, whose HFiles walship does not ship) from walship's progress records.

Per peer (label ``peer``): ``walship_peer_enabled``, ``walship_peer_bandwidth_bytes`` (its
limit in bytes per second, 0 = unlimited), ``walship_age_of_last_applied_op_seconds``
(HBase's sink ageOfLastAppliedOp: when the last batch was applied to the peer minus the write
time of its last edit, fixed until the next batch; NaN before any), the counter
``walship_throttled_seconds_total`` (the time its batches waited for that limit, over its
queues' progress records), ``walship_stuck_queues`` (how many of its queues are stuck),
``walship_dead_letters_pending`` (dead letters not replayed yet, as ``walship deadletter
list`` counts them; NaN when its dead-letter directory cannot be read),
``walship_bulk_loads_not_shipped`` (bulk loads seen in its queues' WALs whose HFiles walship
did not ship, ``walship verify --repair`` copies their rows; a gauge: a removed queue's count
goes with it) and ``walship_peer_last_ship_timestamp_seconds`` (the newest of its queues'
``walship_last_ship_timestamp_seconds``). The counter ``walship_ship_errors_total`` (labels
``peer``, ``kind``) counts its queues' failed shipping passes by kind, one series for each of
:data:`walship.errors.ERROR_KINDS` (0 until one happens, so an increase shows from the first).

``walship_status_up`` is 0 when the status could not be read (the error is logged), so a
scrape never fails with a traceback.

Example::

    registry = status_registry(lambda: collect_status(client, layout, walstore))
    server, port = serve(registry, "0.0.0.0", 9464)
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from importlib import resources
from typing import Any

from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from walship.errors import ERROR_KINDS, WalshipError
from walship.status.model import ReplicationStatus

__all__ = ["ALERT_RULES", "StatusCollector", "alert_rules", "serve", "status_registry"]

#: The alert rules file shipped in this package (``walship metrics rules`` prints it).
ALERT_RULES = "alerts.yml"

log = logging.getLogger(__name__)

_QUEUE_LABELS = ["peer", "server", "queue"]


class StatusCollector(Collector):
    """Reads the status once per scrape (scrapes at the same time wait for one another)."""

    def __init__(self, read: Callable[[], ReplicationStatus], errors: tuple[type[BaseException], ...] = ()) -> None:
        self._read = read
        self._errors: tuple[type[BaseException], ...] = (WalshipError, *errors)
        self._lock = threading.Lock()

    def collect(self) -> Iterator[Metric]:
        started = time.monotonic()
        up = GaugeMetricFamily("walship_status_up", "1 when the replication status was read, else 0")
        with self._lock:
            try:
                status = self._read()
            except self._errors as exc:
                log.error("reading the replication status for a scrape failed: %s", exc)
                up.add_metric([], 0)
                yield up
                return
        up.add_metric([], 1)
        yield up
        yield from _families(status)
        took = GaugeMetricFamily("walship_status_read_seconds", "seconds the last scrape took to read the status")
        took.add_metric([], time.monotonic() - started)
        yield took


def _families(status: ReplicationStatus) -> Iterator[Metric]:
    gauges: dict[str, tuple[str, Callable[[Any], float]]] = {
        "walship_queue_bytes": ("bytes of the queue's WALs not shipped yet", lambda q: q.bytes_queued),
        "walship_queue_wals": ("WALs in the queue", lambda q: q.wals),
        "walship_queue_lag_seconds": ("now minus the write time of the oldest unshipped entry", lambda q: q.lag_s),
        "walship_age_of_last_shipped_op_seconds": (
            "age of the last shipped entry while the queue has unshipped entries (0 when drained)",
            lambda q: q.age_of_last_shipped_op_s if q.age_of_last_shipped_op_s is not None else float("nan"),
        ),
        "walship_queue_waiting_serial": (
            "1 while a serial peer's queue waits for another queue to ship a region's earlier edits",
            lambda q: 1 if q.state == "waiting-serial" else 0,
        ),
        "walship_queue_stalled_seconds": (
            "seconds since the queue last made progress while it has a backlog (0 without one)",
            lambda q: q.stalled_s or 0.0,
        ),
        "walship_queue_stuck": (
            "1 when the queue's backlog made no progress for the stuck threshold and its peer is enabled",
            lambda q: 1 if q.stuck else 0,
        ),
        "walship_last_ship_timestamp_seconds": (
            "when a batch of the queue was last applied and its position committed, Unix time (NaN before any)",
            lambda q: _seconds(q.last_shipped_at),
        ),
    }
    families: list[GaugeMetricFamily | CounterMetricFamily] = [
        GaugeMetricFamily(name, doc, labels=_QUEUE_LABELS) for name, (doc, _) in gauges.items()
    ]
    cells = CounterMetricFamily("walship_shipped_cells", "cells shipped from the queue", labels=_QUEUE_LABELS)
    shipped_bytes = CounterMetricFamily(
        "walship_shipped_bytes",
        "WAL bytes shipped from the queue: each shipped entry's bytes in the share of its cells the peer takes",
        labels=_QUEUE_LABELS,
    )
    bulk_loads = CounterMetricFamily(
        "walship_bulk_loads",
        "bulk loads of what the peer takes seen in the queue: their HFiles bypassed the WAL and were not "
        "shipped (walship verify --repair copies their rows)",
        labels=_QUEUE_LABELS,
    )
    enabled = GaugeMetricFamily(
        "walship_peer_enabled", "1 when walship ships the peer, 0 when disabled", labels=["peer"]
    )
    bandwidth = GaugeMetricFamily(
        "walship_peer_bandwidth_bytes", "the peer's bandwidth limit in bytes per second (0: unlimited)", labels=["peer"]
    )
    throttled = CounterMetricFamily(
        "walship_throttled_seconds",
        "seconds the peer's batches waited for its bandwidth limit (over its queues)",
        labels=["peer"],
    )
    applied_age = GaugeMetricFamily(
        "walship_age_of_last_applied_op_seconds",
        "when the last batch was applied to the peer minus the write time of its last edit (NaN before any)",
        labels=["peer"],
    )
    stuck = GaugeMetricFamily("walship_stuck_queues", "queues of the peer that are stuck", labels=["peer"])
    dead_letters = GaugeMetricFamily(
        "walship_dead_letters_pending",
        "dead letters of the peer not replayed yet (NaN: its dead-letter directory could not be read)",
        labels=["peer"],
    )
    bulk_not_shipped = GaugeMetricFamily(
        "walship_bulk_loads_not_shipped",
        "bulk loads seen in the peer's queues whose HFiles walship did not ship (walship verify --repair "
        "copies their rows); a removed queue's count goes with it",
        labels=["peer"],
    )
    peer_last_ship = GaugeMetricFamily(
        "walship_peer_last_ship_timestamp_seconds",
        "when a batch of any of the peer's queues was last applied and its position committed, Unix time "
        "(NaN before any)",
        labels=["peer"],
    )
    errors = CounterMetricFamily(
        "walship_ship_errors",
        "failed shipping passes over the peer's queues, by kind of error",
        labels=["peer", "kind"],
    )
    for peer in status.peers:
        stuck.add_metric([peer.peer_id], peer.stuck_queues)
        pending = peer.dead_letters_pending
        dead_letters.add_metric([peer.peer_id], float("nan") if pending is None else pending)
        bulk_not_shipped.add_metric([peer.peer_id], peer.bulk_loads)
        peer_last_ship.add_metric([peer.peer_id], _seconds(peer.last_shipped_at))
        for kind in ERROR_KINDS:
            errors.add_metric([peer.peer_id, kind], peer.errors.get(kind, 0))
        enabled.add_metric([peer.peer_id], 1 if peer.enabled else 0)
        age_ms = peer.sink.age_of_last_applied_op_ms
        applied_age.add_metric([peer.peer_id], float("nan") if age_ms is None else age_ms / 1000)
        bandwidth.add_metric([peer.peer_id], peer.bandwidth)
        throttled.add_metric([peer.peer_id], peer.throttled_s)
        for q in peer.queues:
            labels = [peer.peer_id, q.server, q.queue_id]
            for family, (_, value) in zip(families, gauges.values(), strict=True):
                family.add_metric(labels, value(q))
            cells.add_metric(labels, q.cells_shipped)
            shipped_bytes.add_metric(labels, q.bytes_shipped)
            bulk_loads.add_metric(labels, q.bulk_loads)
    yield from families
    yield cells
    yield shipped_bytes
    yield bulk_loads
    yield enabled
    yield bandwidth
    yield throttled
    yield applied_age
    yield stuck
    yield dead_letters
    yield bulk_not_shipped
    yield peer_last_ship
    yield errors


def _seconds(ms: int | None) -> float:
    """Epoch ms as Unix seconds (NaN for none)."""
    return float("nan") if ms is None else ms / 1000


def alert_rules() -> str:
    """The Prometheus alert rules for these metrics (a rules file, YAML), as shipped in the package."""
    return resources.files("walship.status").joinpath(ALERT_RULES).read_text(encoding="utf-8")


def status_registry(
    read: Callable[[], ReplicationStatus], errors: tuple[type[BaseException], ...] = ()
) -> CollectorRegistry:
    """A registry holding only walship's metrics, read by ``read`` on each scrape.

    :param errors: more exception types ``read`` may raise that mean "status unavailable".
    """
    registry = CollectorRegistry(auto_describe=False)
    registry.register(StatusCollector(read, errors))
    return registry


def serve(registry: CollectorRegistry, host: str, port: int) -> tuple[Any, int]:
    """Serve ``/metrics`` on ``host:port`` in a background thread; returns the server and
    the port it listens on (``port`` 0 picks a free one)."""
    server, _ = start_http_server(port, host, registry=registry)
    return server, int(server.server_port)
