"""walship's own records in ZooKeeper: per-queue progress, the summaries of ship jobs and the
results of verify jobs.

Both live under ``<parent>/replication/walship/`` (never inside HBase's queue znodes), are
small JSON documents, and are bounded: one progress record per queue (removed with the queue
or the peer), and the newest :data:`KEEP_JOBS` job summaries per peer. They are what the
``report`` task, status and metrics read, so no task hands another a local file.

A progress record::

    {"peer_id": "1", "server": "rs1,16020,1", "queue_id": "1",
     "last_shipped_wal": "...", "last_shipped_position": 4096, "last_shipped_write_time": 1767225600000,
     "batches": 3, "entries_shipped": 120, "cells_shipped": 240, "bytes_shipped": 65536, "bulk_loads": 0,
     "throttled_s": 1.5,
     "last_shipped_at": 1767225601000, "updated_at": 1767225601000,
     "last_error": {"time": ..., "message": ..., "kind": "peer-unavailable"} | null,
     "last_backoff": {"time": ..., "seconds": 0.4, "reason": ...} | null,
     "last_applied_at": 1767225600900, "last_applied_write_time": 1767225600000}

Counters add up over the queue's life (``bytes_shipped``: each shipped entry's WAL bytes in the
share of its cells the peer takes, an estimate of what it was sent; ``throttled_s``: the seconds
its batches waited for the peer's bandwidth); only a queue's lock holder writes its record, and
writes are versioned compare-and-set all the same.

``last_shipped_at`` is when the record was written after a batch's position was committed
(the batch applied, or wholly filtered): within :data:`~walship.replicate.progressbook.PROGRESS_INTERVAL`
of the commit. ``last_error.kind`` is one of :data:`walship.errors.ERROR_KINDS` (records
written before kinds were recorded lack it).

A peer's shipping errors are counted by kind in one more record, ``errors/<peer>``
(:meth:`ProgressStore.count_error`), one per failed pass over one of its queues; unlike a
queue's record it outlives the queue, so the counts only grow (removed with the peer)::

    {"peer_id": "1", "errors": {"peer-unavailable": 3, "wal-missing": 1}, "updated_at": 1767225601000}

``last_applied_at`` is when the peer's sink last returned from applying a batch of the queue
(not one its filters left empty, nor one whose every entry the sink passed over), and
``last_applied_write_time`` the write time of that batch's last edit: the sink side of
``status 'replication'`` (HBase's AgeOfLastAppliedOp is the one minus the other). Both are
``null`` until a batch is applied; records written before they existed lack them, and readers
take that as ``null``. ``last_shipped_write_time`` differs: it is the write time of the last
entry *read*, whether the filters kept it or not.
"""

from __future__ import annotations

import contextlib
import json
import logging
import time
from collections.abc import Callable
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError, NotEmptyError

from walship.errors import ERROR_KINDS, ZkDataError
from walship.zk.client import translated
from walship.zk.layout import ZnodeLayout, check_znode_name

__all__ = [
    "COUNTERS",
    "KEEP_JOBS",
    "JobStore",
    "ProgressStore",
    "VerifyStore",
    "error_counts",
    "load_json",
    "update_json",
]

log = logging.getLogger(__name__)

#: The counters of a progress record that add up.
COUNTERS = ("batches", "entries_shipped", "cells_shipped", "bytes_shipped", "bulk_loads")
#: Job summaries kept per peer; older ones are deleted when a new one is written.
KEEP_JOBS = 50
#: A summary larger than this is cut (ZooKeeper's limit is 1 MiB a znode).
_MAX_BYTES = 512 * 1024


def _now_ms() -> int:
    return int(time.time() * 1000)


def load_json(data: bytes, path: str) -> dict[str, Any]:
    try:
        value = json.loads(data.decode()) if data else {}
    except (UnicodeDecodeError, ValueError) as exc:
        raise ZkDataError(path, f"not a walship JSON record: {exc}") from None
    if not isinstance(value, dict):
        raise ZkDataError(path, "not a walship JSON record: expected an object")
    return value


def update_json(client: KazooClient, path: str, change: Callable[[dict[str, Any]], dict[str, Any]]) -> dict[str, Any]:
    """Read-modify-write one JSON znode with a versioned write; created when missing."""
    while True:
        try:
            data, stat = client.get(path)
        except NoNodeError:
            record = change({})
            try:
                client.create(path, json.dumps(record).encode(), makepath=True)
            except NodeExistsError:
                continue
            return record
        record = change(load_json(data, path))
        try:
            client.set(path, json.dumps(record).encode(), version=stat.version)
        except BadVersionError:
            continue
        except NoNodeError:
            continue
        return record


