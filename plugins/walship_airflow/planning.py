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


def job_id(run_id: str, group: int) -> str:
    """A ship job's id: the run id made safe for a znode name, and the group."""
    return f"{re.sub(r'[^A-Za-z0-9_.:+-]', '_', run_id)}.g{group}"


def spark_conf(spark_conn_id: str = SPARK_CONN_ID) -> dict[str, str]:
    """Spark settings for a ship job: the Python interpreter comes from the Spark connection's
    extra ``pyspark_python`` (the interpreter on the Spark hosts where walship is installed),
    never from the interpreter that parsed the DAG."""
    conf = {"spark.ui.enabled": "false"}
    try:
        extra = BaseHook.get_connection(spark_conn_id).extra_dejson or {}
    except AirflowNotFoundException:  # the Spark operator will say so itself
        extra = {}
    python = extra.get("pyspark_python")
    if python:
        conf["spark.pyspark.python"] = str(python)
        conf["spark.pyspark.driver.python"] = str(extra.get("pyspark_driver_python") or python)
    return conf


def ship_jobs(source: SourceCluster, queues: list[str], context: Any) -> list[dict[str, Any]]:
    """One Spark submit per group of queues (at most ``max_parallel_jobs`` groups): the
    keyword arguments of each mapped ``ship`` task, the job description as JSON."""
    from walship.spark.ship import ShipJob

    params = context["params"]
    if not queues:
        return []
    n = max(1, min(int(params["max_parallel_jobs"]), len(queues)))
    groups = [sorted(queues)[i::n] for i in range(n)]
    conf = spark_conf()
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
            job_id=job_id(run_id, i),
            run_id=run_id,
        )
        out.append({"application_args": ["--job", job.to_json()], "conf": conf})
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
    with zk_client(source.zk) as client:
        store = JobStore(client, ZnodeLayout(source.znode_parent))
        for kwargs in jobs or []:
            job = ShipJob.from_json(kwargs["application_args"][1])
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
