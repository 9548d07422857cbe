"""Spark submission of walship's jobs (ship, verify, copy), in one hook.

:class:`WalshipSparkHook` is the Spark provider's :class:`SparkSubmitHook` on the Spark
connection (``spark_default``, or a DAG's Param ``spark_conn_id``) that also owns what walship
adds: the settings from the connection's extras (``pyspark_python``, ``spark_conf``), whether
it submits in cluster deploy mode on a standalone master (then the Python job goes as
``spark_jobs/pyrunner.jar`` with Spark's PythonRunner), and the command: the application and
its arguments built from the job description, which the submit's keyword arguments carry as
``job`` (a plan task's output) so that nothing reads it back from ``application_args``.
"""

from __future__ import annotations

import logging
from typing import Any

from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook
from airflow.sdk.exceptions import AirflowException

from walship.spark.entry import job_settings

__all__ = ["PYTHON_RUNNER", "SPARK_CONN_ID", "WalshipSparkHook"]

log = logging.getLogger(__name__)

SPARK_CONN_ID = "spark_default"
#: Spark refuses Python applications in cluster deploy mode on a standalone master; there the
#: job is submitted as this (empty) jar with Spark's own PythonRunner as its main class, which
#: runs the Python file on a worker exactly as spark-submit would run it locally.
PYTHON_RUNNER = "org.apache.spark.deploy.PythonRunner"


class WalshipSparkHook(SparkSubmitHook):
    """spark-submit of one of walship's Spark jobs on ``conn_id``."""

    def __init__(self, conn_id: str = SPARK_CONN_ID, **kwargs: Any) -> None:
        super().__init__(conn_id=conn_id, **kwargs)
        self.spark_conn_id = conn_id

    @property
    def standalone_cluster(self) -> bool:
        """Whether the driver runs on a standalone master's worker (cluster deploy mode)."""
        return str(self._connection["master"]).startswith("spark://") and self._connection["deploy_mode"] == "cluster"

    def settings(self) -> dict[str, str]:
        """Spark settings of a walship job: the Python interpreter from the connection's extra
        ``pyspark_python`` (the one on the Spark hosts where walship is installed, never the
        interpreter that parsed the DAG); with the extra ``walship_jvm_options`` true,
        walship's JVM options (:func:`walship.spark.entry.job_settings`: they replace the
        site's ``extraJavaOptions``, so they are asked for); the extra ``spark_conf`` adds
        settings and overrides these."""
        conf = {"spark.ui.enabled": "false"}
        extra = self.get_connection(self.spark_conn_id).extra_dejson or {}
        if str(extra.get("walship_jvm_options", "false")).lower() == "true":
            conf.update(job_settings())
        python = extra.get("pyspark_python")
        if python:
            conf["spark.pyspark.python"] = str(python)
            conf["spark.pyspark.driver.python"] = str(extra.get("pyspark_driver_python") or python)
        more = extra.get("spark_conf") or {}
        if not isinstance(more, dict):
            raise AirflowException(f"connection {self.spark_conn_id}: extra 'spark_conf' must be an object of settings")
        conf.update({str(k): str(v) for k, v in more.items()})
        return conf

    def submit_kwargs(self, app: str, jar: str, job: str, extra_args: list[str] | None = None) -> dict[str, Any]:
        """The keyword arguments of the Spark task for the job description ``job`` (JSON):
        ``app --job <job> [extra_args]``, as ``jar`` with PythonRunner in cluster deploy mode on
        a standalone master; ``job`` itself rides along for the tasks that read it."""
        args = ["--job", job, *(extra_args or [])]
        kwargs: dict[str, Any] = {
            "conn_id": self.spark_conn_id,
            "conf": self.settings(),
            "job": job,
            "standalone_cluster": self.standalone_cluster,
        }
        if self.standalone_cluster:
            kwargs.update(application=jar, java_class=PYTHON_RUNNER, application_args=[app, "", *args])
        else:
            kwargs.update(application=app, application_args=args)
        return kwargs
