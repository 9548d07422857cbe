"""Is a peer drained? An exact answer on a live cluster, without stopping writes.

At the start, take a *cut*: for every queue of the peer (recovered queues and the queues of
dead servers not claimed yet included), every WAL with bytes past its position and the end of
its last complete entry. The peer is drained once every WAL of the cut has been shipped up
to its cut offset, or has left the peer's queues (shipped and removed; a claim moves a WAL to
another queue under the same name, so WALs are followed by name). HBase enqueues a WAL
before writing to it, so every edit written before the cut lies in a WAL of the cut, before
its offset: drained means every such edit is applied on the peer.

Example::

    cut = take_cut(client, layout, walstore, "1")
    result = wait_drained(client, layout, cut, timeout=600)
    if not result.drained:
        print(result.message())
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kazoo.client import KazooClient

from walship.replicate.walstore import WalLocation, WalStore
from walship.status.collect import QueueFiles
from walship.status.model import iso_ms
from walship.wal.reader import WalReader
from walship.zk import ReplicationPeers, ReplicationQueues, ZnodeLayout, zk_client

__all__ = [
    "Behind",
    "Cut",
    "CutPoint",
    "DrainResult",
    "behind",
    "behind_at",
    "take_cut",
    "take_cut_at",
    "wait_drained",
]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class CutPoint:
    """A WAL of a queue and the offset every edit written before the cut ends by."""

    server: str
    queue_id: str
    wal: str
    offset: int

    def to_json(self) -> dict[str, Any]:
        return {"server": self.server, "queue_id": self.queue_id, "wal": self.wal, "offset": self.offset}


@dataclass(frozen=True)
class Cut:
    peer_id: str
    taken_at: int  # epoch ms
    points: tuple[CutPoint, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "peer_id": self.peer_id,
            "taken_at": iso_ms(self.taken_at),
            "taken_at_ms": self.taken_at,
            "points": [p.to_json() for p in self.points],
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Cut:
        return cls(
            peer_id=str(data["peer_id"]),
            taken_at=int(data["taken_at_ms"]),
            points=tuple(
                CutPoint(str(p["server"]), str(p["queue_id"]), str(p["wal"]), int(p["offset"])) for p in data["points"]
            ),
        )


@dataclass(frozen=True)
class Behind:
    """A WAL of the cut not shipped up to its offset yet, and where it is queued now."""

    server: str
    queue_id: str
    wal: str
    position: int
    cut_offset: int

    @property
    def bytes_behind(self) -> int:
        return self.cut_offset - self.position

    def to_json(self) -> dict[str, Any]:
        return {
            "server": self.server,
            "queue_id": self.queue_id,
            "wal": self.wal,
            "position": self.position,
            "cut_offset": self.cut_offset,
            "bytes_behind": self.bytes_behind,
        }


@dataclass
class DrainResult:
    cut: Cut
    drained: bool
    seconds: float
    behind: list[Behind] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "peer_id": self.cut.peer_id,
            "drained": self.drained,
            "seconds": round(self.seconds, 3),
            "cut": self.cut.to_json(),
            "behind": [b.to_json() for b in self.behind],
        }

    def message(self) -> str:
        """Each queue still behind and by how much (empty when drained)."""
        if self.drained:
            return f"peer {self.cut.peer_id} drained in {self.seconds:.1f} s"
        per_queue: dict[tuple[str, str], list[Behind]] = {}
        for b in self.behind:
            per_queue.setdefault((b.server, b.queue_id), []).append(b)
        parts = []
        for (server, queue_id), items in sorted(per_queue.items()):
            total = sum(b.bytes_behind for b in items)
            first = items[0]
            parts.append(
                f"queue {server}/{queue_id} is {total:,} bytes behind the cut in {len(items)} WAL(s) "
                f"({first.wal} at {first.position}, cut at {first.cut_offset})"
            )
        return f"peer {self.cut.peer_id} not drained after {self.seconds:.1f} s: " + "; ".join(parts)


def _complete_end(walstore: WalStore, loc: WalLocation, position: int) -> int:
    """The end of the last complete entry of the WAL at ``loc`` (``position`` when none lies
    past it), read up to ``loc.size``: the size a reader sees (:meth:`WalStore.visible`)."""
    if loc.size <= position:
        return position
    with walstore.open(loc) as f:
        reader = WalReader(f, loc.path)
        reader.refresh()
        start = max(position, reader.header_end)
        if reader.header is None or reader.edits_end <= start:
            return position  # no entry past the position
        if reader.has_trailer:
            return reader.edits_end
        for _ in reader.entries(start):
            pass
        return reader.stop_offset if reader.stop_offset > start else position


def take_cut(client: KazooClient, layout: ZnodeLayout, walstore: WalStore, peer_id: str) -> Cut:
    """The peer's cut, now.

    :raises PeerNotFoundError: no such peer.
    :raises WalMissingError: a queued WAL is in neither ``WALs/`` nor ``oldWALs/``.
    """
    ReplicationPeers(client, layout).get(peer_id)
    taken_at = int(time.time() * 1000)
    points = []
    queues = ReplicationQueues(client, layout).list_queues(peer_id)
    # on HDFS the sizes a reader sees (the NameNode's length of a WAL being written lags
    # what HBase hflushed, and acknowledged): asked for after the snapshot of the queues
    files = QueueFiles(client, layout, walstore, queues)
    for q in queues:
        for wp in q.wals:
            loc = files.locate(q, wp.name)
            if loc is None:
                continue  # shipped and removed while the cut was taken
            offset = _complete_end(walstore, loc, wp.position)
            if offset > wp.position:
                points.append(CutPoint(q.server, str(q.queue_id), wp.name, offset))
    log.info("peer %s: cut of %d WAL(s) taken", peer_id, len(points))
    return Cut(peer_id, taken_at, tuple(points))


def behind(client: KazooClient, layout: ZnodeLayout, cut: Cut) -> list[Behind]:
    """The WALs of ``cut`` not shipped up to their offset yet.

    :raises PeerNotFoundError: the peer was removed (its queues with it: nothing was drained).
    """
    ReplicationPeers(client, layout).get(cut.peer_id)
    where: dict[str, tuple[str, str, int]] = {}
    for q in ReplicationQueues(client, layout).list_queues(cut.peer_id):
        for wp in q.wals:
            seen = where.get(wp.name)
            if seen is None or wp.position < seen[2]:
                where[wp.name] = (q.server, str(q.queue_id), wp.position)
    out = []
    for point in cut.points:
        now = where.get(point.wal)
        if now is not None and now[2] < point.offset:
            out.append(Behind(now[0], now[1], point.wal, now[2], point.offset))
    return out


def wait_drained(
    client: KazooClient,
    layout: ZnodeLayout,
    cut: Cut,
    *,
    timeout: float | None = None,
    poll: float = 0.5,
    before_each: Callable[[], None] | None = None,
) -> DrainResult:
    """Poll until every WAL of ``cut`` passed its offset, or ``timeout`` seconds passed.

    :param before_each: called before each look (a caller that ships the queues itself).
    """
    start = time.monotonic()
    while True:
        if before_each is not None:
            before_each()
        late = behind(client, layout, cut)
        elapsed = time.monotonic() - start
        if not late:
            return DrainResult(cut, True, elapsed)
        if timeout is not None and elapsed >= timeout:
            return DrainResult(cut, False, elapsed, late)
        time.sleep(poll if timeout is None else max(0.0, min(poll, timeout - elapsed)))


def take_cut_at(zk: str, znode_parent: str, wal_root: str, peer_id: str, *, auth: str | None = None) -> Cut:
    """:func:`take_cut` with a ZooKeeper client of its own (for the Airflow sensor; without
    ``auth``, ``WALSHIP_ZK_AUTH`` is used when set)."""
    with zk_client(zk, auth=auth, parent=znode_parent) as client:
        return take_cut(client, ZnodeLayout(znode_parent), WalStore(wal_root), peer_id)


def behind_at(zk: str, znode_parent: str, cut: Cut, *, auth: str | None = None) -> list[Behind]:
    """:func:`behind` with a ZooKeeper client of its own (for the Airflow trigger)."""
    with zk_client(zk, auth=auth, parent=znode_parent) as client:
        return behind(client, ZnodeLayout(znode_parent), cut)
