"""The ``walship`` connection: a source cluster's ZooKeeper, znode parent and WAL root.

Example::

    AIRFLOW_CONN_WALSHIP_SOURCE='{"conn_type": "walship", "host": "127.0.0.1", "port": 2181,
        "extra": {"znode_parent": "/hbase", "wal_root": "/data/hbase", "thrift2": "hbase-thrift2:9090"}}'

The extra ``thrift2`` (``host:port[,host:port...]`` of the source's Thrift2 servers) is needed
only by the ``walship_scope`` DAG, which reads the source's table descriptors.

Kerberos: the extras ``principal`` (``walship@EXAMPLE.COM``) and ``keytab`` (the keytab's path
on the workers, never its bytes) make every client of the task (ZooKeeper, HBase's master,
the Thrift servers, WebHDFS) authenticate as that principal; without ``keytab``, the worker's
ticket cache (kept fresh by ``airflow kerberos``) must hold its ticket. Processes that get no
connection read ``WALSHIP_PRINCIPAL`` / ``WALSHIP_KEYTAB``; the ship task sets them, and
spark-submit's ``--principal`` / ``--keytab``, for its Spark job.

ZooKeeper credentials: the connection's login and password (digest, as zkCli's ``addauth
digest login:password``), or its extra ``zk_auth`` (``SCHEME:CREDENTIAL``). Processes that get
no connection (the triggerer's trigger, Spark's executors) read ``WALSHIP_ZK_AUTH``; the ship
task passes it to its Spark job through the environment, never through arguments.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseHook
from airflow.sdk.exceptions import AirflowException
from airflow.sdk.log import mask_secret

from walship_airflow.sources import DEFAULT_CONN_ID

if TYPE_CHECKING:
    from walship.replicate.source import SourceSite


@dataclass(frozen=True)
class SourceCluster:
    """Where a source cluster keeps its replication state and its WALs."""

    zk: str
    znode_parent: str
    wal_root: str
    #: ZooKeeper credentials, SCHEME:CREDENTIAL: never in reprs, XCom, job descriptions or logs
    auth: str | None = field(default=None, repr=False)
    #: the source's Thrift2 server(s), ``host:port[,...]`` (extra ``thrift2``), if given
    thrift2: str | None = None
    #: Kerberos: walship's principal (extra ``principal``) and its keytab's path (extra ``keytab``)
    principal: str | None = None
    keytab: str | None = None
    #: the Airflow connection it was read from (named in errors)
    conn_id: str = DEFAULT_CONN_ID

    def login(self) -> None:
        """Log this process in as the connection's principal (nothing without one).

        :raises AirflowException: the keytab or the principal is refused (one line naming them).
        """
        if not self.principal:
            return
        from walship import security
        from walship.errors import WalshipError

        try:
            identity = security.identity_from(self.principal, self.keytab)
            if identity is not None and security.active() != identity:
                security.login(identity)
        except WalshipError as exc:
            raise AirflowException(str(exc)) from None

    def site(self) -> SourceSite:
        """The library's assembly of this source (:class:`walship.replicate.source.SourceSite`)."""
        from walship.replicate.source import SourceSite

        return SourceSite(self.zk, self.znode_parent, self.wal_root, self.auth)

    def kerberos_env(self) -> dict[str, str]:
        """``WALSHIP_PRINCIPAL`` / ``WALSHIP_KEYTAB`` for a process this task starts (a Spark job)."""
        env = {"WALSHIP_PRINCIPAL": self.principal} if self.principal else {}
        if self.principal and self.keytab:
            env["WALSHIP_KEYTAB"] = self.keytab
        return env


class WalshipHook(BaseHook):
    """Reads a ``walship`` connection into a :class:`SourceCluster`.

    :param walship_conn_id: the connection (default ``walship_source``).
    """

    conn_name_attr = "walship_conn_id"
    default_conn_name = DEFAULT_CONN_ID
    conn_type = "walship"
    hook_name = "walship source cluster"

    def __init__(self, walship_conn_id: str = default_conn_name, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.walship_conn_id = walship_conn_id

    def get_source(self) -> SourceCluster:
        """The connection's source cluster; with a principal in it, this process is logged in
        as that principal from here on (:meth:`SourceCluster.login`)."""
        conn = self.get_connection(self.walship_conn_id)
        extra = conn.extra_dejson or {}
        if not conn.host:
            raise AirflowException(f"connection {self.walship_conn_id}: 'host' (the ZooKeeper host) is empty")
        wal_root = extra.get("wal_root")
        if not wal_root:
            raise AirflowException(f"connection {self.walship_conn_id}: extra 'wal_root' is missing")
        hosts = ",".join(h if ":" in h else f"{h}:{conn.port or 2181}" for h in conn.host.split(","))
        auth = extra.get("zk_auth") or (f"digest:{conn.login}:{conn.password}" if conn.login else None)
        if auth:
            mask_secret(auth)  # the whole SCHEME:CREDENTIAL, wherever a task would log it
            mask_secret(auth.split(":", 1)[-1])
        thrift2 = extra.get("thrift2")
        principal = str(extra.get("principal") or "").strip() or None
        keytab = extra.get("keytab")
        if keytab is not None and (not isinstance(keytab, str) or "\n" in keytab or len(keytab) > 4096):
            raise AirflowException(
                f"connection {self.walship_conn_id}: extra 'keytab' must be the keytab's path on the workers, "
                "not its contents"
            )
        if keytab and not principal:
            raise AirflowException(f"connection {self.walship_conn_id}: extra 'keytab' needs extra 'principal'")
        source = SourceCluster(
            zk=hosts,
            znode_parent=str(extra.get("znode_parent") or "/hbase"),
            wal_root=str(wal_root),
            auth=auth,
            thrift2=str(thrift2).strip() if thrift2 else None,
            principal=principal,
            keytab=str(keytab).strip() if keytab else None,
            conn_id=self.walship_conn_id,
        )
        source.login()  # the task's clients authenticate as the connection's principal
        return source

    @contextlib.contextmanager
    def connected(self) -> Iterator[tuple[Any, Any, Any]]:
        """(ZooKeeper client, znode layout, WAL store) of the source; the client is closed on exit."""
        with self.get_source().site().connected() as connected:
            yield connected
