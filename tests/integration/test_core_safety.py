"""Data safety of the shipping core, with real servers: empty recovered queues, who holds a
busy queue, a killed shipper's lock, failed claims, progress records, and ZooKeeper stopped
in the middle of a ship."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kazoo.client import KazooClient
from replication_helpers import Cluster, add_peer, contents, make_cluster, ship
from waiting import wait_until

from walship.cli import main
from walship.replicate import Shipper, WalStore
from walship.wal import WalReader, parse_wal_name
from walship.zk import ReplicationQueues, ZnodeLayout, zk_client
from walship.zk.localserver import LocalZooKeeper
from walship.zk.locks import Holder, queue_lock, read_holder
from walship.zk.records import ProgressStore
from walship_testing.minicluster.process import MiniClusterProcess
from walship_testing.ports import steady_port

pytestmark = pytest.mark.integration

Factory = Callable[..., MiniClusterProcess]
DEAD = "dead.example.com,16020,1600000000000"


@pytest.fixture
def queue_claims() -> str:
    """walship's own claims: A's master claims no crashed server's queues."""
    return "walship"


def all_queue_ids(client: KazooClient, layout: ZnodeLayout) -> set[str]:
    queues = ReplicationQueues(client, layout)
    return {f"{s}/{q}" for s in queues.replicators() for q in queues.queue_ids(s)}


def test_an_empty_recovered_queue_is_removed(ab: tuple[Cluster, Cluster]) -> None:
    """A dead server's queue with no WALs, claimed as ``1-<dead>``, is deleted like HBase does,
    not left under a live server for ever."""
    a, b = ab
    layout = ZnodeLayout(a.parent)
    with zk_client(a.zk_hosts) as client:
        client.ensure_path(layout.queue(DEAD, "1"))  # a dead server's queue, empty
    a.table().put(b"r1", {b"r:q": b"v"})
    summary = ship(a)
    assert summary.status == "ok", summary.error
    assert [c["dead_server"] for c in summary.claimed] == [DEAD]
    removed = [q for q in summary.queues if q.queue_removed]
    assert [q.queue_id for q in removed] == [f"1-{DEAD}"]
    with zk_client(a.zk_hosts) as client:
        left = all_queue_ids(client, layout)
    assert not any(DEAD in q for q in left), left  # neither the claimed queue nor the dead server
    assert contents(b) == contents(a, b"r")


def test_a_failed_claim_is_logged_and_counted(ab: tuple[Cluster, Cluster]) -> None:
    """A claim ZooKeeper refuses (here: no delete right on the dead server's queue) is logged,
    counted and named in the summary, and the queue stays where it was, for the next pass."""
    from kazoo.security import make_acl

    a, _ = ab
    layout = ZnodeLayout(a.parent)
    wal = f"{DEAD.split(',')[0]}%2C16020%2C1600000000000.1600000000001"
    with zk_client(a.zk_hosts) as client:
        ReplicationQueues(client, layout).add_wal(DEAD, wal, peer_ids=["1"])
        no_delete = make_acl("world", "anyone", read=True, write=True, create=True, admin=True, delete=False)
        client.set_acls(layout.queue(DEAD, "1"), [no_delete])
    summary = ship(a)
    assert len(summary.claim_failures) == 1, summary.claim_failures
    failure = summary.claim_failures[0]
    assert DEAD in failure and "NoAuth" in failure, failure
    with zk_client(a.zk_hosts) as client:
        assert f"{DEAD}/1" in all_queue_ids(client, layout)  # kept: retried next pass, never dropped
        assert [w.name for w in ReplicationQueues(client, layout).wals(DEAD, "1")] == [wal]


