"""The batcher of a shipping pass: each queue's batch cut from the entries a WAL read gives,
through its peer's filter chain (HBase's ``WALEntryBatch`` and ``ChainWALEntryFilter``).

- :mod:`.filters`: which edits go to a peer (:class:`EntryFilter`);
- :mod:`.member`: a queue fed during a pass (:class:`Member`), the batches it cuts
  (:class:`Batch`) and their limits (:class:`Ramp`);
- ``_batcher.c``: both compiled, reading walship's tuples by a declared layout
  (:data:`~walship.replicate.batcher.filters.TALLY`, :mod:`walship.wal.layout`).
"""

from walship.replicate.batcher.filters import EntryFilter, TableRule, table_rule
from walship.replicate.batcher.member import (
    Batch,
    Feed,
    InFlight,
    KnownPositions,
    Member,
    Ramp,
    group_key,
    wal_order,
    wanting,
)

__all__ = [
    "Batch",
    "EntryFilter",
    "Feed",
    "InFlight",
    "KnownPositions",
    "Member",
    "Ramp",
    "TableRule",
    "group_key",
    "table_rule",
    "wal_order",
    "wanting",
]
