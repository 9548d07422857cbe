"""Compute the status model from ZooKeeper and file sizes.

One pipelined snapshot of the queues (:meth:`ReplicationQueues.list_queues`, with their WAL
znodes' times), of walship's progress records (a peer's sink side, its last applied batch, is
the newest of its queues' records), of the peers' znodes (their ctime), of their error counts
(``errors/<peer>``) and of the queue locks; one listing of ``WALs/`` and ``oldWALs/`` for the
sizes; per queue with unshipped bytes, the first unshipped entry decoded for its write time
(the lag); per peer, its pending dead letters (its dead-letter directory, empty but for
edits a sink could not express). Nothing else is read, so status for hundreds of queues
takes well under a second. On HDFS, where the listed size of a WAL being written is the NameNode's and lags what
HBase hflushed, the size a reader sees is asked for each queued WAL under ``WALs/``, all at once.

A queue's backlog is a complete entry past its positions (it is not drained), or a queued WAL
that cannot be found. While it has one, ``stalled_s`` is the seconds since the later of

- its last progress: the newest ``mtime`` of its WAL znodes whose position was set since the
  znode was made (``mtime > ctime``: a WAL merely enqueued on a roll is no progress), or the
  ``last_shipped_at`` of walship's progress record (it outlives a finished WAL's znode, which
  the shipper removes), or the ``ctime`` of its current (oldest) WAL's znode (the WAL reached
  this queue: enqueued, or claimed from a dead server, when the clock starts again);
- the write time of its oldest unshipped entry (before it there was no backlog: a queue idle
  for an hour that gets new edits is not stalled for an hour), so ``stalled_s <= lag_s``.

ZooKeeper's times are its server's clock and write times the region server's; they are
compared with this host's, so clocks that differ by seconds make ``stalled_s`` differ by as
much. A queue is ``stuck`` when ``stalled_s >= stuck_after`` and its peer is enabled: a
disabled peer's backlog grows by design. A queue whose shipping DAG is paused, whose shipper
hangs or backs off against a peer that is down, or a serial peer's queue waiting for another
queue, is stuck all the same: in each case its edits stop reaching the peer.

Example::

    status = collect_status(client, ZnodeLayout("/hbase"), WalStore("/data/hbase"))
    print(json.dumps(status.to_json()))
"""

from __future__ import annotations

import concurrent.futures
import json
import logging
import socket
import time
from collections.abc import Iterable, Sequence
from typing import Any

from kazoo.client import KazooClient

from walship.defaults import STUCK_AFTER
from walship.errors import WalMissingError, WalshipError, error_kind
from walship.peer import PeerConfig, table_cfs_json
from walship.replicate.walstore import WalLocation, WalStore
from walship.sinks.deadletter import DeadLetterStore
from walship.sinks.registry import sink_endpoints
from walship.status.model import PeerCount, PeerStatus, QueueStatus, ReplicationStatus, SinkStatus, iso_ms
from walship.wal.reader import WalReader
from walship.zk import QueueInfo, ReplicationPeers, ReplicationQueues, ZnodeLayout, live_servers, zk_client
from walship.zk.locks import Holder
from walship.zk.multiread import read_many
from walship.zk.records import error_counts

__all__ = ["QueueFiles", "collect_status", "read_status"]

log = logging.getLogger(__name__)

#: Bytes read at a time when decoding the first unshipped entry of a queue.
_PROBE_CHUNK = 64 * 1024
#: A shipper's back-off counts as "waiting for the peer" for this long at least.
_BACKOFF_WINDOW_S = 60.0


def _load_json(data: bytes | None) -> dict[str, Any] | None:
    if not data:
        return None
    try:
        value = json.loads(data.decode())
    except (UnicodeDecodeError, ValueError):
        return None
    return value if isinstance(value, dict) else None


def _lock_sequence(name: str) -> str:
    return name.rsplit("__", 1)[-1]


