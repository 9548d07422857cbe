"""Shipping edits to peers: plan -> read -> filter -> batch -> apply -> commit."""

from __future__ import annotations

from walship.replicate.filters import EntryFilter, FilteredEntry
from walship.replicate.shipper import PeerSummary, QueueSummary, Shipper
from walship.replicate.walstore import WalStore

__all__ = ["EntryFilter", "FilteredEntry", "PeerSummary", "QueueSummary", "Shipper", "WalStore"]
