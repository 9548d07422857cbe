"""Side-effect processing (SEP): applications subscribe to the stream of edits HBase
replicates, as hbase-indexer's SEP let them.

A subscription is a walship-managed peer (:mod:`walship.sep.subscriptions`) whose sink turns
each batch into :class:`SepEvent`\\ s, one per row and WAL entry, from its start time and
through its filter hook (:mod:`walship.sep.selection`), and either hands them to a listener
(sink ``sep``, :mod:`walship.sinks.sep`; :mod:`walship.sep.listeners`), rows hashed over
worker threads (:mod:`walship.sep.dispatch`), or writes them as rows of a Parquet change log
(sink ``changelog``, :mod:`walship.sinks.parquet`; :mod:`walship.sep.parquetlog`, compacted
by :mod:`walship.sep.compaction`, which import pyarrow and so are not imported here).
Delivery is at least once and in WAL order per row, with the queues, positions, locks and
failover of any peer.
"""

from __future__ import annotations

from walship.sep.config import SepSettings
from walship.sep.dispatch import RowDispatcher
from walship.sep.events import SepCell, SepEvent, events_of
from walship.sep.listeners import LISTENER_GROUP, Listener, load_filter, load_listener
from walship.sep.selection import EventSelector, KeptEntry, Selection
from walship.sep.subscriptions import Subscriptions, describe, subscription_cluster_key

__all__ = [
    "LISTENER_GROUP",
    "EventSelector",
    "KeptEntry",
    "Listener",
    "RowDispatcher",
    "Selection",
    "SepCell",
    "SepEvent",
    "SepSettings",
    "Subscriptions",
    "describe",
    "events_of",
    "load_filter",
    "load_listener",
    "subscription_cluster_key",
]