def _holders(client: KazooClient, layout: ZnodeLayout, queues: list[QueueInfo]) -> list[Holder | None]:
    """Who holds each queue's lock: the first contender of kazoo's lock recipe."""
    paths = [layout.queue_lock(q.server, str(q.queue_id)) for q in queues]
    firsts: list[str | None] = []
    for path, names in zip(paths, read_many(client, [("children", p) for p in paths]), strict=True):
        contenders = [n for n in (names or ()) if "__lock__" in n]
        firsts.append(f"{path}/{min(contenders, key=_lock_sequence)}" if contenders else None)
    reads = iter(read_many(client, [("data", f) for f in firsts if f is not None]))
    out: list[Holder | None] = []
    for first in firsts:
        answer = next(reads) if first is not None else None
        out.append(Holder.decode(answer[0].decode("utf-8", "replace")) if answer else None)
    return out


def _progress(client: KazooClient, layout: ZnodeLayout, queues: list[QueueInfo]) -> list[dict[str, Any] | None]:
    paths = [layout.queue_progress(q.peer_id, q.server, str(q.queue_id)) for q in queues]
    return [_load_json(answer[0]) if answer else None for answer in read_many(client, [("data", p) for p in paths])]


def _errors(client: KazooClient, layout: ZnodeLayout, peers: list[PeerConfig]) -> list[dict[str, int]]:
    """Each peer's shipping errors counted by kind."""
    answers = read_many(client, [("data", layout.peer_errors(p.peer_id)) for p in peers])
    return [error_counts(_load_json(answer[0])) if answer else {} for answer in answers]


def _dead_letters_pending(peer: PeerConfig, walstore: WalStore) -> int | None:
    """The peer's dead letters not replayed yet, each once (as ``walship deadletter list``);
    ``None`` when its dead-letter directory or a file in it cannot be read (logged)."""
    try:
        return len(DeadLetterStore.for_peer(peer, walstore.root).records())
    except (WalshipError, OSError) as exc:
        log.warning("peer %s: pending dead letters not counted: %s", peer.peer_id, exc)
        return None


def _last_progress(q: QueueInfo, record: dict[str, Any]) -> int | None:
    """Epoch ms when the queue last made progress, or reached this queue (see the module
    docstring); ``None`` when nothing tells."""
    times = [w.mtime for w in q.wals if w.mtime is not None and w.ctime is not None and w.mtime > w.ctime]
    if q.wals and q.wals[0].ctime is not None:
        times.append(q.wals[0].ctime)
    if record.get("last_shipped_at"):
        times.append(int(record["last_shipped_at"]))
    return max(times, default=None)


def _started(client: KazooClient, layout: ZnodeLayout, peers: list[PeerConfig]) -> list[int | None]:
    """When each peer was added: its znode's ctime (``None`` for one removed meanwhile)."""
    answers = read_many(client, [("data", layout.peer(p.peer_id)) for p in peers])
    return [int(answer[1].ctime) if answer else None for answer in answers]


def _sink(started: int | None, records: Iterable[dict[str, Any] | None]) -> SinkStatus:
    """The peer's sink: the last batch applied by any of its queues (records written before
    walship recorded applies have none)."""
    last: tuple[int, int] | None = None
    for record in records:
        at, write_time = (record or {}).get("last_applied_at"), (record or {}).get("last_applied_write_time")
        if at is not None and write_time is not None and (last is None or int(at) > last[0]):
            last = (int(at), int(write_time))
    if last is None:
        return SinkStatus(started)
    return SinkStatus(started, *last)


def _probe(endpoints: Iterable[tuple[str, int]], timeout: float) -> dict[tuple[str, int], bool]:
    """Whether each endpoint takes a TCP connection, all probed at once."""

    def one(endpoint: tuple[str, int]) -> bool:
        try:
            with socket.create_connection(endpoint, timeout=timeout):
                return True
        except OSError:
            return False

    targets = sorted(set(endpoints))
    if not targets:
        return {}
    with concurrent.futures.ThreadPoolExecutor(max_workers=min(16, len(targets))) as pool:
        return dict(zip(targets, pool.map(one, targets), strict=True))


