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
from walship.spark.daemon import DAEMON_KEY, DAEMON_MODULE
from walship.spark.jvm import JVM_OPTIONS, archive_option

__all__ = ["JOB_ERRORS", "JVM_OPTIONS", "bad_job", "failed", "job_settings", "setup_logging", "spark_session"]

log = logging.getLogger(__name__)


#: What a job that cannot be read raises: walship's errors, and a bad flag value's.
JOB_ERRORS: tuple[type[Exception], ...] = (WalshipError, argparse.ArgumentTypeError)


def job_settings() -> dict[str, str]:
    """The Spark settings walship recommends for its jobs: :data:`~walship.spark.jvm.JVM_OPTIONS`
    for the driver and the executors, and for the driver, the class archive ``make setup`` built
    for this environment's Java and Spark (:mod:`walship.spark.jvm`), where it fits. They must
    be given to spark-submit (``--conf``: a driver's JVM options cannot change once it runs), and they
    replace a site's own ``extraJavaOptions`` (and ``UseSerialGC`` conflicts with another
    collector in its ``defaultJavaOptions``), so the Airflow hook adds them only where the
    Spark connection asks (``walship_jvm_options``)."""
    archive = archive_option()
    driver = f"{JVM_OPTIONS} {archive}" if archive else JVM_OPTIONS
    return {"spark.driver.extraJavaOptions": driver, "spark.executor.extraJavaOptions": JVM_OPTIONS}


def setup_logging() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")


def bad_job(prog: str, why: object) -> int:
    """Print why the job cannot be read; exit status 2."""
    print(f"{prog}: {why}", file=sys.stderr)
    return 2


@contextlib.contextmanager
def spark_session(app_name: str) -> Iterator[Any]:
    """A SparkSession for the block, stopped after it. Its Python workers start through
    walship's daemon (:mod:`walship.spark.daemon`), unless the job's configuration names
    another."""
    from pyspark import SparkConf, SparkContext
    from pyspark.sql import SparkSession

    # the JVM first (spark-submit's, or one launched here): a SparkConf made before it holds
    # none of the job's settings, and the builder's would replace the job's own daemon
    SparkContext._ensure_initialized()
    builder = SparkSession.builder.appName(app_name)
    if not SparkConf().contains(DAEMON_KEY):
        builder = builder.config(DAEMON_KEY, DAEMON_MODULE)
    spark = builder.getOrCreate()
    try:
        yield spark
    finally:
        spark.stop()


def failed(prog: str, exc: WalshipError) -> int:
    """Print why the job failed; exit status 1."""
    print(f"{prog}: {exc}", file=sys.stderr)
    return 1
