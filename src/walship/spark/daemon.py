"""The Python daemon of walship's Spark jobs (``spark.python.daemon.module``): Spark's own
(:mod:`pyspark.daemon`), run with pyspark and py4j imported from their installed, compiled
packages instead of Spark's source archives.

Spark starts an executor's Python workers through a daemon whose ``PYTHONPATH`` begins with
``$SPARK_HOME/python/lib/pyspark.zip`` and py4j's source archive. Python keeps no bytecode of
what it imports from an archive, so the daemon compiled pyspark from source, and so did each
worker it forks (a worker imports Spark's worker module after the fork): about 0.5 s of CPU a
process, before the job's first task, on cores the job's tasks and the peer share. Where this
interpreter has the same pyspark (or py4j) installed, as it has where Spark came from pip (the
archives lie inside that package), the daemon leaves that archive out of ``sys.path`` and
imports the installed copy. An archive whose package is not installed here, is installed in
another version, or cannot be read, stays where Spark put it.

It also loads walship's shipping path once, before it forks the workers (:func:`preload`), so
a worker starts with it loaded instead of importing it itself; then it runs Spark's daemon
unchanged.

:func:`walship.spark.entry.spark_session` names this daemon unless the job's configuration
names another; it needs walship on the executors, as every walship job's tasks do.
"""

from __future__ import annotations

import fnmatch
import gc
import importlib.machinery
import logging
import sys
import zipfile
from pathlib import Path

__all__ = ["ARCHIVES", "DAEMON_KEY", "DAEMON_MODULE", "compiled_path", "main", "preload"]

log = logging.getLogger(__name__)

#: Spark's setting that names the module its Python daemon runs.
DAEMON_KEY = "spark.python.daemon.module"
#: This module, the daemon walship's jobs name.
DAEMON_MODULE = "walship.spark.daemon"
#: Spark's source archives (a file name pattern) and the package each one holds.
ARCHIVES = {"pyspark.zip": "pyspark", "py4j-*-src.zip": "py4j"}
#: The file of a package that tells its version, in the archive and in the installed copy.
VERSION_FILE = "version.py"


def archive_package(entry: str) -> str | None:
    """The package a ``sys.path`` entry holds when it is one of Spark's :data:`ARCHIVES`."""
    name = Path(entry).name
    return next((package for pattern, package in ARCHIVES.items() if fnmatch.fnmatch(name, pattern)), None)


def same_as_installed(archive: str, package: str, path: list[str]) -> bool:
    """Whether ``package`` found on ``path`` has the same version file as in ``archive``."""
    spec = importlib.machinery.PathFinder.find_spec(package, path)
    if spec is None or not spec.submodule_search_locations:
        return False
    installed = Path(next(iter(spec.submodule_search_locations)), VERSION_FILE)
    try:
        with zipfile.ZipFile(archive) as zf:
            packed = zf.read(f"{package}/{VERSION_FILE}")
        return packed == installed.read_bytes()
    except (OSError, KeyError, zipfile.BadZipFile) as exc:
        log.debug("%s stays on the path: %s", archive, exc)
        return False


def compiled_path(path: list[str]) -> list[str]:
    """``path`` without those of Spark's source archives whose package the rest of it has in
    the same version."""
    rest = [entry for entry in path if archive_package(entry) is None]
    return [
        entry
        for entry in path
        if (package := archive_package(entry)) is None or not same_as_installed(entry, package, rest)
    ]


def preload() -> None:
    """Load walship's shipping path here, once, for every worker forked after
    (:func:`~walship.spark.warmup.load_shipping_path`: none of it starts a thread, which a
    fork would not carry over), then freeze what is loaded out of the collector's reach: a
    worker's collections (Spark's daemon runs a full one after each task) leave the pages it
    shares with the daemon alone. A shipping path that cannot be loaded is left to the workers,
    whose tasks then meet, and report, what stopped it."""
    try:
        from walship.spark.warmup import load_shipping_path

        load_shipping_path()
    except Exception as exc:  # the daemon serves every task of the job, whatever this misses
        log.warning("walship's daemon: the shipping path is not preloaded: %s: %s", type(exc).__name__, exc)
    gc.collect()
    gc.freeze()


def main() -> None:
    """Run Spark's Python daemon (its arguments: the worker module) on :func:`compiled_path`,
    with walship's shipping path :func:`preload`-ed."""
    sys.path[:] = compiled_path(sys.path)
    from pyspark.daemon import manager

    preload()
    manager()


if __name__ == "__main__":
    main()