class QueueFiles:
    """Sizes from one listing, as a reader sees them, and the first unshipped entry of a queue.

    :param queues: the queues whose WALs will be located: on HDFS, the size a reader sees of
        each of their WALs under ``WALs/`` is asked for at once, here.
    """

    def __init__(
        self, client: KazooClient, layout: ZnodeLayout, walstore: WalStore, queues: Sequence[QueueInfo] = ()
    ) -> None:
        self.client = client
        self.layout = layout
        self.walstore = walstore
        self.listing = walstore.listing()
        names = list(dict.fromkeys(wp.name for q in queues for wp in q.wals if wp.name in self.listing))
        for name, loc in zip(names, walstore.visible_many([self.listing[n] for n in names]), strict=True):
            if loc is None:
                del self.listing[name]  # gone since the listing: locate() looks again
            else:
                self.listing[name] = loc

    def locate(self, q: QueueInfo, wal: str) -> WalLocation | None:
        """Where ``wal`` is, with the size a reader sees; ``None`` when it left the queue since
        the snapshot.

        :raises WalMissingError: it is still queued but in neither ``WALs/`` nor ``oldWALs/``.
        """
        loc = self.listing.get(wal)
        if loc is not None and not loc.visible:
            try:
                loc = self.listing[wal] = self.walstore.visible(loc)
            except FileNotFoundError:
                loc = None  # archived or deleted since the listing
        if loc is not None:
            return loc
        try:
            return self.walstore.locate(wal, q.server)
        except WalMissingError:
            if not ReplicationQueues(self.client, self.layout).has_wal(q.server, str(q.queue_id), wal):
                return None  # shipped and removed, then cleaned, since the snapshot
            raise

    def first_unshipped_write_time(self, q: QueueInfo, locations: list[tuple[int, WalLocation]]) -> int | None:
        """Write time (epoch ms) of the queue's oldest entry past its position, or ``None``
        when every complete entry is shipped."""
        for position, loc in locations:
            if loc.size <= position:
                continue
            try:
                write_time = self._first_write_time(loc, position)
            except FileNotFoundError:
                # archived since it was located (a roll moves the WAL it closes): read it there
                self.listing.pop(loc.name, None)
                moved = self.locate(q, loc.name)
                if moved is None:
                    continue
                try:
                    write_time = self._first_write_time(moved, position)
                except FileNotFoundError:
                    raise WalMissingError(f"WAL {moved.path} left while being read for the status") from None
            if write_time is not None:
                return write_time
        return None

    def _first_write_time(self, loc: WalLocation, position: int) -> int | None:
        with self.walstore.open(loc) as f:
            reader = WalReader(f, loc.path, chunk_size=_PROBE_CHUNK)
            for entry in reader.entries(position or None):
                return int(entry.key.write_time)
        return None


