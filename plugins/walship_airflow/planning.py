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


def submit_kwargs(spark_conn_id: str, app: str, jar: str, args: list[str]) -> dict[str, Any]:
    """The keyword arguments of a Spark submit of ``app`` with ``args``: the connection's
    settings (:func:`spark_settings`), and in cluster deploy mode on a standalone master the
    job submitted as ``jar`` run by Spark's PythonRunner (Spark refuses Python files there)."""
    conf, standalone_cluster = spark_settings(spark_conn_id)
    kwargs: dict[str, Any] = {"conn_id": spark_conn_id, "conf": conf}
    if standalone_cluster:
        kwargs.update(application=jar, java_class=PYTHON_RUNNER, application_args=[app, "", *args])
    else:
        kwargs.update(application=app, application_args=args)
    return kwargs


def ship_jobs(source: SourceCluster, queues: list[str], context: Any, app: str, jar: str) -> list[dict[str, Any]]:
    """One Spark submit per group of queues (at most ``max_parallel_jobs`` groups): the
    keyword arguments of each mapped ``ship`` task, the job description as JSON. The queues
    of several peers over the same WALs stay in one job, which reads each WAL once for them
    all; a job names the peers of its queues.

    :param app: ``spark_jobs/ship.py`` as the Spark hosts see it.
    :param jar: ``spark_jobs/pyrunner.jar``, for cluster deploy mode on a standalone master.
    """
    from walship.replicate.feeds import group_key
    from walship.spark.ship import ShipJob
    from walship.zk import QueueId

    params = context["params"]
    if not queues:
        return []
    by_wals: dict[tuple[str, tuple[str, ...]], list[str]] = {}
    for key in sorted(queues):
        server, _, queue_id = key.partition("/")
        by_wals.setdefault(group_key(server, queue_id), []).append(key)
    shared = [by_wals[k] for k in sorted(by_wals)]
    n = max(1, min(int(params["max_parallel_jobs"]), len(shared)))
    groups = [[key for keys in shared[i::n] for key in keys] for i in range(n)]
    spark_conn_id = str(params.get("spark_conn_id") or SPARK_CONN_ID)
    run_id = str(context["run_id"])
    out = []
    for i, group in enumerate(groups):
        job = ShipJob(
            zk=source.zk,
            znode_parent=source.znode_parent,
            wal_root=source.wal_root,
            peer_id=",".join(dict.fromkeys(QueueId.parse(key.partition("/")[2]).peer_id for key in group)),
            queues=tuple(group),
            max_batches=int(params["max_batches"]) or None,
            batch_bytes=int(params["batch_bytes"]),
            batch_entries=int(params["batch_entries"]),
            linger=float(params.get("linger") or 0),
            job_id=job_id(run_id, i),
            run_id=run_id,
        )
        out.append(submit_kwargs(spark_conn_id, app, jar, ["--job", job.to_json()]))
    return out


def read_summaries(source: SourceCluster, jobs: list[dict[str, Any]], context: Any, alias: Any) -> dict[str, Any]:
    """Sum the jobs' summaries (from ZooKeeper), record an asset event for each peer shipped,
    fail on any error."""
    from walship.replicate.shipper import SUMMED_FIELDS
    from walship.spark.ship import ShipJob
    from walship.zk import ZnodeLayout, zk_client
    from walship.zk.progress import JobStore

    totals = dict.fromkeys(SUMMED_FIELDS, 0)
    per_peer: dict[str, dict[str, int]] = {}
    errors = []
    with zk_client(source.zk, auth=source.auth, parent=source.znode_parent) as client:
        store = JobStore(client, ZnodeLayout(source.znode_parent))
        for kwargs in jobs or []:
            job = ShipJob.from_json(kwargs["application_args"][-1])
            for peer_id in job.peer_ids:
                summary = store.get(peer_id, job.job_id or "")
                if summary is None:
                    errors.append(
                        f"ship job {job.job_id} (queues {', '.join(job.queues)}) recorded no summary for peer {peer_id}"
                    )
                    continue
                mine = per_peer.setdefault(peer_id, dict.fromkeys(SUMMED_FIELDS, 0))
                for key, value in summary.get("totals", {}).items():
                    totals[key] = totals.get(key, 0) + int(value)
                    mine[key] = mine.get(key, 0) + int(value)
                if summary.get("status") == "error":
                    errors.append(f"peer {peer_id}: {summary.get('error')}")
                for q in summary.get("queues", []):
                    if q.get("status") == "busy" and q.get("message"):
                        log.info("%s", q["message"])
    for peer_id, peer_totals in sorted(per_peer.items()):
        context["outlet_events"][alias].add(
            Asset(name=f"walship-peer-{peer_id}", uri=f"walship://peer/{peer_id}"),
            extra={"peer_id": peer_id, **peer_totals},
        )
    if errors:
        raise AirflowException("; ".join(errors))
    asked = str(context["params"].get("peer_id") or "")
    return {"peer_id": asked, "peers": sorted(per_peer), "jobs": len(jobs or []), **totals}
