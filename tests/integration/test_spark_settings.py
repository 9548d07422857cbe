"""The Spark settings walship's DAGs submit a job with: walship's JVM options for the driver and
the executors where the Spark connection asks for them (they replace the site's own), which its
extra ``spark_conf`` overrides."""

from __future__ import annotations

import json

import pytest

from walship.spark.entry import JVM_OPTIONS

pytestmark = pytest.mark.integration


def spark_conn(extra: dict[str, object]) -> str:
    return json.dumps({"conn_type": "spark", "host": "local[2]", "extra": extra})


def test_jobs_go_with_walship_s_jvm_options_where_the_connection_asks_unless_it_sets_its_own(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from walship_airflow.spark import WalshipSparkHook

    monkeypatch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", spark_conn({}))
    settings = WalshipSparkHook().settings()
    assert "spark.driver.extraJavaOptions" not in settings  # the site's own stay
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", spark_conn({"walship_jvm_options": True}))
    settings = WalshipSparkHook().settings()
    assert settings["spark.driver.extraJavaOptions"] == settings["spark.executor.extraJavaOptions"] == JVM_OPTIONS
    own = {"walship_jvm_options": "true", "spark_conf": {"spark.driver.extraJavaOptions": "-Xss4m"}}
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", spark_conn(own))
    settings = WalshipSparkHook().settings()
    assert settings["spark.driver.extraJavaOptions"] == "-Xss4m"
    assert settings["spark.executor.extraJavaOptions"] == JVM_OPTIONS