def _queue_status(
    peer: PeerConfig,
    q: QueueInfo,
    reader: QueueFiles,
    live: set[str],
    holder: Holder | None,
    record: dict[str, Any] | None,
    now_ms: int,
    stuck_after: float = STUCK_AFTER,
) -> QueueStatus:
    record = record or {}
    problem: str | None = None
    problem_kind: str | None = None
    locations: list[tuple[int, WalLocation]] = []
    total = shipped = 0
    for wp in q.wals:
        try:
            loc = reader.locate(q, wp.name)
        except WalshipError as exc:
            problem, problem_kind = str(exc), error_kind(exc)
            continue
        if loc is None:
            continue
        locations.append((wp.position, loc))
        total += loc.size
        shipped += min(wp.position, loc.size)
    queued = total - shipped
    write_time: int | None = None
    if queued > 0 and problem is None:
        try:
            write_time = reader.first_unshipped_write_time(q, locations)
        except WalshipError as exc:
            problem, problem_kind = str(exc), error_kind(exc)
    unshipped = write_time is not None or problem is not None
    lag_s = round(max(0, now_ms - write_time) / 1000, 3) if write_time is not None else 0.0
    stalled_s: float | None = None
    if unshipped:
        since = max(_last_progress(q, record) or 0, write_time or 0)
        stalled_s = round(max(0, now_ms - since) / 1000, 3) if since else None
    last_wt = record.get("last_shipped_write_time")
    age: float | None = 0.0
    if unshipped:
        age = round(max(0, now_ms - int(last_wt)) / 1000, 3) if last_wt else None
    last_error = record.get("last_error")
    if problem is not None:
        last_error = {"time": now_ms, "message": problem, "kind": problem_kind}
    last_backoff = record.get("last_backoff")
    last_shipped_at = int(record.get("last_shipped_at") or 0)
    waiting = record.get("waiting_serial")
    if not (waiting and unshipped and int(waiting["time"]) >= last_shipped_at):
        waiting = None
    if not peer.enabled:
        state = "disabled"
    elif waiting is not None:
        state = "waiting-serial"
    elif holder is not None:
        state = "shipping"
        if last_backoff and int(last_backoff["time"]) >= last_shipped_at:
            window = max(_BACKOFF_WINDOW_S, 3 * float(last_backoff.get("seconds") or 0)) * 1000
            if now_ms - int(last_backoff["time"]) <= window:
                state = "waiting-peer"
    elif problem is not None or (unshipped and last_error and int(last_error["time"]) >= last_shipped_at):
        state = "stuck"
    else:
        state = "idle"
    dead = list(q.queue_id.dead_servers)
    if q.server not in live:
        dead.append(q.server)  # a dead server's queue, not claimed yet
    current = q.wals[0] if q.wals else None
    return QueueStatus(
        server=q.server,
        queue_id=str(q.queue_id),
        recovered=q.recovered or q.server not in live,
        dead_servers=dead,
        wals=len(q.wals),
        current_wal=current.name if current else None,
        position=current.position if current else 0,
        bytes_queued=queued,
        progress_pct=round(100.0 * shipped / total, 2) if total else 100.0,
        last_shipped_write_time=int(last_wt) if last_wt else None,
        age_of_last_shipped_op_s=age,
        lag_s=lag_s,
        holder=holder.to_json() if holder else None,
        last_error=(
            {"time": iso_ms(last_error["time"]), "message": last_error.get("message"), "kind": last_error.get("kind")}
            if last_error
            else None
        ),
        last_backoff=(
            {
                "time": iso_ms(last_backoff["time"]),
                "seconds": last_backoff.get("seconds"),
                "reason": last_backoff.get("reason"),
            }
            if last_backoff
            else None
        ),
        state=state,
        unshipped=unshipped,
        cells_shipped=int(record.get("cells_shipped") or 0),
        bytes_shipped=int(record.get("bytes_shipped") or 0),
        bulk_loads=int(record.get("bulk_loads") or 0),
        throttled_s=round(float(record.get("throttled_s") or 0.0), 3),
        waiting_serial={**waiting, "time": iso_ms(waiting["time"])} if waiting else None,
        stalled_s=stalled_s,
        stuck=peer.enabled and stalled_s is not None and stalled_s >= stuck_after,
        last_shipped_at=last_shipped_at or None,
    )


