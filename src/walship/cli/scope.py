"""``walship scope audit|enforce``: replication scope as a policy, checked against each peer.

Both read the source's table descriptors from its Thrift2 server (the global
``--source-thrift2``), the peers from ZooKeeper and each peer's tables from its own Thrift
servers (its ``walship.sink.thrift2``, or ``walship.sink.thrift``).
"""

from __future__ import annotations

import argparse
import json
import logging

from walship.cli.common import state
from walship.scope import AuditReport, PeerAudit, open_source, run_audit, run_enforce
from walship.scope.model import family_text, ttl_text

__all__ = ["EXIT_DATA_LOSS", "register", "render_audit"]

log = logging.getLogger(__name__)

#: Exit code of ``scope audit`` when a finding would lose data.
EXIT_DATA_LOSS = 1
_SOURCE_FLAG = "--source-thrift2"
_SOURCE_HOW = "give --source-thrift2 HOST:PORT (before the subcommand) or set WALSHIP_SOURCE_THRIFT2"


def _yes_no(value: bool | None) -> str:
    return "-" if value is None else ("yes" if value else "no")


def _peer_table(audit: PeerAudit) -> list[str]:
    read = f"read over {audit.peer_access} {audit.peer_servers}" if audit.peer_access else "not read"
    lines = [f"peer {audit.peer_id}: selects {audit.selection}", f"  its tables: {read}"]
    header = ("TABLE", "FAMILY", "SCOPE", "SELECTED", "ON PEER", "VERSIONS SRC/PEER", "TTL SRC/PEER")
    rows = [header]
    for r in audit.rows:
        peer = r.peer
        rows.append(
            (
                r.table,
                family_text(r.family),
                str(r.scope),
                _yes_no(r.selected),
                _yes_no(r.on_peer),
                f"{r.source.max_versions}/{peer.max_versions if peer else '-'}",
                f"{ttl_text(r.source.ttl)}/{ttl_text(peer.ttl) if peer else '-'}",
            )
        )
    if len(rows) == 1:
        lines.append("  the source has no user tables")
    else:
        widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
        lines.extend("  " + "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in rows)
    if audit.findings:
        lines.append("  findings:")
        lines.extend(f"    {f}" for f in audit.findings)
    else:
        lines.append("  no findings")
    return lines


def render_audit(report: AuditReport) -> str:
    """The audit as text: a table per peer, its findings, and a verdict."""
    if not report.peers:
        return "no replication peers"
    lines: list[str] = []
    for audit in report.peers:
        lines.extend(_peer_table(audit))
        lines.append("")
    losing = sum(f.data_loss for f in report.findings)
    if losing:
        lines.append(f"{losing} finding(s) would lose data")
    else:
        lines.append(f"no finding would lose data ({len(report.findings)} warning(s))")
    return "\n".join(lines)


def cmd_scope_audit(args: argparse.Namespace) -> int:
    with open_source(args.source_thrift2, name=_SOURCE_FLAG, how=_SOURCE_HOW) as src:
        source = src.all_tables()
    with state(args) as (client, layout):
        report = run_audit(client, layout, source, peer_id=args.peer)
    if args.json:
        print(json.dumps(report.to_json(), indent=2, sort_keys=False))
    else:
        print(render_audit(report))
    return EXIT_DATA_LOSS if report.data_loss else 0


def cmd_scope_enforce(args: argparse.Namespace) -> int:
    with open_source(args.source_thrift2, name=_SOURCE_FLAG, how=_SOURCE_HOW) as src, state(args) as (client, layout):
        run_enforce(
            client,
            layout,
            src,
            args.peer,
            create_missing=args.create_missing,
            dry_run=args.dry_run,
            emit=lambda line: print(line, flush=True),
        )
    return 0


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    scope = sub.add_parser(
        "scope",
        help="replication scope as a policy: audit it against the peers, enforce it",
        description="Needs the source's Thrift2 server: the global --source-thrift2 HOST:PORT "
        "(env WALSHIP_SOURCE_THRIFT2).",
    )
    ssub = scope.add_subparsers(dest="scope_command", required=True, metavar="COMMAND")
    audit = ssub.add_parser(
        "audit",
        help="per peer: every family's scope, selection and settings on the peer, and the findings "
        f"(exit {EXIT_DATA_LOSS} when one would lose data)",
    )
    audit.add_argument("--peer", metavar="PEER_ID", help="only this peer")
    audit.add_argument("--json", action="store_true", help="the audit as JSON (schema in docs/scope.md)")
    audit.set_defaults(func=cmd_scope_audit)

    enforce = ssub.add_parser(
        "enforce",
        help="set REPLICATION_SCOPE 1 on every family the peer selects; with --create-missing, create "
        "what the peer lacks",
    )
    enforce.add_argument("--peer", required=True, metavar="PEER_ID")
    enforce.add_argument(
        "--create-missing",
        action="store_true",
        help="create tables missing on the peer and add missing families, with the source's descriptors "
        "(needs the peer's walship.sink.thrift2)",
    )
    enforce.add_argument("--dry-run", action="store_true", help="print what would change; change nothing")
    enforce.set_defaults(func=cmd_scope_enforce)
