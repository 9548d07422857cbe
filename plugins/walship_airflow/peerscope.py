"""The scope check of a peer before it is added (the ``walship_add_peer`` DAG's ``check``
task): ``walship scope audit`` of its configuration against the source's tables, the tables
and families it lacks created on it first when asked (``walship scope enforce
--create-missing``'s changes of the peer; the source's scopes are never changed here).

The audit reads the peer from the configuration it is given, not from ZooKeeper, so it runs
before the peer exists; the tables are read from the source's Thrift2 server and the peer's
``walship.sink.thrift2`` servers.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from airflow.sdk.exceptions import AirflowException, AirflowFailException

from walship_airflow.peerparams import fail

if TYPE_CHECKING:
    from walship.peer import PeerConfig
    from walship.scope import PeerAudit, TableInfo

__all__ = ["check_scope"]

log = logging.getLogger(__name__)


def _findings_failure(audit: PeerAudit, create_missing: bool) -> str:
    """Every finding, data-losing ones first, and what the DAG's Params can do about them."""
    from walship_airflow.scope import findings_message

    lines = [findings_message({"peers": [audit.to_json()]})]
    codes = {f.code for f in audit.findings if f.data_loss}
    if codes & {"table-missing-on-peer", "family-missing-on-peer"} and not create_missing:
        lines.append("  (the Param create_missing creates the tables and families the peer lacks)")
    if "selected-scope-0" in codes:
        lines.append(
            "  (this DAG never changes the source's scopes: set REPLICATION_SCOPE 1 on those families, e.g. HBase "
            "shell alter 'TABLE', {NAME => 'FAMILY', REPLICATION_SCOPE => 1}, or leave them out of table_cfs)"
        )
    return "\n".join(lines)


def _create_missing(audit: PeerAudit, source: Mapping[str, TableInfo], config: PeerConfig) -> list[str]:
    """Create on the peer the tables and families the audit found missing there, with the
    source's descriptors (one made meanwhile is left alone); what was made."""
    from walship.errors import ScopeError
    from walship.scope import Thrift2Admin, peer_tables_reader, plan_enforce
    from walship.scope.enforce import CREATE_TABLE

    changes = [c for c in plan_enforce(audit, source, create_missing=True).changes if c.on_peer]
    if not changes:
        return []
    reader = peer_tables_reader(config)
    if not isinstance(reader, Thrift2Admin):  # sink_thrift2 is a required Param: never the case
        raise ScopeError(f"peer {config.peer_id}: no Thrift2 server to create tables on")
    made = []
    with reader as peer:
        for change in changes:
            if change.kind == CREATE_TABLE:
                if peer.exists(change.table):
                    continue
                peer.create_table(source[change.table].descriptor)
            else:
                columns = source[change.table].descriptor.columns or []
                (desc,) = [c for c in columns if bytes(c.name) == change.family]
                peer.add_family(change.table, desc)
            log.info("peer %s: %s", config.peer_id, change.describe())
            made.append(change.describe())
    return made


def check_scope(config: PeerConfig, source_thrift2: str, *, create_missing: bool, name: str) -> dict[str, Any]:
    """Audit ``config`` against the source's tables; with ``create_missing``, create what the
    peer lacks first, then audit again. Returns ``created`` (what was made on the peer) and
    ``warnings`` (the findings left, none of which loses data).

    :param source_thrift2: the source's Thrift2 server(s), ``host:port[,...]``.
    :param name: where ``source_thrift2`` comes from, for messages.
    :raises AirflowFailException: a finding that would lose data (every finding listed); the
        peer's table-cfs names a table or family the source lacks; a server refused.
    :raises AirflowException: a server did not answer (retried).
    """
    from walship.errors import ScopeError, ScopeUnavailableError
    from walship.scope import open_source, read_peer

    try:
        with open_source(source_thrift2, name=name, how=f"set {name}") as src:
            tables = src.all_tables()
        audit = read_peer(config, tables)
        missing = [f for f in audit.findings if f.code == "selected-missing-on-source"]
        if missing:
            raise fail(
                f"Param {'table_cfs' if config.table_cfs else 'namespaces'}: "
                + "; ".join(f.message for f in missing)
                + " (a typo? name tables and families the source has)"
            )
        created = _create_missing(audit, tables, config) if create_missing else []
        if created:
            audit = read_peer(config, tables)  # the peer as it is now
    except ScopeUnavailableError as exc:
        raise AirflowException(f"walship_add_peer: {exc}") from None
    except ScopeError as exc:
        raise fail(str(exc)) from None
    if audit.data_loss:
        raise AirflowFailException(_findings_failure(audit, create_missing))
    warnings = [str(f) for f in audit.findings]
    for line in warnings:
        log.warning("%s", line)
    log.info("peer %s: %s; the scope check found nothing that would lose data", config.peer_id, audit.selection)
    return {"created": created, "warnings": warnings}
