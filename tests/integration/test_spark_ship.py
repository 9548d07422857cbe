"""The ship Spark job through spark-submit on a local Spark: one task per queue."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from replication_helpers import Cluster, add_peer, contents, make_cluster

from walship.minicluster import AdminClient
from walship.minicluster.process import MiniClusterProcess

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]


def spark_submit(args: list[str], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    bindir = Path(sys.executable).parent
    env = {
        **os.environ,
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
        "PATH": f"{bindir}:{os.environ.get('PATH', '')}",
        "SPARK_LOCAL_IP": "127.0.0.1",
    }
    cmd = [
        str(bindir / "spark-submit"),
        "--master",
        "local[2]",
        "--conf",
        "spark.ui.enabled=false",
        "--conf",
        "spark.driver.memory=512m",
        str(ROOT / "spark_jobs" / "ship.py"),
        *args,
    ]
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600, check=False, cwd=tmp_path)


def ship_peer_1(a: Cluster, summary_path: Path, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    """The ship job for peer 1 of source ``a``, its summary written to ``summary_path``."""
    args = ["--zk", a.zk_hosts, "--znode-parent", a.parent, "--wal-root", str(a.mc.data_dir),
            "--peer", "1", "--summary", str(summary_path)]  # fmt: skip
    return spark_submit(args, tmp_path)


def test_spark_job_ships_every_queue_in_parallel(
    minicluster_factory: Callable[..., MiniClusterProcess], zk_hosts: str, tmp_path: Path
) -> None:
    a = make_cluster(minicluster_factory, zk_hosts, "A")
    b = make_cluster(minicluster_factory, zk_hosts, "B")
    add_peer(a, b)
    conn = a.conn()
    conn.create_table("u", {"r": {}})
    AdminClient(a.mc.admin).set_scope("u", "r", 1)
    bconn = b.conn()
    bconn.create_table("u", {"r": {}})
    with a.table().batch() as batch:
        for i in range(300):
            batch.put(b"t-%03d" % i, {b"r:q": b"%d" % i, b"l:q": b"x"})
    with conn.table("u").batch() as batch:  # another table: another region, another server's queue
        for i in range(200):
            batch.put(b"u-%03d" % i, {b"r:q": b"%d" % i})
    summary_path = tmp_path / "out" / "summary.json"
    done = ship_peer_1(a, summary_path, tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads(summary_path.read_text())
    assert summary["status"] == "ok"
    assert summary["totals"]["entries_shipped"] == 500
    assert len([q for q in summary["queues"] if q["entries_shipped"]]) == 2  # two queues, two tasks
    assert contents(b) == contents(a, b"r")
    assert dict(bconn.table("u").scan()) == dict(conn.table("u").scan())
    conn.close()
    bconn.close()


def test_spark_job_reports_a_failing_queue(
    minicluster_factory: Callable[..., MiniClusterProcess], zk_hosts: str, tmp_path: Path
) -> None:
    a = make_cluster(minicluster_factory, zk_hosts, "A")
    b = minicluster_factory("B")  # no table t on the peer: the sink refuses the edits
    add_peer(a, Cluster(b, zk_hosts))
    a.table().put(b"r", {b"r:q": b"v"})
    summary_path = tmp_path / "summary.json"
    done = ship_peer_1(a, summary_path, tmp_path)
    assert done.returncode == 1
    summary = json.loads(summary_path.read_text())
    assert summary["status"] == "error" and "table t" in summary["error"] and "does not exist" in summary["error"]
