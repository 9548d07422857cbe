"""The scope audit: every table and family of the source, as each peer selects it and keeps it.

For each peer, each family of each user table of the source gets a row: its
REPLICATION_SCOPE, whether the peer selects it (with exactly the rule the shipper filters
by, :func:`walship.replicate.batcher.filters.table_rule`), and whether the peer's table has it, with
how many versions and for how long it keeps cells. :func:`audit_peer` compares (pure);
:func:`run_audit` reads the clusters and compares. The findings and their severities are
listed in :mod:`walship.scope.model`.

Example::

    with open_source("src-thrift2:9090", name="--source-thrift2", how="give --source-thrift2") as src:
        report = run_audit(client, ZnodeLayout("/hbase"), src.all_tables())
    sys.exit(1 if report.data_loss else 0)
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from kazoo.client import KazooClient

from walship.peer import PeerConfig, TableCfs
from walship.replicate.batcher.filters import table_rule
from walship.scope.admin import PeerTablesReader, peer_tables_reader
from walship.scope.model import (
    AuditReport,
    FamilyRow,
    FamilySettings,
    Finding,
    PeerAudit,
    TableInfo,
    family_text,
    ttl_text,
)
from walship.sinks.base import SINK_THRIFT2_KEY, SINK_THRIFT_KEY
from walship.zk.layout import ZnodeLayout
from walship.zk.peers import ReplicationPeers

__all__ = ["audit_peer", "describe_selection", "read_peer", "run_audit"]

log = logging.getLogger(__name__)


def _cfs_text(table_cfs: TableCfs) -> str:
    return "; ".join(f"{t}:{','.join(fams)}" if fams else t for t, fams in sorted(table_cfs.items()))


def describe_selection(peer: PeerConfig) -> str:
    """What the peer selects, e.g. ``table-cfs t:r; ns:u`` or ``all tables except namespaces ns``."""
    if peer.replicate_all:
        parts = []
        if peer.exclude_namespaces:
            parts.append(f"namespaces {','.join(sorted(peer.exclude_namespaces))}")
        if peer.exclude_table_cfs:
            parts.append(f"table-cfs {_cfs_text(peer.exclude_table_cfs)}")
        return "all tables" + (f" except {' and '.join(parts)}" if parts else "")
    parts = []
    if peer.namespaces:
        parts.append(f"namespaces {','.join(sorted(peer.namespaces))}")
    if peer.table_cfs:
        parts.append(f"table-cfs {_cfs_text(peer.table_cfs)}")
    return "; ".join(parts) or "nothing"


def _missing_on_source(peer: PeerConfig, source: Mapping[str, TableInfo]) -> list[Finding]:
    """Tables and families the peer's table-cfs (or exclude-table-cfs) names that the source lacks."""
    out = []
    lists = [("table-cfs", peer.table_cfs, "selected-missing-on-source")]
    if peer.replicate_all:
        lists = [("exclude-table-cfs", peer.exclude_table_cfs, "excluded-missing-on-source")]
    for what, table_cfs, code in lists:
        for table, fams in sorted((table_cfs or {}).items()):
            info = source.get(table)
            if info is None:
                message = f"peer {peer.peer_id}'s {what} names table {table}, which the source cluster does not have"
                out.append(Finding(peer.peer_id, table, None, code, message))
                continue
            for fam in fams or ():
                if fam.encode() not in info.families:
                    message = (
                        f"peer {peer.peer_id}'s {what} names family {table}:{fam}, which the source's table "
                        f"{table} does not have"
                    )
                    out.append(Finding(peer.peer_id, table, fam.encode(), code, message))
    return out


