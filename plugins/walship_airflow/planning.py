"""The DAG's small tasks: turn pending queues into ship-job descriptions, and read the jobs'
summaries back from walship's znodes (no local files pass between tasks)."""

from __future__ import annotations

import logging
import re
from typing import Any

from airflow.sdk import Asset
from airflow.sdk.exceptions import AirflowException

from walship_airflow.hooks.source import SourceCluster
from walship_airflow.hooks.spark import SPARK_CONN_ID
from walship_airflow.sources import Source

log = logging.getLogger(__name__)


def job_id(run_id: str, group: int) -> str:
    """A ship job's id: the run id made safe for a znode name, and the group."""
    return f"{re.sub(r'[^A-Za-z0-9_.:+-]', '_', run_id)}.g{group}"


def submit_kwargs(
    spark_conn_id: str, app: str, jar: str, job: str, extra_args: list[str] | None = None
) -> dict[str, Any]:
    """:meth:`WalshipSparkHook.submit_kwargs` on ``spark_conn_id``."""
    from walship_airflow.hooks.spark import WalshipSparkHook

    return WalshipSparkHook(spark_conn_id).submit_kwargs(app, jar, job, extra_args)


def ship_jobs(source: SourceCluster, queues: list[str], context: Any, app: str, jar: str) -> list[dict[str, Any]]:
    """One Spark submit per group of queues (at most ``max_parallel_jobs`` groups): the
    keyword arguments of each mapped ``ship`` task, the job description as JSON. The queues
    of several peers over the same WALs stay in one job, which reads each WAL once for them
    all; a job names the peers of its queues.

    :param app: ``spark_jobs/ship.py`` as the Spark hosts see it.
    :param jar: ``spark_jobs/pyrunner.jar``, for cluster deploy mode on a standalone master.
    """
    from walship.replicate.batcher.member import group_key
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
            source_thrift2=source.thrift2 or "",
        )
        out.append(submit_kwargs(spark_conn_id, app, jar, job.to_json()))
    return out


def read_summaries(
    source: SourceCluster, jobs: list[dict[str, Any]], context: Any, alias: Any, site: Source | None = None
) -> dict[str, Any]:
    """Sum the jobs' summaries (from ZooKeeper), record an asset event for each peer shipped
    (``walship://peer/ID``; another source than the default's: ``walship://peer/ID/SUFFIX``),
    fail on any error."""
    from walship.replicate.summary import SUMMED_FIELDS
    from walship.spark.ship import ShipJob
    from walship.zk.records import JobStore

    site = site or Source()
    totals = dict.fromkeys(SUMMED_FIELDS, 0)
    per_peer: dict[str, dict[str, int]] = {}
    errors = []
    with source.site().state() as (client, layout):
        store = JobStore(client, layout)
        for kwargs in jobs or []:
            job = ShipJob.from_json(kwargs["job"])
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
            Asset(name=site.asset_name(f"walship-peer-{peer_id}"), uri=site.asset_uri(f"walship://peer/{peer_id}")),
            extra={"peer_id": peer_id, **peer_totals},
        )
    if errors:
        raise AirflowException("; ".join(errors))
    asked = str(context["params"].get("peer_id") or "")
    return {"peer_id": asked, "peers": sorted(per_peer), "jobs": len(jobs or []), **totals}
