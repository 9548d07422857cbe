"""What a peer's queues still have to ship: per ``(table, row)``, the cells of every entry past
each queue's position (recovered queues too) that the peer's filter chain lets through.

A row is in flight when every way it differs is explained by those cells, not merely touched
by them: a cell the source has (or has with another value) must be an unshipped put at the
same coordinates; a cell only the peer has must be masked by an unshipped delete marker
(``Delete`` at its timestamp, ``DeleteColumn`` or ``DeleteFamily`` at or after it,
``DeleteFamilyVersion`` at it) or pushed out of the versions kept by an unshipped newer put of
its column. A row with an unshipped edit and another difference besides is bad.

Reading the queues is the same work the shipper does before it ships, without the shipping:
the queued WALs are located as ``walship status`` locates them
(:class:`~walship.status.collect.QueueFiles`) and read from their positions.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from kazoo.client import KazooClient

from walship.peer import PeerConfig
from walship.replicate.batcher.filters import EntryFilter
from walship.replicate.walstore import WalStore
from walship.status.collect import QueueFiles
from walship.verify.model import RowDiff
from walship.wal.model import CellType
from walship.wal.reader import WalReader
from walship.zk import ReplicationQueues, ZnodeLayout

__all__ = ["Unshipped", "normalize_table", "unshipped_rows"]

log = logging.getLogger(__name__)


def normalize_table(name: str | bytes) -> str:
    """A table name as a WAL key names it: ``t`` in the default namespace, else ``ns:t``."""
    text = name.decode(errors="replace") if isinstance(name, bytes) else name
    return text[len("default:") :] if text.startswith("default:") else text


@dataclass
class Unshipped:
    """The unshipped cells of one row: puts by coordinates, and delete markers."""

    puts: set[tuple[bytes, bytes, int]] = field(default_factory=set)
    #: (type, family, qualifier, timestamp) of each delete marker
    deletes: list[tuple[int, bytes, bytes, int]] = field(default_factory=list)

    def masks(self, family: bytes, qualifier: bytes, ts: int) -> bool:
        """An unshipped marker hides the peer's cell, or a newer unshipped put of its column
        pushes it out of the versions kept."""
        for kind, f, q, mts in self.deletes:
            if f != family:
                continue
            if (kind == CellType.DeleteFamily and ts <= mts) or (kind == CellType.DeleteFamilyVersion and ts == mts):
                return True
            if q == qualifier and (
                (kind == CellType.DeleteColumn and ts <= mts) or (kind == CellType.Delete and ts == mts)
            ):
                return True
        return any(f == family and q == qualifier and pts > ts for f, q, pts in self.puts)

    def explains(self, diff: RowDiff) -> bool:
        """Every difference of ``diff`` is an edit still to ship (see the module's description)."""
        if any(key not in self.puts for key in (*diff.only_source, *diff.different)):
            return False
        return all(self.masks(f, q, ts) for f, q, ts in diff.only_peer)


def unshipped_rows(
    client: KazooClient,
    layout: ZnodeLayout,
    walstore: WalStore,
    peer: PeerConfig,
    entry_filter: EntryFilter,
    tables: set[str] | None = None,
) -> dict[tuple[str, bytes], Unshipped]:
    """Per ``(table, row)``, the unshipped cells the peer would receive (of ``tables`` only,
    when given).

    :raises WalMissingError: a queued WAL is in neither ``WALs/`` nor ``oldWALs/``.
    :raises WalError: a queued WAL does not parse from its position.
    """
    files = QueueFiles(client, layout, walstore)
    rows: dict[tuple[str, bytes], Unshipped] = {}
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
                        cells = rows.setdefault((table, cell.row), Unshipped())
                        if cell.type == CellType.Put:
                            cells.puts.add((cell.family, cell.qualifier, cell.timestamp))
                        else:
                            cells.deletes.append((int(cell.type), cell.family, cell.qualifier, cell.timestamp))
    log.debug("peer %s: %d unshipped entries touch %d rows", peer.peer_id, entries, len(rows))
    return rows
