"""Start the executors' Python workers while a ship job's driver plans.

A Spark task's Python worker starts (forked by Spark's Python daemon, then importing walship,
unless walship's daemon loaded it before the fork: :mod:`walship.spark.daemon`) when a job
first needs it. On a small cluster that start took the CPU the ship tasks' first
batches needed, inside their stage. :class:`WorkerWarmUp` runs a small job of its own first,
one task for each slot Spark reports (``defaultParallelism``), in a thread beside the plan;
Spark keeps a worker for the next task (:data:`REUSE_KEY`, on by default), so the ship tasks
find theirs started.

The warm-up never holds the job back: the ship stage waits for it at most
:data:`WARM_UP_WAIT` seconds, and it is cancelled (its own job group) when the plan fails or
finds nothing to ship. One that fails costs only its head start: it logs the cause in one line,
and the ship stage then meets, and reports, whatever stopped it.
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import os
import re
import threading
import uuid
from collections.abc import Iterator
from typing import Any

from walship.sinks.registry import sink_factory

__all__ = [
    "REUSE_KEY",
    "WARM_SINKS",
    "WARM_UP_GROUP",
    "WARM_UP_WAIT",
    "WorkerWarmUp",
    "failure_line",
    "load_shipping_path",
    "warm_worker",
]

log = logging.getLogger(__name__)

#: Spark's setting that keeps a task's Python worker for the next task (on unless set false;
#: set false, there is no warm-up: a started worker would serve no ship task).
REUSE_KEY = "spark.python.worker.reuse"
#: The sinks a worker loads ahead (both Thrift sinks; the others load in their ship task).
WARM_SINKS = ("thrift1", "thrift2")
#: The module a ship task's function comes from: importing it imports the shipping path.
SHIP_MODULE = "walship.spark.ship"
#: The module a copy task's function comes from (little beyond the shipping path).
COPY_MODULE = "walship.spark.copy"
#: Seconds the ship stage waits for the warm-up once the plan is made (executors slow to come,
#: say); then the warm-up is cancelled and the ship tasks go on without it.
WARM_UP_WAIT = 60.0
#: The warm-up job's group id starts with this (the Spark UI and event log show it).
WARM_UP_GROUP = "walship-warm-up"

#: A line of a Python traceback that names the error: ``ModuleNotFoundError: No module ...``.
_ERROR_LINE = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|Exit|Interrupt)\b")


def load_shipping_path() -> None:
    """Import what a ship task imports before its first batch: the shipping path, the Thrift
    sinks, the sinks' entry points; and a copy task's path. None of it starts a thread
    (walship's Python daemon loads it before it forks the workers: :mod:`walship.spark.daemon`)."""
    importlib.import_module(SHIP_MODULE)
    importlib.import_module(COPY_MODULE)
    for protocol in WARM_SINKS:
        sink_factory(protocol)


def warm_worker(_: Iterator[int]) -> Iterator[int]:
    """On an executor: :func:`load_shipping_path` in a Python worker the ship tasks then reuse
    (nothing left to load where walship's daemon forked it). Its process id."""
    load_shipping_path()
    yield os.getpid()


def failure_line(exc: BaseException) -> str:
    """The line of a failed Spark job's error that names its cause: the last line of the
    Python traceback in it that names an error, else its first line."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    named = [line for line in lines if _ERROR_LINE.match(line)]
    if named:
        return named[-1]
    return lines[0] if lines else type(exc).__name__


class WorkerWarmUp:
    """The warm-up job, started at construction in a thread of its own (see the module's
    docstring); :meth:`wait` for it before the ship stage, :meth:`stop` it in any case."""

    def __init__(self, spark: Any) -> None:
        from pyspark import InheritableThread  # the thread takes the caller's Spark properties

        self._sc = spark.sparkContext
        self.group = f"{WARM_UP_GROUP}-{uuid.uuid4().hex[:12]}"
        #: the process ids of the workers it started
        self.workers: set[int] = set()
        self._cancelled = threading.Event()
        self._thread = InheritableThread(target=self._run, name="walship-warm-up", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        if self._sc.getConf().get(REUSE_KEY, "true").strip().lower() == "false":
            log.info("%s is false: each ship task starts its own Python worker", REUSE_KEY)
            return
        slots = self._sc.defaultParallelism
        self._sc.setJobGroup(self.group, "walship: start the ship tasks' Python workers", interruptOnCancel=False)
        if self._cancelled.is_set():
            return
        try:
            rdd = self._sc.parallelize(range(slots), numSlices=slots)
            self.workers = set(rdd.mapPartitions(warm_worker).collect())
        except Exception as exc:  # only a head start is lost; the ship stage goes on
            if self._cancelled.is_set():
                log.info("the Python workers' warm-up was cancelled")
            else:
                log.warning("the Python workers could not be started ahead of the ship tasks: %s", failure_line(exc))
        else:
            log.info("%d Python worker(s) started ahead of the ship tasks", len(self.workers))

    def wait(self, timeout: float = WARM_UP_WAIT) -> None:
        """Wait for the warm-up, at most ``timeout`` seconds, then :meth:`stop` it."""
        self._thread.join(timeout)
        if self._thread.is_alive():
            log.info("the Python workers are not started after %.0f s: the ship tasks go on without them", timeout)
        self.stop()

    def stop(self) -> None:
        """Cancel the warm-up if it still runs (the plan failed or found nothing to ship, or
        it took too long), and wait until its thread has ended."""
        while self._thread.is_alive():
            self._cancelled.set()
            with contextlib.suppress(Exception):  # a session going down: its job ends with it
                self._sc.cancelJobGroup(self.group)
            self._thread.join(0.5)
