"""``--repair``: make one bad row of the peer equal to the source's, for the compared
families only.

Cells the peer lacks (or holds with another value) are put with their original timestamps;
versions only the peer has are deleted one by one (``DELETE_COLUMN`` at the cell's
timestamp, never a wider delete); then both sides are read again. Deleting a newer version
can bring an older one into the compared versions, so this goes round a few times.

HBase never shows a put behind a newer delete marker of its column or family: a cell masked
that way on the peer cannot be put back with its original timestamp. Such a row is left as
it is and reported unrepaired, with the reason and the remedy (major-compact the peer's
table, which drops the marker, then repair again); walship never writes new timestamps.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from walship.verify.compare import compare_row
from walship.verify.model import RepairOutcome, RowCells, RowDiff
from walship.verify.scan import Side

__all__ = ["MASKED_REASON", "MASKED_REMEDY", "repair_row"]

log = logging.getLogger(__name__)

MASKED_REASON = "masked by a delete marker on the peer"
MASKED_REMEDY = "flush and major-compact the peer table, then repair again"
_ROUNDS = 3


def repair_row(
    source: Side,
    peer: Side,
    diff: RowDiff,
    versions: Mapping[bytes, int],
    min_ts: int,
    max_ts: int,
) -> RepairOutcome:
    """Repair ``diff.row`` of ``diff.table`` on ``peer``; the outcome is its audit line."""
    table, row = diff.table, diff.row
    outcome = RepairOutcome(table, row, diff.kind)
    current: RowDiff | None = diff
    put_all: RowCells = {}
    for _ in range(_ROUNDS):
        assert current is not None
        puts: RowCells = dict(current.only_source)
        puts.update({key: sv for key, (sv, _pv) in current.different.items()})
        deletes = sorted(current.only_peer)
        if not puts and not deletes:
            break
        peer.put_cells(table, row, puts)
        peer.delete_versions(table, row, deletes)
        outcome.put += len(puts)
        outcome.deleted += len(deletes)
        put_all.update(puts)
        src = source.get(table, row, versions, min_ts, max_ts)
        dst = peer.get(table, row, versions, min_ts, max_ts)
        current = compare_row(table, row, src, dst)
        if current is None:
            outcome.repaired = True
            log.info("repaired row %r of table %s: %d put, %d deleted", row, table, outcome.put, outcome.deleted)
            return outcome
        if any(key in put_all and key not in dst for key in src):
            break  # a put did not show: masked; another round would not change that
    outcome.remaining = current
    if current is not None and any(key in put_all for key in current.only_source):
        outcome.reason = MASKED_REASON
        outcome.remedy = MASKED_REMEDY
    else:
        outcome.reason = f"still differs after {_ROUNDS} repair rounds (is it being written to?)"
        outcome.remedy = "verify the row again; repair again once writes to it have stopped"
    log.warning("row %r of table %s not repaired: %s", row, table, outcome.reason)
    return outcome
