"""What every ``spark_jobs/*.py`` entry point does around its own work: log, read the job (a
JSON description, or flags), start and stop the SparkSession, and turn walship's errors into
one line on stderr and an exit status (2: a bad job, 1: it failed). The entry point itself
calls its job's function, so that a reader follows it from ``main`` to the work."""

from __future__ import annotations

import argparse
import contextlib
import logging
import sys
from collections.abc import Iterator
from typing import Any

from walship.errors import WalshipError

__all__ = ["JOB_ERRORS", "bad_job", "failed", "setup_logging", "spark_session"]

log = logging.getLogger(__name__)


#: What a job that cannot be read raises: walship's errors, and a bad flag value's.
JOB_ERRORS: tuple[type[Exception], ...] = (WalshipError, argparse.ArgumentTypeError)


def setup_logging() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")


def bad_job(prog: str, why: object) -> int:
    """Print why the job cannot be read; exit status 2."""
    print(f"{prog}: {why}", file=sys.stderr)
    return 2


@contextlib.contextmanager
def spark_session(app_name: str) -> Iterator[Any]:
    """A SparkSession for the block, stopped after it."""
    from pyspark.sql import SparkSession

    spark = SparkSession.builder.appName(app_name).getOrCreate()
    try:
        yield spark
    finally:
        spark.stop()


def failed(prog: str, exc: WalshipError) -> int:
    """Print why the job failed; exit status 1."""
    print(f"{prog}: {exc}", file=sys.stderr)
    return 1
