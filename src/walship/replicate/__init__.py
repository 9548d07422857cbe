"""Shipping edits to peers: plan -> read -> filter -> batch -> apply -> commit."""

from __future__ import annotations

from walship.replicate.batcher.filters import EntryFilter
from walship.replicate.planner import Planner
from walship.replicate.shipper import PeerSummary, QueueSummary, Shipper
from walship.replicate.walstore import WalStore
from walship.sinks.base import FilteredEntry

__all__ = ["EntryFilter", "FilteredEntry", "PeerSummary", "Planner", "QueueSummary", "Shipper", "WalStore"]
