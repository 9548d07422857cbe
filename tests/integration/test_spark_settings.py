"""The Spark settings walship's jobs run with: walship's JVM options for the driver and the
executors where the Spark connection asks for them (they replace the site's own), which its
extra ``spark_conf`` overrides; walship's Python daemon unless the job names another."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fixtures_spark_wal import spark_submit

from walship.spark.daemon import DAEMON_KEY, DAEMON_MODULE
from walship.spark.entry import JVM_OPTIONS, job_settings
from walship.spark.jvm import ARCHIVE, archive_option

pytestmark = pytest.mark.integration


def spark_conn(extra: dict[str, object]) -> str:
    return json.dumps({"conn_type": "spark", "host": "local[2]", "extra": extra})


def test_jobs_go_with_walship_s_jvm_options_where_the_connection_asks_unless_it_sets_its_own(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from walship_airflow.hooks.spark import WalshipSparkHook

    monkeypatch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", spark_conn({}))
    settings = WalshipSparkHook().settings()
    assert "spark.driver.extraJavaOptions" not in settings  # the site's own stay
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", spark_conn({"walship_jvm_options": True}))
    settings = WalshipSparkHook().settings()
    # and the class archive, where make setup built it (tests/unit/test_spark_jvm.py)
    assert settings["spark.driver.extraJavaOptions"] == " ".join(filter(None, (JVM_OPTIONS, archive_option())))
    assert settings["spark.executor.extraJavaOptions"] == JVM_OPTIONS
    own = {"walship_jvm_options": "true", "spark_conf": {"spark.driver.extraJavaOptions": "-Xss4m"}}
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", spark_conn(own))
    settings = WalshipSparkHook().settings()
    assert settings["spark.driver.extraJavaOptions"] == "-Xss4m"
    assert settings["spark.executor.extraJavaOptions"] == JVM_OPTIONS


def test_a_packed_environment_is_the_python_of_yarn_s_containers_and_a_local_driver_keeps_its_own(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import sys

    from walship_airflow.hooks.spark import WalshipSparkHook

    def settings(deploy_mode: str, **extra: object) -> dict[str, str]:
        conn = {"conn_type": "spark", "host": "yarn", "extra": {"deploy-mode": deploy_mode, **extra}}
        monkeypatch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", json.dumps(conn))
        return WalshipSparkHook().settings()

    cluster = settings("cluster", archive="hdfs:///apps/env.tar.gz")
    assert cluster["spark.pyspark.python"] == cluster["spark.pyspark.driver.python"] == "./walship-env/bin/python"
    client = settings("client", archive="hdfs:///apps/env.tar.gz#py")
    assert (client["spark.pyspark.python"], client["spark.pyspark.driver.python"]) == (
        "./py/bin/python",
        sys.executable,
    )
    chosen = settings("client", archive="/env.tar.gz", pyspark_python="/opt/py", pyspark_driver_python="/opt/d")
    assert (chosen["spark.pyspark.python"], chosen["spark.pyspark.driver.python"]) == ("/opt/py", "/opt/d")
    assert "spark.pyspark.python" not in settings("cluster")


#: A Spark job that starts its session as walship's jobs do, and prints, from its one task, the
#: module its Python daemon runs and where the worker's pyspark came from.
PROBE = """
import json, os
from walship.spark.entry import spark_session

def probe(_):
    import gc, sys
    loaded = "walship.spark.ship" in sys.modules  # before this task imports anything of walship's
    import pyspark
    with open(f"/proc/{os.getppid()}/cmdline", "rb") as f:
        daemon = f.read().split(b"\\0")
    yield json.dumps({"daemon": daemon[daemon.index(b"-m") + 1].decode(), "pyspark": pyspark.__file__,
                      "shipping_path_loaded": loaded, "frozen": gc.get_freeze_count()})

with spark_session("daemon-probe") as spark:
    print("PROBE " + spark.sparkContext.parallelize([0], 1).mapPartitions(probe).collect()[0])
"""


def test_walship_s_jobs_start_their_python_workers_with_compiled_pyspark_unless_the_job_names_a_daemon(
    tmp_path: Path,
) -> None:
    """A job's Python workers start through walship's daemon, which imports pyspark from the
    installed package, not Spark's source archive, and forks them with walship's shipping path
    loaded and frozen; a daemon the job's configuration names is the one Spark runs."""
    script = tmp_path / "probe.py"
    script.write_text(PROBE)
    seen = []
    for conf in ({}, {DAEMON_KEY: "pyspark.daemon"}):
        done = spark_submit(script, [], tmp_path, conf)
        lines = [line for line in done.stdout.splitlines() if line.startswith("PROBE ")]
        assert done.returncode == 0 and lines, done.stdout[-2000:] + done.stderr[-3000:]
        seen.append(json.loads(lines[0].removeprefix("PROBE ")))
    ours, spark_s = seen
    assert ours["daemon"] == DAEMON_MODULE
    assert ".zip" not in ours["pyspark"] and Path(ours["pyspark"]).is_file()
    assert ours["shipping_path_loaded"] and ours["frozen"] > 0
    assert spark_s["daemon"] == "pyspark.daemon"
    assert "pyspark.zip" in spark_s["pyspark"]  # Spark's own daemon: from its source archive
    assert not spark_s["shipping_path_loaded"] and spark_s["frozen"] == 0


def test_the_driver_maps_spark_s_classes_from_the_archive_make_setup_built(tmp_path: Path) -> None:
    """``make setup`` built the class archive of this environment's Spark; a job submitted with
    walship's settings has its driver take Spark's classes from it, not from Spark's jars."""
    archive = archive_option()
    assert archive is not None, f"no class archive at {ARCHIVE}: make setup builds it"
    settings = job_settings()
    assert archive in settings["spark.driver.extraJavaOptions"]
    assert "SharedArchiveFile" not in settings["spark.executor.extraJavaOptions"]
    script = tmp_path / "probe.py"
    script.write_text(PROBE)
    loaded = tmp_path / "classes.log"
    driver = f"{settings['spark.driver.extraJavaOptions']} -Xlog:class+load=info:file={loaded}"
    done = spark_submit(script, [], tmp_path, {"spark.driver.extraJavaOptions": driver})
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    sources = {}
    for line in loaded.read_text().splitlines():
        # Spark's classes, not the lambdas' classes the JVM makes as it runs
        if " org.apache.spark." in line and " source: " in line and "$$Lambda" not in line:
            name, source = line.split(" org.apache.spark.", 1)[1].split(" source: ", 1)
            sources[name] = source
    assert sources["SparkContext"] == "shared objects file (top)"
    shared = sum(1 for source in sources.values() if source.startswith("shared objects file"))
    assert shared >= 0.9 * len(sources) > 1000  # nearly all of Spark's classes: mapped, not read from a jar
