"""The embedded-default demo: replicate one minicluster into another through Airflow.

Starts ZooKeeper and two miniclusters (source A, peer B), creates table ``demo`` with
families ``r`` (replication scope 1) and ``l`` (scope 0) on both, adds peer ``1`` from A to B
(the Thrift2 sink) with one ``walship peer add`` through A's master, writes 100,000 rows into A through happybase (puts over several versions,
some deletes) and single-version deletes through Thrift2,
runs the ``walship_replicate`` DAG with ``airflow dags test``, prints the queues, and checks
that family ``r`` is identical on A and B and family ``l`` absent on B. Ends with one line,
PASS or FAIL, and leaves nothing running.

``HBASE=real`` (``make demo HBASE=real``) runs the same steps on two real HBase 2.6 clusters
from the harness (``harness/``): the tables are created through HBase's own Admin, and the
same ``walship peer add`` goes through HBase's master (peer-state DISABLED,
``walship.managed=true``).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import happybase

from walship.cli import main as walship_cli
from walship.thrift.conn import open_thrift2
from walship.thrift.hbase2 import hbase2
from walship.zk import ReplicationQueues, ZnodeLayout, zk_client
from walship.zk.localserver import LocalZooKeeper, free_port
from walship_testing.harness import HBaseProcess
from walship_testing.minicluster import AdminClient
from walship_testing.minicluster.process import MiniClusterProcess

ROOT = Path(__file__).resolve().parent.parent
DEMO = ROOT / ".demo"
ROWS = int(os.environ.get("WALSHIP_DEMO_ROWS", "100000"))
REAL = os.environ.get("HBASE", "") == "real"
#: the timestamp of the older versions the demo writes
BASE = int(time.time() * 1000) - 10_000


def say(msg: str) -> None:
    print(f"demo: {msg}", flush=True)


def load(conn: happybase.Connection) -> None:
    """100,000 rows: every row twice in r (two versions), every 10th a third time, l for all;
    every 50th row loses r:b (DeleteColumn), every 97th its family r, every 101st the row."""
    t = conn.table("demo")
    base = BASE
    with t.batch(batch_size=1000) as b:
        for i in range(ROWS):
            row = b"row-%06d" % i
            b.put(
                row,
                {b"r:a": b"a%d-v1" % i, b"r:b": b"b%d" % i, b"l:x": b"local-only"},
            )
    with t.batch(batch_size=1000, timestamp=base) as b:  # older versions, explicit timestamps
        for i in range(0, ROWS, 2):
            b.put(b"row-%06d" % i, {b"r:a": b"a%d-v0" % i})
    with t.batch(batch_size=1000) as b:
        for i in range(0, ROWS, 10):
            b.put(b"row-%06d" % i, {b"r:a": b"a%d-v2" % i})
        for i in range(0, ROWS, 50):
            b.delete(b"row-%06d" % i, columns=[b"r:b"])
        for i in range(0, ROWS, 97):
            b.delete(b"row-%06d" % i, columns=[b"r"])
        for i in range(0, ROWS, 101):
            b.delete(b"row-%06d" % i)


def single_version_deletes(mc: MiniClusterProcess | HBaseProcess) -> None:
    """Over Thrift2, what Thrift1 cannot say: every 7th even row loses its oldest version of r:a
    (a single-version Delete), every 13th even row every column of r at that timestamp
    (DeleteFamilyVersion)."""
    with open_thrift2(*mc.thrift2) as c:
        t = hbase2.TDeleteType
        deletes = [
            hbase2.TDelete(
                row=b"row-%06d" % i,
                columns=[hbase2.TColumn(family=b"r", qualifier=b"a", timestamp=BASE)],
                deleteType=t.DELETE_COLUMN,
            )
            for i in range(0, ROWS, 14)
        ] + [
            hbase2.TDelete(
                row=b"row-%06d" % i,
                columns=[hbase2.TColumn(family=b"r", timestamp=BASE)],
                deleteType=t.DELETE_FAMILY_VERSION,
            )
            for i in range(0, ROWS, 26)
        ]
        for start in range(0, len(deletes), 1000):
            c.client.deleteMultiple(b"demo", deletes[start : start + 1000])


def snapshot(conn: happybase.Connection, family: bytes) -> dict[bytes, dict[bytes, tuple[bytes, int]]]:
    return dict(conn.table("demo").scan(columns=[family], include_timestamp=True, batch_size=5000))


def versions(conn: happybase.Connection, rows: list[bytes]) -> dict[bytes, list[tuple[bytes, int]]]:
    t = conn.table("demo")
    return {r: t.cells(r, b"r:a", versions=3, include_timestamp=True) for r in rows}


def run_dag(zk: str, wal_root: str) -> int:
    env = dict(os.environ)
    env["PATH"] = f"{ROOT / '.venv' / 'bin'}:{env.get('PATH', '')}"
    env["AIRFLOW_CONN_WALSHIP_SOURCE"] = json.dumps(
        {
            "conn_type": "walship",
            "host": zk.split(":")[0],
            "port": int(zk.split(":")[1]),
            "extra": {"znode_parent": "/hbase-a", "wal_root": wal_root},
        }
    )
    env["AIRFLOW_HOME_OVERRIDE"] = str(DEMO / "airflow")
    cmd = 'source scripts/airflow-env.sh && airflow dags test walship_replicate -c \'{"peer_id": "1"}\''
    with open(DEMO / "airflow-dags-test.log", "w") as log:
        proc = subprocess.run(["bash", "-c", cmd], cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, check=False)
    return proc.returncode


def main() -> int:
    shutil.rmtree(DEMO, ignore_errors=True)
    DEMO.mkdir(parents=True)
    zk = LocalZooKeeper(DEMO / "zk", free_port())
    a = b = None
    ok = False
    try:
        zk.start()
        say(f"ZooKeeper on {zk.hosts}")
        a: MiniClusterProcess | HBaseProcess
        b: MiniClusterProcess | HBaseProcess
        if REAL:
            say("starting two real HBase 2.6 clusters (HBase's test cluster and Thrift servers, harness/)")
            a = HBaseProcess("a", DEMO / "a", zk=zk.hosts, znode_parent="/hbase-a", regionservers=3).start()
            b = HBaseProcess("b", DEMO / "b", zk=zk.hosts, znode_parent="/hbase-b", regionservers=1).start()
        else:
            a = MiniClusterProcess("a", DEMO / "a", zk=zk.hosts, znode_parent="/hbase-a").start()
            b = MiniClusterProcess("b", DEMO / "b", zk=zk.hosts, znode_parent="/hbase-b").start()
        say(f"source A: thrift {a.ready['thrift']}, cluster {a.cluster_id}")
        say(f"peer   B: thrift {b.ready['thrift']}, thrift2 {b.ready['thrift2']}, cluster {b.cluster_id}")
        ca, cb = happybase.Connection(*a.thrift), happybase.Connection(*b.thrift)
        bhost, bport = b.thrift2
        sink = {"walship.sink.protocol": "thrift2", "walship.sink.thrift2": f"{bhost}:{bport}"}
        if isinstance(a, HBaseProcess) and isinstance(b, HBaseProcess):
            families = {"r": {"scope": 1, "versions": 3}, "l": {"scope": 0, "versions": 3}}
            for hb in (a, b):
                hb.call("create_table", table="demo", families=families)
        else:
            assert isinstance(a, MiniClusterProcess) and isinstance(b, MiniClusterProcess)
            for conn, mc in ((ca, a), (cb, b)):
                conn.create_table("demo", {"r": {"max_versions": 3}, "l": {"max_versions": 3}})
                AdminClient(mc.admin).set_scope("demo", "r", 1)
        # one walship command: the peer goes through A's master (HBase's peer-state DISABLED, so HBase
        # queues and keeps its WALs but never ships it; walship's switch ENABLED)
        config = [x for key, value in sink.items() for x in ("--config", f"{key}={value}")]
        added = walship_cli(["--zk", zk.hosts, "--znode-parent", "/hbase-a", "peer", "add", "1",
                             "--cluster-key", f"{zk.hosts}:/hbase-b", *config])  # fmt: skip
        if added != 0:
            raise SystemExit("demo: walship peer add failed (its error is above)")
        say("peer 1 added: A -> B over Thrift2 (family r has REPLICATION_SCOPE 1, l has 0)")
        time.sleep(0.5)
        t0 = time.time()
        load(ca)
        single_version_deletes(a)
        say(f"wrote {ROWS:,} rows into A in {time.time() - t0:.1f} s")
        t0 = time.time()
        code = run_dag(zk.hosts, a.wal_root)
        say(
            f"airflow dags test walship_replicate: exit {code} in {time.time() - t0:.1f} s "
            f"(log: {DEMO / 'airflow-dags-test.log'})"
        )
        with zk_client(zk.hosts) as client:
            queues = ReplicationQueues(client, ZnodeLayout("/hbase-a")).list_queues()
        say("queues of A after shipping:")
        for q in queues:
            for w in q.wals:
                print(f"    {q.server}  queue {q.queue_id}  {w.name}  position {w.position}")
        # fresh connections: HBase's Thrift server closes one left idle for a minute
        # (hbase.thrift.server.socket.read.timeout) while the DAG ran
        ca.close()
        cb.close()
        ca, cb = happybase.Connection(*a.thrift), happybase.Connection(*b.thrift)
        ra, rb = snapshot(ca, b"r"), snapshot(cb, b"r")
        multi = [b"row-%06d" % i for i in range(0, ROWS, 10)][:2000]
        va, vb = versions(ca, multi), versions(cb, multi)
        lb = snapshot(cb, b"l")
        say(
            f"family r: {len(ra):,} rows on A, {len(rb):,} on B; versions of {len(multi):,} rows compared; "
            f"family l on B: {len(lb)} rows"
        )
        ok = code == 0 and ra == rb and va == vb and not lb and len(ra) > 0
        ca.close()
        cb.close()
    finally:
        for mc in (a, b):
            if mc is not None:
                mc.stop()
        zk.stop()
    print("PASS" if ok else "FAIL", flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
