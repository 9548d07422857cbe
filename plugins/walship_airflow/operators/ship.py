"""The ship task: Spark's submit operator, given the source's ZooKeeper credentials through
the environment at run time (never through arguments, XCom or the job description)."""

from __future__ import annotations

import os
from typing import Any

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.sdk import Context

from walship_airflow.hooks.source import SourceCluster, WalshipHook

#: The variable the Spark driver and executors read ZooKeeper credentials from.
AUTH_ENV = "WALSHIP_ZK_AUTH"
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
    workers' own environment (docker-compose.yml sets it there).

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
        self.pass_source(WalshipHook(self.walship_conn_id).get_source())
        super().execute(context)

    def pass_source(self, source: SourceCluster) -> None:
        """Give the Spark job the source's credentials through its environment: ZooKeeper's
        (``WALSHIP_ZK_AUTH``) and the Kerberos identity (``WALSHIP_PRINCIPAL``,
        ``WALSHIP_KEYTAB``: for the driver and, as ``spark.executorEnv``, the executors, which
        log in where they run); on YARN, spark-submit's own ``--principal``/``--keytab`` too."""
        if (
            source.auth and not self.standalone_cluster
        ):  # Spark refuses env_vars there; the workers' own environment holds it
            self.env_vars = {**(self.env_vars or {}), AUTH_ENV: source.auth}
        if source.principal:
            kerberos = source.kerberos_env()
            if not self.standalone_cluster:
                self.env_vars = {**(self.env_vars or {}), **kerberos}
            self.conf = {**(self.conf or {}), **{f"spark.executorEnv.{k}": v for k, v in kerberos.items()}}
            if source.keytab and _on_yarn(self._conn_id):
                self.principal = self.principal or source.principal
                self.keytab = self.keytab or source.keytab


class WalshipVerifyOperator(WalshipShipOperator):
    """A :class:`SparkSubmitOperator` for ``spark_jobs/verify.py --job <JSON> --job-id ID``,
    given the source's ZooKeeper credentials as :class:`WalshipShipOperator` gives them.

    The job records its result in walship's znodes under its job id
    (:class:`walship.zk.progress.VerifyStore`), for the ``report`` task: an earlier result
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
