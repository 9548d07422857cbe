"""The Java side of walship's Spark jobs: the JVMs' options (:data:`JVM_OPTIONS`), and a class
archive of the driver's JVM (Java's class data sharing).

Before a job's first task, its driver's JVM loads and checks several thousand classes from
Spark's jars: on a ``local[2]`` job, about 4 of its 9 s and as much CPU. Java can write the
classes a run loaded into an archive (``-XX:ArchiveClassesAtExit``), which later JVMs map
instead (``-XX:SharedArchiveFile``). ``make setup`` builds one for this machine's Java and
Spark (``python -m walship.spark.jvm``: a small job such as walship's, run once), and
:func:`walship.spark.entry.job_settings` names it in the driver's Java options while the Java,
the Spark and walship's Java options are those it was built for (:func:`fingerprint`, a few
file reads); after an upgrade it is left out until ``make setup`` builds it again. A JVM it
does not fit all the same (more on the class path; a driver run on another host in cluster
deploy mode) loads the classes from the jars, with at most one warning, on standard error;
executors, which may run another host's Spark, are not given it.

    python -m walship.spark.jvm [--force]
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from walship.errors import ConfigError

__all__ = ["ARCHIVE", "JVM_OPTIONS", "archive_option", "build", "fingerprint", "local_submit_env", "main"]

log = logging.getLogger(__name__)

#: Java options for the JVMs of walship's Spark jobs: the Python tasks do the work and the JVM
#: lives for one short job, so compiling only with the quick compiler (C1) and collecting
#: garbage in one thread spend far less of the machine on the JVM itself: measured on a
#: ``local[2]`` ship job, half the JVM's CPU and 2.5 s less to start (``benchmarks/spark_ship.py``
#: prints the job both ways).
JVM_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
#: Where the archive is built: beside this Python environment's packages, so that the
#: environment that runs ``spark-submit`` finds the archive of its own Spark.
ARCHIVE = Path(sys.prefix) / "share" / "walship" / "spark-driver.jsa"
#: Seconds the job that builds the archive may take.
BUILD_TIMEOUT = 600
#: The driver's Java warnings (the archive's among them) on standard error: on standard
#: output they would mix with what the job prints there.
WARNINGS_TO_STDERR = "-Xlog:disable -Xlog:all=warning:stderr"
#: The job the archive is built from: a session, Python tasks in a job group, a cancelled
#: group, as walship's jobs run them (a script of its own: run from this package's folder,
#: its ``copy`` module would stand in for the standard library's).
PROBE = """from walship.spark.entry import spark_session

with spark_session("walship-class-archive") as spark:
    sc = spark.sparkContext
    sc.setJobGroup("walship-class-archive", "load the driver's classes", interruptOnCancel=False)
    sc.parallelize(range(2), 2).mapPartitions(lambda rows: [sum(1 for _ in rows)]).collect()
    sc.cancelJobGroup("walship-class-archive")
