"""The status of replication: one model (:mod:`walship.status.model`), computed from
ZooKeeper and file sizes (:mod:`walship.status.collect`), with an exact drained check
(:mod:`walship.status.drain`), the stuck queues (:mod:`walship.status.stuck`) and a
Prometheus view with its alert rules (:mod:`walship.status.metrics`)."""

from walship.status.collect import collect_status, read_status
from walship.status.drain import Cut, DrainResult, behind, take_cut, wait_drained
from walship.status.model import QUEUE_STATES, PeerStatus, QueueStatus, ReplicationStatus, SinkStatus, format_hbase
from walship.status.stuck import StuckQueue, stuck_queues

__all__ = [
    "QUEUE_STATES",
    "Cut",
    "DrainResult",
    "PeerStatus",
    "QueueStatus",
    "ReplicationStatus",
    "SinkStatus",
    "StuckQueue",
    "behind",
    "collect_status",
    "format_hbase",
    "read_status",
    "stuck_queues",
    "take_cut",
    "wait_drained",
]
