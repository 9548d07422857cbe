"""The Python daemon of walship's Spark jobs (``spark.python.daemon.module``): Spark's own
(:mod:`pyspark.daemon`), run with pyspark and py4j imported from their installed, compiled
packages instead of Spark's source archives.

Spark starts an executor's Python workers through a daemon whose ``PYTHONPATH`` begins with
``$SPARK_HOME/python/lib/pyspark.zip`` and py4j's source archive. Python keeps no bytecode of
what it imports from an archive, so the daemon compiled pyspark from source, and so did each
worker it forks (a worker imports Spark's worker module after the fork): about 0.5 s of CPU a
process, before the job's first task, on cores the job's tasks and the peer share. Where this
interpreter has the same pyspark (or py4j) installed, as it has where Spark came from pip (the
archives lie inside that package: the files that make Spark's worker protocol match, checked by
their checksums), the daemon leaves that archive out of ``sys.path`` and imports the installed
copy. An archive whose package is not installed here, differs from the installed copy, or
cannot be read, stays where Spark put it; so does the whole path when the installed pyspark
cannot be imported.

It also loads walship's shipping path once, before it forks the workers (:func:`preload`), so
a worker starts with it loaded instead of importing it itself; then it runs Spark's daemon
unchanged.

:func:`walship.spark.entry.spark_session` names this daemon unless the job's configuration
names another; it needs walship on the executors, as every walship job's tasks do.
"""

from __future__ import annotations

import contextlib
import fnmatch
import gc
import importlib.machinery
import logging
import sys
import zipfile
import zlib
from pathlib import Path

__all__ = ["ARCHIVES", "DAEMON_KEY", "DAEMON_MODULE", "compiled_path", "main", "preload"]

#: Spark's setting that names the module its Python daemon runs.
DAEMON_KEY = "spark.python.daemon.module"
#: This module, the daemon walship's jobs name.
DAEMON_MODULE = "walship.spark.daemon"

log = logging.getLogger(DAEMON_MODULE)  # Spark runs it as ``python -m``: its __name__ is __main__

#: Spark's source archives (a file name pattern), the package each one holds, and the files
#: that must be the same in the installed copy: its version, and what speaks to Spark's JVM.
ARCHIVES = {
    "pyspark.zip": ("pyspark", ("version.py", "daemon.py", "worker.py", "worker_util.py", "serializers.py")),
    "py4j-*-src.zip": ("py4j", ("version.py", "java_gateway.py", "clientserver.py", "protocol.py")),
}


def archive_package(entry: str) -> str | None:
    """The package a ``sys.path`` entry holds when it is one of Spark's :data:`ARCHIVES`."""
    name = Path(entry).name
    return next((package for pattern, (package, _) in ARCHIVES.items() if fnmatch.fnmatch(name, pattern)), None)


def same_as_installed(archive: str, package: str, path: list[str]) -> bool:
    """Whether ``package`` found on ``path`` has the same files (:data:`ARCHIVES`, by their
    CRC-32) as in ``archive``."""
    files = next(names for name, names in ARCHIVES.values() if name == package)
    try:
        spec = importlib.machinery.PathFinder.find_spec(package, path)
        if spec is None or not spec.submodule_search_locations:
            return False
        installed = Path(next(iter(spec.submodule_search_locations)))
        with zipfile.ZipFile(archive) as zf:
            packed = {name: zf.getinfo(f"{package}/{name}").CRC for name in files}
        return all(zlib.crc32(Path(installed, name).read_bytes()) == crc for name, crc in packed.items())
    except Exception as exc:  # whatever it cannot check, it leaves as Spark set it
        log.debug("%s stays on the path: %s", archive, exc)
        return False


def compiled_path(path: list[str]) -> list[str]:
    """``path`` without those of Spark's source archives whose package the rest of it has,
    the same (see :func:`same_as_installed`)."""
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
    whose tasks then meet, and report, what stopped it. Nothing it prints goes to standard
    output, where the daemon tells Spark its port."""
    with contextlib.redirect_stdout(sys.stderr):
        try:
            from walship.spark.warmup import load_shipping_path

            load_shipping_path()
        except Exception as exc:  # the daemon serves every task of the job, whatever this misses
            log.warning("walship's daemon: the shipping path is not preloaded: %s: %s", type(exc).__name__, exc)
    gc.collect()
    gc.freeze()


def main() -> None:
    """Run Spark's Python daemon (its arguments: the worker module) on :func:`compiled_path`,
    with walship's shipping path :func:`preload`-ed; on Spark's own path where the installed
    pyspark cannot be imported."""
    spark_s = list(sys.path)
    try:
        sys.path[:] = compiled_path(spark_s)
        from pyspark.daemon import manager
    except Exception as exc:
        log.warning("walship's daemon: pyspark from Spark's own path (%s: %s)", type(exc).__name__, exc)
        sys.path[:] = spark_s
        for name in [m for m in sys.modules if m.split(".")[0] in ("pyspark", "py4j")]:
            del sys.modules[name]
        from pyspark.daemon import manager
    preload()
    manager()


if __name__ == "__main__":
    main()
