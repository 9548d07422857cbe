"""The ``walship_verify`` DAG's logic: ``walship verify`` as a Spark job, its result read back
from walship's znodes and recorded as an event of the :data:`VERIFY_ASSET` asset.

* :func:`verify_jobs` (task ``plan``): the Params and the run's time range made into a
  :class:`walship.verify.VerifyJob` and the keyword arguments of the Spark submit
  (``spark_jobs/verify.py --job <JSON> --job-id <ID>``); the job description never holds
  ZooKeeper credentials (the operator hands them over in the environment).
* :func:`report_result` (task ``report``): reads the job's result from ZooKeeper and records
  it as the asset event, bad rows or not.
* :func:`check_result` (task ``check``): fails the run, without retrying, when a row is bad.

An event's ``extra``::

    {"peer_id": "1", "run_id": "scheduled__2026-01-02T00:00:00+00:00", "status": "bad_rows",
     "counters": {"GOODROWS": 19, "BADROWS": 1, ...}, "bad_rows": ["row03"],
     "bad_rows_truncated": false, "time_range": {"start": "2026-01-01T00:00:00+00:00",
     "end": "2026-01-02T00:00:00+00:00"}, "tables": ["t"], "families": [], "row_prefixes": [],
     "repair": false, "splits": 1, "rows_scanned": 20, "seconds": 1.2}

The time range (cell timestamps, ``[start, end)``): the Params ``start_time`` / ``end_time``
when given; else, for a scheduled or backfill run, its data interval (the last day); else (a
run triggered by hand) no bound: the whole history.
"""

from __future__ import annotations

import argparse
import datetime
import logging
import re
from typing import TYPE_CHECKING, Any

from airflow.sdk import Asset

from walship_airflow.hooks.source import SourceCluster
from walship_airflow.sources import Source

if TYPE_CHECKING:
    from walship.verify import VerifyJob

__all__ = [
    "BAD_ROWS_LISTED",
    "VERIFY_ASSET",
    "check_result",
    "failure_message",
    "forget_result",
    "job_of",
    "read_result",
    "report_result",
    "time_range",
    "verify_asset",
    "verify_job",
    "verify_job_id",
    "verify_jobs",
]

log = logging.getLogger(__name__)

#: the asset whose events carry the verify results
VERIFY_ASSET_NAME = "walship_verify"
VERIFY_ASSET_URI = "walship://verify"
VERIFY_ASSET = Asset(name=VERIFY_ASSET_NAME, uri=VERIFY_ASSET_URI)


def verify_asset(source: Source) -> Asset:
    """The asset whose events carry a source's verify results (:data:`VERIFY_ASSET` for the
    default source)."""
    if not source.suffix:
        return VERIFY_ASSET
    return Asset(name=source.asset_name(VERIFY_ASSET_NAME), uri=source.asset_uri(VERIFY_ASSET_URI))


#: bad rows named in the failure message (and in the asset event)
BAD_ROWS_LISTED = 20
#: runs whose data interval is the default time range
_INTERVAL_RUN_TYPES = ("scheduled", "backfill")


def verify_job_id(run_id: str) -> str:
    """A verify job's id (its result's znode name): the run id made safe for a znode name."""
    return re.sub(r"[^A-Za-z0-9_.:+-]", "_", run_id)


def _ms(value: datetime.datetime) -> int:
    return int(value.timestamp() * 1000)


def _param_time(params: Any, name: str) -> int | None:
    from airflow.sdk.exceptions import AirflowFailException

    from walship.cli.argtypes import iso_time

    text = str(params.get(name) or "").strip()
    if not text:
        return None
    try:
        return _ms(iso_time(text))
    except argparse.ArgumentTypeError as exc:
        raise AirflowFailException(f"Param {name}: {exc} (expected e.g. 2026-05-01T12:00:00Z)") from None


def time_range(params: Any, context: Any) -> tuple[int, int]:
    """The ``[start, end)`` of cell timestamps to compare, in ms (0 and ``LATEST``: no bound).

    Each of the Params ``start_time`` / ``end_time`` wins when given; else a scheduled or
    backfill run takes its data interval's bound; a run triggered by hand has none (the whole
    history), even when Airflow inferred a data interval for it.
    """
    from walship.verify.model import LATEST

    start, end = _param_time(params, "start_time"), _param_time(params, "end_time")
    run = context.get("dag_run")
    run_type = str(getattr(getattr(run, "run_type", None), "value", getattr(run, "run_type", "")))
    if run_type in _INTERVAL_RUN_TYPES:
        if start is None and context.get("data_interval_start") is not None:
            start = _ms(context["data_interval_start"])
        if end is None and context.get("data_interval_end") is not None:
            end = _ms(context["data_interval_end"])
    return (0 if start is None else start), (LATEST if end is None else end)


