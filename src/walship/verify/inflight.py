"""The rows a peer's queues still have to ship: ``(table, row)`` of every entry past each
queue's position (recovered queues too) that the peer's filter chain lets through.

A row that differs only because such an edit has not reached the peer yet is not bad: it is
in flight. Reading the queues is the same work the shipper does before it ships, without the
shipping: the queued WALs are located as ``walship status`` locates them
(:class:`~walship.status.collect.QueueFiles`) and read from their positions.
"""

from __future__ import annotations

import logging

from kazoo.client import KazooClient

from walship.replicate.filters import EntryFilter
from walship.replicate.walstore import WalStore
from walship.status.collect import QueueFiles
from walship.wal.reader import WalReader
from walship.zk import PeerConfig, ReplicationQueues, ZnodeLayout

__all__ = ["normalize_table", "unshipped_rows"]

log = logging.getLogger(__name__)


def normalize_table(name: str | bytes) -> str:
    """A table name as a WAL key names it: ``t`` in the default namespace, else ``ns:t``."""
    text = name.decode(errors="replace") if isinstance(name, bytes) else name
    return text[len("default:") :] if text.startswith("default:") else text


def unshipped_rows(
    client: KazooClient,
    layout: ZnodeLayout,
    walstore: WalStore,
    peer: PeerConfig,
    entry_filter: EntryFilter,
    tables: set[str] | None = None,
) -> set[tuple[str, bytes]]:
    """``(table, row)`` of every unshipped entry the peer would receive (of ``tables`` only,
    when given).

    :raises WalMissingError: a queued WAL is in neither ``WALs/`` nor ``oldWALs/``.
    :raises WalError: a queued WAL does not parse from its position.
    """
    files = QueueFiles(client, layout, walstore)
    keys: set[tuple[str, bytes]] = set()
    entries = 0
    for q in ReplicationQueues(client, layout).list_queues(peer.peer_id):
        for wp in q.wals:
            loc = files.locate(q, wp.name)
            if loc is None or loc.size <= wp.position:
                continue
            with walstore.open(loc) as f:
                reader = WalReader(f, loc.path)
                for entry in reader.entries(wp.position or None):
                    table = normalize_table(entry.key.table)
                    if tables is not None and table not in tables:
                        continue
                    filtered = entry_filter.apply(entry)
                    if filtered is None:
                        continue
                    entries += 1
                    for cell in filtered.cells:
                        keys.add((table, cell.row))
    log.debug("peer %s: %d unshipped entries touch %d rows", peer.peer_id, entries, len(keys))
    return keys
