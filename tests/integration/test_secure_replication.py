"""walship's commands on a Kerberized HBase 2.6 (the ``secure_hbase`` stack), run as an operator
runs them: ``walship --principal P --keytab K ...`` in a process of its own. A peer added through
the master, a tail run whose 20-second ticket ends mid-run, status and wait-drained with WALs
read over WebHDFS with SPNEGO and over ``hdfs://``, verify, copy, the cleaner deleting on
Kerberized HDFS, and each refusal in one line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import pytest
from fixtures_spark_wal import spark_submit
from secure_hbase import SecureStack
from test_real_hdfs import hdfs_client_env
from waiting import wait_until

from walship import security
from walship.replicate import WalStore
from walship.spark.ship import ShipJob
from walship.thrift.conn import ThriftOptions, open_thrift2
from walship.thrift.hbase2 import hbase2 as T
from walship.zk import ReplicationQueues, ZnodeLayout, zk_client
from walship_testing.harness import HBaseProcess

pytestmark = pytest.mark.integration

KERBEROS_ENV = ("KRB5CCNAME", "KRB5_CLIENT_KTNAME", "WALSHIP_PRINCIPAL", "WALSHIP_KEYTAB")
_names = iter(range(1, 1000))


def unique(prefix: str) -> str:
    return f"{prefix}{next(_names)}x{os.getpid() % 1000}"


@pytest.fixture(scope="module")
def stack(secure_hbase: SecureStack) -> Iterator[SecureStack]:
    """The secure stack, with this process logged in as ``walship`` (for the test's own reads and
    writes); the login and its environment are undone afterwards, for the tests after these."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("KRB5_CONFIG", str(secure_hbase.krb5_conf))
        for name in KERBEROS_ENV:
            mp.delenv(name, raising=False)
        security.logout()
        security.login(security.KerberosIdentity(f"walship@{secure_hbase.realm}", str(secure_hbase.walship_keytab)))
        try:
            yield secure_hbase
        finally:
            security.logout()


def local(hb: HBaseProcess, address: tuple[str, int]) -> str:
    """A Thrift server's address by the name its principal carries (``hbase/localhost``)."""
    return f"{hb.service_host or 'localhost'}:{address[1]}"


def command(
    stack: SecureStack, who: str = "walship", wal_root: str | None = None, env: dict[str, str] | None = None
) -> tuple[list[str], dict[str, str]]:
    """``walship --principal <who> --keytab <its keytab> <SA's flags>`` and its environment
    (``KRB5_CONFIG``, no Kerberos identity of this process's)."""
    keytabs = {
        "walship": stack.walship_keytab,
        "walship-short": stack.walship_short_keytab,
        "intruder": stack.intruder_keytab,
    }
    sa = stack.sa
    argv = [sys.executable, "-m", "walship.cli", "--principal", f"{who}@{stack.realm}", "--keytab", str(keytabs[who])]
    argv += ["--zk", stack.zk_hosts, "--znode-parent", sa.znode_parent, "--wal-root", wal_root or sa.wal_root]
    argv += ["--source-thrift2", local(sa, sa.thrift2)]
    environ = {k: v for k, v in (env or os.environ).items() if k not in KERBEROS_ENV}
    return argv, {**environ, "KRB5_CONFIG": str(stack.krb5_conf)}


def walship(
    stack: SecureStack,
    *argv: str,
    who: str = "walship",
    wal_root: str | None = None,
    env: dict[str, str] | None = None,
    timeout: float = 240,
) -> subprocess.CompletedProcess[str]:
    """``walship ... argv`` (see :func:`command`) in a process of its own, run to its end."""
    prefix, environ = command(stack, who, wal_root, env)
    return subprocess.run([*prefix, *argv], env=environ, capture_output=True, text=True, timeout=timeout)


def one_line_refusal(run: subprocess.CompletedProcess[str]) -> str:
    assert run.returncode == 1, (run.returncode, run.stdout, run.stderr)
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in run.stderr, run.stderr
    return lines[0]


