"""walship as an Airflow provider: what ``airflow providers list`` shows, the ``walship``
connection type with its form (read by Airflow without importing the hook), the modules of
its hooks, operators, sensors, triggers and notifiers, and its ``[walship]`` configuration.

Airflow finds it through the ``apache_airflow_provider`` entry point of the ``walship``
distribution; the "Replication" page is the ``airflow.plugins`` entry point
:class:`walship_airflow.plugins.replication.WalshipUiPlugin`.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version
from typing import Any

_INTEGRATION = "walship"

_STRING = {"type": ["string", "null"]}


def _version() -> str:
    try:
        return version("walship")
    except PackageNotFoundError:  # the source tree on the path, not installed
        return "0.0.0"


def _modules(*names: str) -> list[dict[str, Any]]:
    return [{"integration-name": _INTEGRATION, "python-modules": [f"walship_airflow.{n}" for n in names]}]


def _option(description: str, default: str, example: str | None = None, type_: str = "string") -> dict[str, Any]:
    return {"description": description, "version_added": None, "type": type_, "example": example, "default": default}


def get_provider_info() -> dict[str, Any]:
    """The provider's description, as Airflow's ProvidersManager reads it."""
    return {
        "package-name": "walship",
        "name": "walship",
        "description": "HBase cluster replication as an Airflow-managed, Spark-shipped pipeline.",
        "versions": [_version()],
        "integrations": [
            {
                "integration-name": _INTEGRATION,
                "external-doc-url": "https://hbase.apache.org/book.html#_cluster_replication",
                "tags": ["software"],
            }
        ],
        "hooks": _modules("hooks.source", "hooks.spark"),
        "operators": _modules("operators.ship"),
        "sensors": _modules("sensors.queues"),
        "triggers": _modules("triggers.queues"),
        "notifications": ["walship_airflow.notifications.webhook.WebhookNotifier"],
        "connection-types": [
            {
                "hook-class-name": "walship_airflow.hooks.source.WalshipHook",
                "hook-name": "walship source cluster",
                "connection-type": "walship",
                "ui-field-behaviour": {
                    "hidden-fields": ["schema"],
                    "relabeling": {
                        "host": "ZooKeeper quorum",
                        "port": "ZooKeeper port",
                        "login": "ZooKeeper digest user",
                        "password": "ZooKeeper digest password",
                    },
                    "placeholders": {
                        "host": "zk1,zk2:2181,zk3 (a chroot: zk1:2181/hbase-east)",
                        "port": "2181",
                        "login": "only for ZooKeeper digest ACLs",
                    },
                },
                "conn-fields": {
                    "znode_parent": {
                        "label": "Znode parent",
                        "description": "HBase's zookeeper.znode.parent",
                        "schema": {**_STRING, "default": "/hbase"},
                    },
                    "wal_root": {
                        "label": "WAL root",
                        "description": "HBase's root directory holding WALs/ and oldWALs/: a local path, "
                        "hdfs://namenode:8020/hbase or webhdfs://namenode:9870/hbase",
                        "schema": _STRING,
                    },
                    "thrift2": {
                        "label": "Source Thrift2 servers",
                        "description": "host:port[,host:port...] of the source's Thrift2 servers (scope checks, "
                        "verify, copy, serial peers' barriers)",
                        "schema": _STRING,
                    },
                    "principal": {
                        "label": "Kerberos principal",
                        "description": "walship's principal (walship@EXAMPLE.COM); empty: no Kerberos",
                        "schema": _STRING,
                    },
                    "keytab": {
                        "label": "Keytab path",
                        "description": "the keytab's path on the workers (never its contents); empty: the "
                        "worker's ticket cache",
                        "schema": _STRING,
                    },
                    "zk_auth": {
                        "label": "ZooKeeper auth",
                        "description": "SCHEME:CREDENTIAL for ZooKeeper instead of the digest user and password",
                        "schema": {**_STRING, "format": "password"},
                    },
                },
            }
        ],
        "config": {
            "walship": {
                "description": "walship's source clusters and alerts.",
                "options": {
                    "sources": _option(
                        "The walship connections this Airflow serves, comma-separated, each CONN_ID or "
                        "CONN_ID=SUFFIX. walship_source keeps the plain DAG ids; the others' DAG ids end in "
                        "_SUFFIX (by default the connection id).",
                        "walship_source",
                        "walship_source, hbase_east, hbase-west-prod=west",
                    ),
                    "on_failure_notifier": _option(
                        "The notifier class every walship DAG's on_failure_callback is built from (an import "
                        "path); empty: none.",
                        "",
                        "walship_airflow.notifications.webhook.WebhookNotifier",
                    ),
                    "on_failure_notifier_kwargs": _option(
                        "The notifier's keyword arguments, a JSON object.",
                        "{{}}",  # formatted by Airflow: "{}"
                        '{"url": "https://alerts.example.com/hooks/walship"}',
                    ),
                    "spark_jobs": _option(
                        "The folder of walship's Spark jobs (ship.py, verify.py, copy_rows.py, pyrunner.jar) as "
                        "the Spark hosts see it; empty: spark_jobs/ beside the DAGs folder.",
                        "",
                        "/opt/airflow/spark_jobs",
                    ),
                    "stuck_after": _option(
                        "Seconds a queue with a backlog may make no progress before walship_status's check "
                        "task fails (and the notifier fires).",
                        "600",
                        type_="integer",
                    ),
                    "tail_duration": _option(
                        "Seconds a walship_tail run follows the queues before the next continuous run "
                        "takes over (the default of its Param duration).",
                        "600",
                        type_="float",
                    ),
                    "tail_gather": _option(
                        "Seconds a walship_tail pass that read few entries lets new edits gather before the "
                        "next (the default of its Param gather): fewer passes and less CPU, for at most this "
                        "much more lag.",
                        "0.1",
                        type_="float",
                    ),
                    "cleaner_queue": _option(
                        "The executor queue walship_clean's task goes to: with Celery, the workers that may "
                        "delete WALs consume it (the WALs are read-only to every other worker).",
                        "default",
                        example="walship_clean",
                    ),
                },
            }
        },
    }
