"""Enforcing one peer's scope policy: what the audit finds, made right where walship can.

* Every family the peer selects whose REPLICATION_SCOPE is not 1 gets scope 1 on the source:
  its descriptor is read, its scope changed and the descriptor written back
  (``modifyColumnFamily``), so its other settings stay as they are.
* With ``create_missing``, tables the peer lacks are created there with the source's table
  descriptor (``createTable``), and selected families its tables lack are added with the
  source's family descriptors (``addColumnFamily``). That needs the peer's Thrift2 servers
  (``walship.sink.thrift2``).

The peer is changed before the source: a family starts to ship only once the peer can take
its edits. A peer that keeps fewer versions or a shorter TTL is reported and left as is
(walship does not change how long a peer keeps data).

A peer whose table-cfs names a table or family the source does not have is refused before
anything changes: its policy cannot be made to hold, and the operator must say what was meant.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from kazoo.client import KazooClient

from walship.errors import ScopeError
from walship.scope.admin import Thrift2Admin, peer_tables_reader
from walship.scope.audit import audit_peer
from walship.scope.model import Finding, PeerAudit, TableInfo, family_text
from walship.sinks.base import SINK_THRIFT2_KEY
from walship.zk.layout import ZnodeLayout
from walship.zk.peers import ReplicationPeers

__all__ = ["Change", "EnforcePlan", "EnforceResult", "plan_enforce", "run_enforce"]

log = logging.getLogger(__name__)

SET_SCOPE = "set-scope"
CREATE_TABLE = "create-table"
ADD_FAMILY = "add-family"
#: the order changes are made in: the peer first
_ORDER = {CREATE_TABLE: 0, ADD_FAMILY: 1, SET_SCOPE: 2}
#: the family setting as HBase keeps it among a descriptor's values
_SCOPE_KEY = b"REPLICATION_SCOPE"
_NOT_MINE = " (enforce does not change how long a peer keeps data: alter the family on the peer)"


@dataclass(frozen=True)
class Change:
    """One change enforce makes: ``set-scope`` (on the source), ``create-table`` or
    ``add-family`` (on the peer).

    :param families: a created table's families (in the source descriptor's order).
    """

    kind: str
    peer_id: str
    table: str
    family: bytes | None = None
    families: tuple[bytes, ...] = ()

    @property
    def on_peer(self) -> bool:
        return self.kind != SET_SCOPE

    def describe(self, *, done: bool = True) -> str:
        """E.g. ``set REPLICATION_SCOPE 1 on t:r (source)``; ``done=False``: ``would set ...``."""
        if self.kind == SET_SCOPE:
            verb, what = "set", f"REPLICATION_SCOPE 1 on {self.table}:{family_text(self.family or b'')} (source)"
        elif self.kind == CREATE_TABLE:
            names = ", ".join(family_text(f) for f in self.families)
            verb, what = "created", f"table {self.table} on peer {self.peer_id} (families {names})"
        else:
            verb, what = "added", f"family {self.table}:{family_text(self.family or b'')} on peer {self.peer_id}"
        if not done:
            verb = {"set": "would set", "created": "would create", "added": "would add"}[verb]
        return f"{verb} {what}"


@dataclass(frozen=True)
class EnforcePlan:
    """The changes for one peer, in the order they are made, and the data-losing findings
    (plus a peer that could not be checked) they leave."""

    peer_id: str
    changes: tuple[Change, ...]
    left: tuple[Finding, ...]


@dataclass(frozen=True)
class EnforceResult:
    """What enforce did: ``made`` changes of the plan's (none in a dry run)."""

    plan: EnforcePlan
    dry_run: bool
    made: int


def _refuse_missing_on_source(audit: PeerAudit) -> None:
    missing = [f for f in audit.findings if f.code == "selected-missing-on-source"]
    if missing:
        raise ScopeError(
            "; ".join(f.message for f in missing)
            + f": enforce cannot make peer {audit.peer_id}'s policy hold. Fix its table-cfs "
            f"(walship peer set {audit.peer_id} --table-cfs ...) or create the table or family on the source; "
            "nothing was changed"
        )


def plan_enforce(audit: PeerAudit, source: Mapping[str, TableInfo], *, create_missing: bool) -> EnforcePlan:
    """The changes that make ``audit``'s data-losing findings of scope and presence go away.

    :raises ScopeError: the peer's table-cfs names a table or family the source does not have.
    """
    _refuse_missing_on_source(audit)
    changes: list[Change] = []
    left: list[Finding] = []
    for finding in audit.findings:
        table, family = finding.table, finding.family
        if finding.code == "selected-scope-0" and table is not None and family is not None:
            changes.append(Change(SET_SCOPE, audit.peer_id, table, family))
        elif finding.code == "table-missing-on-peer" and create_missing and table is not None:
            fams = tuple(bytes(c.name) for c in source[table].descriptor.columns or [])
            changes.append(Change(CREATE_TABLE, audit.peer_id, table, families=fams))
        elif finding.code == "family-missing-on-peer" and create_missing and table is not None:
            changes.append(Change(ADD_FAMILY, audit.peer_id, table, family))
        elif finding.data_loss or finding.code == "peer-not-checked":
            left.append(finding)
    changes.sort(key=lambda c: _ORDER[c.kind])
    return EnforcePlan(audit.peer_id, tuple(changes), tuple(left))