def sink(stack: SecureStack, protocol: str, **extra: str) -> list[str]:
    """``--config`` flags of a peer shipping into SB over ``protocol`` with SASL GSSAPI."""
    sb = stack.sb
    config = {
        "walship.sink.thrift": local(sb, sb.thrift),
        "walship.sink.thrift.security.qop": "auth",
        "walship.sink.thrift.kerberos.principal": "hbase/_HOST",
        **extra,
    }
    if protocol in ("thrift2", "hbase"):  # hbase: SB's region servers, over HBase's RPC with Kerberos
        config |= {"walship.sink.protocol": protocol, "walship.sink.thrift2": local(sb, sb.thrift2)}
    return [arg for k, v in config.items() for arg in ("--config", f"{k}={v}")]


def thrift2(hb: HBaseProcess) -> Any:
    host, port = local(hb, hb.thrift2).split(":")
    return open_thrift2(host, int(port), ThriftOptions.for_source())


def put_rows(hb: HBaseProcess, table: str, rows: range, ts: int = 1000) -> None:
    with thrift2(hb) as c:
        for i in rows:
            c.client.put(
                table.encode(),
                T.TPut(row=b"row%04d" % i, columnValues=[T.TColumnValue(b"r", b"q", b"v%d" % i, ts)]),
            )


def rows_of(hb: HBaseProcess, table: str) -> dict[bytes, list[tuple[bytes, bytes, int]]]:
    with thrift2(hb) as c:
        results = c.client.getScannerResults(table.encode(), T.TScan(maxVersions=5), 100000)
    return {r.row: sorted((cv.qualifier, cv.value, cv.timestamp) for cv in r.columnValues) for r in results}


def create_table(stack: SecureStack, prefix: str) -> str:
    table = unique(prefix)
    for hb in (stack.sa, stack.sb):
        hb.call("create_table", table=table, families={"r": {"scope": 1, "versions": 5}})
    return table


def queues_ready(stack: SecureStack, peer: str) -> None:
    """Every live server of SA queues WALs for ``peer`` (HBase adds the queues)."""

    def ready() -> bool:
        with zk_client(stack.zk_hosts) as client:
            queued = {q.server for q in ReplicationQueues(client, ZnodeLayout(stack.sa.znode_parent)).list_queues(peer)}
        return set(stack.sa.servers()) <= {str(s) for s in queued}

    wait_until(ready, timeout=60, what=f"peer {peer}'s queues on every server of SA")


def new_peer(stack: SecureStack, prefix: str, protocol: str) -> tuple[str, str]:
    """A table on SA and SB and a managed peer of it added through the master (``walship peer
    add``, as walship), its queues on every server of SA: (table, peer)."""
    table = create_table(stack, prefix)
    peer = unique(prefix)
    added = walship(stack, "peer", "add", peer, "--cluster-key", stack.sb.cluster_key, "--table-cfs", table,
                    *sink(stack, protocol))  # fmt: skip
    assert added.returncode == 0, added.stderr
    queues_ready(stack, peer)
    return table, peer


def as_walship_short(stack: SecureStack, log_file: IO[str], *argv: str) -> subprocess.Popen[str]:
    """``walship -v ... argv`` as walship-short (20 s tickets), started; its log to ``log_file``
    (a pipe nobody reads while it runs would stop it once full)."""
    prefix, environ = command(stack, "walship-short")
    return subprocess.Popen([*prefix, "-v", *argv], env=environ, stdout=subprocess.PIPE, stderr=log_file, text=True)


