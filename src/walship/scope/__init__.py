"""Replication scope as a policy: audit it against each peer, and enforce it.

A peer receives a cell only when its family's REPLICATION_SCOPE is 1 on the source *and*
the peer selects the family (table-cfs, namespaces, or replicate-all minus the exclude
lists), and keeps it only when the peer's table has the family with as many versions and as
long a TTL. :func:`run_audit` reports where that does not hold (:mod:`walship.scope.model`
lists the findings and severities); :func:`run_enforce` sets the scopes and creates what a
peer lacks.

The source's descriptors come from its Thrift2 server; a peer's from its
``walship.sink.thrift2`` servers, or read-only from its Thrift1 ``walship.sink.thrift``.
"""

from __future__ import annotations

from walship.scope.admin import Thrift2Admin, open_source, peer_tables_reader
from walship.scope.audit import audit_peer, describe_selection, read_peer, run_audit
from walship.scope.enforce import Change, EnforcePlan, EnforceResult, plan_enforce, run_enforce
from walship.scope.model import (
    CODES,
    DATA_LOSS,
    FOREVER,
    WARNING,
    AuditReport,
    FamilyRow,
    FamilySettings,
    Finding,
    PeerAudit,
    TableInfo,
)

__all__ = [
    "CODES",
    "DATA_LOSS",
    "FOREVER",
    "WARNING",
    "AuditReport",
    "Change",
    "EnforcePlan",
    "EnforceResult",
    "FamilyRow",
    "FamilySettings",
    "Finding",
    "PeerAudit",
    "TableInfo",
    "Thrift2Admin",
    "audit_peer",
    "describe_selection",
    "open_source",
    "peer_tables_reader",
    "plan_enforce",
    "read_peer",
    "run_audit",
    "run_enforce",
]
