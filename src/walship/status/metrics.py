"""The status model in Prometheus text format (prometheus-client), computed on each scrape.

Per queue (labels ``peer``, ``server``, ``queue``): ``walship_queue_bytes``,
``walship_queue_wals``, ``walship_queue_lag_seconds``,
``walship_age_of_last_shipped_op_seconds``, and the counters ``walship_shipped_cells_total`` and
``walship_shipped_bytes_total`` (the WAL bytes of what the peer was sent, estimated) from
walship's progress records. Per peer (label ``peer``): ``walship_peer_enabled``,
``walship_peer_bandwidth_bytes`` (its limit in bytes per second, 0 = unlimited),
``walship_age_of_last_applied_op_seconds`` (HBase's sink ageOfLastAppliedOp: when the last
batch was applied to the peer minus the write time of its last edit, fixed until the next
batch; NaN before any) and the counter ``walship_throttled_seconds_total`` (the time its
batches waited for that limit, over its queues' progress records). ``walship_status_up`` is 0
when the status could not be read (the error is logged), so a scrape never fails with a
traceback.

Example::

    registry = status_registry(lambda: collect_status(client, layout, walstore))
    server, port = serve(registry, "0.0.0.0", 9464)
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from walship.errors import WalshipError
from walship.status.model import ReplicationStatus

__all__ = ["StatusCollector", "serve", "status_registry"]

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
    for peer in status.peers:
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