def test_a_busy_queue_names_its_holder(ab: tuple[Cluster, Cluster], capsys: pytest.CaptureFixture[str]) -> None:
    a, _ = ab
    a.table().put(b"r1", {b"r:q": b"v"})
    layout = ZnodeLayout(a.parent)
    with zk_client(a.zk_hosts) as client:
        q = ReplicationQueues(client, layout).list_queues("1")[0]
        holder = Holder.here("other-shipper", run_id="manual__2026-11-23T07:00:00+00:00")
        with queue_lock(client, layout, q.server, str(q.queue_id), holder=holder) as lock:
            assert lock.held
            code = main(["--zk", a.zk_hosts, "--znode-parent", a.parent, "--wal-root", str(a.mc.data_dir),
                         "ship", "--peer", "1", "--queue", f"{q.server}/{q.queue_id}"])  # fmt: skip
    assert code == 0
    out = json.loads(capsys.readouterr().out)
    (busy,) = out["queues"]
    assert busy["status"] == "busy"
    assert busy["holder"]["pid"] == os.getpid() and busy["holder"]["run_id"] == holder.run_id
    assert f"pid {os.getpid()}" in busy["message"] and "manual__2026-11-23T07:00:00+00:00" in busy["message"]


HOLD_LOCK = """
import sys, time
from walship.zk import ZnodeLayout, connect
from walship.zk.locks import Holder, queue_lock
client = connect(sys.argv[1])
with queue_lock(client, ZnodeLayout("/hbase"), sys.argv[2], "1", holder=Holder.here("victim", "run-7")) as lock:
    print("held" if lock.held else "busy", flush=True)
    time.sleep(600)
"""


def test_a_killed_shippers_lock_is_free_after_the_session_timeout(zk: KazooClient, zk_hosts: str) -> None:
    layout = ZnodeLayout("/hbase")
    env = {**os.environ, "WALSHIP_ZK_SESSION_TIMEOUT": "3"}
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLD_LOCK, zk_hosts, DEAD], env=env, stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
        holder = read_holder(zk, layout, DEAD, "1")
        assert holder is not None and holder.pid == proc.pid and holder.run_id == "run-7"
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        # the lock is an ephemeral znode: it goes with the killed holder's session
        wait_until(
            lambda: read_holder(zk, layout, DEAD, "1") is None, timeout=30, what="the killed holder's lock freed"
        )
    finally:
        proc.kill()
        proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()
    with queue_lock(zk, layout, DEAD, "1") as lock:
        assert lock.held


def test_progress_records_follow_the_shipping(ab: tuple[Cluster, Cluster]) -> None:
    a, _b = ab
    with a.table().batch() as batch:
        for i in range(100):
            batch.put(b"row-%03d" % i, {b"r:q": b"%d" % i})
    before = int(time.time() * 1000)
    summary = ship(a)
    assert summary.status == "ok"
    with zk_client(a.zk_hosts) as client:
        records = ProgressStore(client, ZnodeLayout(a.parent)).list("1")
    shipped = [r for r in records if r["cells_shipped"]]
    assert sum(r["cells_shipped"] for r in records) == summary.totals()["cells_shipped"] == 100
    assert sum(r["entries_shipped"] for r in records) == summary.totals()["entries_shipped"]
    assert len(shipped) == 1 and shipped[0]["last_error"] is None
    assert shipped[0]["last_shipped_write_time"] <= int(time.time() * 1000)
    assert shipped[0]["last_shipped_write_time"] >= before - 120_000
    q = next(q for q in summary.queues if q.cells_shipped)
    assert shipped[0]["last_shipped_position"] == q.positions[shipped[0]["last_shipped_wal"]]


def test_a_failing_queue_leaves_its_error_in_the_progress_record(minicluster_factory: Factory, zk_hosts: str) -> None:
    a = make_cluster(minicluster_factory, zk_hosts, "A")
    b = minicluster_factory("B")  # no table t on the peer: it refuses the edits
    add_peer(a, Cluster(b, zk_hosts))
    a.table().put(b"r", {b"r:q": b"v"})
    summary = ship(a)
    assert summary.status == "error"
    with zk_client(a.zk_hosts) as client:
        records = ProgressStore(client, ZnodeLayout(a.parent)).list("1")
    errors = [r["last_error"] for r in records if r["last_error"]]
    assert len(errors) == 1 and "table t" in errors[0]["message"] and "does not exist" in errors[0]["message"]


# -- ZooKeeper stopped in the middle of a ship ---------------------------------------------------


@pytest.fixture
def own_zk(tmp_path: Path) -> Iterator[LocalZooKeeper]:
    """A ZooKeeper of this test's own: it is stopped and started again (on a port no client
    connection can take meanwhile)."""
    server = LocalZooKeeper(tmp_path / "zk", steady_port())
    server.start()
    yield server
    server.stop()


