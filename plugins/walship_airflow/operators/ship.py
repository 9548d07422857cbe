"""The ship task: Spark's submit operator, given the source's ZooKeeper credentials through
the environment at run time (never through arguments, XCom or the job description)."""

from __future__ import annotations

import os
import shutil
import tempfile
from typing import Any

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.sdk import Context

from walship.zk.client import AUTH_FILE_ENV
from walship_airflow.hooks.source import SourceCluster, WalshipHook

#: The variable the Spark driver and executors read ZooKeeper credentials from.
AUTH_ENV = "WALSHIP_ZK_AUTH"
#: On YARN: the file that holds them, by its name in a container (``AUTH_FILE_ENV`` names it).
AUTH_FILE = "walship-zk-auth"
#: The variable naming the Airflow pool of walship's Spark tasks.
POOL_ENV = "WALSHIP_SPARK_POOL"


def spark_pool() -> str:
    """``$WALSHIP_SPARK_POOL``, else Airflow's ``default_pool``."""
    return os.environ.get(POOL_ENV, "").strip() or "default_pool"


def _on_yarn(conn_id: str) -> bool:
    """Whether the Spark connection submits to YARN, where spark-submit's own ``--principal`` /
    ``--keytab`` get the job its Hadoop delegation tokens and log the application master in again."""
    from airflow.sdk import BaseHook

    try:
        host = BaseHook.get_connection(conn_id).host or ""
    except Exception:  # no such connection: the submit itself says so
        return False
    return host.startswith("yarn")


