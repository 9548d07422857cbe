"""The ``walship_copy`` DAG's logic: the Params made into the copy job and the keyword
arguments of its Spark submit (``spark_jobs/copy_rows.py --job <JSON>``); the job
description never holds ZooKeeper credentials (the operator hands them over in the
environment)."""

from __future__ import annotations

import logging
from typing import Any

from walship_airflow.hooks.source import SourceCluster, WalshipHook

__all__ = ["copy_jobs"]

log = logging.getLogger(__name__)


def copy_jobs(source: SourceCluster, context: Any, app: str, jar: str) -> list[dict[str, Any]]:
    """The ``plan`` task: the keyword arguments of the one ``copy`` Spark submit.

    :param app: ``spark_jobs/copy_rows.py`` as the Spark hosts see it.
    :param jar: ``spark_jobs/pyrunner.jar``, for cluster deploy mode on a standalone master.
    :raises AirflowFailException: a bad Param, or no extra ``thrift2`` on the connection.
    """
    from airflow.sdk.exceptions import AirflowFailException

    from walship.copy import copy_job, until_ms
    from walship.errors import ConfigError, VerifyError
    from walship_airflow.hooks.spark import SPARK_CONN_ID
    from walship_airflow.planning import submit_kwargs

    params = context["params"]
    if not source.thrift2:
        raise AirflowFailException(
            f"connection {WalshipHook.default_conn_name}: set the extra 'thrift2' (host:port of the source's "
            "Thrift2 server): copy reads the source over Thrift2"
        )
    try:
        job = copy_job(
            zk=source.zk,
            znode_parent=source.znode_parent,
            wal_root=source.wal_root,
            source_thrift2=source.thrift2,
            peer_id=str(params["peer_id"]),
            tables=[str(t) for t in params.get("tables") or () if str(t).strip()],
            until_ms=until_ms(str(params.get("until") or ""), "Param until"),
        )
    except (ConfigError, VerifyError) as exc:
        raise AirflowFailException(str(exc) if str(exc).startswith("Param ") else f"walship_copy: {exc}") from None
    spark_conn_id = str(params.get("spark_conn_id") or SPARK_CONN_ID)
    return [submit_kwargs(spark_conn_id, app, jar, job.to_json())]