def collect_status(
    client: KazooClient,
    layout: ZnodeLayout,
    walstore: WalStore,
    peer_id: str | None = None,
    *,
    probe_timeout: float = 0.5,
    now_ms: int | None = None,
    stuck_after: float = STUCK_AFTER,
) -> ReplicationStatus:
    """The status of one peer, or of every peer.

    :param probe_timeout: seconds each sink endpoint has to take a TCP connection (0: no probe).
    :param stuck_after: seconds a queue with a backlog may make no progress before it is
        stuck (see the module docstring).
    :raises PeerNotFoundError: ``peer_id`` names no peer.
    :raises ValueError: ``stuck_after`` is not more than 0.
    """
    if not stuck_after > 0:
        raise ValueError(f"'stuck_after' must be > 0 seconds, got {stuck_after!r}")
    peers_store = ReplicationPeers(client, layout)
    peers = [peers_store.get(peer_id)] if peer_id is not None else peers_store.list()
    wanted = {p.peer_id for p in peers}
    queues = [q for q in ReplicationQueues(client, layout).list_queues(peer_id) if q.peer_id in wanted]
    live = set(live_servers(client, layout))
    holders = _holders(client, layout, queues)
    records = _progress(client, layout, queues)
    reader = QueueFiles(client, layout, walstore, queues)
    endpoints: dict[str, list[tuple[str, int]]] = {}
    counts: dict[str, PeerCount] = {}
    for peer in peers:
        try:
            endpoints[peer.peer_id] = sink_endpoints(peer)
        except WalshipError as exc:
            log.warning("peer %s: %s", peer.peer_id, exc)
            counts[peer.peer_id] = PeerCount(0, 0, (str(exc),))
    answered = _probe([e for es in endpoints.values() for e in es], probe_timeout) if probe_timeout > 0 else {}
    for pid, targets in endpoints.items():
        down = tuple(f"{h}:{p}" for h, p in targets if not answered.get((h, p), False))
        counts[pid] = PeerCount(len(targets), len(targets) - len(down), down)
    now = int(time.time() * 1000) if now_ms is None else now_ms
    status = ReplicationStatus(generated_at=now, stuck_after=stuck_after)
    by_peer: dict[str, PeerStatus] = {}
    peer_records: dict[str, list[dict[str, Any] | None]] = {}
    for q, record in zip(queues, records, strict=True):
        peer_records.setdefault(q.peer_id, []).append(record)
    started_at = _started(client, layout, peers)
    for peer, started, errors in zip(peers, started_at, _errors(client, layout, peers), strict=True):
        ps = PeerStatus(
            peer_id=peer.peer_id,
            enabled=peer.enabled,
            hbase_enabled=peer.hbase_state_enabled,
            cluster_key=peer.cluster_key,
            table_cfs=table_cfs_json(peer.table_cfs),
            peer_count=counts[peer.peer_id],
            bandwidth=peer.bandwidth,
            sink=_sink(started, peer_records.get(peer.peer_id, [])),
            serial=peer.serial,
            errors=errors,
            dead_letters_pending=_dead_letters_pending(peer, walstore),
        )
        by_peer[peer.peer_id] = ps
        status.peers.append(ps)
    configs = {p.peer_id: p for p in peers}
    for q, holder, record in zip(queues, holders, records, strict=True):
        qs = _queue_status(configs[q.peer_id], q, reader, live, holder, record, now, stuck_after)
        by_peer[q.peer_id].queues.append(qs)
    return status


def read_status(
    zk: str,
    znode_parent: str,
    wal_root: str,
    peer_id: str | None = None,
    *,
    auth: str | None = None,
    probe_timeout: float = 0.5,
    stuck_after: float = STUCK_AFTER,
) -> dict[str, Any]:
    """:func:`collect_status` as JSON, with a ZooKeeper client of its own (for the Airflow
    page and tasks; without ``auth``, ``WALSHIP_ZK_AUTH`` is used when set)."""
    with zk_client(zk, auth=auth, parent=znode_parent) as client:
        status = collect_status(
            client,
            ZnodeLayout(znode_parent),
            WalStore(wal_root),
            peer_id,
            probe_timeout=probe_timeout,
            stuck_after=stuck_after,
        )
    return status.to_json()
