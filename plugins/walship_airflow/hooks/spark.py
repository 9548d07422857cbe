"""Spark submission of walship's jobs (ship, verify, copy), in one hook.

:class:`WalshipSparkHook` is the Spark provider's :class:`SparkSubmitHook` on the Spark
connection (``spark_default``, or a DAG's Param ``spark_conn_id``) that also owns what walship
adds: the settings from the connection's extras, whether it submits in cluster deploy mode on
a standalone master (then the Python job goes as ``spark_jobs/pyrunner.jar`` with Spark's
PythonRunner), and the command: the application and its arguments built from the job
description, which the submit's keyword arguments carry as ``job`` (a plan task's output) so
that nothing reads it back from ``application_args``.

The same connection submits to a standalone master, ``local[*]`` or YARN (host ``yarn``). On
YARN the job's Python comes as a packed environment (``walship spark pack``; the extra
``archive``, sent as ``--archives <archive>#walship-env``), the queue from the provider's own
extra ``queue``, the resources from ``num_executors``, ``executor_cores``,
``executor_memory`` and ``driver_memory``; in cluster deploy mode the provider follows the
application through the ResourceManager's REST API (extra
``yarn_resourcemanager_webapp_address``), so a task retried after its worker died finds the
running application instead of submitting a second. :meth:`WalshipSparkHook.check` makes sure,
at the task's start, that the queue exists and the archive is there.
"""

from __future__ import annotations

import functools
import logging
import sys
from typing import Any

from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook
from airflow.sdk.exceptions import AirflowException, AirflowFailException

from walship.errors import SparkSetupError, YarnUnavailableError
from walship.spark.entry import job_settings
from walship.spark.yarn import check_archive, check_queue, split_archive, webapp_from_conf

__all__ = ["PYTHON_RUNNER", "RESOURCE_EXTRAS", "SPARK_CONN_ID", "WalshipSparkHook"]

log = logging.getLogger(__name__)

SPARK_CONN_ID = "spark_default"
#: Spark refuses Python applications in cluster deploy mode on a standalone master; there the
#: job is submitted as this (empty) jar with Spark's own PythonRunner as its main class, which
#: runs the Python file on a worker exactly as spark-submit would run it locally.
PYTHON_RUNNER = "org.apache.spark.deploy.PythonRunner"
#: The connection's extras that size a job: the submit operator's arguments of the same names.
RESOURCE_EXTRAS = ("num_executors", "executor_cores", "executor_memory", "driver_memory")
#: The provider's extra naming the ResourceManager's web address.
WEBAPP_EXTRA = "yarn_resourcemanager_webapp_address"


