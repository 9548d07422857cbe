"""Run a verification: plan the splits, compare each (in this process, or one Spark task per
split through :mod:`walship.spark.verify`: the same :func:`run_split`), combine.

Per split: both sides are scanned over the split's ranges and merged in key order; rows that
differ are read again, both sides, after ``recompare_sleep`` seconds, and are bad only when
they still differ and no unshipped edit of the peer's queues touches them (else in flight).
With ``repair``, each bad row is repaired on the peer (:mod:`walship.verify.repair`).

Example::

    result = verify(job)          # job: a VerifyJob
    print(result.to_json()["counters"])
"""

from __future__ import annotations

import dataclasses
import json
import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from walship.errors import ConfigError, ReplicationError, SinkError, VerifyError, VerifyUnavailableError
from walship.files import url_to_fs
from walship.meter import NO_METER, Meter
from walship.replicate.planner import Planner
from walship.replicate.walstore import WalStore
from walship.rpc.meta import read_meta_location
from walship.sinks.regionservers import RegionServerSink
from walship.thrift.hbase2 import table_name
from walship.verify.compare import compare_row, merge_rows
from walship.verify.inflight import Unshipped, unshipped_rows
from walship.verify.model import COUNTER_NAMES, Counters, RowDiff, Split, SplitResult, to_string_binary
from walship.verify.plan import VerifyJob, plan_splits
from walship.verify.repair import repair_row
from walship.verify.scan import Side
from walship.zk import ReplicationPeers, ZnodeLayout, zk_client
from walship.zk.cluster import read_cluster_id

__all__ = ["BAD_ROWS_SHOWN", "VerifyResult", "combine", "plan", "run_split", "verify", "write_report"]

log = logging.getLogger(__name__)

#: Bad row keys listed in the summary (every one goes to the report).
BAD_ROWS_SHOWN = 100


def _in_flight(job: VerifyJob, table: str) -> dict[tuple[str, bytes], Unshipped]:
    """Per ``(table, row)``, what the peer's queues still have to ship, read now.

    :raises ConfigError: the job has no WAL root.
    """
    if not job.wal_root:
        raise ConfigError("verify: no WAL root: give --wal-root (before the subcommand) or set WALSHIP_WAL_ROOT")
    layout = ZnodeLayout(job.znode_parent)
    with zk_client(job.zk, auth=job.zk_auth, parent=layout.parent) as client:
        planner = Planner(client, layout, WalStore(job.wal_root))
        peer = ReplicationPeers(client, layout).get(job.peer_id)
        try:
            entry_filter = planner.entry_filter(peer)
        except ReplicationError as exc:
            raise VerifyError(f"peer {job.peer_id}: cannot tell which edits are in flight: {exc}") from None
        return unshipped_rows(client, layout, planner.walstore, peer, entry_filter, {table})


def run_split(
    job: VerifyJob, split: Split, in_flight: Callable[[VerifyJob, str], dict[tuple[str, bytes], Unshipped]] = _in_flight
) -> SplitResult:
    """Compare one split (and repair it, when the job says so)."""
    began = time.monotonic()
    result = SplitResult(split)
    versions = dict(split.families)
    lo, hi = job.start_ms, job.end_ms
    suspects: list[RowDiff] = []
    with job.source_side() as source, job.peer_side() as peer:
        for start, stop in split.ranges:
            rows = merge_rows(
                source.scan(split.table, start, stop, versions, lo, hi),
                peer.scan(split.table, start, stop, versions, lo, hi),
            )
            for row, src, dst in rows:
                result.rows_scanned += 1
                diff = compare_row(split.table, row, src, dst)
                if diff is None:
                    result.found.good += 1
                else:
                    suspects.append(diff)
        bad = _recompare(job, split, source, peer, suspects, result.found, in_flight)
        result.counters = Counters(good=result.found.good, in_flight=result.found.in_flight)
        for diff in bad:
            result.found.count_bad(diff.kind)
            line = diff.to_json()
            still = diff
            if job.repair:
                outcome = repair_row(source, peer, diff, versions, lo, hi)
                result.repairs.append(outcome.to_json())
                line["repaired"] = outcome.repaired
                if outcome.repaired:
                    result.counters.repaired += 1
                    result.bad.append(line)
                    continue
                still = outcome.remaining or diff
            result.counters.count_bad(still.kind)
            result.bad_keys.append(to_string_binary(diff.row))
            result.bad.append(line)
    result.seconds = round(time.monotonic() - began, 3)
    log.info("%s: %s", split.describe(), result.counters.to_json())
    return result