def audit_peer(
    peer: PeerConfig,
    source: Mapping[str, TableInfo],
    peer_tables: Mapping[str, TableInfo] | None,
    *,
    peer_access: str | None = None,
    peer_servers: str | None = None,
) -> PeerAudit:
    """Compare the source's tables with what the peer selects and keeps.

    :param source: the source's user tables, by name.
    :param peer_tables: the peer's tables among them (``None``: the peer was not read).
    """
    pid = peer.peer_id
    rows: list[FamilyRow] = []
    findings: list[Finding] = []
    if peer_tables is None:
        findings.append(
            Finding(
                pid,
                None,
                None,
                "peer-not-checked",
                f"peer {pid} has neither {SINK_THRIFT2_KEY} nor {SINK_THRIFT_KEY} in its configuration: "
                "its tables were not compared",
            )
        )
    for tname, info in sorted(source.items()):
        rule = table_rule(peer, tname.encode())
        ptable = None if peer_tables is None else peer_tables.get(tname)
        selected = [f for f in sorted(info.families) if rule.selects(f)]
        if peer_tables is not None and ptable is None and selected:
            names = ", ".join(family_text(f) for f in selected)
            findings.append(
                Finding(
                    pid,
                    tname,
                    None,
                    "table-missing-on-peer",
                    f"table {tname} does not exist on peer {pid}: edits of its selected families ({names}) cannot be "
                    f"applied there (walship scope enforce --peer {pid} --create-missing creates it)",
                )
            )
        for fam in sorted(info.families):
            src = info.families[fam]
            scope = src.scope or 0
            is_selected = fam in selected
            pfam = None if ptable is None else ptable.families.get(fam)
            rows.append(
                FamilyRow(tname, fam, scope, is_selected, None if peer_tables is None else pfam is not None, src, pfam)
            )
            findings.extend(_family_findings(pid, tname, fam, scope, is_selected, ptable, pfam, src))
    findings.extend(_missing_on_source(peer, source))
    return PeerAudit(pid, describe_selection(peer), peer_access, peer_servers, tuple(rows), tuple(findings))


def _family_findings(
    pid: str,
    tname: str,
    fam: bytes,
    scope: int,
    selected: bool,
    ptable: TableInfo | None,
    pfam: FamilySettings | None,
    src: FamilySettings,
) -> list[Finding]:
    """The findings about one family of the source (see :mod:`walship.scope.model`)."""
    where = f"{tname}:{family_text(fam)}"
    out = []
    if selected and scope != 1:
        out.append(
            Finding(
                pid,
                tname,
                fam,
                "selected-scope-0",
                f"peer {pid} selects {where} but its REPLICATION_SCOPE is {scope}: its edits are never shipped "
                f"(walship scope enforce --peer {pid} sets it to 1)",
            )
        )
    if scope == 1 and not selected:
        out.append(
            Finding(
                pid,
                tname,
                fam,
                "scoped-not-selected",
                f"{where} has REPLICATION_SCOPE 1 but peer {pid} does not select it: its edits do not go to this peer",
            )
        )
    if not selected or ptable is None:
        return out
    if pfam is None:
        out.append(
            Finding(
                pid,
                tname,
                fam,
                "family-missing-on-peer",
                f"table {tname} on peer {pid} has no family {family_text(fam)}: its edits cannot be applied there "
                f"(walship scope enforce --peer {pid} --create-missing adds it)",
            )
        )
        return out
    if pfam.max_versions < src.max_versions:
        out.append(
            Finding(
                pid,
                tname,
                fam,
                "peer-fewer-versions",
                f"peer {pid} keeps {pfam.max_versions} versions of {where}, the source {src.max_versions}: "
                "older versions are lost on the peer",
            )
        )
    if pfam.ttl < src.ttl:
        out.append(
            Finding(
                pid,
                tname,
                fam,
                "peer-ttl-shorter",
                f"peer {pid} keeps cells of {where} for {ttl_text(pfam.ttl)}, the source for {ttl_text(src.ttl)}: "
                "they expire earlier on the peer",
            )
        )
    return out


def read_peer(peer: PeerConfig, source: Mapping[str, TableInfo], *, timeout_ms: int = 30_000) -> PeerAudit:
    """Read the peer's tables (those of ``source``) and audit it."""
    reader: PeerTablesReader | None = peer_tables_reader(peer, timeout_ms=timeout_ms)
    if reader is None:
        return audit_peer(peer, source, None)
    try:
        tables = reader.tables(source)
    finally:
        reader.close()
    return audit_peer(peer, source, tables, peer_access=reader.access, peer_servers=reader.server)


def run_audit(
    client: KazooClient,
    layout: ZnodeLayout,
    source: Mapping[str, TableInfo],
    peer_id: str | None = None,
    *,
    timeout_ms: int = 30_000,
) -> AuditReport:
    """Audit every peer (or the one given) against the source's tables.

    :param source: the source's user tables (:meth:`Thrift2Admin.all_tables`).
    :raises PeerNotFoundError: ``peer_id`` names no peer.
    :raises ScopeError: a peer's Thrift server refused or did not answer.
    """
    peers = ReplicationPeers(client, layout)
    configs = [peers.get(peer_id)] if peer_id is not None else peers.list()
    audits = []
    for peer in configs:
        audit = read_peer(peer, source, timeout_ms=timeout_ms)
        losing = sum(f.data_loss for f in audit.findings)
        log.info("peer %s: %d findings (%d data-losing)", peer.peer_id, len(audit.findings), losing)
        audits.append(audit)
    return AuditReport(tuple(audits))
