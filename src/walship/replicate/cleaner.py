"""The log cleaner: delete archived WALs nobody needs any more.

A file under ``oldWALs/`` is deleted only when all of these hold, as HBase's LogCleaner with
its TimeToLiveLogCleaner and ReplicationLogCleaner decides:

* its name is a WAL name (anything else is reported, never deleted);
* it is older than the TTL (default :data:`walship.defaults.CLEAN_TTL`, a day) and older than
  the snapshot of the queues;
* no queue references it, by one consistent snapshot of every queue taken for the whole run
  (a set lookup per file, not a ZooKeeper read per file).

Nothing under ``WALs/`` is ever touched, nothing outside the archive, and if ZooKeeper cannot
be read, nothing is deleted at all.

On a local file system Hadoop writes a checksum file ``.<name>.crc`` beside each WAL (as HBase
on ``file://`` does): it is no WAL, and goes with its WAL (or, its WAL gone, once older than
the TTL), as Hadoop's own delete takes both.

Each run that deletes (not a dry run) records its TTL and time in ``<parent>/replication/
walship/cleaner`` (:func:`last_run`), so that ``walship replay`` can say why a window's WALs
are gone.
"""

from __future__ import annotations

import json
import logging
import math
import posixpath
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from kazoo.client import KazooClient

from walship import defaults
from walship.errors import ConfigError, ZkError, ZkUnavailableError
from walship.replicate.walstore import WalStore
from walship.wal.names import checksum_file_of, is_checksum_file, is_wal_name
from walship.zk import ReplicationPeers, ReplicationQueues, ZnodeLayout
from walship.zk.client import KAZOO_ERRORS

__all__ = ["DEFAULT_DISABLED_PEER_LIMIT", "DEFAULT_TTL", "CleanReport", "clean", "last_run"]

log = logging.getLogger(__name__)

DEFAULT_TTL = defaults.CLEAN_TTL
DEFAULT_DISABLED_PEER_LIMIT = 10 * 1024**3


@dataclass
class Tally:
    files: int = 0
    bytes: int = 0

    def add(self, size: int) -> None:
        self.files += 1
        self.bytes += size