@translated("progress records")
class ProgressStore:
    """Per-queue progress records (see the module docstring)."""

    def __init__(self, client: KazooClient, layout: ZnodeLayout) -> None:
        self.client = client
        self.layout = layout

    def get(self, peer_id: str, server: str, queue_id: str) -> dict[str, Any] | None:
        path = self.layout.queue_progress(peer_id, server, queue_id)
        try:
            data, _ = self.client.get(path)
        except NoNodeError:
            return None
        return load_json(data, path)

    def list(self, peer_id: str) -> list[dict[str, Any]]:
        """Every record of the peer."""
        out = []
        base = self.layout.peer_progress(peer_id)
        try:
            servers = sorted(self.client.get_children(base))
        except NoNodeError:
            return []
        for server in servers:
            try:
                queue_ids = sorted(self.client.get_children(f"{base}/{server}"))
            except NoNodeError:
                continue
            for queue_id in queue_ids:
                record = self.get(peer_id, server, queue_id)
                if record is not None:
                    out.append(record)
        return out

    def record(
        self,
        peer_id: str,
        server: str,
        queue_id: str,
        *,
        counters: dict[str, int] | None = None,
        last_wal: str | None = None,
        last_position: int | None = None,
        last_write_time: int | None = None,
        error: str | None = None,
        error_kind: str | None = None,
        backoff: tuple[float, str] | None = None,
        throttled_s: float = 0.0,
        waiting_serial: dict[str, Any] | None = None,
        applied: tuple[int, int] | None = None,
        clear_error: bool = False,
    ) -> dict[str, Any]:
        """Add ``counters`` and set what is given; returns the record as written.

        :param error_kind: the kind of ``error``, one of :data:`walship.errors.ERROR_KINDS`.

        :param applied: ``(applied_at, write_time)``, epoch ms: when the peer's sink last
            returned from applying a batch, and the write time of that batch's last edit; kept
            only when it is no older than the record's.
        """

        def change(record: dict[str, Any]) -> dict[str, Any]:
            now = _now_ms()
            record.setdefault("peer_id", peer_id)
            record.setdefault("server", server)
            record.setdefault("queue_id", queue_id)
            for key in COUNTERS:
                record[key] = int(record.get(key, 0)) + int((counters or {}).get(key, 0))
            record["throttled_s"] = round(float(record.get("throttled_s") or 0.0) + throttled_s, 3)
            if last_wal is not None:
                record["last_shipped_wal"] = last_wal
                record["last_shipped_position"] = last_position
                record["last_shipped_at"] = now
            record.setdefault("last_shipped_at", None)
            if last_write_time is not None:
                record["last_shipped_write_time"] = max(
                    int(record.get("last_shipped_write_time") or 0), last_write_time
                )
            record.setdefault("last_shipped_write_time", None)
            if error is not None:
                record["last_error"] = {"time": now, "message": error[:2000], "kind": error_kind}
            elif clear_error:
                record["last_error"] = None
            record.setdefault("last_error", None)
            if backoff is not None:
                record["last_backoff"] = {"time": now, "seconds": backoff[0], "reason": backoff[1][:500]}
            record.setdefault("last_backoff", None)
            if waiting_serial is not None:
                record["waiting_serial"] = {"time": now, **waiting_serial}
            record.setdefault("waiting_serial", None)
            if applied is not None and applied[0] >= int(record.get("last_applied_at") or 0):
                record["last_applied_at"], record["last_applied_write_time"] = applied
            record.setdefault("last_applied_at", None)
            record.setdefault("last_applied_write_time", None)
            record["updated_at"] = now
            return record

        return update_json(self.client, self.layout.queue_progress(peer_id, server, queue_id), change)

    def remove(self, peer_id: str, server: str, queue_id: str) -> None:
        """Forget a queue's record (the queue is gone), and its server's folder once empty."""
        path = self.layout.queue_progress(peer_id, server, queue_id)
        try:
            self.client.delete(path)
            self.client.delete(path.rsplit("/", 1)[0])
        except (NoNodeError, NotEmptyError):
            pass

    def count_error(self, peer_id: str, kind: str) -> dict[str, int]:
        """Count one more shipping error of ``kind`` for the peer (a versioned write: shippers
        of the peer's queues count at once without losing one); returns the counts.

        :raises ValueError: ``kind`` is not one of :data:`walship.errors.ERROR_KINDS`.
        """
        if kind not in ERROR_KINDS:
            raise ValueError(f"'kind' must be one of {', '.join(ERROR_KINDS)}, got {kind!r}")

        def change(record: dict[str, Any]) -> dict[str, Any]:
            counts = record.get("errors")
            counts = dict(counts) if isinstance(counts, dict) else {}
            counts[kind] = int(counts.get(kind) or 0) + 1
            return {**record, "peer_id": peer_id, "errors": counts, "updated_at": _now_ms()}

        return dict(update_json(self.client, self.layout.peer_errors(peer_id), change)["errors"])

    def errors(self, peer_id: str) -> dict[str, int]:
        """The peer's shipping errors counted by kind (``{}`` before any)."""
        path = self.layout.peer_errors(peer_id)
        try:
            data, _ = self.client.get(path)
        except NoNodeError:
            return {}
        return error_counts(load_json(data, path))

    def remove_peer(self, peer_id: str) -> None:
        with contextlib.suppress(NoNodeError):
            self.client.delete(self.layout.peer_progress(peer_id), recursive=True)
        with contextlib.suppress(NoNodeError):
            self.client.delete(self.layout.peer_errors(peer_id))