def _family_descriptor(info: TableInfo, family: bytes, where: str) -> Any:
    for column in info.descriptor.columns or []:
        if bytes(column.name) == family:
            return column
    raise ScopeError(f"{where}: table {info.name} has no family {family_text(family)} (any more)")


def _apply(change: Change, source: Mapping[str, TableInfo], src: Thrift2Admin, peer: Thrift2Admin | None) -> bool:
    """Make one change; ``False`` when it turned out to be made already."""
    if change.kind == SET_SCOPE:
        family = change.family or b""
        current = src.table(change.table)  # the descriptor as it is now, not as the audit read it
        desc = _family_descriptor(current, family, "the source cluster")
        if getattr(desc, "scope", None) == 1:
            return False
        desc.scope = 1
        if desc.attributes and _SCOPE_KEY in desc.attributes:
            # HBase's Thrift2 server returns every setting among the attributes too
            desc.attributes[_SCOPE_KEY] = b"1"
        src.modify_family(change.table, desc)
        return True
    if peer is None:
        raise ScopeError(f"peer {change.peer_id}: no Thrift2 server to {change.describe(done=False)} on")
    if change.kind == CREATE_TABLE:
        if peer.exists(change.table):
            return False
        peer.create_table(source[change.table].descriptor)
        return True
    desc = _family_descriptor(source[change.table], change.family or b"", "the source cluster")
    peer.add_family(change.table, desc)
    return True


def _left_line(finding: Finding) -> str:
    extra = _NOT_MINE if finding.code in ("peer-fewer-versions", "peer-ttl-shorter") else ""
    return f"left as is: {finding.message}{extra}"


def run_enforce(
    client: KazooClient,
    layout: ZnodeLayout,
    src: Thrift2Admin,
    peer_id: str,
    *,
    create_missing: bool = False,
    dry_run: bool = False,
    emit: Callable[[str], None] = log.info,
    timeout_ms: int = 30_000,
) -> EnforceResult:
    """Enforce peer ``peer_id``'s scope policy; ``emit`` gets one line per change as it is
    made (with ``dry_run``: as it would be made, and nothing changes), then one per
    data-losing finding left as is, then a summary.

    :raises PeerNotFoundError: no such peer.
    :raises ScopeError: the table-cfs names what the source lacks; a table or family must be
        created on a peer without Thrift2 servers; a server refused or did not answer.
    """
    peer = ReplicationPeers(client, layout).get(peer_id)
    source = src.all_tables()
    reader = peer_tables_reader(peer, timeout_ms=timeout_ms)
    try:
        if reader is None and create_missing:
            raise ScopeError(
                f"peer {peer_id} has no Thrift servers in its configuration ({SINK_THRIFT2_KEY}): --create-missing "
                "cannot check or create its tables; nothing was changed"
            )
        tables = None if reader is None else reader.tables(source)
        audit = audit_peer(
            peer,
            source,
            tables,
            peer_access=None if reader is None else reader.access,
            peer_servers=None if reader is None else reader.server,
        )
        plan = plan_enforce(audit, source, create_missing=create_missing)
        peer_admin = reader if isinstance(reader, Thrift2Admin) else None
        creates = [c for c in plan.changes if c.on_peer]
        if creates and peer_admin is None:
            raise ScopeError(
                f"peer {peer_id} has no Thrift2 servers ({SINK_THRIFT2_KEY}), only Thrift1: --create-missing needs "
                f"Thrift2 to {'; '.join(c.describe(done=False).removeprefix('would ') for c in creates)}. Set the "
                f"peer's {SINK_THRIFT2_KEY}=host:port (walship peer set {peer_id} --config "
                f"{SINK_THRIFT2_KEY}=HOST:PORT); nothing was changed"
            )
        made = 0
        for change in plan.changes:
            if dry_run:
                emit(change.describe(done=False))
            elif _apply(change, source, src, peer_admin):
                made += 1
                log.info("peer %s: %s", peer_id, change.describe())
                emit(change.describe())
            else:
                emit(f"already done: {change.describe()}")
    finally:
        if reader is not None:
            reader.close()
    for finding in plan.left:
        emit(_left_line(finding))
    if not plan.changes:
        tail = " and exists on the peer" if create_missing else ""
        emit(f"nothing to change for peer {peer_id}: every family it selects has REPLICATION_SCOPE 1{tail}")
    elif dry_run:
        emit(f"dry run: {len(plan.changes)} change(s) for peer {peer_id}; nothing was changed")
    else:
        emit(f"{made} change(s) made for peer {peer_id}")
    return EnforceResult(plan, dry_run, made)