def test_replication_outlives_a_ticket_and_is_watched_verified_and_cleaned(stack: SecureStack, tmp_path: Path) -> None:
    sa, realm = stack.sa, stack.realm
    table, peer = new_peer(stack, "k", "thrift2")
    with zk_client(stack.zk_hosts) as client:  # walship's znodes get their parent's ACLs (HBase's)
        layout = ZnodeLayout(sa.znode_parent)
        switch_acl, _ = client.get_acls(layout.walship_peer_state(peer))
        parent_acl, _ = client.get_acls(sa.znode_parent)
    assert sorted(str(a) for a in switch_acl) == sorted(str(a) for a in parent_acl)
    assert ("sasl", "walship") in {(a.id.scheme, a.id.id) for a in switch_acl}

    # a tail run as walship-short, whose tickets last 20 s, for longer than two of them
    log_path = tmp_path / "tail.log"
    began = time.monotonic()
    with log_path.open("w") as log_file:
        tail = as_walship_short(stack, log_file, "tail", "--peer", peer, "--duration", "50")
        try:
            put_rows(sa, table, range(100))
            wait_until(lambda: len(rows_of(stack.sb, table)) >= 100, timeout=40, what="the first rows on SB")
            wait_until(lambda: time.monotonic() > began + 25, timeout=40, what="the tail run's first ticket's end")
            put_rows(sa, table, range(100, 200))
            sa.call("roll")  # a new WAL mid-run: new readers, new files opened over WebHDFS
            put_rows(sa, table, range(200, 300))
            wait_until(lambda: len(rows_of(stack.sb, table)) >= 300, timeout=60, what="every row on SB")
            out, _ = tail.communicate(timeout=120)
        except AssertionError as exc:
            tail.kill()
            tail.communicate()
            said = [line for line in log_path.read_text().splitlines() if " WARNING " in line or " ERROR " in line]
            raise AssertionError(f"{exc}; the tail run said ({log_path}): {chr(10).join(said)[-4000:]}") from None
        finally:
            if tail.poll() is None:
                tail.kill()
                tail.communicate()
    err = log_path.read_text()
    assert tail.returncode == 0, err[-3000:]
    assert json.loads(out.strip().splitlines()[-1])["status"] == "ok", out
    assert time.monotonic() - began > 45  # the run outlived two tickets
    assert err.count(f"ticket of walship-short@{realm} valid for") >= 3, err[-3000:]  # asked again as they ended
    assert rows_of(stack.sb, table) == rows_of(sa, table)

    # status and wait-drained, WALs read over WebHDFS with SPNEGO
    status = walship(stack, "status", "--peer", peer, "--json")
    assert status.returncode == 0, status.stderr
    queues = json.loads(status.stdout)["peers"][0]["queues"]
    assert queues and all(q["bytes_queued"] == 0 for q in queues), queues
    drained = walship(stack, "wait-drained", "--peer", peer, "--timeout", "60", "--json")
    assert drained.returncode == 0, drained.stderr
    assert json.loads(drained.stdout)["drained"] is True

    # the same status through libhdfs at the hdfs:// root, with this process's ticket cache
    # (a CLASSPATH without a core-site.xml: walship adds one that says kerberos)
    env = {**hdfs_client_env(tmp_path), "WALSHIP_HDFS_PRINCIPAL": f"hbase/{stack.service_host}@{realm}"}
    over_hdfs = walship(stack, "status", "--peer", peer, "--json", wal_root=sa.ready["wal_root"], env=env)
    assert over_hdfs.returncode == 0, over_hdfs.stderr[-3000:]
    assert len(json.loads(over_hdfs.stdout)["peers"][0]["queues"]) == len(queues)

    # verify: the source over its SASL Thrift2 server, the peer over its sink's
    verify = walship(stack, "verify", "--peer", peer, "--table", table, "--json")
    assert verify.returncode == 0, verify.stderr
    counters = json.loads(verify.stdout)["counters"]
    assert counters["GOODROWS"] == 300 and counters["BADROWS"] == 0, counters

    # the cleaner: WALs rolled and shipped past are deleted from oldWALs/ on Kerberized HDFS
    sa.call("roll")
    shipped = walship(stack, "ship", "--peer", peer)
    assert shipped.returncode == 0, shipped.stderr
    store = WalStore(sa.wal_root)
    archived = {path.rsplit("/", 1)[-1] for path, _, _ in store.list_archive()}
    clean = walship(stack, "clean", "--ttl", "0", "--json")
    assert clean.returncode == 0, clean.stderr
    report = json.loads(clean.stdout)
    deleted = {p.rsplit("/", 1)[-1] for p in report["deleted_files"]}
    assert deleted and deleted <= archived, (deleted, archived)
    assert not deleted & {path.rsplit("/", 1)[-1] for path, _, _ in store.list_archive()}
    with zk_client(stack.zk_hosts) as client:
        queued = {w.name for q in ReplicationQueues(client, ZnodeLayout(sa.znode_parent)).list_queues() for w in q.wals}
    assert not deleted & queued


