"""Backlog replay: ship every edit written in a time window, from all WALs still present
(``WALs/`` and ``oldWALs/``), to a peer, filtered as for that peer, without touching any
queue position.

Replay is idempotent: cells keep their timestamps, so replaying a window twice, or two
overlapping windows, leaves the peer as replaying once. If the WALs that covered part of the
window are gone (deleted by a cleaner), the replay fails naming the missing span, unless gaps
are allowed.

A WAL covers the time from its creation (the timestamp in its name) until the next WAL of its
group was created; the last WAL of a group covers until now if it is still being written, or
until its last modification once archived.
"""

from __future__ import annotations

import datetime as dt
import logging
import posixpath
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from kazoo.client import KazooClient

from walship import defaults
from walship.errors import ConfigError, InvalidWalNameError, ReplayGapError
from walship.meter import NO_METER, Meter
from walship.replicate.cleaner import last_run
from walship.replicate.planner import Planner
from walship.replicate.throttle import within_bandwidth
from walship.replicate.walstore import WalStore
from walship.sinks.base import ApplyStats, FilteredEntry, Sink, SinkContext
from walship.sinks.registry import create_sink
from walship.wal.names import WalName, is_checksum_file, parse_wal_name
from walship.wal.reader import WalReader
from walship.zk import ZnodeLayout

__all__ = ["ReplayReport", "find_gaps", "replay"]

log = logging.getLogger(__name__)

#: What a replay into a serial peer does not keep.
SERIAL_WARNING = (
    "peer {peer} is serial, but a replay sends the window WAL by WAL: a row's edits from before "
    "and after a region move, split or merge may reach the peer out of order (the cells keep "
    "their timestamps, so the peer ends the same; a SEP listener sees the order they come in)"
)


@dataclass
class ReplayReport:
    peer_id: str
    start: str
    end: str
    wals_read: list[str] = field(default_factory=list)
    entries_in_window: int = 0
    entries_shipped: int = 0
    cells_shipped: int = 0
    bulk_loads: list[str] = field(default_factory=list)  # bulk loads of what the peer takes: not shipped
    gaps: list[list[str]] = field(default_factory=list)
    not_wals: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    #: seconds the batches waited for the peer's bandwidth (a replay keeps to it as shipping does)
    throttled_s: float = 0.0

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["throttled_s"] = round(self.throttled_s, 3)
        return out

    def add(self, stats: ApplyStats, entries: int) -> None:
        """Count a batch of ``entries`` the sink applied (less those it had nothing to do for)."""
        self.cells_shipped += stats.cells
        self.entries_shipped += entries - stats.passed_over
        self.throttled_s += stats.throttled_s


@dataclass(frozen=True)
class _WalFile:
    path: str
    name: WalName
    archived: bool
    mtime_ms: int
    size: int


def _overlaps(span: tuple[int, int], start_ms: int, end_ms: int) -> bool:
    return span[1] > start_ms and span[0] < end_ms


def _iso(ms: int) -> str:
    return dt.datetime.fromtimestamp(ms / 1000, tz=dt.UTC).isoformat()


def _to_ms(value: dt.datetime) -> int:
    if value.tzinfo is None:
        raise ConfigError(f"time {value.isoformat()} has no time zone")
    return int(value.timestamp() * 1000)


def _coverage(files: list[_WalFile], now_ms: int) -> tuple[list[tuple[int, int]], dict[str, tuple[int, int]]]:
    """The merged time spans the WALs cover, and each WAL's own span."""
    groups: dict[str, list[_WalFile]] = {}
    for f in files:
        groups.setdefault(f.name.group, []).append(f)
    spans: dict[str, tuple[int, int]] = {}
    for members in groups.values():
        members.sort(key=lambda f: f.name.timestamp)
        for i, f in enumerate(members):
            if i + 1 < len(members):
                end = members[i + 1].name.timestamp
            else:
                end = max(f.mtime_ms, f.name.timestamp) + 1 if f.archived else now_ms
            spans[f.path] = (f.name.timestamp, max(end, f.mtime_ms + 1))
    merged: list[tuple[int, int]] = []
    for start, end in sorted(spans.values()):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged, spans


def find_gaps(covered: list[tuple[int, int]], start_ms: int, end_ms: int) -> list[tuple[int, int]]:
    """The parts of [start, end) no span covers."""
    gaps = []
    cursor = start_ms
    for s, e in covered:
        if e <= cursor:
            continue
        if s >= end_ms:
            break
        if s > cursor:
            gaps.append((cursor, min(s, end_ms)))
        cursor = max(cursor, e)
        if cursor >= end_ms:
            break
    if cursor < end_ms:
        gaps.append((cursor, end_ms))
    return gaps


