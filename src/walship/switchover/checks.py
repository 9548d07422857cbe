"""A switchover's preflight: every check runs, and each problem found is named, so that one run
tells an operator everything to mend before the source is fenced.

* both masters answer;
* the peer is walship's (managed, HBase's peer-state DISABLED), its switch on, no queue stuck,
  no dead letter pending;
* the tables are the peer's, exist on both clusters, and take writes on both (on the source:
  unless this switchover fenced them already);
* the scope audit finds nothing that loses data in those tables;
* the source's Thrift2 servers are known (the verify reads them, the reverse peer writes to them)
  and the reverse peer id is free on the peer's cluster, or already walship's peer back to the
  source;
* the caller's own checks (the Airflow DAG's: the peer cluster's connection exists).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence

from walship.errors import (
    ConfigError,
    MasterError,
    RemoteHBaseError,
    ScopeError,
    SwitchoverError,
    SwitchoverStateError,
    TableNotFoundError,
    WalshipError,
)
from walship.peer import PeerConfig
from walship.replicate.batcher.filters import table_rule
from walship.switchover.record import SwitchoverRecord, SwitchoverRequest
from walship.switchover.sides import Side, Sides, master_answers, same_cluster
from walship.verify.inflight import normalize_table

__all__ = ["Check", "dry_run_lines", "new_record", "preflight_problems", "resolve_tables", "split_tables"]

log = logging.getLogger(__name__)

#: A check of the caller's: ``None``, or what is wrong.
Check = Callable[[], str | None]


def resolve_tables(peer: PeerConfig, asked: Sequence[str]) -> tuple[str, ...]:
    """The tables to move: those asked for (as a WAL key names them), or the peer's table-cfs.

    :raises SwitchoverError: none asked for and the peer names none (it replicates every
        table, or whole namespaces).
    """
    if asked:
        return tuple(dict.fromkeys(normalize_table(t.strip()) for t in asked if t.strip()))
    if peer.table_cfs:
        return tuple(sorted(normalize_table(t) for t in peer.table_cfs))
    raise SwitchoverError(
        f"preflight: peer {peer.peer_id} names no tables (it replicates "
        + ("whole namespaces" if peer.namespaces else "every table")
        + "): give the tables to switch over (--tables)"
    )


def _table_problems(side: Side, table: str, *, writable: bool) -> list[str]:
    """What stops ``table`` on ``side`` from taking writes (only that it exists, unless ``writable``)."""
    try:
        if not writable:
            side.tables.table_descriptor(table)
            return []
        out = []
        if side.tables.is_read_only(table):
            out.append(f"table {table} is READONLY on {side.label}")
        if not side.tables.table_enabled(table):
            out.append(f"table {table} is disabled on {side.label}")
        return out
    except TableNotFoundError:
        return [f"table {table} does not exist on {side.label}"]
    except MasterError as exc:
        return [f"table {table} on {side.label}: {exc}"]


def _peer_problems(sides: Sides) -> list[str]:
    """Whether the peer is walship's, switched on, shipping, without dead letters."""
    from walship.status.collect import collect_status

    peer = sides.peer
    pid = peer.peer_id
    out = []
    if not peer.managed:
        out.append(f"peer {pid} is shipped by HBase itself, not walship (walship peer adopt {pid} first)")
    elif peer.hbase_state_enabled:
        out.append(f"peer {pid}'s HBase peer-state is ENABLED: HBase ships it too")
    if not peer.enabled:
        out.append(f"peer {pid} is disabled: nothing would drain it (walship peer enable {pid})")
    try:
        status = collect_status(sides.source.client, sides.source.layout, sides.walstore, pid, probe_timeout=2.0)
    except WalshipError as exc:
        return [*out, f"peer {pid}'s status cannot be read: {exc}"]
    ps = status.peers[0]
    stuck = [f"{q.server}/{q.queue_id}" for q in ps.queues if q.state == "stuck"]
    if stuck:
        out.append(f"peer {pid}'s queue(s) {', '.join(stuck)} are stuck: mend them first (walship status --peer {pid})")
    if ps.peer_count.unanswered:
        out.append(f"peer {pid}'s sink server(s) {', '.join(ps.peer_count.unanswered)} do not answer")
    if ps.dead_letters_pending is None:
        out.append(f"peer {pid}'s dead letters cannot be read")
    elif ps.dead_letters_pending:
        out.append(
            f"peer {pid} has {ps.dead_letters_pending} dead letter(s) pending: replay them first "
            f"(walship deadletter replay --peer {pid})"
        )
    return out


def _scope_problems(sides: Sides, tables: Sequence[str], source_thrift2: str) -> list[str]:
    """The scope audit's findings that lose data in ``tables``."""
    from walship.scope.admin import open_source
    from walship.scope.audit import run_audit

    pid = sides.peer.peer_id
    try:
        admin = open_source(source_thrift2, name="the source's Thrift2", how="give the source's Thrift2 server")
        try:
            report = run_audit(sides.source.client, sides.source.layout, admin.all_tables(), pid)
        finally:
            admin.close()
    except (ScopeError, ConfigError) as exc:
        return [f"the scope audit of peer {pid} cannot run: {exc}"]
    wanted = set(tables)
    return [
        f"scope audit: {f.where}: {f.message}"
        for f in report.findings
        if f.data_loss and (f.table is None or normalize_table(f.table) in wanted)
    ]


