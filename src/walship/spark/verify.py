"""Verify a peer with Spark: the driver plans, one Spark task compares one split.

The driver reads the peer and the table descriptors and lists the splits (one per region of
each source table); each split goes to its own task (``parallelize(splits, len(splits))``),
which scans both sides, recompares, checks the peer's queues for rows in flight and, when
asked, repairs: :func:`walship.verify.run_split`, exactly as ``walship verify`` runs it in
one process. Only plain JSON crosses between driver and executors.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from walship.verify import Split, SplitResult, VerifyJob, VerifyResult, combine, plan, run_split, write_report

__all__ = ["verify_split_json", "verify_with_spark"]

log = logging.getLogger(__name__)


def verify_split_json(job_json: str, split_json: dict[str, Any]) -> dict[str, Any]:
    """On an executor: compare one split; its result as JSON."""
    job = VerifyJob.from_json(job_json)
    return run_split(job, Split.from_json(split_json)).to_json()


def verify_with_spark(spark: Any, job: VerifyJob, report: str | None = None) -> VerifyResult:
    """Plan on the driver, compare one split per Spark task, combine (and write the report)."""
    began = time.monotonic()
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
    return result