def _strings(params: Any, name: str) -> tuple[str, ...]:
    from airflow.sdk.exceptions import AirflowFailException

    value = params.get(name)
    if value is None or value == "":
        return ()
    if isinstance(value, str):
        items = value.split(",")
    elif isinstance(value, list | tuple):
        items = [str(v) for v in value]
    else:
        raise AirflowFailException(f"Param {name}: expected a list of strings, got {value!r}")
    out = tuple(i.strip() for i in items if i.strip())
    if name == "families" and len(out) != len(items):
        raise AirflowFailException(f"Param families: an empty family name in {value!r}")
    return out


def verify_job(source: SourceCluster, params: Any, context: Any) -> VerifyJob:
    """The verify job of a run: the source from the connection (never its credentials), the
    rest from the Params and the run's time range.

    :raises AirflowFailException: a bad Param, or no extra ``thrift2`` on the connection.
    """
    from airflow.sdk.exceptions import AirflowFailException

    from walship.errors import ConfigError, VerifyError
    from walship.verify import VerifyJob

    if not source.thrift2:
        raise AirflowFailException(
            f"connection {source.conn_id}: set the extra 'thrift2' (host:port of the source's "
            "Thrift2 server): verify reads the source over Thrift2"
        )
    start_ms, end_ms = time_range(params, context)
    versions = params.get("versions")
    try:
        return VerifyJob(
            zk=source.zk,
            znode_parent=source.znode_parent,
            wal_root=source.wal_root,
            source_thrift2=source.thrift2,
            peer_id=str(params["peer_id"]).strip(),
            tables=_strings(params, "tables"),
            families=_strings(params, "families"),
            start_ms=start_ms,
            end_ms=end_ms,
            row_prefixes=tuple(str(p) for p in params.get("row_prefixes") or () if str(p)),
            versions=None if versions in (None, "") else int(versions),
            recompare_sleep=float(params.get("recompare_sleep", 2)),
            repair=bool(params.get("repair")),
        )
    except (ConfigError, VerifyError, ValueError, TypeError) as exc:
        raise AirflowFailException(f"walship_verify: {exc}") from None


def verify_jobs(source: SourceCluster, context: Any, app: str, jar: str) -> list[dict[str, Any]]:
    """The ``plan`` task: the keyword arguments of the one ``verify`` Spark submit.

    :param app: ``spark_jobs/verify.py`` as the Spark hosts see it.
    :param jar: ``spark_jobs/pyrunner.jar``, for cluster deploy mode on a standalone master.
    """
    from walship_airflow.hooks.spark import SPARK_CONN_ID
    from walship_airflow.planning import submit_kwargs

    params = context["params"]
    job = verify_job(source, params, context)
    job_id = verify_job_id(str(context["run_id"]))
    extra_args = ["--job-id", job_id]
    report_dir = str(params.get("report_dir") or "").strip()
    if report_dir:
        extra_args += ["--report", report_dir]
    spark_conn_id = str(params.get("spark_conn_id") or SPARK_CONN_ID)
    return [{**submit_kwargs(spark_conn_id, app, jar, job.to_json(), extra_args), "job_id": job_id}]


def job_of(kwargs: dict[str, Any]) -> tuple[VerifyJob, str]:
    """The verify job and its id of a Spark task's keyword arguments (``job``, ``job_id``)."""
    from walship.verify import VerifyJob

    return VerifyJob.from_json(str(kwargs["job"])), str(kwargs["job_id"])


def read_result(source: SourceCluster, peer_id: str, job_id: str) -> dict[str, Any] | None:
    """The result the verify job recorded in ZooKeeper, or ``None``."""
    from walship.zk.records import VerifyStore

    with source.site().state() as (client, layout):
        return VerifyStore(client, layout).get(peer_id, job_id)


