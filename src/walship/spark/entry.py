"""What every ``spark_jobs/*.py`` entry point does around its own work: read the job (a JSON
description, or flags), start the SparkSession, run, stop Spark, and turn walship's errors
into one line on stderr and an exit status (2: a bad job, 1: it failed)."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Callable
from typing import Any, TypeVar

from walship.errors import WalshipError

__all__ = ["run_spark_job"]

log = logging.getLogger(__name__)

J = TypeVar("J")
R = TypeVar("R")


def run_spark_job(
    prog: str,
    make_job: Callable[[], J | str],
    app_name: Callable[[J], str],
    work: Callable[[Any, J], R],
    report: Callable[[R], int],
) -> int:
    """Run one Spark job; the process's exit status.

    :param make_job: the job; a string instead is what is missing (printed, exit 2).
    :param work: ``work(spark, job)``, on the driver.
    :param report: prints the result; the exit status.
    """
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        job = make_job()
    except (WalshipError, argparse.ArgumentTypeError) as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        return 2
    if isinstance(job, str):
        print(f"{prog}: {job}", file=sys.stderr)
        return 2
    from pyspark.sql import SparkSession

    spark = SparkSession.builder.appName(app_name(job)).getOrCreate()
    try:
        result = work(spark, job)
    except WalshipError as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        return 1
    finally:
        spark.stop()
    return report(result)