@dataclass
class CleanReport:
    """What one run of the cleaner did, and why it kept what it kept."""

    dry_run: bool
    ttl: float
    deleted: Tally = field(default_factory=Tally)
    kept_referenced: Tally = field(default_factory=Tally)
    kept_young: Tally = field(default_factory=Tally)
    not_wal: list[str] = field(default_factory=list)
    deleted_files: list[str] = field(default_factory=list)
    #: Hadoop checksum files (``.<wal>.crc``) deleted with their WAL, or left by a WAL gone
    checksum_files_deleted: int = 0
    warnings: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def clean(
    client: KazooClient,
    layout: ZnodeLayout,
    walstore: WalStore,
    *,
    ttl: float = DEFAULT_TTL,
    dry_run: bool = False,
    now: float | None = None,
    disabled_peer_limit: int = DEFAULT_DISABLED_PEER_LIMIT,
) -> CleanReport:
    """One cleaner run.

    :raises WalshipError: ZooKeeper could not be read (then nothing was deleted).
    """
    if not (math.isfinite(ttl) and ttl >= 0):  # NaN compares false with everything: refuse it here
        raise ConfigError(f"invalid TTL {ttl!r}: must be a finite number of seconds >= 0")
    report = CleanReport(dry_run=dry_run, ttl=ttl)
    queues = ReplicationQueues(client, layout)
    try:
        snapshot_time = time.time() if now is None else now
        referenced = queues.all_wals()
        held_by_disabled = _disabled_peer_wals(client, layout, queues)
    except ZkError as exc:
        kind = ZkUnavailableError if isinstance(exc, ZkUnavailableError) else ZkError
        raise kind(f"cannot read the replication queues under {layout.queues}; nothing deleted: {exc}") from exc
    current = time.time() if now is None else now
    archive = posixpath.join(walstore.base, "oldWALs") + "/"
    disabled_bytes: dict[str, int] = {}
    expired: list[tuple[str, int]] = []
    listing = walstore.list_archive()
    checksums = {posixpath.basename(p): (p, m) for p, m, _ in listing if is_checksum_file(posixpath.basename(p))}
    archived = {posixpath.basename(p) for p, _, _ in listing}
    for path, mtime, size in listing:
        name = posixpath.basename(path)
        if not path.startswith(archive):  # defensive: only ever the archive
            report.not_wal.append(path)
            continue
        if name in checksums:
            continue  # goes with its WAL, below
        if not is_wal_name(name):
            report.not_wal.append(path)
            continue
        if name in referenced:
            report.kept_referenced.add(size)
            for peer_id in held_by_disabled.get(name, ()):
                disabled_bytes[peer_id] = disabled_bytes.get(peer_id, 0) + size
            continue
        if current - mtime <= ttl or mtime >= snapshot_time:
            report.kept_young.add(size)
            continue
        expired.append((path, size))
    # a WAL's checksum file goes with it; one whose WAL is gone, once older than the TTL
    sums = [checksums[c][0] for p, _ in expired if (c := checksum_file_of(posixpath.basename(p))) in checksums]
    for crc, (path, mtime) in checksums.items():
        wal = crc[1 : -len(".crc")]
        if path.startswith(archive) and wal not in archived and wal not in referenced and current - mtime > ttl:
            sums.append(path)
    # decided from the snapshot and the listing alone; deleted together (on HDFS, several
    # deletes in flight at once); a file gone meanwhile was deleted by another cleaner
    done = [True] * len(expired) if dry_run else walstore.delete([path for path, _ in expired])
    for (path, size), deleted in zip(expired, done, strict=True):
        if deleted:
            report.deleted.add(size)
            report.deleted_files.append(posixpath.basename(path))
    if sums:
        report.checksum_files_deleted = len(sums) if dry_run else sum(walstore.delete(sums))
    for peer_id, held in sorted(disabled_bytes.items()):
        if held > disabled_peer_limit:
            msg = (
                f"disabled peer {peer_id} holds {held:,} bytes of archived WALs "
                f"(limit {disabled_peer_limit:,}): enable it, or remove it to let them go"
            )
            report.warnings.append(msg)
            log.warning("%s", msg)
    if not dry_run:
        _record_run(client, layout, ttl, current)
    log.info(
        "cleaner: deleted %d files (%d bytes), kept %d referenced, %d young, %d not WALs%s",
        report.deleted.files,
        report.deleted.bytes,
        report.kept_referenced.files,
        report.kept_young.files,
        len(report.not_wal),
        " (dry run)" if dry_run else "",
    )
    return report


def _record_run(client: KazooClient, layout: ZnodeLayout, ttl: float, at: float) -> None:
    """Record the run's TTL and time (a failure is a warning: the run's deletes are done)."""
    data = json.dumps({"ttl": ttl, "ran_at": int(at * 1000)}).encode()
    try:
        if client.exists(layout.cleaner) is None:
            client.create(layout.cleaner, data, makepath=True)
        else:
            client.set(layout.cleaner, data)
    except KAZOO_ERRORS as exc:
        log.warning("cleaner: could not record this run under %s: %s", layout.cleaner, exc)


#: a cleaner record that cannot be read (ZooKeeper) or parsed (not JSON)
_UNREADABLE: tuple[type[Exception], ...] = (*KAZOO_ERRORS, ValueError)


def last_run(client: KazooClient, layout: ZnodeLayout) -> dict[str, Any] | None:
    """The last cleaner run that deleted: ``{"ttl": seconds, "ran_at": epoch ms}`` (``None``
    before any, or when unreadable)."""
    try:
        data, _ = client.get(layout.cleaner)
        record = json.loads(data)
    except _UNREADABLE:
        return None
    if not isinstance(record, dict) or not isinstance(record.get("ttl"), int | float):
        return None
    return record


def _disabled_peer_wals(client: KazooClient, layout: ZnodeLayout, queues: ReplicationQueues) -> dict[str, set[str]]:
    """WAL name -> the disabled peers whose queues hold it."""
    disabled = sorted(p.peer_id for p in ReplicationPeers(client, layout).list() if not p.enabled)
    out: dict[str, set[str]] = {}
    for peer_id in disabled:  # only their queues are read (a warning's figure, not a decision)
        for q in queues.list_queues(peer_id):
            for w in q.wals:
                out.setdefault(w.name, set()).add(peer_id)
    return out