"""


def local_submit_env() -> dict[str, str]:
    """The environment of a ``spark-submit`` on this host with this interpreter: it runs the
    driver and the Python workers, its folder (``spark-submit``'s) leads the path, and Spark
    binds to the loopback address."""
    bindir = Path(sys.executable).parent
    return {
        **os.environ,
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
        "PATH": f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}",
        "SPARK_LOCAL_IP": "127.0.0.1",
    }


def _java() -> str | None:
    """The ``java`` spark-submit runs: ``$JAVA_HOME/bin/java``, else the one on the path."""
    home = os.environ.get("JAVA_HOME")
    java = str(Path(home, "bin", "java")) if home else shutil.which("java")
    return java if java and Path(java).is_file() else None


def fingerprint() -> dict[str, str] | None:
    """What an archive fits: the Java (its launcher's real path and time), the Spark
    (``SPARK_HOME``, else pyspark's version) and walship's Java options; ``None`` where there
    is no java or no pyspark."""
    java = _java()
    try:
        pyspark = importlib.metadata.version("pyspark")
    except importlib.metadata.PackageNotFoundError:
        return None
    if java is None:
        return None
    real = os.path.realpath(java)
    return {
        "java": real,
        "java_changed": str(os.stat(real).st_mtime_ns),
        "spark_home": os.environ.get("SPARK_HOME", ""),
        "pyspark": pyspark,
        "options": JVM_OPTIONS,
    }


def _stamp() -> Path:
    return ARCHIVE.with_suffix(".fingerprint")


def _built_for() -> dict[str, str] | None:
    try:
        stamp = json.loads(_stamp().read_text())
    except (OSError, ValueError):
        return None
    return stamp if isinstance(stamp, dict) else None


def archive_option() -> str | None:
    """The driver's Java options that map the archive (and put the JVM's warnings on standard
    error), where it is built for this :func:`fingerprint`; else ``None`` (also where its path
    holds a space: Spark splits Java options at spaces)."""
    if any(c.isspace() for c in str(ARCHIVE)) or not ARCHIVE.is_file():
        return None
    now = fingerprint()
    if now is None or _built_for() != now:
        log.info("%s was built for another Java or Spark: left out until make setup builds it again", ARCHIVE)
        return None
    return f"{WARNINGS_TO_STDERR} -XX:SharedArchiveFile={ARCHIVE}"


def build(force: bool = False) -> bool:
    """Build the archive unless one of the same :func:`fingerprint` is there (``force``:
    anyway); whether it was built. Written aside first, so a failed build leaves the archive
    that was there.

    :raises ConfigError: no java or pyspark, a path with a space, or the job that builds it
        failed (its output's end).
    """
    wanted = fingerprint()
    if wanted is None:
        raise ConfigError("no java or no pyspark to build the Spark driver's class archive with (set JAVA_HOME)")
    if any(c.isspace() for c in str(ARCHIVE)):
        raise ConfigError(f"{ARCHIVE}: Spark splits Java options at spaces, so no archive there")
    if not force and ARCHIVE.is_file() and _built_for() == wanted:
        return False
    ARCHIVE.parent.mkdir(parents=True, exist_ok=True)
    bindir = Path(sys.executable).parent
    env = local_submit_env()
    with tempfile.TemporaryDirectory(prefix="walship-classes-", dir=ARCHIVE.parent) as tmp:
        written = Path(tmp, ARCHIVE.name)
        script = Path(tmp, "probe.py")
        script.write_text(PROBE)
        options = f"{JVM_OPTIONS} -XX:ArchiveClassesAtExit={written}"
        cmd = [str(bindir / "spark-submit"), "--master", "local[2]", "--conf", "spark.ui.enabled=false",
               "--conf", f"spark.driver.extraJavaOptions={options}", str(script)]  # fmt: skip
        done = subprocess.run(cmd, env=env, cwd=tmp, capture_output=True, text=True, timeout=BUILD_TIMEOUT, check=False)
        if done.returncode != 0 or not written.is_file():
            tail = (done.stdout + done.stderr).strip().splitlines()[-15:]
            raise ConfigError(
                f"the job that builds {ARCHIVE} failed (exit status {done.returncode}):\n" + "\n".join(tail)
            )
        os.replace(written, ARCHIVE)
    _stamp().write_text(json.dumps(wanted, sort_keys=True) + "\n")
    return True


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m walship.spark.jvm", description=__doc__.split("\n\n")[0])
    parser.add_argument("--force", action="store_true", help="build it even where one of the same fingerprint is")
    args = parser.parse_args(argv)
    try:
        built = build(force=args.force)
    except (ConfigError, OSError, subprocess.TimeoutExpired) as exc:
        print(f"walship.spark.jvm: {exc}", file=sys.stderr)
        return 1
    print(f"{ARCHIVE}: {'built' if built else 'up to date'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
