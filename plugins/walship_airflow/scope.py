"""The scope audit for Airflow (the ``walship_scope`` DAG): ``walship scope audit --json`` of
the source cluster of a ``walship`` connection, failing loudly on any finding.

The connection gives ZooKeeper (host, port, extras ``znode_parent`` and ``zk_auth``) and, in
its extra ``thrift2``, the source's Thrift2 server(s), ``host:port[,...]``, for its table
descriptors. Each peer's tables are read over the peer's own ``walship.sink.thrift2`` (or
``walship.sink.thrift``).
"""

from __future__ import annotations

from typing import Any

from airflow.sdk.exceptions import AirflowFailException

from walship_airflow.hooks.source import WalshipHook

__all__ = ["AUDIT_XCOM_KEY", "audit_task", "findings_message", "read_audit"]

#: The XCom key the audit document is pushed under when the task fails on findings.
AUDIT_XCOM_KEY = "audit"


def read_audit(peer_id: str | None = None, conn_id: str = WalshipHook.default_conn_name) -> dict[str, Any]:
    """The scope audit of the connection's source cluster (every peer, or one) as its JSON
    document (see docs/scope.md).

    :raises AirflowFailException: the connection has no (or a malformed) extra ``thrift2``.
    :raises walship.errors.PeerNotFoundError: ``peer_id`` names no peer.
    :raises walship.errors.ScopeError: a Thrift server refused or did not answer.
    """
    from walship.errors import ConfigError
    from walship.scope import open_source, run_audit

    source = WalshipHook(conn_id).get_source()
    try:
        admin = open_source(
            source.thrift2,
            name=f"the extra 'thrift2' of connection {conn_id}",
            how=f"set the extra 'thrift2' (host:port of the source's Thrift2 server) of connection {conn_id}",
        )
    except ConfigError as exc:
        raise AirflowFailException(str(exc)) from None
    with admin:
        tables = admin.all_tables()
    with source.site().state() as (client, layout):
        report = run_audit(client, layout, tables, peer_id=peer_id)
    return report.to_json()


def findings_message(doc: dict[str, Any]) -> str:
    """Every finding of an audit document, one a line, data-losing ones first."""
    findings = [f for peer in doc["peers"] for f in peer["findings"]]
    findings.sort(key=lambda f: f["severity"] != "data_loss")
    losing = sum(f["severity"] == "data_loss" for f in findings)
    lines = [f"scope audit: {len(findings)} finding(s), {losing} would lose data:"]
    for f in findings:
        where = f["table"] if f["family"] is None else f"{f['table']}:{f['family']}"
        lines.append(
            f"  peer {f['peer_id']} {where or '-'}: {f['severity'].upper().replace('_', ' ')} "
            f"{f['code']}: {f['message']}"
        )
    return "\n".join(lines)


def audit_task(context: Any, conn_id: str = WalshipHook.default_conn_name) -> dict[str, Any]:
    """The DAG's task: the audit document when there is no finding.

    :raises AirflowFailException: findings (the message lists every one; the document is
        pushed as the XCom ``audit`` first), or no ``thrift2`` extra. Not retried: the policy
        does not change by itself.
    """
    peer_id = str(context["params"].get("peer_id") or "").strip() or None
    doc = read_audit(peer_id, conn_id)
    if any(peer["findings"] for peer in doc["peers"]):
        context["ti"].xcom_push(key=AUDIT_XCOM_KEY, value=doc)
        raise AirflowFailException(findings_message(doc))
    return doc
