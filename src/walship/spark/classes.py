"""A class archive of the Spark driver's JVM for walship's jobs (Java's class data sharing).

Before a job's first task, its driver's JVM loads and checks several thousand classes from
Spark's jars: on a ``local[2]`` job, about 4 of its 11 s and as much CPU. Java can write the
classes a run loaded into an archive (``-XX:ArchiveClassesAtExit``), which later JVMs map
instead (``-XX:SharedArchiveFile``). ``make setup`` builds one for this machine's Java and
Spark (``python -m walship.spark.classes``: a small job such as walship's, run once), and
:func:`walship.spark.entry.job_settings` names it in the driver's Java options where it is
built. A JVM it does not fit (another Java, another Spark, more on the class path) says so in
one warning line and loads the classes from the jars as before; executors, which may run
another host's Spark, are not given it.

    python -m walship.spark.classes [--force]
"""

from __future__ import annotations

import argparse
import hashlib
import logging
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from walship.errors import ConfigError

__all__ = ["ARCHIVE", "archive_option", "build", "fingerprint", "main"]

log = logging.getLogger(__name__)

#: Where the archive is built: beside this Python environment's packages, so that the
#: environment that runs ``spark-submit`` finds the archive of its own Spark.
ARCHIVE = Path(sys.prefix) / "share" / "walship" / "spark-driver.jsa"
#: Seconds the job that builds the archive may take.
BUILD_TIMEOUT = 600
#: The job the archive is built from: a session, Python tasks in a job group, a cancelled
#: group, as walship's jobs run them.
PROBE = "--probe"


def archive_option() -> str | None:
    """The driver's Java option that maps the archive, where it is built; else ``None`` (also
    where its path holds a space: Spark splits Java options at spaces)."""
    if not ARCHIVE.is_file() or any(c.isspace() for c in str(ARCHIVE)):
        return None
    return f"-XX:SharedArchiveFile={ARCHIVE}"


def _java() -> str:
    """The ``java`` spark-submit runs: ``$JAVA_HOME/bin/java``, else the one on the path."""
    home = os.environ.get("JAVA_HOME")
    java = str(Path(home, "bin", "java")) if home else shutil.which("java")
    if not java or not Path(java).is_file():
        raise ConfigError("no java to build the Spark driver's class archive with (set JAVA_HOME)")
    return java


def fingerprint() -> str:
    """What the archive fits: the Java (its version line), Spark (pyspark's place and version)
    and walship's Java options."""
    import pyspark

    from walship.spark.entry import JVM_OPTIONS

    version = subprocess.run([_java(), "-version"], capture_output=True, text=True, timeout=60, check=False)
    parts = [version.stderr.strip(), str(Path(pyspark.__file__).parent), pyspark.__version__, JVM_OPTIONS]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


def _stamp() -> Path:
    return ARCHIVE.with_suffix(".fingerprint")


def build(force: bool = False) -> bool:
    """Build the archive unless one of the same :func:`fingerprint` is there (``force``:
    anyway); whether it was built. Written aside first, so a failed build leaves the archive
    that was there.

    :raises ConfigError: no java, or the job that builds it failed (its output's end).
    """
    from walship.spark.entry import JVM_OPTIONS

    wanted = fingerprint()
    if not force and ARCHIVE.is_file() and _stamp().is_file() and _stamp().read_text().strip() == wanted:
        return False
    ARCHIVE.parent.mkdir(parents=True, exist_ok=True)
    bindir = Path(sys.executable).parent
    env = {
        **os.environ,
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
        "PATH": f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}",
        "SPARK_LOCAL_IP": os.environ.get("SPARK_LOCAL_IP", "127.0.0.1"),
    }
    with tempfile.TemporaryDirectory(prefix="walship-classes-", dir=ARCHIVE.parent) as tmp:
        written = Path(tmp, ARCHIVE.name)
        options = f"{JVM_OPTIONS} -XX:ArchiveClassesAtExit={written}"
        cmd = [str(bindir / "spark-submit"), "--master", "local[2]", "--conf", "spark.ui.enabled=false",
               "--conf", f"spark.driver.extraJavaOptions={options}", __file__, PROBE]  # fmt: skip
        done = subprocess.run(cmd, env=env, cwd=tmp, capture_output=True, text=True, timeout=BUILD_TIMEOUT, check=False)
        if done.returncode != 0 or not written.is_file():
            tail = (done.stdout + done.stderr).strip().splitlines()[-15:]
            raise ConfigError(
                f"the job that builds {ARCHIVE} failed (exit status {done.returncode}):\n" + "\n".join(tail)
            )
        os.replace(written, ARCHIVE)
    _stamp().write_text(wanted + "\n")
    return True


def _probe() -> None:
    """Inside spark-submit: what walship's jobs have their driver do, once."""
    from walship.spark.entry import spark_session

    with spark_session("walship-class-archive") as spark:
        sc = spark.sparkContext
        sc.setJobGroup("walship-class-archive", "load the driver's classes", interruptOnCancel=False)
        sc.parallelize(range(2), 2).mapPartitions(lambda rows: [sum(1 for _ in rows)]).collect()
        sc.cancelJobGroup("walship-class-archive")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m walship.spark.classes", description=__doc__.split("\n\n")[0])
    parser.add_argument("--force", action="store_true", help="build it even where one of the same fingerprint is")
    parser.add_argument(PROBE, action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.probe:
        _probe()
        return 0
    try:
        built = build(force=args.force)
    except (ConfigError, OSError, subprocess.TimeoutExpired) as exc:
        print(f"walship.spark.classes: {exc}", file=sys.stderr)
        return 1
    print(f"{ARCHIVE}: {'built' if built else 'up to date'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
