"""Replication queues: which WALs each region server still has to ship to each peer, and how
far, stored as HBase 2.x's ZKReplicationQueueStorage stores them.

``<parent>/replication/rs/<server>/<queueId>/<wal>`` holds ``PBUF`` + ReplicationHLogPosition.
A queue id is a peer id, or for a queue claimed from dead servers ``<peerId>-<dead>[-<dead>...]``.

Every change is safe under concurrency: positions move by versioned compare-and-set and
never backwards; a claim moves one queue with one ZooKeeper multi, so a queue is either
wholly with the dead server or wholly with its claimer, whatever happens to the claimer.
"""

from __future__ import annotations

import contextlib
import logging
import random
import time
from collections.abc import Iterable, Mapping

from kazoo.client import KazooClient
from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError, RolledBackError

from walship.errors import (
    InvalidWalNameError,
    PositionBackwardsError,
    QueueError,
    QueueNotFoundError,
    ZkDataError,
)
from walship.wal.names import parse_wal_name
from walship.zk.claims import CVERSION_BUMP, QueueClaims
from walship.zk.client import translated
from walship.zk.encoding import decode_position, encode_position
from walship.zk.lastpushed import LastPushedIds
from walship.zk.layout import ZnodeLayout
from walship.zk.multiread import read_many
from walship.zk.queueid import QueueId, QueueInfo, WalPosition

__all__ = ["KnownQueue", "QueueId", "QueueInfo", "ReplicationQueues", "WalPosition"]

log = logging.getLogger(__name__)

#: A queue as its lock holder last read or wrote it: its children stamp and its WAL znodes.
KnownQueue = tuple[int, Mapping[str, WalPosition]]