def error_counts(record: dict[str, Any] | None) -> dict[str, int]:
    """The counts by kind of a peer's ``errors/<peer>`` record (kinds this version does not
    know are left out; ``{}`` for none)."""
    counts = (record or {}).get("errors")
    if not isinstance(counts, dict):
        return {}
    out: dict[str, int] = {}
    for kind, n in counts.items():
        if kind in ERROR_KINDS and isinstance(n, int) and not isinstance(n, bool) and n > 0:
            out[kind] = n
    return out


@translated("ship job summaries")
class JobStore:
    """Summaries of ship jobs, by peer and job id; the newest :data:`KEEP_JOBS` are kept."""

    def __init__(self, client: KazooClient, layout: ZnodeLayout) -> None:
        self.client = client
        self.layout = layout

    def put(self, peer_id: str, job_id: str, summary: dict[str, Any]) -> None:
        path = self.layout.job(peer_id, job_id)
        record = {**summary, "job_id": job_id, "written_at": _now_ms()}
        data = json.dumps(record).encode()
        if len(data) > _MAX_BYTES:
            # keep the totals and the state of every queue, drop per-queue detail
            queues = [
                {k: q.get(k) for k in ("server", "queue_id", "status", "error")} for q in record.get("queues", [])
            ]
            data = json.dumps({**record, "queues": queues, "truncated": True}).encode()[:_MAX_BYTES]
        try:
            self.client.create(path, data, makepath=True)
        except NodeExistsError:
            self.client.set(path, data)
        self._trim(peer_id)

    def get(self, peer_id: str, job_id: str) -> dict[str, Any] | None:
        path = self.layout.job(peer_id, job_id)
        try:
            data, _ = self.client.get(path)
        except NoNodeError:
            return None
        return load_json(data, path)

    def job_ids(self, peer_id: str) -> list[str]:
        """Job ids, oldest first."""
        base = self.layout.peer_jobs(peer_id)
        try:
            names = self.client.get_children(base)
        except NoNodeError:
            return []
        stamped = []
        for name in names:
            stat = self.client.exists(f"{base}/{name}")
            if stat is not None:
                stamped.append((stat.ctime, name))
        return [name for _, name in sorted(stamped)]

    def _trim(self, peer_id: str) -> None:
        ids = self.job_ids(peer_id)
        for job_id in ids[: max(0, len(ids) - KEEP_JOBS)]:
            with contextlib.suppress(NoNodeError):
                self.client.delete(self.layout.job(peer_id, job_id))


class _VerifyLayout(ZnodeLayout):
    """The layout with a job's znode moved to ``<parent>/replication/walship/verify/<peer>/<job>``."""

    def peer_jobs(self, peer_id: str) -> str:
        return f"{self.walship}/verify/{check_znode_name(peer_id, 'peer id')}"

    def job(self, peer_id: str, job_id: str) -> str:
        return f"{self.peer_jobs(peer_id)}/{check_znode_name(job_id, 'verify job id')}"


@translated("verify results")
class VerifyStore(JobStore):
    """Results of verify jobs (what ``walship verify --json`` prints, or an error), by peer and
    job id, under ``<parent>/replication/walship/verify/<peer>/<job>``; the newest
    :data:`KEEP_JOBS` are kept. The ``walship_verify`` DAG's report reads them there, whichever
    host the Spark driver ran on.

    Example::

        store = VerifyStore(client, ZnodeLayout("/hbase"))
        store.put("1", "scheduled__2026-01-02T00:00:00+00:00", result.to_json())
        store.get("1", "scheduled__2026-01-02T00:00:00+00:00")["counters"]["BADROWS"]
    """

    def __init__(self, client: KazooClient, layout: ZnodeLayout) -> None:
        super().__init__(client, _VerifyLayout(layout.parent))

    def put(self, peer_id: str, job_id: str, summary: dict[str, Any]) -> None:
        """Write a result; too large a one loses its repair audit lines, then its bad row keys
        (each marked ``<key>_truncated``), never its counters."""
        record = dict(summary)
        for key in ("repair", "bad_rows"):
            if len(json.dumps(record).encode()) <= _MAX_BYTES - 4096:  # room for job_id, written_at
                break
            if record.get(key):
                record[key] = []
                record[f"{key}_truncated"] = True
        super().put(peer_id, job_id, record)

    def delete(self, peer_id: str, job_id: str) -> None:
        """Forget a result (before a job runs again under the same id)."""
        with contextlib.suppress(NoNodeError):
            self.client.delete(self.layout.job(peer_id, job_id))
