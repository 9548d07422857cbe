"""
### walship_scope

Audits replication scope as a policy once a day, as `walship scope audit --json` does: for
every peer of the source cluster (connection `walship_source`, whose extra `thrift2` names
the source's Thrift2 server), every table and family of the source, its REPLICATION_SCOPE,
whether the peer selects it, and whether the peer's table has it with as many versions and as
long a TTL.

**audit** returns the audit document when it finds nothing. On any finding it fails at once
(no retry), its message listing every finding, data-losing ones first; the document is in its
XCom `audit`. `walship scope enforce --peer ID [--create-missing]` fixes scopes and missing
tables and families.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from airflow.sdk import DAG, Param, dag, task

from walship_airflow.dags.common import dag_kwargs
from walship_airflow.sources import Source


def build(source: Source) -> DAG:
    """``walship_scope`` of a source."""
    conn_id = source.conn_id

    @dag(
        **dag_kwargs(
            source,
            "walship_scope",
            __doc__,
            tags=["scope"],
            default_args={"retries": 1, "retry_delay": timedelta(minutes=5)},
            schedule="@daily",
            max_active_runs=1,
        ),
        params={"peer_id": Param("", type="string", description="only this peer (empty: every peer)")},
    )
    def walship_scope() -> None:
        @task
        def audit(**context: Any) -> dict[str, Any]:
            from walship_airflow.scope import audit_task

            return audit_task(context, conn_id)

        audit()

    return walship_scope()
