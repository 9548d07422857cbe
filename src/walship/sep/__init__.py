"""Side-effect processing (SEP): applications subscribe to the stream of edits HBase
replicates, as hbase-indexer's SEP let them.

A subscription is a walship-managed peer (:mod:`walship.sep.subscriptions`) whose sink
(``sep``, :mod:`walship.sinks.sep`) turns each batch into :class:`SepEvent`\\ s, one per row
and WAL entry, and hands them to a listener (:mod:`walship.sep.listeners`), rows hashed over
worker threads (:mod:`walship.sep.dispatch`). Delivery is at least once and in WAL order per
row, with the queues, positions, locks and failover of any peer.
"""

from __future__ import annotations

from walship.sep.config import SepSettings
from walship.sep.dispatch import RowDispatcher
from walship.sep.events import SepCell, SepEvent, events_of
from walship.sep.listeners import LISTENER_GROUP, Listener, load_filter, load_listener
from walship.sep.subscriptions import Subscriptions, describe, subscription_cluster_key

__all__ = [
    "LISTENER_GROUP",
    "Listener",
    "RowDispatcher",
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
