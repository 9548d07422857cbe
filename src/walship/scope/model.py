"""What the scope audit reads and finds: table and family settings, findings and their
severity, and the audit document (``walship scope audit --json``).

A finding is :data:`DATA_LOSS` when edits that the peer is meant to receive never reach it
or do not survive there; every other finding is a :data:`WARNING`:

==============================  ===========  =================================================
code                            severity     meaning
==============================  ===========  =================================================
``selected-scope-0``            data_loss    the peer selects the family, but its
                                             REPLICATION_SCOPE is not 1: nothing is shipped
``table-missing-on-peer``       data_loss    a selected family's table does not exist on the
                                             peer: shipping to it fails
``family-missing-on-peer``      data_loss    the peer's table lacks a selected family
``peer-fewer-versions``         data_loss    the peer keeps fewer versions (VERSIONS) of a
                                             selected family than the source
``peer-ttl-shorter``            data_loss    the peer's TTL of a selected family is shorter
``scoped-not-selected``         warning      scope 1, but the peer does not select the family
``selected-missing-on-source``  warning      the peer's table-cfs names a table or family the
                                             source does not have
``excluded-missing-on-source``  warning      the peer's exclude-table-cfs names a table or
                                             family the source does not have
``peer-not-checked``            warning      the peer has no Thrift servers in its
                                             configuration: its tables were not checked
==============================  ===========  =================================================
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "CODES",
    "DATA_LOSS",
    "FOREVER",
    "WARNING",
    "AuditReport",
    "FamilyRow",
    "FamilySettings",
    "Finding",
    "PeerAudit",
    "TableInfo",
    "compared_ttl",
    "family_text",
    "ttl_text",
]

log = logging.getLogger(__name__)

#: HBase's ``HConstants.FOREVER``: a time to live of "never expires" (seconds).
FOREVER = 2**31 - 1

DATA_LOSS = "data_loss"
WARNING = "warning"

#: Every finding code and its severity (see the module's description).
CODES: Mapping[str, str] = {
    "selected-scope-0": DATA_LOSS,
    "table-missing-on-peer": DATA_LOSS,
    "family-missing-on-peer": DATA_LOSS,
    "peer-fewer-versions": DATA_LOSS,
    "peer-ttl-shorter": DATA_LOSS,
    "scoped-not-selected": WARNING,
    "selected-missing-on-source": WARNING,
    "excluded-missing-on-source": WARNING,
    "peer-not-checked": WARNING,
}


def family_text(name: bytes) -> str:
    """A family name for messages and JSON (bytes that are not UTF-8 as ``\\xNN``)."""
    return name.decode(errors="backslashreplace")


def ttl_text(ttl: int) -> str:
    return "FOREVER" if ttl >= FOREVER else f"{ttl}s"


@dataclass(frozen=True)
class FamilySettings:
    """The settings of one column family that the audit compares.

    :param ttl: seconds; :data:`FOREVER` when cells never expire.
    :param scope: ``None`` when the server does not say (Thrift1 has no scope).
    """

    name: bytes
    max_versions: int
    ttl: int = FOREVER
    scope: int | None = None

    def settings_json(self) -> dict[str, int]:
        return {"max_versions": self.max_versions, "ttl": self.ttl}


@dataclass(frozen=True)
class TableInfo:
    """A table of a cluster: its name as HBase prints it (``t``, ``ns:t``) and its families.

    :param descriptor: the table's ``TTableDescriptor`` as its Thrift2 server returned it
        (``None`` when read over Thrift1): what ``enforce`` copies to a peer.
    """

    name: str
    families: Mapping[bytes, FamilySettings]
    descriptor: Any = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class FamilyRow:
    """One family of the source, as one peer sees it.

    :param on_peer: whether the peer's table has the family (``None``: not checked).
    """

    table: str
    family: bytes
    scope: int
    selected: bool
    on_peer: bool | None
    source: FamilySettings
    peer: FamilySettings | None

    def to_json(self) -> dict[str, Any]:
        return {
            "table": self.table,
            "family": family_text(self.family),
            "scope": self.scope,
            "selected": self.selected,
            "on_peer": self.on_peer,
            "source": self.source.settings_json(),
            "peer": None if self.peer is None else self.peer.settings_json(),
        }


@dataclass(frozen=True)
class Finding:
    """Something about one peer's scope policy: ``family`` is ``None`` for a whole table or
    for the peer itself (``table`` is then ``None`` too)."""

    peer_id: str
    table: str | None
    family: bytes | None
    code: str
    message: str

    @property
    def severity(self) -> str:
        return CODES[self.code]

    @property
    def data_loss(self) -> bool:
        return self.severity == DATA_LOSS

    @property
    def where(self) -> str:
        """``t:r``, ``t`` or ``peer 1``."""
        if self.table is None:
            return f"peer {self.peer_id}"
        return self.table if self.family is None else f"{self.table}:{family_text(self.family)}"

    def to_json(self) -> dict[str, Any]:
        return {
            "peer_id": self.peer_id,
            "table": self.table,
            "family": None if self.family is None else family_text(self.family),
            "code": self.code,
            "severity": self.severity,
            "message": self.message,
        }

    def __str__(self) -> str:
        return f"{self.severity.upper().replace('_', ' ')} {self.where}: {self.message} [{self.code}]"


@dataclass(frozen=True)
class PeerAudit:
    """The audit of one peer.

    :param peer_access: how the peer's tables were read: ``thrift2``, ``thrift1`` or ``None``
        (not checked).
    :param peer_servers: the Thrift server read (``host:port``), if any.
    """

    peer_id: str
    selection: str
    peer_access: str | None
    peer_servers: str | None
    rows: tuple[FamilyRow, ...]
    findings: tuple[Finding, ...]

    @property
    def data_loss(self) -> bool:
        return any(f.data_loss for f in self.findings)

    def to_json(self) -> dict[str, Any]:
        return {
            "peer_id": self.peer_id,
            "selection": self.selection,
            "peer_access": self.peer_access,
            "peer_servers": self.peer_servers,
            "tables": [r.to_json() for r in self.rows],
            "findings": [f.to_json() for f in self.findings],
        }


@dataclass(frozen=True)
class AuditReport:
    """The audit of every peer asked for."""

    peers: tuple[PeerAudit, ...]

    @property
    def findings(self) -> list[Finding]:
        return [f for p in self.peers for f in p.findings]

    @property
    def data_loss(self) -> bool:
        return any(p.data_loss for p in self.peers)

    def to_json(self) -> dict[str, Any]:
        """The document of ``walship scope audit --json`` (keys are stable)."""
        return {"peers": [p.to_json() for p in self.peers], "data_loss": self.data_loss}


def compared_ttl(value: int | None) -> int:
    """A TTL as the audit compares it: unset or <= 0 (Thrift1's "none") is FOREVER."""
    return FOREVER if value is None or value <= 0 or value >= FOREVER else value