def forget_result(source: SourceCluster, peer_id: str, job_id: str) -> None:
    """Remove an earlier result under this job id (an earlier try of the task)."""
    from walship.zk.records import VerifyStore

    with source.site().state() as (client, layout):
        VerifyStore(client, layout).delete(peer_id, job_id)


def _iso(ms: int, open_value: int) -> str | None:
    if ms == open_value:
        return None
    return datetime.datetime.fromtimestamp(ms / 1000, datetime.UTC).isoformat()


def report_result(
    source: SourceCluster, jobs: list[dict[str, Any]], context: Any, asset: Asset = VERIFY_ASSET
) -> dict[str, Any]:
    """The ``report`` task: read the result from ZooKeeper and record it as the extra of the
    task's event of ``asset`` (:func:`verify_asset`), bad rows or not (the ``check`` task fails the run
    afterwards: a failing task records no asset event). Returns the event's extra.

    :raises AirflowFailException: the job recorded an error.
    :raises AirflowException: the job recorded no result.
    """
    from airflow.sdk.exceptions import AirflowException, AirflowFailException

    from walship.verify.model import LATEST

    (kwargs,) = jobs
    job, job_id = job_of(kwargs)
    record = read_result(source, job.peer_id, job_id)
    if record is None:
        raise AirflowException(f"verify job {job_id} of peer {job.peer_id} recorded no result in ZooKeeper")
    if record.get("status") == "error":
        raise AirflowFailException(f"verify of peer {job.peer_id} failed: {record.get('error')}")
    extra: dict[str, Any] = {
        "peer_id": job.peer_id,
        "run_id": str(context["run_id"]),
        "job_id": job_id,
        "status": record.get("status"),
        "counters": record["counters"],
        "bad_rows": list(record.get("bad_rows", []))[:BAD_ROWS_LISTED],
        "bad_rows_truncated": bool(record.get("bad_rows_truncated"))
        or len(record.get("bad_rows", [])) > BAD_ROWS_LISTED,
        "time_range": {"start": _iso(job.start_ms, 0), "end": _iso(job.end_ms, LATEST)},
        "tables": record.get("tables", []),
        "families": list(job.families),
        "row_prefixes": list(job.row_prefixes),
        "repair": job.repair,
        "splits": record.get("splits"),
        "rows_scanned": record.get("rows_scanned"),
        "seconds": record.get("seconds"),
    }
    if job.repair:
        extra["found"] = record.get("found")
        extra["unrepaired"] = [
            {k: r.get(k) for k in ("table", "row", "reason", "remedy")}
            for r in record.get("repair", [])
            if not r.get("repaired")
        ][:BAD_ROWS_LISTED]
    if record.get("report"):
        extra["report"] = record["report"]
    context["outlet_events"][asset].extra.update(extra)
    log.info("peer %s: %s", job.peer_id, extra["counters"])
    return extra


def failure_message(extra: dict[str, Any]) -> str:
    """The counters and up to :data:`BAD_ROWS_LISTED` bad rows, readable."""
    counters = extra["counters"]
    width = max(len(name) for name in counters)
    bounds = extra["time_range"]
    span = (
        f"cells from {bounds['start'] or 'the beginning'} to {bounds['end'] or 'now'}"
        if bounds["start"] or bounds["end"]
        else "every cell"
    )
    lines = [
        f"verify of peer {extra['peer_id']}: {counters.get('BADROWS', 0)} bad row(s) in "
        f"{', '.join(extra.get('tables') or []) or '-'} ({span})"
    ]
    lines += [f"  {name:<{width}}  {value}" for name, value in counters.items()]
    rows = extra.get("bad_rows") or []
    if rows:
        more = " (more in the report)" if extra.get("bad_rows_truncated") else ""
        lines.append(f"  bad rows{more}: {', '.join(rows)}")
    lines += [
        f"  unrepaired {r['table']} {r['row']}: {r['reason']}; {r['remedy']}" for r in extra.get("unrepaired", [])
    ]
    return "\n".join(lines)


def check_result(extra: dict[str, Any]) -> dict[str, Any]:
    """The ``check`` task: the counters when no row is bad.

    :raises AirflowFailException: a bad row (not retried: a retry would find the same).
    """
    from airflow.sdk.exceptions import AirflowFailException

    if int(extra["counters"].get("BADROWS", 0)) > 0:
        raise AirflowFailException(failure_message(extra))
    return dict(extra["counters"])
