"""Copy into a new peer with Spark: the driver plans (one split per source region, as
``walship verify`` plans), one Spark task copies one split (:func:`walship.copy.copy_split`,
exactly as ``walship copy`` runs it in one process). Only plain JSON crosses between driver
and executors."""

from __future__ import annotations

import logging
import time
from typing import Any

from walship.copy import CopyResult, SplitCopied, combine, copy_split
from walship.spark.warmup import WorkerWarmUp
from walship.verify import Split, VerifyJob, plan

__all__ = ["copy_split_json", "copy_with_spark"]

log = logging.getLogger(__name__)


def copy_split_json(job_json: str, split_json: dict[str, Any]) -> dict[str, Any]:
    """On an executor: copy one split; what it copied as JSON."""
    job = VerifyJob.from_json(job_json)
    return copy_split(job, Split.from_json(split_json)).to_json()


def copy_with_spark(spark: Any, job: VerifyJob) -> CopyResult:
    """Plan on the driver while the executors' Python workers start (as a ship job's do:
    :class:`~walship.spark.warmup.WorkerWarmUp`), copy one split per Spark task, add up what
    they copied."""
    began = time.monotonic()
    warm_up = WorkerWarmUp(spark)
    try:
        job, splits = plan(job, for_copy=True)
        copied: list[SplitCopied] = []
        if splits:
            warm_up.wait()
            job_json = job.to_json()
            rdd = spark.sparkContext.parallelize([s.to_json() for s in splits], len(splits))
            copied = [SplitCopied.from_json(r) for r in rdd.map(lambda s: copy_split_json(job_json, s)).collect()]
    finally:
        warm_up.stop()  # nothing to copy, or a failed plan: no worker is waited for
    return combine(job, copied, time.monotonic() - began)