def _kept_for(client: KazooClient, layout: ZnodeLayout) -> str:
    """How long archived WALs are kept, for a gap's message: the TTL of walship's last cleaner
    run, and HBase's own cleaner's setting."""
    hbase = "HBase's own cleaner keeps them hbase.master.logcleaner.ttl"
    run = last_run(client, layout)
    if run is None:
        return f"deleted already? walship clean keeps archived WALs --ttl seconds (default {defaults.CLEAN_TTL:g}); {hbase}"
    at = _iso(int(run.get("ran_at") or 0))
    return f"deleted already? walship clean keeps archived WALs {float(run['ttl']):g} s (its last run: {at}); {hbase}"


def replay(
    client: KazooClient,
    layout: ZnodeLayout,
    walstore: WalStore,
    peer_id: str,
    start: dt.datetime,
    end: dt.datetime,
    *,
    allow_gaps: bool = False,
    batch_entries: int = defaults.BATCH_ENTRIES,
    sink: Sink | None = None,
    meter: Meter = NO_METER,
) -> ReplayReport:
    """Replay the window [start, end) to ``peer_id`` (``meter`` counts the WAL bytes read),
    no faster than the peer's bandwidth.

    :raises ReplayGapError: WALs covering part of the window are gone (unless ``allow_gaps``).
    :raises ReplicationError: the peer refused the edits.
    """
    start_ms, end_ms = _to_ms(start), _to_ms(end)
    if end_ms <= start_ms:
        raise ConfigError(f"empty window: --from {start.isoformat()} is not before --to {end.isoformat()}")
    planner = Planner(client, layout, walstore)
    peer = planner.peers.get(peer_id)
    report = ReplayReport(peer_id, _iso(start_ms), _iso(end_ms))
    if peer.serial:
        report.warnings.append(SERIAL_WARNING.format(peer=peer_id))
        log.warning("%s", report.warnings[-1])
    files: list[_WalFile] = []
    for path, archived in walstore.wal_files():
        if is_checksum_file(posixpath.basename(path)):
            continue  # Hadoop's .<wal>.crc beside each WAL on a local file system
        try:
            name = parse_wal_name(posixpath.basename(path))
        except InvalidWalNameError:
            report.not_wals.append(path)
            continue
        if name.is_meta:
            continue  # hbase:meta WALs are never replicated
        info = walstore.fs.info(path)
        mtime = info.get("mtime") or info.get("created") or 0
        mtime = mtime.timestamp() if hasattr(mtime, "timestamp") else float(mtime)
        files.append(_WalFile(path, name, archived, int(mtime * 1000), int(info.get("size") or 0)))
    covered, spans = _coverage(files, int(time.time() * 1000))
    gaps = find_gaps(covered, start_ms, end_ms)
    report.gaps = [[_iso(s), _iso(e)] for s, e in gaps]
    if gaps and not allow_gaps:
        spans_text = ", ".join(f"{a} to {b}" for a, b in report.gaps)
        raise ReplayGapError(
            f"replay of {report.start} to {report.end} for peer {peer_id}: no WAL covers {spans_text} "
            f"({_kept_for(client, layout)}); allow gaps to replay the rest"
        )
    entry_filter = planner.entry_filter(peer)
    sink = within_bandwidth(sink or create_sink(peer, SinkContext(walstore.root)), peer)
    in_window = [
        f for f in sorted(files, key=lambda f: (f.name.timestamp, f.path)) if _overlaps(spans[f.path], start_ms, end_ms)
    ]
    meter.start(sum(f.size for f in in_window), "bytes")
    try:
        for f in in_window:
            report.wals_read.append(f.name.name)
            batch: list[FilteredEntry] = []
            # up to what a reader sees: on HDFS a WAL being written lists less
            with walstore.open(walstore.location(f.path, f.archived)) as fh:
                for entry in WalReader(fh, f.path).entries():
                    if not start_ms <= entry.key.write_time < end_ms:
                        continue
                    report.entries_in_window += 1
                    kept = entry_filter.apply(entry)
                    if kept is not None:
                        batch.append(kept)
                    elif (load := entry_filter.bulk_load(entry, f.path)) is not None:
                        report.bulk_loads.append(load.describe())
                        log.warning(
                            "replay for peer %s: a bulk load is not in the WAL, so not replayed: %s; "
                            "'walship verify --peer %s --table %s --repair' copies its rows",
                            peer_id,
                            load.describe(),
                            peer_id,
                            load.table.decode(errors="replace"),
                        )
                    if len(batch) >= batch_entries:
                        report.add(sink.apply(batch, f.name.name), len(batch))
                        batch = []
            if batch:
                report.add(sink.apply(batch, f.name.name), len(batch))
            meter.advance(f.size)
    finally:
        sink.close()
    log.info(
        "replayed %s to %s for peer %s: %d entries in the window, %d shipped, from %d WALs",
        report.start,
        report.end,
        peer_id,
        report.entries_in_window,
        report.entries_shipped,
        len(report.wals_read),
    )
    return report