def table_cells(cluster: Cluster) -> int:
    """Cells of family r of table t in the cluster's WAL entries: one per applied put."""
    root = cluster.mc.data_dir
    files = [p for p in (root / "WALs").rglob("*") if p.is_file()] + list((root / "oldWALs").iterdir())
    n = 0
    for path in sorted(files, key=lambda p: parse_wal_name(p.name)):
        with open(path, "rb") as f:
            for e in WalReader(f, str(path)).entries():
                if e.key.table == b"t":
                    n += sum(c.family == b"r" for c in e.cells)
    return n


def test_zookeeper_stopped_mid_ship_then_restarted(own_zk: LocalZooKeeper, tmp_path: Path) -> None:
    chroot = f"/walship-outage-{uuid.uuid4().hex[:8]}"
    with zk_client(own_zk.hosts) as client:
        client.ensure_path(chroot)
    hosts = own_zk.hosts + chroot
    started: list[MiniClusterProcess] = []

    def factory(name: str, **kwargs: Any) -> MiniClusterProcess:
        mc = MiniClusterProcess(name, tmp_path / name, zk=hosts, znode_parent=f"/hbase-{name.lower()}", **kwargs)
        mc.start()
        started.append(mc)
        return mc

    try:
        a = make_cluster(factory, hosts, "A", regionservers=1)
        b = make_cluster(factory, hosts, "B", regionservers=1)
        add_peer(a, b)
        total, batch_entries = 6000, 20
        with a.table().batch(batch_size=10) as batch:  # WAL entries of 10 rows, batches of 20 entries
            for i in range(total):
                batch.put(b"row-%05d" % i, {b"r:q": b"v%d" % i})
        env = {
            **os.environ,
            "WALSHIP_ZK": hosts,
            "WALSHIP_ZNODE_PARENT": a.parent,
            "WALSHIP_WAL_ROOT": str(a.mc.data_dir),
        }
        cmd = [sys.executable, "-m", "walship.cli", "ship", "--peer", "1", "--batch-entries", str(batch_entries)]
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        tb = b.table()
        wait_until(
            lambda: tb.row(b"row-00000") or proc.poll() is not None,
            timeout=120,
            interval=0.01,
            what="the ship under way (its first row on B)",
        )
        own_zk.stop()  # in the middle of the ship
        out, err = proc.communicate(timeout=180)
        assert proc.returncode == 1, (out, err[-2000:])
        first = json.loads(out)
        assert first["status"] == "error" and "ZooKeeper unavailable" in first["error"]
        assert "Traceback" not in err
        assert len(contents(b)) < total  # stopped part way
        own_zk.start()
        # the first shipper's locks go with its session; wait for them, then finish
        done = subprocess.run([*cmd, "--lock-wait", "60"], env=env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stdout + done.stderr[-2000:]
        assert contents(b) == contents(a, b"r") and len(contents(b)) == total
        # nothing doubled beyond the batch whose position could not be committed and the one
        # applied behind it meanwhile (a batch: 20 entries of 10 rows)
        applied = table_cells(b)
        assert total <= applied <= total + 2 * batch_entries * 10, applied
    finally:
        for mc in started:
            mc.stop()


def test_a_shipper_on_a_stopped_zookeeper_says_so(own_zk: LocalZooKeeper, tmp_path: Path) -> None:
    hosts = own_zk.hosts
    own_zk.stop()
    code = subprocess.run(
        [
            sys.executable,
            "-m",
            "walship.cli",
            "--zk",
            hosts,
            "--zk-timeout",
            "2",
            "--wal-root",
            str(tmp_path),
            "ship",
            "--peer",
            "1",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert code.returncode == 1
    # a stopped server refuses the connection: said at once, in one line naming it
    assert f"ZooKeeper at {hosts} refused every connection" in code.stderr and "Traceback" not in code.stderr
    assert len(code.stderr.strip().splitlines()) == 1, code.stderr


def test_shipper_refuses_bad_limits_with_a_config_error(zk: KazooClient, tmp_path: Path) -> None:
    from walship.errors import ConfigError

    with pytest.raises(ConfigError, match="batch limits must be > 0"):
        Shipper(zk, ZnodeLayout("/hbase"), WalStore(str(tmp_path)), batch_entries=0)
