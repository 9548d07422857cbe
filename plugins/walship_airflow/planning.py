"""The DAG's small tasks: turn pending queues into ship-job descriptions, and read the jobs'
summaries back from walship's znodes (no local files pass between tasks)."""

from __future__ import annotations

import logging
import re
from typing import Any

from airflow.sdk import Asset, BaseHook
from airflow.sdk.exceptions import AirflowException, AirflowNotFoundException

from walship_airflow.hooks import SourceCluster

log = logging.getLogger(__name__)

SPARK_CONN_ID = "spark_default"
#: Spark refuses Python applications in cluster deploy mode on a standalone master; there the
#: job is submitted as this (empty) jar with Spark's own PythonRunner as its main class, which
#: runs the Python file on a worker exactly as spark-submit would run it locally.
PYTHON_RUNNER = "org.apache.spark.deploy.PythonRunner"


def job_id(run_id: str, group: int) -> str:
    """A ship job's id: the run id made safe for a znode name, and the group."""
    return f"{re.sub(r'[^A-Za-z0-9_.:+-]', '_', run_id)}.g{group}"


def spark_settings(spark_conn_id: str = SPARK_CONN_ID) -> tuple[dict[str, str], bool]:
    """Spark settings for a ship job, and whether it runs in cluster deploy mode on a
    standalone master. The Python interpreter comes from the Spark connection's extra
    ``pyspark_python`` (the interpreter on the Spark hosts where walship is installed), never
    from the interpreter that parsed the DAG; the extra ``spark_conf`` adds settings."""
    conf = {"spark.ui.enabled": "false"}
    try:
        conn = BaseHook.get_connection(spark_conn_id)
    except AirflowNotFoundException:  # the Spark operator will say so itself
        return conf, False
    extra = conn.extra_dejson or {}
    python = extra.get("pyspark_python")
    if python:
        conf["spark.pyspark.python"] = str(python)
        conf["spark.pyspark.driver.python"] = str(extra.get("pyspark_driver_python") or python)
    more = extra.get("spark_conf") or {}
    if not isinstance(more, dict):
        raise AirflowException(f"connection {spark_conn_id}: extra 'spark_conf' must be an object of settings")
    conf.update({str(k): str(v) for k, v in more.items()})
    standalone_cluster = str(conn.host or "").startswith("spark://") and extra.get("deploy-mode") == "cluster"
    return conf, standalone_cluster


def ship_jobs(source: SourceCluster, queues: list[str], context: Any, app: str, jar: str) -> list[dict[str, Any]]:
    """One Spark submit per group of queues (at most ``max_parallel_jobs`` groups): the
    keyword arguments of each mapped ``ship`` task, the job description as JSON.

    :param app: ``spark_jobs/ship.py`` as the Spark hosts see it.
    :param jar: ``spark_jobs/pyrunner.jar``, for cluster deploy mode on a standalone master.
    """
    from walship.spark.ship import ShipJob

    params = context["params"]
    if not queues:
        return []
    n = max(1, min(int(params["max_parallel_jobs"]), len(queues)))
    groups = [sorted(queues)[i::n] for i in range(n)]
    spark_conn_id = str(params.get("spark_conn_id") or SPARK_CONN_ID)
    conf, standalone_cluster = spark_settings(spark_conn_id)
    run_id = str(context["run_id"])
    out = []
    for i, group in enumerate(groups):
        job = ShipJob(
            zk=source.zk,
            znode_parent=source.znode_parent,
            wal_root=source.wal_root,
            peer_id=str(params["peer_id"]),
            queues=tuple(group),
            max_batches=int(params["max_batches"]) or None,
            batch_bytes=int(params["batch_bytes"]),
            batch_entries=int(params["batch_entries"]),
            linger=float(params.get("linger") or 0),
            job_id=job_id(run_id, i),
            run_id=run_id,
        )
        args = ["--job", job.to_json()]
        kwargs: dict[str, Any] = {"conn_id": spark_conn_id, "conf": conf}
        if standalone_cluster:
            kwargs.update(application=jar, java_class=PYTHON_RUNNER, application_args=[app, "", *args])
        else:
            kwargs.update(application=app, application_args=args)
        out.append(kwargs)
    return out


def read_summaries(source: SourceCluster, jobs: list[dict[str, Any]], context: Any, alias: Any) -> dict[str, Any]:
    """Sum the jobs' summaries (from ZooKeeper), record an asset event for the peer, fail on
    any error."""
    from walship.replicate.shipper import SUMMED_FIELDS
    from walship.spark.ship import ShipJob
    from walship.zk import ZnodeLayout, zk_client
    from walship.zk.progress import JobStore

    totals = dict.fromkeys(SUMMED_FIELDS, 0)
    errors = []
    peer_id = str(context["params"]["peer_id"])
    with zk_client(source.zk, auth=source.auth, parent=source.znode_parent) as client:
        store = JobStore(client, ZnodeLayout(source.znode_parent))
        for kwargs in jobs or []:
            job = ShipJob.from_json(kwargs["application_args"][-1])
            summary = store.get(job.peer_id, job.job_id or "")
            if summary is None:
                errors.append(f"ship job {job.job_id} (queues {', '.join(job.queues)}) recorded no summary")
                continue
            for key, value in summary.get("totals", {}).items():
                totals[key] = totals.get(key, 0) + int(value)
            if summary.get("status") == "error":
                errors.append(str(summary.get("error")))
            for q in summary.get("queues", []):
                if q.get("status") == "busy" and q.get("message"):
                    log.info("%s", q["message"])
    if jobs:
        context["outlet_events"][alias].add(
            Asset(name=f"walship-peer-{peer_id}", uri=f"walship://peer/{peer_id}"), extra={"peer_id": peer_id, **totals}
        )
    if errors:
        raise AirflowException("; ".join(errors))
    return {"peer_id": peer_id, "jobs": len(jobs or []), **totals}