def _reverse_problems(sides: Sides, record: SwitchoverRecord) -> list[str]:
    """Whether the peer back to the source can be added, or is walship's already."""
    back = record.reverse_peer_id
    try:
        existing = sides.target.find_peer(back)
    except SwitchoverError as exc:
        return [str(exc)]
    if existing is None or record.reverse_peer is not None:
        return []  # this switchover's own
    if not same_cluster(existing.cluster_key, record.source_cluster_key):
        return [
            f"peer {back} of {sides.target.label} exists and goes to {existing.cluster_key}, not the source "
            f"({record.source_cluster_key}): give another reverse peer id"
        ]
    if not existing.managed:
        return [f"peer {back} of {sides.target.label} is shipped by HBase itself: give another reverse peer id"]
    return []


def preflight_problems(
    sides: Sides, request: SwitchoverRequest, record: SwitchoverRecord, checks: Sequence[Check] = ()
) -> list[str]:
    """Every problem that stops the switchover, each named (none: go)."""
    problems = [p for p in (master_answers(sides.source), master_answers(sides.target)) if p is not None]
    if problems:
        return problems  # nothing else can be asked
    problems += _peer_problems(sides)
    for table in record.tables:
        if not table_rule(sides.peer, table.encode()).replicate:
            problems.append(f"peer {sides.peer.peer_id} does not replicate table {table}")
        problems += _table_problems(sides.source, table, writable=table not in record.fenced)
        problems += _table_problems(sides.target, table, writable=True)
    if not request.source_thrift2:
        problems.append("the source's Thrift2 server is not known: the verify reads it and the peer back writes to it")
    else:
        problems += _scope_problems(sides, record.tables, request.source_thrift2)
    if record.reverse:
        problems += _reverse_problems(sides, record)
    for check in checks:
        try:
            found = check()
        except (WalshipError, RemoteHBaseError) as exc:
            found = str(exc)
        if found:
            problems.append(found)
    for p in problems:
        log.warning("preflight: %s", p)
    return problems


def new_record(sides: Sides, request: SwitchoverRequest, run_id: str) -> SwitchoverRecord:
    """The record of a switchover ``request`` asks for, before any step ran.

    :raises SwitchoverError: it names no tables and the peer names none either.
    """
    return SwitchoverRecord(
        peer_id=request.peer_id,
        run_id=run_id,
        reverse_peer_id=request.back_id,
        peer_cluster_key=sides.target.cluster_key,
        source_cluster_key=sides.source.cluster_key,
        tables=list(resolve_tables(sides.peer, request.tables)),
        fence=request.fence,
        reverse=request.reverse,
    )


def split_tables(values: Iterable[str]) -> tuple[str, ...]:
    """Table names given as ``t1,t2 t3`` (a flag's values, a Param): each once, in order."""
    return tuple(dict.fromkeys(t for v in values for t in v.replace(",", " ").split()))


def dry_run_lines(
    sides: Sides, request: SwitchoverRequest, found: SwitchoverRecord | None, checks: Sequence[Check] = ()
) -> list[str]:
    """Preflight's checks, and what each step would change (a line each), changing nothing.

    :param found: the peer's last switchover: one unfinished is refused.
    :raises SwitchoverError: a preflight check fails, or another switchover is unfinished.
    """
    if found is not None and not found.finished:
        raise SwitchoverStateError(
            f"preflight: the switchover {found.run_id} to peer {request.peer_id} is unfinished (state {found.state})"
        )
    probe = new_record(sides, request, "dry-run")
    tables = probe.tables
    problems = preflight_problems(sides, request, probe, checks)
    if problems:
        raise SwitchoverError(f"preflight: {len(problems)} problem(s): " + "; ".join(problems))
    how = "READONLY false -> true" if request.fence == "read_only" else "disabled"
    back = request.back_id
    lines = ["preflight: would pass"]
    lines += [f"fence: table {t}: {how}" for t in tables]
    lines += [f"drain: would wait for peer {request.peer_id}'s queues (at most {request.drain_timeout:g} s)"]
    if request.fence == "disable":
        lines += ["verify: skipped (the tables are disabled)"]
    else:
        lines += [f"verify: would compare {', '.join(tables)} with peer {request.peer_id}'s cluster"]
    if not request.reverse:
        return [*lines, "reverse: skipped", "switch: would report the switch", "unfence: skipped (stays fenced)"]
    kept = sides.target.find_peer(back) is not None
    return [
        *lines,
        f"reverse: peer {back} {'kept, walship switch off' if kept else 'added'} on {sides.target.label}",
        "switch: would report the switch",
        f"unfence: {', '.join(tables)} as before the fence; peer {back}'s switch on",
    ]