def _recompare(
    job: VerifyJob,
    split: Split,
    source: Side,
    peer: Side,
    suspects: list[RowDiff],
    counters: Counters,
    in_flight: Callable[[VerifyJob, str], dict[tuple[str, bytes], Unshipped]],
) -> list[RowDiff]:
    """The suspects that are still bad after the recompare sleep (the others counted good or
    in flight in ``counters``)."""
    if not suspects:
        return []
    if job.recompare_sleep > 0:
        time.sleep(job.recompare_sleep)
    versions = dict(split.families)
    before = in_flight(job, split.table)
    still: list[RowDiff] = []
    for diff in suspects:
        src = source.get(split.table, diff.row, versions, job.start_ms, job.end_ms)
        dst = peer.get(split.table, diff.row, versions, job.start_ms, job.end_ms)
        again = compare_row(split.table, diff.row, src, dst)
        if again is None:
            counters.good += 1
        else:
            still.append(again)

    def explained(diff: RowDiff, unshipped: dict[tuple[str, bytes], Unshipped]) -> bool:
        cells = unshipped.get((split.table, diff.row))
        return cells is not None and cells.explains(diff)

    after: dict[tuple[str, bytes], Unshipped] = {}
    if any(not explained(d, before) for d in still):
        after = in_flight(job, split.table)
    bad = []
    for diff in still:
        if explained(diff, before) or explained(diff, after):
            counters.in_flight += 1
        else:
            bad.append(diff)
    return bad


@dataclass
class VerifyResult:
    """A whole run: the counters at the end (after ``--repair``), those found before it, the
    bad rows with their differences, the repair audit lines."""

    job: VerifyJob
    splits: list[Split]
    counters: Counters = field(default_factory=Counters)
    found: Counters = field(default_factory=Counters)
    bad: list[dict[str, Any]] = field(default_factory=list)
    bad_keys: list[str] = field(default_factory=list)
    repairs: list[dict[str, Any]] = field(default_factory=list)
    rows_scanned: int = 0
    seconds: float = 0.0
    report: dict[str, str] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.counters.bad == 0

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "peer_id": self.job.peer_id,
            "counters": self.counters.to_json(repair=self.job.repair),
            "bad_rows": self.bad_keys[:BAD_ROWS_SHOWN],
            "bad_rows_truncated": len(self.bad_keys) > BAD_ROWS_SHOWN,
            "tables": sorted({s.table for s in self.splits}),
            "splits": len(self.splits),
            "rows_scanned": self.rows_scanned,
            "seconds": self.seconds,
            "time_range": [self.job.start_ms, self.job.end_ms],
        }
        if self.job.repair:
            out["found"] = self.found.to_json()
            out["repaired"] = self.counters.repaired
            out["repair"] = self.repairs[:BAD_ROWS_SHOWN]
        if self.report:
            out["report"] = self.report
        return out

    def summary(self) -> str:
        """The counters, readable."""
        lines = [
            f"peer {self.job.peer_id}: {self.rows_scanned} rows in {len(self.splits)} split(s) "
            f"of {', '.join(sorted({s.table for s in self.splits}))} ({self.seconds:.1f}s)"
        ]
        counters = self.counters.to_json(repair=self.job.repair)
        width = max(len(n) for n in counters)
        lines += [
            f"  {name:<{width}}  {counters[name]}" for name in (*COUNTER_NAMES, "REPAIRED_ROWS") if name in counters
        ]
        if self.job.repair:
            lines.append(f"  found before repair: {self.found.bad} bad, repaired {self.counters.repaired}")
            lines += [
                f"  unrepaired {r['table']} {r['row']}: {r['reason']}; {r['remedy']}"
                for r in self.repairs
                if not r["repaired"]
            ][:BAD_ROWS_SHOWN]
        if self.bad_keys:
            shown = ", ".join(self.bad_keys[:10])
            more = f" (and {len(self.bad_keys) - 10} more)" if len(self.bad_keys) > 10 else ""
            lines.append(f"  bad rows: {shown}{more}")
        for name, path in self.report.items():
            lines.append(f"  {name}: {path}")
        lines.append("OK: no bad rows" if self.ok else f"FAILED: {self.counters.bad} bad row(s)")
        return "\n".join(lines)