class WalshipSparkHook(SparkSubmitHook):
    """spark-submit of one of walship's Spark jobs on ``conn_id``."""

    def __init__(self, conn_id: str = SPARK_CONN_ID, **kwargs: Any) -> None:
        super().__init__(conn_id=conn_id, **kwargs)
        self.spark_conn_id = conn_id

    @property
    def standalone_cluster(self) -> bool:
        """Whether the driver runs on a standalone master's worker (cluster deploy mode)."""
        return str(self._connection["master"]).startswith("spark://") and self._connection["deploy_mode"] == "cluster"

    @property
    def yarn(self) -> bool:
        """Whether the connection submits to YARN."""
        return str(self._connection["master"]).startswith("yarn")

    @property
    def yarn_cluster(self) -> bool:
        """Whether the driver runs in YARN's application master (cluster deploy mode)."""
        return self.yarn and self._connection["deploy_mode"] == "cluster"

    @functools.cached_property
    def extra(self) -> dict[str, Any]:
        """The connection's extras, looked up once for this hook."""
        return dict(self.get_connection(self.spark_conn_id).extra_dejson or {})

    def archive(self) -> str | None:
        """The packed environment as ``--archives`` takes it (``location#walship-env``), from
        the extra ``archive``, else ``None``."""
        value = str(self.extra.get("archive") or "").strip()
        if not value:
            return None
        location, alias = split_archive(value)
        return f"{location}#{alias}"

    def webapp(self) -> str | None:
        """The ResourceManager's web address: the extra ``yarn_resourcemanager_webapp_address``,
        else ``yarn-site.xml`` of ``$HADOOP_CONF_DIR``."""
        value = str(self.extra.get(WEBAPP_EXTRA) or "").strip()
        if value:
            return value if "://" in value else f"http://{value}"
        return webapp_from_conf()

    def settings(self) -> dict[str, str]:
        """Spark settings of a walship job: the Python interpreter from the connection's extra
        ``pyspark_python`` (the one on the Spark hosts where walship is installed, never the
        interpreter that parsed the DAG), or the packed environment's (extra ``archive``; a
        driver in the task itself, in client mode, runs under the task's Python);
        with the extra ``walship_jvm_options`` true, walship's JVM options
        (:func:`walship.spark.entry.job_settings`: they replace the site's
        ``extraJavaOptions``, so they are asked for); the extra ``spark_conf`` adds settings
        and overrides these."""
        conf = {"spark.ui.enabled": "false"}
        extra = self.extra
        if str(extra.get("walship_jvm_options", "false")).lower() == "true":
            conf.update(job_settings())
        archive = self.archive()
        packed = f"./{split_archive(archive)[1]}/bin/python" if archive else None
        python = extra.get("pyspark_python") or packed
        if python:
            conf["spark.pyspark.python"] = str(python)
            # the packed environment is unpacked in YARN's containers: a driver in this task
            # (client mode) runs under this task's own Python
            local_driver = python == packed and not self.yarn_cluster
            driver = extra.get("pyspark_driver_python") or (sys.executable if local_driver else python)
            conf["spark.pyspark.driver.python"] = str(driver)
        more = extra.get("spark_conf") or {}
        if not isinstance(more, dict):
            raise AirflowException(f"connection {self.spark_conn_id}: extra 'spark_conf' must be an object of settings")
        conf.update({str(k): str(v) for k, v in more.items()})
        return conf

    def resources(self) -> dict[str, Any]:
        """The submit's sizing arguments from the extras of :data:`RESOURCE_EXTRAS`."""
        extra = self.extra
        out: dict[str, Any] = {}
        for key in RESOURCE_EXTRAS:
            value = extra.get(key)
            if value in (None, ""):
                continue
            if key in ("num_executors", "executor_cores"):
                try:
                    value = int(value)
                except (TypeError, ValueError):
                    raise AirflowException(
                        f"connection {self.spark_conn_id}: extra {key!r} must be a whole number, not {value!r}"
                    ) from None
            out[key] = value
        return out

    def submit_kwargs(self, app: str, jar: str, job: str, extra_args: list[str] | None = None) -> dict[str, Any]:
        """The keyword arguments of the Spark task for the job description ``job`` (JSON):
        ``app --job <job> [extra_args]``, as ``jar`` with PythonRunner in cluster deploy mode on
        a standalone master; with the packed environment and the resources of the connection,
        and in YARN cluster mode the application followed through the ResourceManager (when
        its web address is known; else spark-submit waits for it); ``job`` itself rides along
        for the tasks that read it."""
        args = ["--job", job, *(extra_args or [])]
        kwargs: dict[str, Any] = {
            "conn_id": self.spark_conn_id,
            "conf": self.settings(),
            "job": job,
            "standalone_cluster": self.standalone_cluster,
            **self.resources(),
        }
        archive = self.archive()
        if archive:
            kwargs["archives"] = archive
        if self.yarn_cluster:
            if str(self.extra.get(WEBAPP_EXTRA) or "").strip():
                kwargs["yarn_track_via_rm_api"] = True
            else:
                kwargs["durable"] = False
        if self.standalone_cluster:
            kwargs.update(application=jar, java_class=PYTHON_RUNNER, application_args=[app, "", *args])
        else:
            kwargs.update(application=app, application_args=args)
        return kwargs

    def check(self, archives: str | None = None, queue: str | None = None) -> None:
        """What can be checked before submitting, so that a bad setting is one line at the
        task's start: on YARN the queue (``queue``, else the extra ``queue``) is a leaf queue
        of the ResourceManager, and the packed environment (``archives``, else the extra
        ``archive``) is there.

        :raises AirflowFailException: the queue does not exist or the archive is missing
            (trying again cannot help).
        :raises AirflowException: the ResourceManager does not answer.
        """
        archive = archives or self.archive()
        try:
            if archive:
                check_archive(archive, what=f"Spark archive (connection {self.spark_conn_id})")
            queue = queue or self._connection.get("queue")
            if self.yarn and queue:
                webapp = self.webapp()
                if webapp is None:
                    log.warning(
                        "YARN queue %r not checked: connection %s has no extra %r and $HADOOP_CONF_DIR no yarn-site.xml "
                        "naming yarn.resourcemanager.webapp.address",
                        queue, self.spark_conn_id, WEBAPP_EXTRA,
                    )  # fmt: skip
                else:
                    check_queue(webapp, str(queue), what=f"YARN queue (connection {self.spark_conn_id})")
        except YarnUnavailableError as exc:
            raise AirflowException(str(exc)) from None
        except SparkSetupError as exc:
            raise AirflowFailException(str(exc)) from None
