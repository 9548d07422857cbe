"""Serial peers' last pushed sequence ids, kept where HBase 2.x keeps them.

``<parent>/replication/regions/<enc[0:2]>/<enc[2:4]>/<enc[4:]>-<peer>`` holds ``PBUF`` +
ReplicationHLogPosition: the highest sequence id of the region shipped to the peer. HBase's
SerialReplicationChecker lets a region's edits after a barrier (a reopen, a split, a merge)
go only once the range before it is shipped, read from here. A shipper writes the ids of a
batch in the same ZooKeeper multi as its queue's position (:meth:`LastPushedIds.add_ops`),
each only forward and by compare-and-set on the znode's version, as
``ZKReplicationQueueStorage.addLastSeqIdsToOps`` does.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from walship.errors import ZkError
from walship.zk.client import translated
from walship.zk.encoding import decode_position, encode_position
from walship.zk.layout import ZnodeLayout

__all__ = ["NO_SEQNUM", "LastPushedIds"]

log = logging.getLogger(__name__)

#: HBase's ``HConstants.NO_SEQNUM``: no id pushed yet.
NO_SEQNUM = -1


@translated("last pushed sequence ids")
class LastPushedIds:
    """Read, and add to a multi, the last pushed sequence ids of serial peers."""

    def __init__(self, client: KazooClient, layout: ZnodeLayout) -> None:
        self.client = client
        self.layout = layout

    def get(self, encoded_region: str, peer_id: str) -> int:
        """The region's last pushed sequence id for the peer, :data:`NO_SEQNUM` when none."""
        return self.get_with_version(encoded_region, peer_id)[0]

    def get_with_version(self, encoded_region: str, peer_id: str) -> tuple[int, int]:
        """The id and its znode's version; ``(NO_SEQNUM, -1)`` when the znode does not exist."""
        path = self.layout.last_pushed(encoded_region, peer_id)
        try:
            data, stat = self.client.get(path)
        except NoNodeError:
            return NO_SEQNUM, -1
        return decode_position(data, path), int(stat.version)

    def add_ops(self, tx: Any, peer_id: str, ids: Mapping[str, int]) -> int:
        """Add to the transaction ``tx`` the writes that move each region's id forward to
        ``ids[region]``: a create where there is none yet (its parent znodes made first), a
        set at the version read where the new id is higher, nothing where it is not. The
        multi then fails if another shipper moved one meanwhile. Returns the writes added."""
        added = 0
        for region, seq in sorted(ids.items()):
            path = self.layout.last_pushed(region, peer_id)
            current, version = self.get_with_version(region, peer_id)
            if version < 0:
                self.client.ensure_path(path.rpartition("/")[0])
                tx.create(path, encode_position(seq))
            elif seq > current:
                tx.set_data(path, encode_position(seq), version=version)
            else:
                continue
            added += 1
        return added

    def advance(self, peer_id: str, ids: Mapping[str, int], chunk: int = 500) -> None:
        """Move regions' ids forward (outside any queue's multi), a multi per ``chunk``
        regions; a multi that lost a race to a shipper is read and tried again."""
        items = sorted(ids.items())
        for i in range(0, len(items), chunk):
            part = dict(items[i : i + chunk])
            for _ in range(100):
                tx = self.client.transaction()
                if not self.add_ops(tx, peer_id, part):
                    break
                results = tx.commit()
                if not any(isinstance(r, Exception) for r in results):
                    break
            else:
                raise ZkError(f"{self.layout.regions}: the last pushed ids of peer {peer_id} kept changing")

    def remove_peer(self, peer_id: str) -> int:
        """Delete every id of a removed peer (as HBase's ``removeLastSequenceIds(peerId)``);
        returns how many were deleted."""
        removed = 0
        for a in self._children(self.layout.regions):
            for b in self._children(f"{self.layout.regions}/{a}"):
                folder = f"{self.layout.regions}/{a}/{b}"
                for name in self._children(folder):
                    if name.rpartition("-")[2] == peer_id:
                        try:
                            self.client.delete(f"{folder}/{name}")
                            removed += 1
                        except NoNodeError:
                            continue
        return removed

    def remove_regions(self, peer_id: str, regions: Iterable[str]) -> int:
        """Delete the peer's ids of these regions (HBase's ``removeLastSequenceIds(peerId,
        regions)``, for the tables a serial peer stopped taking); returns how many were deleted."""
        removed = 0
        for region in sorted(set(regions)):
            try:
                self.client.delete(self.layout.last_pushed(region, peer_id))
                removed += 1
            except NoNodeError:
                continue
        return removed

    def _children(self, path: str) -> list[str]:
        try:
            return sorted(self.client.get_children(path))
        except NoNodeError:
            return []
