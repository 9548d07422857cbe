"""Airflow on a Kerberized HBase 2.6 (the ``secure_hbase`` stack): the ``walship_source``
connection carries the principal and its keytab's path; a DAG's tasks (and their trigger) log
in as that principal, and a keytab's bytes in the connection are refused without being shown."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from typing import Any

import pytest
from airflow_env import AIRFLOW_MARKS
from secure_hbase import SecureStack
from test_secure_replication import KERBEROS_ENV, create_table, local, put_rows, queues_ready, sink, unique, walship

from walship import security

pytestmark = [pytest.mark.integration, *AIRFLOW_MARKS]


@pytest.fixture
def stack(secure_hbase: SecureStack, monkeypatch: pytest.MonkeyPatch) -> Iterator[SecureStack]:
    """The secure stack and its krb5.conf, with nobody logged in: the connection says who."""
    monkeypatch.setenv("KRB5_CONFIG", str(secure_hbase.krb5_conf))
    for name in KERBEROS_ENV:
        monkeypatch.delenv(name, raising=False)
    security.logout()
    yield secure_hbase
    security.logout()


def connection(stack: SecureStack, **extra: Any) -> str:
    sa = stack.sa
    return json.dumps(
        {
            "conn_type": "walship",
            "host": stack.zk_hosts,
            "extra": {
                "znode_parent": sa.znode_parent,
                "wal_root": sa.wal_root,
                "thrift2": local(sa, sa.thrift2),
                "principal": f"walship@{stack.realm}",
                "keytab": str(stack.walship_keytab),
                **extra,
            },
        }
    )


def test_the_drain_dag_runs_as_the_connections_principal(
    stack: SecureStack, dagbag: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    table = create_table(stack, "a")
    peer = unique("a")
    added = walship(stack, "peer", "add", peer, "--cluster-key", stack.sb.cluster_key, "--table-cfs", table,
                    *sink(stack, "thrift2"))  # fmt: skip
    assert added.returncode == 0, added.stderr
    security.login(security.KerberosIdentity(f"walship@{stack.realm}", str(stack.walship_keytab)))
    queues_ready(stack, peer)
    put_rows(stack.sa, table, range(20))
    security.logout()
    monkeypatch.setenv("AIRFLOW_CONN_WALSHIP_SOURCE", connection(stack))
    assert walship(stack, "ship", "--peer", peer).returncode == 0

    run = dagbag.dags["walship_drain"].test(run_conf={"peer_id": peer, "timeout_s": 60})
    assert run.get_task_instance("wait_drained").state == "success"
    identity = security.active()  # the task logged this process in as the connection said
    assert identity == security.KerberosIdentity(f"walship@{stack.realm}", str(stack.walship_keytab))


def test_a_keytabs_bytes_in_the_connection_are_refused_unshown(
    stack: SecureStack, monkeypatch: pytest.MonkeyPatch
) -> None:
    from airflow.sdk.exceptions import AirflowException

    from walship_airflow.hooks.source import WalshipHook

    contents = base64.b64encode(stack.walship_keytab.read_bytes()).decode()
    pasted = "\n".join(contents[i : i + 64] for i in range(0, len(contents), 64))
    monkeypatch.setenv("AIRFLOW_CONN_WALSHIP_SOURCE", connection(stack, keytab=pasted))
    with pytest.raises(AirflowException) as caught:
        WalshipHook().get_source()
    assert "keytab's path" in str(caught.value) and contents[:16] not in str(caught.value)
    assert security.active() is None

    # a keytab the workers do not have: one line naming it and the principal
    monkeypatch.setenv("AIRFLOW_CONN_WALSHIP_SOURCE", connection(stack, keytab="/nonexistent/walship.keytab"))
    with pytest.raises(AirflowException, match=f"/nonexistent/walship.keytab for principal walship@{stack.realm}"):
        WalshipHook().get_source()


def test_the_ship_task_passes_the_identity_through_the_environment(
    stack: SecureStack, monkeypatch: pytest.MonkeyPatch
) -> None:
    from walship_airflow.hooks.source import WalshipHook
    from walship_airflow.operators.ship import WalshipShipOperator

    monkeypatch.setenv("AIRFLOW_CONN_WALSHIP_SOURCE", connection(stack))
    source = WalshipHook().get_source()
    expected = {"WALSHIP_PRINCIPAL": f"walship@{stack.realm}", "WALSHIP_KEYTAB": str(stack.walship_keytab)}
    op = WalshipShipOperator(task_id="ship", application="spark_jobs/ship.py", job="{}")
    op.pass_source(source)
    assert op.env_vars == expected  # the driver's environment, not its command line
    assert {k: v for k, v in (op.conf or {}).items() if k.startswith("spark.executorEnv.")} == {
        f"spark.executorEnv.{k}": v for k, v in expected.items()
    }
    assert op.principal is None and op.keytab is None  # spark-submit's own only on YARN (local here)
