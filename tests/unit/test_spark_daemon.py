"""walship's Python daemon for Spark leaves Spark's source archives off the path only where the
same packages are installed: what it cannot check stays as Spark set it."""

from __future__ import annotations

import json
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pyspark

from walship.spark.daemon import compiled_path

SITE = sysconfig.get_paths()["purelib"]
#: the archives Spark puts first on its Python workers' path, from the pip-installed Spark
LIB = Path(pyspark.__file__).parent / "python" / "lib"


def spark_archives() -> list[str]:
    archives = [str(LIB / "pyspark.zip"), *map(str, LIB.glob("py4j-*-src.zip"))]
    assert len(archives) == 2 and all(Path(a).is_file() for a in archives)
    return archives


def archive(path: Path, files: dict[str, bytes]) -> str:
    with zipfile.ZipFile(path, "w") as zf:
        for name, data in files.items():
            zf.writestr(name, data)
    return str(path)


def test_spark_s_archives_leave_the_path_where_the_same_packages_are_installed() -> None:
    path = ["", *spark_archives(), "/opt/app", SITE]
    assert compiled_path(path) == ["", "/opt/app", SITE]


def test_an_archive_stays_where_its_package_is_not_installed_on_the_rest_of_the_path() -> None:
    path = [*spark_archives(), "/opt/app"]  # no site-packages: nothing else has pyspark or py4j
    assert compiled_path(path) == path


def test_an_archive_of_another_version_stays(tmp_path: Path) -> None:
    other = archive(tmp_path / "pyspark.zip", {"pyspark/version.py": b'__version__: str = "3.0.0"\n'})
    py4j = spark_archives()[1]
    assert compiled_path([other, py4j, SITE]) == [other, SITE]


def test_an_archive_whose_worker_protocol_differs_stays_though_its_version_is_the_same(tmp_path: Path) -> None:
    """A Spark whose Python side was patched under the same version keeps its own archive."""
    with zipfile.ZipFile(spark_archives()[0]) as zf:
        files = {name: zf.read(name) for name in zf.namelist() if name.count("/") == 1}
    files["pyspark/worker.py"] += b"\n# patched\n"
    patched = archive(tmp_path / "pyspark.zip", files)
    assert compiled_path([patched, SITE]) == [patched, SITE]


def test_an_archive_that_cannot_be_read_or_tells_no_version_stays(tmp_path: Path) -> None:
    (tmp_path / "broken").mkdir()
    broken = tmp_path / "broken" / "pyspark.zip"
    broken.write_bytes(b"PK\x03\x04 not a whole archive")
    unversioned = archive(tmp_path / "py4j-0.10.9.9-src.zip", {"py4j/__init__.py": b""})
    missing = str(tmp_path / "gone" / "pyspark.zip")
    for path in ([str(broken), SITE], [unversioned, SITE], [missing, SITE]):
        assert compiled_path(path) == path


def fresh_python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False)


def test_the_daemon_preloads_the_shipping_path_without_a_thread_and_freezes_it() -> None:
    """What the daemon loads before it forks starts no thread, not even a native one: a fork
    carries only the thread that forks."""
    done = fresh_python(
        "import gc, json, os, sys, threading\n"
        "import pyspark.daemon\n"  # as the daemon runs it: Spark's daemon first
        "from walship.spark.daemon import preload\n"
        "preload()\n"
        "print(json.dumps([threading.active_count(), len(os.listdir('/proc/self/task')),\n"
        "    'walship.spark.ship' in sys.modules and 'walship.spark.copy' in sys.modules,\n"
        "    'happybase' in sys.modules, gc.get_freeze_count()]))\n"
    )
    assert done.returncode == 0, done.stderr
    python_threads, os_threads, ship, thrift1, frozen = json.loads(done.stdout)
    assert (python_threads, os_threads, ship, thrift1) == (1, 1, True, True)
    assert frozen > 10_000


def test_a_shipping_path_that_cannot_be_preloaded_leaves_the_daemon_running_and_says_why() -> None:
    done = fresh_python(
        "import walship.spark.warmup as w\n"
        "w.WARM_SINKS = ('no-such-sink',)\n"
        "from walship.spark.daemon import preload\n"
        "preload()\n"
        "print('daemon goes on')\n"
    )
    assert done.returncode == 0 and done.stdout.strip() == "daemon goes on", done.stderr
    assert "not preloaded" in done.stderr and "no-such-sink" in done.stderr
    assert "Traceback" not in done.stderr