def plan(job: VerifyJob, *, for_copy: bool = False) -> tuple[VerifyJob, list[Split]]:
    """On the driver: read the peer, check the request, list the splits. ``for_copy``: a copy's
    plan, which also says whether the source's region servers can be read (its ZooKeeper names
    hbase:meta's server) and, for a peer of sink ``hbase``, finds the peer's tables in its
    hbase:meta instead of over Thrift2.

    :raises PeerNotFoundError: no such peer.
    :raises VerifyError: see :func:`~walship.verify.plan.plan_splits`.
    """
    layout = ZnodeLayout(job.znode_parent)
    with zk_client(job.zk, auth=job.zk_auth, parent=layout.parent) as client:
        peer = ReplicationPeers(client, layout).get(job.peer_id)
        source_id = read_cluster_id(client, layout) if for_copy else None
        native = for_copy and read_meta_location(client, layout) is not None
    job = job.with_peer(peer, copy_source_id=source_id)
    if native:
        job = dataclasses.replace(job, source_region_servers=True)
    with job.source_side() as source:
        if job.peer_cluster_key:
            sink = job.peer_region_servers()
            try:
                return job, plan_splits(job, peer, source, lambda t: _has_table(sink, t), job.peer_cluster_key)
            finally:
                sink.close()
        with job.peer_side() as peer_side:

            def has_table(table: str) -> bool:
                return bool(peer_side.call(f"check table {table}", lambda c: c.tableExists(table_name(table))))

            return job, plan_splits(job, peer, source, has_table, peer_side.server)


def _has_table(sink: RegionServerSink, table: str) -> bool:
    try:
        return sink.has_table(table.encode())
    except SinkError as exc:
        raise VerifyUnavailableError(str(exc)) from None


def combine(job: VerifyJob, splits: list[Split], results: Iterable[SplitResult], seconds: float) -> VerifyResult:
    out = VerifyResult(job, splits, seconds=round(seconds, 3))
    for r in results:
        out.counters.add(r.counters)
        out.found.add(r.found)
        out.bad.extend(r.bad)
        out.bad_keys.extend(r.bad_keys)
        out.repairs.extend(r.repairs)
        out.rows_scanned += r.rows_scanned
    return out


def write_report(result: VerifyResult, directory: str) -> dict[str, str]:
    """Every bad row with its difference (``bad_rows.jsonl``) and, after ``--repair``, one
    audit line per repaired row (``repair.jsonl``), into ``directory`` (a path or URL)."""
    files = {"bad_rows": [json.dumps(b, sort_keys=True) for b in result.bad]}
    if result.job.repair:
        files["repair"] = [json.dumps(r, sort_keys=True) for r in result.repairs]
    written: dict[str, str] = {}
    try:
        fs, root = url_to_fs(directory)
        fs.makedirs(root, exist_ok=True)
        for name, lines in files.items():
            path = f"{root.rstrip('/')}/{name}.jsonl"
            with fs.open(path, "w") as f:
                f.write("".join(line + "\n" for line in lines))
            written[name] = path if "://" not in directory else f"{directory.rstrip('/')}/{name}.jsonl"
    except (OSError, ValueError) as exc:
        raise VerifyError(f"--report {directory}: cannot write the report: {exc}") from None
    return written


def verify(job: VerifyJob, report: str | None = None, *, meter: Meter = NO_METER) -> VerifyResult:
    """Plan and compare every split in this process (``meter`` counts the splits); write the
    report when asked."""
    began = time.monotonic()
    job, splits = plan(job)
    meter.start(len(splits), "splits")
    results = []
    for split in splits:
        results.append(run_split(job, split))
        meter.advance()
    result = combine(job, splits, results, time.monotonic() - began)
    if report:
        result.report = write_report(result, report)
    return result