class WalshipShipOperator(SparkSubmitOperator):
    """A :class:`SparkSubmitOperator` for ``spark_jobs/ship.py``: when the ``walship_source``
    connection holds ZooKeeper credentials, they reach the driver (client and local mode) as
    ``WALSHIP_ZK_AUTH`` in the environment of the spark-submit process, never on its command
    line nor in a log line (the hook registers them with Airflow's secrets masker). Executors
    on Spark workers, and a driver in cluster deploy mode, read ``WALSHIP_ZK_AUTH`` from the
    workers' own environment (docker-compose.yml sets it there). On YARN they go as a file
    sent with the job (:meth:`pass_auth_file`).

    The task runs in the Airflow pool ``$WALSHIP_SPARK_POOL`` when set (one slot per Spark
    worker core), else the default pool.

    Its keyword arguments are a plan task's output, built by
    :meth:`walship_airflow.hooks.spark.WalshipSparkHook.submit_kwargs`: the submit's own and ``job``
    (the job description) and ``standalone_cluster`` (cluster deploy mode on a standalone
    master), which this operator reads instead of the command line.

    :param walship_conn_id: the source connection (default ``walship_source``).
    """

    def __init__(
        self,
        *,
        job: str = "",
        standalone_cluster: bool = False,
        job_id: str | None = None,
        walship_conn_id: str = WalshipHook.default_conn_name,
        **kwargs: Any,
    ) -> None:
        kwargs.setdefault("pool", spark_pool())
        super().__init__(**kwargs)
        self.job = job
        self.job_id = job_id
        self.standalone_cluster = standalone_cluster
        self.walship_conn_id = walship_conn_id

    def execute(self, context: Context) -> None:
        self.check_submit()
        self.pass_source(WalshipHook(self.walship_conn_id).get_source())
        try:
            super().execute(context)
        finally:
            self.forget_auth_file()

    def check_submit(self) -> None:
        """Before submitting: on YARN the queue exists and the packed environment is there
        (:meth:`walship_airflow.hooks.spark.WalshipSparkHook.check`), so that a bad setting is
        one line naming it at the task's start, not a submit that never runs."""
        from walship_airflow.hooks.spark import WalshipSparkHook

        WalshipSparkHook(self._conn_id).check(archives=self._archives, queue=self._yarn_queue)

    def pass_source(self, source: SourceCluster) -> None:
        """Give the Spark job the source's credentials through its environment: ZooKeeper's
        (``WALSHIP_ZK_AUTH``) and the Kerberos identity (``WALSHIP_PRINCIPAL``,
        ``WALSHIP_KEYTAB``: for the driver and, as ``spark.executorEnv``, the executors, which
        log in where they run); on YARN, spark-submit's own ``--principal``/``--keytab`` too.

        On YARN the Spark provider would put ``env_vars`` on spark-submit's command line
        (``spark.yarn.appMasterEnv``), so the ZooKeeper credentials go as a file instead: written
        for this task only (mode 600), sent with ``--files`` into each container's staging
        directory (private to the submitting user), and named by ``WALSHIP_ZK_AUTH_FILE``.
        """
        on_yarn = _on_yarn(self._conn_id)
        if source.auth and on_yarn:
            self.pass_auth_file(source.auth)
        elif (
            source.auth and not self.standalone_cluster
        ):  # Spark refuses env_vars there; the workers' own environment holds it
            self.env_vars = {**(self.env_vars or {}), AUTH_ENV: source.auth}
        if source.principal:
            kerberos = source.kerberos_env()
            if not self.standalone_cluster:
                self.env_vars = {**(self.env_vars or {}), **kerberos}
            self.conf = {**(self.conf or {}), **{f"spark.executorEnv.{k}": v for k, v in kerberos.items()}}
            if source.keytab and on_yarn:
                self.principal = self.principal or source.principal
                self.keytab = self.keytab or source.keytab

    def pass_auth_file(self, auth: str) -> None:
        """The ZooKeeper credentials as a file sent with the job (see :meth:`pass_source`): a
        driver in YARN's application master and the executors read it in their container's
        directory; a driver in this task (client mode) reads it where it was written."""
        folder = tempfile.mkdtemp(prefix="walship-auth-")
        path = os.path.join(folder, AUTH_FILE)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(auth)
        self.files = f"{self.files},{path}" if self.files else path
        self.conf = {
            **(self.conf or {}),
            f"spark.yarn.appMasterEnv.{AUTH_FILE_ENV}": AUTH_FILE,
            f"spark.executorEnv.{AUTH_FILE_ENV}": AUTH_FILE,
        }
        os.environ[AUTH_FILE_ENV] = path  # the spark-submit process, and a driver in client mode

    def forget_auth_file(self) -> None:
        """Remove the credentials' file once spark-submit has sent it."""
        path = os.environ.pop(AUTH_FILE_ENV, None)
        if path and os.path.basename(path) == AUTH_FILE:
            shutil.rmtree(os.path.dirname(path), ignore_errors=True)


class WalshipVerifyOperator(WalshipShipOperator):
    """A :class:`SparkSubmitOperator` for ``spark_jobs/verify.py --job <JSON> --job-id ID``,
    given the source's ZooKeeper credentials as :class:`WalshipShipOperator` gives them.

    The job records its result in walship's znodes under its job id
    (:class:`walship.zk.records.VerifyStore`), for the ``report`` task: an earlier result
    under the same id (an earlier try) is removed before the submit, so a report never reads
    a stale one. When the job fails having recorded why, the task fails with that reason, and
    without retrying when trying again cannot help (an unknown peer, table or family).
    """

    def execute(self, context: Context) -> None:
        from airflow.sdk.exceptions import AirflowException, AirflowFailException

        from walship_airflow.verify import forget_result, job_of, read_result

        source = WalshipHook(self.walship_conn_id).get_source()
        job, job_id = job_of({"job": self.job, "job_id": self.job_id})
        forget_result(source, job.peer_id, job_id)
        try:
            super().execute(context)
        except AirflowException as exc:
            record = read_result(source, job.peer_id, job_id)
            if record is None or record.get("status") != "error":
                raise
            message = f"verify of peer {job.peer_id} failed: {record.get('error')}"
            if not record.get("retryable", True):
                raise AirflowFailException(message) from exc
            raise AirflowException(message) from exc