@translated("replication queues")
class ReplicationQueues(QueueClaims):
    """Read and change the replication queues of one cluster (its failover from
    :class:`~walship.zk.claims.QueueClaims`)."""

    def __init__(self, client: KazooClient, layout: ZnodeLayout) -> None:
        self.client = client
        self.layout = layout

    # -- reading ---------------------------------------------------------------------------

    def replicators(self) -> list[str]:
        """Servers that own queues (live or dead)."""
        try:
            return sorted(c for c in self.client.get_children(self.layout.queues) if c != CVERSION_BUMP)
        except NoNodeError:
            return []

    def queue_ids(self, server: str) -> list[str]:
        try:
            return sorted(self.client.get_children(self.layout.replicator(server)))
        except NoNodeError:
            return []

    def wals(self, server: str, queue_id: str) -> list[WalPosition]:
        """The WALs of a queue with their positions, ordered by WAL timestamp.

        :raises QueueNotFoundError: the queue does not exist.
        :raises ZkDataError: a child is not a WAL name, or a position is malformed.
        """
        return self.read_queue(server, queue_id)[0]

    def read_queue(self, server: str, queue_id: str, known: KnownQueue | None = None) -> tuple[list[WalPosition], int]:
        """:meth:`wals`, and the queue's children stamp (its ``pzxid``, which moves when a WAL
        znode is created or removed, or the queue is made anew). ``known``: that stamp with the
        WAL znodes as the caller last read or wrote them; while the stamp is the same, those
        are not read again: the holder of the queue's lock, the only one to move its positions,
        keeps them, as HBase's sources do; a queue removed and made again (a peer removed and
        added back) is read whole.

        :raises QueueNotFoundError: the queue does not exist.
        :raises ZkDataError: a child is not a WAL name, or a position is malformed.
        """
        qpath = self.layout.queue(server, queue_id)
        try:
            names, qstat = self.client.get_children(qpath, include_data=True)
        except NoNodeError:
            raise QueueNotFoundError(f"queue {qpath} does not exist") from None
        reuse = known[1] if known is not None and known[0] == qstat.pzxid else {}
        out: list[tuple[int, str, WalPosition]] = []
        for name in names:
            wpath = f"{qpath}/{name}"
            try:
                parsed = parse_wal_name(name)
            except InvalidWalNameError as exc:
                raise ZkDataError(wpath, str(exc)) from None
            if name in reuse:
                out.append((parsed.timestamp, name, reuse[name]))
                continue
            try:
                data, stat = self.client.get(wpath)
            except NoNodeError:
                continue  # shipped and removed while we listed
            position = decode_position(data, wpath)
            out.append((parsed.timestamp, name, WalPosition(name, position, stat.version, stat.ctime, stat.mtime)))
        return [w for _, _, w in sorted(out)], int(qstat.pzxid)

    def list_queues(self, peer_id: str | None = None) -> list[QueueInfo]:
        """Every queue of every server (optionally of one peer), WALs oldest first.

        Read in a few round trips whatever the number of WALs (:func:`read_many`): the
        servers' queue ids, then the queues' WALs, then every position. A queue or WAL removed
        while it is listed is left out, as it would be a moment later.

        :raises ZkDataError: a child is not a WAL name, or a position is malformed.
        """
        servers = self.replicators()
        id_lists = read_many(self.client, [("children", self.layout.replicator(s)) for s in servers])
        wanted: list[tuple[str, QueueId, str]] = []
        for server, ids in zip(servers, id_lists, strict=True):
            for qid in sorted(ids or ()):
                queue_id = QueueId.parse(qid)
                if peer_id is None or queue_id.peer_id == peer_id:
                    wanted.append((server, queue_id, self.layout.queue(server, qid)))
        wal_lists = read_many(self.client, [("children", qpath) for _, _, qpath in wanted])
        listed: list[tuple[str, QueueId, list[tuple[int, str, str]]]] = []
        for (server, queue_id, qpath), names in zip(wanted, wal_lists, strict=True):
            if names is None:
                continue  # claimed or removed while we listed
            wals = []
            for name in names:
                wpath = f"{qpath}/{name}"
                try:
                    wals.append((parse_wal_name(name).timestamp, name, wpath))
                except InvalidWalNameError as exc:
                    raise ZkDataError(wpath, str(exc)) from None
            listed.append((server, queue_id, wals))
        datas = iter(read_many(self.client, [("data", wpath) for _, _, wals in listed for _, _, wpath in wals]))
        out = []
        for server, queue_id, wals in listed:
            found = []
            for ts, name, wpath in wals:
                answer = next(datas)
                if answer is None:
                    continue  # shipped and removed while we listed
                data, stat = answer
                position = decode_position(data, wpath)
                found.append((ts, name, WalPosition(name, position, stat.version, stat.ctime, stat.mtime)))
            out.append(QueueInfo(server, queue_id, tuple(w for _, _, w in sorted(found))))
        return out

    def get_position(self, server: str, queue_id: str, wal: str) -> tuple[int, int]:
        """(position, znode version) of one WAL of a queue."""
        path = self.layout.wal(server, queue_id, wal)
        try:
            data, stat = self.client.get(path)
        except NoNodeError:
            raise QueueNotFoundError(f"WAL znode {path} does not exist") from None
        return decode_position(data, path), stat.version

    def all_wals(self, *, attempts: int = 50) -> frozenset[str]:
        """Every WAL name referenced by any queue, as one consistent snapshot.

        As HBase's ``getAllWALs``: list everything, and retry while the cversion of the
        ``rs`` znode changed underneath (servers added or removed, queues claimed).

        :raises QueueError: no consistent snapshot after ``attempts`` tries.
        """
        root = self.layout.queues
        for attempt in range(attempts):
            if attempt:
                time.sleep(min(0.005 * 2**attempt, 0.5) * random.uniform(0.5, 1.0))
            before = self.client.exists(root)
            if before is None:
                return frozenset()
            wals: set[str] = set()
            try:
                spaths = [f"{root}/{server}" for server in self.client.get_children(root)]
                qids = read_many(self.client, [("children", p) for p in spaths])
                qpaths = [f"{sp}/{qid}" for sp, ids in zip(spaths, qids, strict=True) for qid in ids or ()]
                names = read_many(self.client, [("children", p) for p in qpaths])
                if any(ids is None for ids in qids) or any(n is None for n in names):
                    raise NoNodeError  # removed while listed
            except NoNodeError:
                log.debug("queues changed during snapshot attempt %d; retrying", attempt + 1)
                continue
            for listed in names:
                wals.update(listed)
            after = self.client.exists(root)
            if after is not None and after.cversion == before.cversion:
                return frozenset(wals)
            log.debug("rs cversion moved %s -> %s; retrying", before.cversion, after and after.cversion)
        raise QueueError(f"queues under {root} kept changing: no consistent snapshot after {attempts} attempts")

    # -- changing ---------------------------------------------------------------------------

    def add_wal(self, server: str, wal: str, peer_ids: Iterable[str] | None = None) -> list[str]:
        """Add a new WAL to every peer's queue of ``server`` (the region server does this on
        every roll, before it writes to the WAL). Returns the znodes created."""
        parse_wal_name(wal)
        if peer_ids is None:
            try:
                peer_ids = self.client.get_children(self.layout.peers)
            except NoNodeError:
                peer_ids = []
        created = []
        for peer_id in sorted(peer_ids):
            path = self.layout.wal(server, peer_id, wal)
            try:
                self.client.create(path, b"", makepath=True)
            except NodeExistsError:
                continue
            created.append(path)
        return created

    def set_position(
        self,
        server: str,
        queue_id: str,
        wal: str,
        position: int,
        *,
        version: int | None = None,
        last_pushed: Mapping[str, int] | None = None,
        known: WalPosition | None = None,
    ) -> int:
        """Move a WAL's position forward; return the znode's new version.

        With ``version``, the write succeeds only if the znode is still at that version (a
        shipper's check that nobody else moved the queue); without, it re-reads and retries.
        With ``last_pushed`` (a serial peer's batch: encoded region -> highest sequence id
        shipped), those ids move forward in the same multi as the position, as HBase's
        ``setWALPosition`` writes them (see :mod:`walship.zk.lastpushed`). ``known`` is the
        znode as the caller last read or wrote it (its position and version): a position past
        it is written at that version in one round trip, and read again (as without it) only
        when the znode changed since.

        :raises PositionBackwardsError: ``position`` is below the stored one.
        :raises QueueNotFoundError: the WAL znode is gone (removed, or the queue was claimed).
        :raises QueueError: ``version`` was given and the znode changed since.
        """
        path = self.layout.wal(server, queue_id, wal)
        data_out = encode_position(position)
        if known is not None and version is None and not last_pushed and position > known.position:
            try:
                return int(self.client.set(path, data_out, version=known.version).version)
            except BadVersionError:
                pass  # changed since: read it, as without ``known``
            except NoNodeError:
                raise QueueNotFoundError(f"WAL znode {path} does not exist (claimed or removed)") from None
        while True:
            try:
                data, stat = self.client.get(path)
            except NoNodeError:
                raise QueueNotFoundError(f"WAL znode {path} does not exist (claimed or removed)") from None
            current = decode_position(data, path)
            if version is not None and stat.version != version:
                raise QueueError(f"WAL znode {path} changed: version {stat.version}, expected {version}")
            if position < current:
                raise PositionBackwardsError(f"{path}: position {position} is behind the stored {current}")
            if last_pushed:
                done = self._set_with_last_pushed(path, data_out, stat.version, queue_id, last_pushed)
                if done is None:
                    if version is not None:
                        raise QueueError(f"WAL znode {path} changed while setting position {position}")
                    continue
                return done
            if position == current and data:
                return int(stat.version)
            try:
                new_stat = self.client.set(path, data_out, version=stat.version)
            except BadVersionError:
                if version is not None:
                    raise QueueError(f"WAL znode {path} changed while setting position {position}") from None
                continue
            except NoNodeError:
                raise QueueNotFoundError(f"WAL znode {path} does not exist (claimed or removed)") from None
            return int(new_stat.version)

    def _set_with_last_pushed(
        self, path: str, data: bytes, version: int, queue_id: str, last_pushed: Mapping[str, int]
    ) -> int | None:
        """One multi: the position at ``version`` and the serial ids forward. ``None`` when the
        WAL znode changed meanwhile; a region's id moved by another shipper is read again."""
        ids = LastPushedIds(self.client, self.layout)
        peer_id = QueueId.parse(queue_id).peer_id
        for _ in range(100):
            tx = self.client.transaction()
            tx.set_data(path, data, version=version)
            ids.add_ops(tx, peer_id, last_pushed)
            results = tx.commit()
            failed = [r for r in results if isinstance(r, Exception) and not isinstance(r, RolledBackError)]
            if not failed:
                return int(results[0].version)
            if isinstance(results[0], NoNodeError):
                raise QueueNotFoundError(f"WAL znode {path} does not exist (claimed or removed)")
            if isinstance(results[0], BadVersionError):
                return None
            log.debug("%s: a last pushed id moved meanwhile (%s); read again", path, failed[0])
        raise QueueError(f"{path}: the last pushed sequence ids of queue {queue_id} kept changing")

    def remove_wals(self, server: str, queue_id: str, wals: Iterable[str]) -> int:
        """Remove finished WALs from a queue; returns how many were there to remove."""
        removed = 0
        for wal in wals:
            try:
                self.client.delete(self.layout.wal(server, queue_id, wal))
                removed += 1
            except NoNodeError:
                continue
        return removed

    def remove_queue(self, server: str, queue_id: str) -> None:
        """Delete a queue and its WALs (a drained recovered queue, or a removed peer's)."""
        with contextlib.suppress(NoNodeError):
            self.client.delete(self.layout.queue(server, queue_id), recursive=True)

    def remove_peer_queues(self, peer_id: str) -> int:
        removed = 0
        for server in self.replicators():
            for qid in self.queue_ids(server):
                if QueueId.parse(qid).peer_id == peer_id:
                    self.remove_queue(server, qid)
                    removed += 1
        return removed

    def has_wal(self, server: str, queue_id: str, wal: str) -> bool:
        """Whether the WAL is (still) in the queue."""
        return self.client.exists(self.layout.wal(server, queue_id, wal)) is not None
