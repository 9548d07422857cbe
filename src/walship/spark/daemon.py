"""The Python daemon of walship's Spark jobs: pyspark's own, with walship loaded once before it
forks.

Spark starts one Python daemon an executor, which forks a worker for each Python task (and
keeps it for the next). pyspark's daemon imports nothing of the job, so every worker imported
walship's task modules itself: about 0.2 s of CPU each (the Thrift IDLs, kazoo, protobuf),
paid again by every worker of every job. This daemon imports them, and pyspark's worker, before
its first fork, so its workers start with them loaded.

It is what :func:`walship.spark.entry.spark_session` names as ``spark.python.daemon.module``
unless the job's settings name another. pyspark's daemon must fork without threads running:
none of these imports starts one (``tests/unit/test_spark_daemon.py`` checks it in a fresh
interpreter, as the daemon starts).
"""

from __future__ import annotations

import importlib
import logging
import sys
import time

__all__ = ["PRELOADED", "main", "preload"]

log = logging.getLogger(__name__)

#: What a worker finds loaded: pyspark's worker, and what the tasks of the ship, verify and copy
#: jobs import.
PRELOADED = ("pyspark.worker", "walship.spark.ship", "walship.spark.verify", "walship.spark.copy")


def preload() -> None:
    """Import :data:`PRELOADED`."""
    for name in PRELOADED:
        importlib.import_module(name)


def main() -> None:
    """pyspark's daemon, after :func:`preload` (which it reports on stderr: the daemon's stdout
    is its channel to Spark)."""
    started = time.process_time()
    preload()
    print(
        f"walship.spark.daemon: loaded {', '.join(PRELOADED)} in {time.process_time() - started:.2f} s of CPU, "
        "once for every worker",
        file=sys.stderr,
        flush=True,
    )
    from pyspark.daemon import manager

    manager()


if __name__ == "__main__":
    main()