def test_a_lingering_spark_ship_task_logs_in_where_it_runs_and_outlives_its_ticket(
    stack: SecureStack, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """spark_jobs/ship.py as the ship task submits it: the principal and keytab in the driver's
    and the executors' environment (WALSHIP_PRINCIPAL, WALSHIP_KEYTAB), never on the command line."""
    sa, realm = stack.sa, stack.realm
    table, peer = new_peer(stack, "s", "thrift1")
    monkeypatch.setenv("KRB5_CONFIG", str(stack.krb5_conf))
    monkeypatch.setenv("WALSHIP_PRINCIPAL", f"walship-short@{realm}")  # 20 s tickets
    monkeypatch.setenv("WALSHIP_KEYTAB", str(stack.walship_short_keytab))
    job = ShipJob(zk=stack.zk_hosts, znode_parent=sa.znode_parent, wal_root=sa.wal_root, peer_id=peer, linger=40)
    done: list[subprocess.CompletedProcess[str]] = []
    submit = threading.Thread(target=lambda: done.append(spark_submit("ship.py", ["--job", job.to_json()], tmp_path)))
    began = time.monotonic()
    submit.start()
    try:
        for i in range(8):  # a round every 4 s: the task keeps lingering past its first tickets
            put_rows(sa, table, range(i * 10, i * 10 + 10))
            wait_until(lambda i=i: time.monotonic() > began + 4 * (i + 1), timeout=10, what=f"round {i}'s time")
        wait_until(lambda: len(rows_of(stack.sb, table)) >= 80, timeout=60, what="every round's rows on SB")
    finally:
        submit.join(timeout=300)
    (run,) = done
    assert run.returncode == 0, (run.stdout + run.stderr)[-4000:]
    printed = [line for line in run.stdout.splitlines() if line.startswith('{"peer_id"')]
    assert json.loads(printed[-1])["status"] == "ok", printed
    assert time.monotonic() - began > 30
    assert "walship-short" not in job.to_json()  # not in the job's description (its command line)
    assert rows_of(stack.sb, table) == rows_of(sa, table)


def test_the_metrics_server_outlives_its_ticket(stack: SecureStack, tmp_path: Path) -> None:
    sa, realm = stack.sa, stack.realm
    table, peer = new_peer(stack, "p", "thrift1")
    log_path = tmp_path / "metrics.log"
    began = time.monotonic()
    with log_path.open("w") as log_file:
        server = as_walship_short(
            stack, log_file, "metrics", "serve", "--host", "127.0.0.1", "--port", "0", "--peer", peer
        )
        try:
            assert server.stdout is not None
            url = server.stdout.readline().split(" on ", 1)[1].strip()

            def scrape() -> dict[str, float]:
                """Each family's samples summed (walship_queue_bytes: over the peer's queues)."""
                try:
                    body = urllib.request.urlopen(url, timeout=30).read().decode()
                except urllib.error.HTTPError as exc:
                    raise AssertionError(f"{exc}: {log_path.read_text()[-3000:]}") from None
                out: dict[str, float] = {}
                for line in body.splitlines():
                    if line.startswith(("walship_status_up", "walship_queue_bytes")):
                        name = line.split("{")[0].split(" ")[0]
                        out[name] = out.get(name, 0.0) + float(line.rsplit(" ", 1)[1])
                return out

            assert scrape()["walship_status_up"] == 1
            wait_until(lambda: time.monotonic() > began + 45, timeout=60, what="two of its tickets' ends")
            put_rows(sa, table, range(20))  # unshipped: the queue's bytes grow
            sa.call("roll")
            later = scrape()
            assert later["walship_status_up"] == 1, log_path.read_text()[-3000:]
            assert later["walship_queue_bytes"] > 0
        finally:
            server.terminate()
            server.communicate(timeout=30)
    assert log_path.read_text().count(f"ticket of walship-short@{realm} valid for") >= 3


def test_a_serial_peer_reads_its_barriers_over_sasl(stack: SecureStack) -> None:
    """A serial peer's shipping reads the replication barriers in the source's hbase:meta over
    its SASL Thrift2 server (the source's options from the login)."""
    table = create_table(stack, "o")
    peer = unique("o")
    added = walship(stack, "peer", "add", peer, "--cluster-key", stack.sb.cluster_key, "--table-cfs", table,
                    "--serial", *sink(stack, "thrift1"))  # fmt: skip
    assert added.returncode == 0, added.stderr
    queues_ready(stack, peer)
    put_rows(stack.sa, table, range(30))
    shipped = walship(stack, "ship", "--peer", peer)
    assert shipped.returncode == 0, shipped.stderr
    assert json.loads(shipped.stdout)["status"] == "ok"
    assert rows_of(stack.sb, table) == rows_of(stack.sa, table) and len(rows_of(stack.sb, table)) == 30


def test_copy_into_a_new_peer(stack: SecureStack) -> None:
    table = create_table(stack, "c")
    put_rows(stack.sa, table, range(50))
    with thrift2(stack.sa) as c:
        c.client.deleteSingle(table.encode(), T.TDelete(row=b"row0007", columns=[T.TColumn(b"r", b"q", 1000)]))
    peer = unique("c")
    added = walship(stack, "peer", "add", peer, "--cluster-key", stack.sb.cluster_key, "--table-cfs", table,
                    *sink(stack, "hbase"))  # fmt: skip
    assert added.returncode == 0, added.stderr
    copied = walship(stack, "copy", "--peer", peer, "--table", table, "--json")
    assert copied.returncode == 0, copied.stderr
    # read from SA's region servers and written into SB's, over HBase's RPC as walship's principal
    result = json.loads(copied.stdout)
    assert (result["read_from"], result["written_to"]) == ("region_servers", "region_servers")
    on_b = rows_of(stack.sb, table)
    assert on_b == rows_of(stack.sa, table) and len(on_b) == 49 and b"row0007" not in on_b


def test_refusals_name_the_principal_and_the_server(stack: SecureStack) -> None:
    sa, realm = stack.sa, stack.realm
    table = create_table(stack, "m")
    peer = unique("m")
    sink_flags = sink(stack, "thrift1", **{"walship.sink.thrift.kerberos.principal": "nothbase/_HOST"})
    # intruder is known to the KDC but in no ACL: its peer is refused before the master adds it
    line = one_line_refusal(walship(stack, "peer", "add", peer, "--cluster-key", stack.sb.cluster_key, *sink_flags,
                                    who="intruder"))  # fmt: skip
    assert f"intruder@{realm}" in line and stack.zk_hosts in line and "ACL" in line
    listed = walship(stack, "peer", "list")
    assert listed.returncode == 0 and peer not in listed.stdout, listed.stdout

    # a Thrift server that is not the principal asked for (hbase.thrift.kerberos.principal)
    added = walship(stack, "peer", "add", peer, "--cluster-key", stack.sb.cluster_key, "--table-cfs", table,
                    *sink_flags)  # fmt: skip
    assert added.returncode == 0, added.stderr
    queues_ready(stack, peer)
    put_rows(sa, table, range(3))
    line = one_line_refusal(walship(stack, "ship", "--peer", peer))
    assert f"walship@{realm}" in line and "nothbase" in line and str(stack.sb.thrift[1]) in line
    assert rows_of(stack.sb, table) == {}

    # ZooKeeper's ACL: the replication queues are HBase's and its superusers'
    line = one_line_refusal(walship(stack, "queues", who="intruder"))
    assert f"intruder@{realm}" in line and stack.zk_hosts in line

    # HDFS: a WAL of HBase's, read over WebHDFS as a principal HDFS does not let in
    store = WalStore(sa.wal_root)
    path, _ = next(p for p in store.wal_files() if "/WALs/" in p[0])
    url = sa.wal_root.rstrip("/") + path[len(store.base) :]
    line = one_line_refusal(walship(stack, "wal", "dump", url, who="intruder"))
    assert f"intruder@{realm}" in line and url.split("/")[2] in line and "Permission denied" in line
