"""``walship copy``: a first copy of what a new peer selects, with rows written before the peer
existed (in WALs that were rolled before it: no queue will ever ship them), during the copy
and after it; then shipping, and B equals A, and ``walship verify`` finds no bad row. On the
minicluster and on real HBase."""

from __future__ import annotations

import datetime
import json
import threading
from collections.abc import Callable
from typing import Any

import pytest
import real_hbase as real_hbase_module
from airflow_env import AIRFLOW_MARKS, source_conn, task_failures
from replication_helpers import Cluster, add_peer, contents, make_cluster, ship

from walship.cli import main
from walship.harness import HBaseProcess
from walship.minicluster import AdminClient
from walship.minicluster.process import MiniClusterProcess
from walship.peer import MANAGED_KEY
from walship.thrift.conn import open_thrift2
from walship.thrift.hbase2 import hbase2

pytestmark = [pytest.mark.integration, *AIRFLOW_MARKS]


def global_flags(a: Cluster) -> list[str]:
    return ["--zk", a.zk_hosts, "--znode-parent", a.parent, "--wal-root", a.mc.wal_root,
            "--source-thrift2", a.thrift2_address()]  # fmt: skip


def write_versions(a: Cluster, prefix: bytes, n: int) -> None:
    """Rows with three versions of r:q at their own timestamps, a scope-0 cell, and a version
    deleted (what a delete masked is not copied, and not expected on B)."""
    host, port = a.mc.thrift2
    table = a.table_name
    with open_thrift2(host, port) as c:
        puts = [
            hbase2.TPut(
                row=prefix + b"%03d" % i,
                columnValues=[
                    *(
                        hbase2.TColumnValue(family=b"r", qualifier=b"q", value=b"v%d" % ts, timestamp=ts)
                        for ts in (10, 20, 30)
                    ),
                    hbase2.TColumnValue(family=b"l", qualifier=b"x", value=b"local", timestamp=10),
                ],
            )
            for i in range(n)
        ]
        c.client.putMultiple(table, puts)
        c.client.deleteSingle(
            table,
            hbase2.TDelete(
                row=prefix + b"000",
                columns=[hbase2.TColumn(family=b"r", qualifier=b"q", timestamp=20)],
                deleteType=hbase2.TDeleteType.DELETE_COLUMN,
            ),
        )


def first_copy(
    a: Cluster,
    b: Cluster,
    roll: Callable[[], None],
    add: Callable[[], None],
    capsys: pytest.CaptureFixture[str],
) -> None:
    write_versions(a, b"before", 60)
    roll()  # those edits are in WALs no queue of the new peer holds
    add()
    added = datetime.datetime.now(datetime.UTC)
    ship(a, "2")
    assert not any(row.startswith(b"before") for row in contents(b))  # shipping alone misses them
    stop = threading.Event()

    def keep_writing() -> None:
        i = 0
        while not stop.is_set() and i < 400:
            a.table().put(b"during%04d" % i, {b"r:q": b"d%d" % i})
            i += 1

    writer = threading.Thread(target=keep_writing)
    writer.start()
    try:
        capsys.readouterr()
        code = main([*global_flags(a), "copy", "--peer", "2", "--until", added.isoformat(), "--json"])
    finally:
        stop.set()
        writer.join()
    out = capsys.readouterr()
    assert code == 0, out.err
    result = json.loads(out.out)
    assert result["peer_id"] == "2" and result["tables"] == [a.table_name.decode()]
    assert result["rows"] >= 60 and result["cells"] >= 60 * 3 - 1 and result["splits"] >= 1
    write_versions(a, b"after", 20)
    ship(a, "2")
    on_b, on_a = contents(b), contents(a, b"r")
    assert on_b == on_a, sorted(set(on_a) ^ set(on_b))[:5]
    assert on_b[b"before000"] == {b"r:q": [(b"v30", 30), (b"v10", 10)]}  # every version, its own timestamp
    assert on_b[b"before001"] == {b"r:q": [(b"v30", 30), (b"v20", 20), (b"v10", 10)]}
    assert contents(b, b"l") == {}  # scope 0 stays home
    capsys.readouterr()
    code = main([*global_flags(a), "verify", "--peer", "2", "--recompare-sleep", "0", "--json"])
    verified = json.loads(capsys.readouterr().out)
    assert code == 0 and verified["counters"]["BADROWS"] == 0, verified["counters"]
    # a second copy changes nothing
    assert main([*global_flags(a), "copy", "--peer", "2", "--json"]) == 0
    capsys.readouterr()
    assert contents(b) == on_a


def test_the_copy_dag_copies_through_spark(
    dagbag: Any,
    minicluster_factory: Callable[..., MiniClusterProcess],
    zk_hosts: str,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
) -> None:
    """``walship_copy`` with Airflow itself (``dag.test()``) and a real spark-submit: one task
    per source region fills the new peer; a bad ``until`` fails the run, naming the Param."""
    a = make_cluster(minicluster_factory, zk_hosts, "A")
    b = make_cluster(minicluster_factory, zk_hosts, "B")
    write_versions(a, b"before", 40)
    AdminClient(a.mc.admin).roll()
    add_peer(a, b, "2", protocol="thrift2", **{MANAGED_KEY: "true"})
    conn = json.loads(source_conn(a))
    conn["extra"]["thrift2"] = a.thrift2_address()
    monkeypatch.setenv("AIRFLOW_CONN_WALSHIP_SOURCE", json.dumps(conn))
    dag = dagbag.dags["walship_copy"]
    assert type(dag.timetable).__name__ == "NullTimetable"  # manual only
    params = {"peer_id": "2", "tables": [], "until": "", "spark_conn_id": "spark_default"}
    run = dag.test(run_conf=params)
    states = {ti.task_id: ti.state for ti in run.get_task_instances()}
    assert run.state == "success", states
    assert contents(b) == contents(a, b"r") and len(contents(b)) == 40
    capfd.readouterr()
    bad = dag.test(run_conf={**params, "until": "yesterday"})
    assert bad.state == "failed"
    (reason,) = task_failures(capfd.readouterr().out)
    assert "Param until: not an ISO time: 'yesterday'" in reason


def test_first_copy_on_the_minicluster(
    minicluster_factory: Callable[..., MiniClusterProcess], zk_hosts: str, capsys: pytest.CaptureFixture[str]
) -> None:
    a = make_cluster(minicluster_factory, zk_hosts, "A")
    b = make_cluster(minicluster_factory, zk_hosts, "B")
    first_copy(
        a,
        b,
        lambda: AdminClient(a.mc.admin).roll(),
        lambda: add_peer(a, b, "2", protocol="thrift2", **{MANAGED_KEY: "true"}),
        capsys,
    )


def test_first_copy_on_real_hbase(
    real_hbase: tuple[HBaseProcess, HBaseProcess], capsys: pytest.CaptureFixture[str]
) -> None:
    a, b = real_hbase_module.table_on_both(*real_hbase, "copy")
    hb = a.mc
    assert isinstance(hb, HBaseProcess)

    def add() -> None:
        real_hbase_module.add_managed_peer(a, b, "2", "thrift2")
        real_hbase_module.wait_queues_hold_current_wals(a, "2")

    try:
        first_copy(a, b, lambda: hb.call("roll"), add, capsys)
    finally:
        real_hbase_module.remove_peer(a, "2")
