"""Which entries of a queue a serial peer may be sent now: HBase's SerialReplicationChecker.

A region that moves, splits or merges leaves its older edits in one server's WALs and its newer
ones in another's. Each open of a region is a barrier in ``hbase:meta`` (its open sequence id);
the edits between two barriers form a range, and a range may go to the peer only once the range
before it has gone (the region's last pushed id, in ZooKeeper, reached the barrier - 1). The
first range of a region split or merged from parents waits until every parent has gone to its
last barrier; the last range of a region still OPENING waits. Edits before the first barrier
(written before serial replication, or in a table without replication scope) go at once.

One checker serves one queue, as in HBase: its own entries arrive in WAL order, so an entry
whose sequence id follows the last one it passed for the region needs no look-up, nor does one
below the end of a range already found open.
"""

from __future__ import annotations

import bisect
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from walship.errors import ConfigError
from walship.wal.model import WalEntry

if TYPE_CHECKING:
    from walship.serial.metarow import RegionBarriers

__all__ = ["BarrierSource", "Blocked", "LastPushedSource", "SerialChecker", "SerialCheckers"]

log = logging.getLogger(__name__)


class BarrierSource(Protocol):
    """The replication barriers of ``hbase:meta`` (:class:`walship.serial.barriers.BarrierReader`)."""

    def region(self, table: bytes, row: bytes, encoded: str) -> RegionBarriers: ...

    def parent(self, encoded: str) -> tuple[int, ...]: ...

    def close(self) -> None: ...


class LastPushedSource(Protocol):
    """The last pushed ids in ZooKeeper (:class:`walship.zk.lastpushed.LastPushedIds`)."""

    def get(self, encoded_region: str, peer_id: str) -> int: ...


@dataclass(frozen=True)
class Blocked:
    """Why an entry waits: its region, its sequence id, and what must be shipped first."""

    region: str
    seq: int
    waits_for: str  # the region whose range must finish first (itself, or a parent)
    needed: int  # that region's last pushed id must reach this
    pushed: int  # where it is
    opening: bool = False  # the region's last open has not finished

    def describe(self) -> str:
        if self.opening:
            return f"region {self.region} is still opening (sequence id {self.seq} is in its last range)"
        whose = "its previous range" if self.waits_for == self.region else f"its parent {self.waits_for}"
        return (
            f"region {self.region}, sequence id {self.seq}: waits for {whose} to be shipped "
            f"(last pushed {self.pushed}, needs {self.needed})"
        )

    def to_json(self) -> dict[str, object]:
        return {
            "region": self.region,
            "seq": self.seq,
            "waits_for": self.waits_for,
            "needed": self.needed,
            "pushed": self.pushed,
            "opening": self.opening,
        }


class SerialChecker:
    """Decides, entry by entry in a queue's order, whether the peer may be sent it now."""

    def __init__(self, peer_id: str, barriers: BarrierSource, pushed: LastPushedSource) -> None:
        self.peer_id = peer_id
        self.barriers = barriers
        self.pushed_ids = pushed
        self._under: dict[str, int] = {}  # region -> an id below which its entries may go
        self._passed: dict[str, int] = {}  # region -> the last id this queue let go
        self.lookups = 0  # barrier look-ups made (what the fast paths save)

    def check(self, entry: WalEntry) -> Blocked | None:
        """``None`` when the entry may go now (and it is counted as passed), else why not."""
        key = entry.key
        region = key.encoded_region_name.decode()
        seq = key.sequence_id
        under = self._under.get(region)
        if under is not None:
            if seq < under:
                self._passed[region] = seq
                return None
            del self._under[region]  # past the end of the range found open
        if seq == self._passed.get(region, -2) + 1:
            self._passed[region] = seq  # continuous: the region is open here, nothing between
            return None
        row = entry.cells[0].row if entry.cells else b""
        return self._check_barriers(key.table, row, region, seq)

    def _check_barriers(self, table: bytes, row: bytes, region: str, seq: int) -> Blocked | None:
        self.lookups += 1
        result = self.barriers.region(table, row, region)
        barriers = result.barriers
        index = bisect.bisect_right(barriers, seq)  # the range [b(index-1), b(index)) holds seq
        if index == 0:
            self._passed[region] = seq  # before the first barrier: order cannot be kept, nor lost
            return None
        if index == 1:
            for parent in result.parents:
                blocked = self._parent_unfinished(region, seq, parent)
                if blocked is not None:
                    return blocked
        else:
            start = barriers[index - 1]
            pushed = self.pushed_ids.get(region, self.peer_id)
            if pushed < start - 1:
                return Blocked(region, seq, region, start - 1, pushed)
        if index == len(barriers) and result.state == "OPENING":
            return Blocked(region, seq, region, seq, self._passed.get(region, -1), opening=True)
        if index < len(barriers):
            self._under[region] = barriers[index]
        self._passed[region] = seq
        return None

    def _parent_unfinished(self, region: str, seq: int, parent: str) -> Blocked | None:
        barriers = self.barriers.parent(parent)
        if not barriers:
            return None  # the parent's row is gone: it finished long ago
        pushed = self.pushed_ids.get(parent, self.peer_id)
        if pushed >= barriers[-1] - 1:
            return None
        return Blocked(region, seq, parent, barriers[-1] - 1, pushed)


class SerialCheckers:
    """A shipper's checkers, one per queue of a serial peer, kept from pass to pass (each
    knows which regions' ranges it found open), and the one connection they read
    ``hbase:meta``'s barriers through, over the source's Thrift2 server ``source_thrift2``.

    :param last_pushed: what the checkers read the regions' last pushed ids from
        (:class:`walship.zk.lastpushed.LastPushedIds`).
    """

    def __init__(self, source_thrift2: str | None, last_pushed: Callable[[], LastPushedSource]) -> None:
        self.source_thrift2 = source_thrift2
        self._last_pushed = last_pushed
        self._barriers: BarrierSource | None = None
        self._checkers: dict[tuple[str, str, str], SerialChecker] = {}

    def of(self, peer_id: str, server: str, queue_id: str, *, serial: bool) -> SerialChecker | None:
        """The queue's checker when its peer is serial, else ``None`` (a peer no longer serial
        forgets its queues' checkers).

        :raises ConfigError: a serial peer, and no source Thrift2 server to read barriers from.
        """
        key = (peer_id, server, queue_id)
        if not serial:
            self._checkers.pop(key, None)
            return None
        checker = self._checkers.get(key)
        if checker is None:
            if not self.source_thrift2:
                raise ConfigError(
                    f"peer {peer_id} is serial: the order of its edits comes from hbase:meta's "
                    "replication barriers, read over the source cluster's Thrift2 server; give "
                    "--source-thrift2 HOST:PORT (or set WALSHIP_SOURCE_THRIFT2)"
                )
            if self._barriers is None:
                from walship.serial.barriers import BarrierReader

                self._barriers = BarrierReader(self.source_thrift2)
            checker = self._checkers[key] = SerialChecker(peer_id, self._barriers, self._last_pushed())
        return checker

    def close(self) -> None:
        """Let go of the connection to ``hbase:meta`` and the checkers (a later pass opens
        another, and checks anew)."""
        if self._barriers is not None:
            barriers, self._barriers = self._barriers, None
            self._checkers.clear()
            barriers.close()
