"""Verify a peer with Spark: the driver plans, one Spark task compares one split.

The driver reads the peer and the table descriptors and lists the splits (one per region of
each source table); each split goes to its own task (``parallelize(splits, len(splits))``),
which scans both sides, recompares, checks the peer's queues for rows in flight and, when
asked, repairs: :func:`walship.verify.run_split`, exactly as ``walship verify`` runs it in
one process. Only plain JSON crosses between driver and executors.

Given a job id, the driver also records the result (or the error that stopped it) in
walship's znodes (:class:`~walship.zk.records.VerifyStore`), where the ``walship_verify``
DAG's report reads it, whichever host the driver ran on (client or cluster deploy mode).
"""

from __future__ import annotations

import logging
import time
from typing import Any

from walship.errors import ConfigError, PeerNotFoundError, VerifyError, VerifyUnavailableError, WalshipError
from walship.replicate.source import SourceSite
from walship.verify import Split, SplitResult, VerifyJob, VerifyResult, combine, plan, run_split, write_report
from walship.zk.layout import check_znode_name
from walship.zk.records import VerifyStore

__all__ = ["error_record", "record_result", "verify_split_json", "verify_with_spark"]

log = logging.getLogger(__name__)


def verify_split_json(job_json: str, split_json: dict[str, Any]) -> dict[str, Any]:
    """On an executor: compare one split; its result as JSON."""
    job = VerifyJob.from_json(job_json)
    return run_split(job, Split.from_json(split_json)).to_json()


def error_record(job: VerifyJob, exc: WalshipError) -> dict[str, Any]:
    """The record of a verification that could not run: the error, and whether trying again
    may help (not for a bad request: an unknown peer, table or family, a bad option)."""
    bad_request = isinstance(exc, (ConfigError, PeerNotFoundError)) or (
        isinstance(exc, VerifyError) and not isinstance(exc, VerifyUnavailableError)
    )
    return {
        "peer_id": job.peer_id,
        "status": "error",
        "error": str(exc),
        "error_type": type(exc).__name__,
        "retryable": not bad_request,
    }


def record_result(job: VerifyJob, job_id: str, record: dict[str, Any]) -> None:
    """Write a verify job's result (or error record) into walship's znodes under ``job_id``."""
    with SourceSite(job.zk, job.znode_parent, auth=job.zk_auth).state() as (client, layout):
        VerifyStore(client, layout).put(job.peer_id, job_id, record)


def verify_with_spark(spark: Any, job: VerifyJob, report: str | None = None, job_id: str | None = None) -> VerifyResult:
    """Plan on the driver, compare one split per Spark task, combine (and write the report).

    :param job_id: record the result (``walship verify --json``'s document with ``status``
        ``ok`` or ``bad_rows``), or the error that stopped it (``status`` ``error``), under
        this id in ZooKeeper.
    """
    if job_id is not None:
        check_znode_name(job_id, "verify job id")
    began = time.monotonic()
    try:
        job, splits = plan(job)
        results: list[SplitResult] = []
        if splits:
            job_json = job.to_json()
            rdd = spark.sparkContext.parallelize([s.to_json() for s in splits], len(splits))
            collected = rdd.map(lambda s: verify_split_json(job_json, s)).collect()
            results = [SplitResult.from_json(r) for r in collected]
        result = combine(job, splits, results, time.monotonic() - began)
        if report:
            result.report = write_report(result, report)
    except WalshipError as exc:
        if job_id is not None:
            try:
                record_result(job, job_id, error_record(job, exc))
            except WalshipError as again:
                log.warning("verify job %s: cannot record its error: %s", job_id, again)
        raise
    if job_id is not None:
        record_result(job, job_id, {**result.to_json(), "status": "ok" if result.ok else "bad_rows"})
    return result
