"""`walship peer ...`, `walship queues` and `walship zookeeper ...` against a real server."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from cluster_state import offline
from conftest import server_name, wal_name
from kazoo.client import KazooClient

from walship.cli import main
from walship.zk import ReplicationQueues, ZnodeLayout
from walship.zk.localserver import free_port
from walship.zk.master import MasterAddress, register_master

pytestmark = pytest.mark.integration


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """``walship argv`` against a bare ZooKeeper: no master, so a peer change is ``--offline``."""
    code = main(offline(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_peer_commands(zk_hosts: str, capsys: pytest.CaptureFixture[str], zk: KazooClient) -> None:
    g = ["--zk", zk_hosts, "--znode-parent", "/hbase-a"]
    code, out, _ = run(
        capsys,
        *g,
        "peer",
        "add",
        "1",
        "--cluster-key",
        "127.0.0.1:2181:/hbase-b",
        "--config",
        "walship.sink.thrift=127.0.0.1:9091",
        "--table-cfs",
        "demo:r;ns.t2",
    )
    assert code == 0 and "added peer 1 (ENABLED, managed by walship; HBase peer-state DISABLED)" in out
    code, out, _ = run(
        capsys,
        *g,
        "peer",
        "add",
        "2",
        "--cluster-key",
        "h1,h2:2181:/c",
        "--disabled",
        "--namespaces",
        "ns1,ns2",
        "--config",
        "walship.sink.thrift=h:9090",
    )
    assert code == 0 and "(DISABLED, managed by walship" in out
    code, out, _ = run(capsys, *g, "peer", "list", "--json")
    peers = json.loads(out)
    assert [p["peer_id"] for p in peers] == ["1", "2"]
    assert peers[0]["table_cfs"] == {"demo": ["r"], "ns:t2": None}
    assert peers[0]["configuration"] == {"walship.managed": "true", "walship.sink.thrift": "127.0.0.1:9091"}
    assert peers[0]["replicate_all"] is False and peers[1]["state"] == "DISABLED"
    assert [(p["managed"], p["hbase_peer_state"]) for p in peers] == [(True, "DISABLED"), (True, "DISABLED")]
    assert peers[1]["namespaces"] == ["ns1", "ns2"]
    code, out, _ = run(capsys, *g, "peer", "list")
    assert "default.demo:r;ns.t2" in out and "2 peer(s)" in out
    assert run(capsys, *g, "peer", "enable", "2")[0] == 0
    code, out, _ = run(capsys, *g, "peer", "show", "2", "--json")
    assert json.loads(out)["state"] == "ENABLED"
    assert run(capsys, *g, "peer", "disable", "1")[0] == 0
    # walship's switch flips; HBase's peer-state stays DISABLED, so HBase never ships it
    assert zk.get("/hbase-a/replication/walship/peers/1/state")[0] == bytes.fromhex("504255460801")
    assert zk.get("/hbase-a/replication/peers/1/peer-state")[0] == bytes.fromhex("504255460801")
    assert run(capsys, *g, "peer", "enable", "1")[0] == 0
    assert zk.get("/hbase-a/replication/walship/peers/1/state")[0] == bytes.fromhex("504255460800")
    assert zk.get("/hbase-a/replication/peers/1/peer-state")[0] == bytes.fromhex("504255460801")
    assert run(capsys, *g, "peer", "remove", "2")[0] == 0
    code, out, _ = run(capsys, *g, "peer", "list", "--json")
    assert [p["peer_id"] for p in json.loads(out)] == ["1"]
    assert zk.exists("/hbase-a/replication/walship/peers/2") is None  # walship's switch went with it


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["peer", "add", "a-b", "--cluster-key", "h:1:/x"], "invalid peer id 'a-b'"),
        (["peer", "add", "1", "--cluster-key", "nonsense"], "invalid cluster key 'nonsense'"),
        (["peer", "add", "1", "--cluster-key", "h:1:/x", "--table-cfs", "a:b:c:d"], "invalid table-cfs part"),
        (["peer", "add", "1", "--cluster-key", "h:1:/x", "--config", "novalue"], "invalid --config 'novalue'"),
        (
            ["peer", "add", "1", "--cluster-key", "h:1:/x", "--config", "walship.sink.thrift=x"],
            "invalid walship.sink.thrift of peer 1",
        ),
        (["peer", "enable", "42"], "peer 42 does not exist"),
        (["peer", "show", "42"], "peer 42 does not exist"),
        (["peer", "remove", "42"], "peer 42 does not exist"),
    ],
)
def test_peer_errors_name_the_thing(
    zk_hosts: str, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    code, _, err = run(capsys, "--zk", zk_hosts, *argv)
    assert code == 1
    assert message in err


def test_a_peer_change_without_a_master_needs_offline(
    zk_hosts: str, capsys: pytest.CaptureFixture[str], zk: KazooClient
) -> None:
    add = ["peer", "add", "1", "--cluster-key", "h:1:/x", "--config", "walship.sink.thrift=h:9090"]
    code = main(["--zk", zk_hosts, *add])
    _, err = capsys.readouterr()
    assert code == 1 and len(err.splitlines()) == 1, err
    assert "no HBase master is registered at /hbase/master" in err and "--offline" in err
    assert zk.exists("/hbase/replication/peers/1") is None  # nothing written
    assert run(capsys, "--zk", zk_hosts, *add)[0] == 0  # offline: the znodes written directly


def test_a_master_that_does_not_answer_is_named(
    zk_hosts: str, capsys: pytest.CaptureFixture[str], zk: KazooClient
) -> None:
    """A master registered in ZooKeeper whose port refuses: one line naming its address and the
    znode it came from, once it was looked for again for a while; nothing written."""
    port = free_port()
    register_master(zk, ZnodeLayout("/hbase"), MasterAddress("127.0.0.1", port, 1))
    add = ["peer", "add", "1", "--cluster-key", "h:1:/x", "--config", "walship.sink.thrift=h:9090"]
    code = main(["--zk", zk_hosts, *add])
    _, err = capsys.readouterr()
    assert code == 1 and len(err.splitlines()) == 1, err
    assert f"the master at 127.0.0.1:{port} (from /hbase/master) does not answer" in err
    assert "peer 1" in err and zk.exists("/hbase/replication/peers/1") is None


def test_duplicate_peer(zk_hosts: str, capsys: pytest.CaptureFixture[str]) -> None:
    add = ["peer", "add", "1", "--cluster-key", "h:1:/x", "--config", "walship.sink.thrift=h:9090"]
    assert run(capsys, "--zk", zk_hosts, *add)[0] == 0
    code, _, err = run(capsys, "--zk", zk_hosts, *add)
    assert code == 1 and "peer 1 exists already" in err


def test_bad_global_flags(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "--zk", "not a host", "peer", "list")
    assert code == 1 and "invalid --zk 'not a host'" in err
    code, _, err = run(capsys, "--zk", "127.0.0.1:1", "--znode-parent", "hbase", "peer", "list")
    assert code == 1 and "invalid znode parent 'hbase'" in err


def test_unreachable_zookeeper(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "--zk", f"127.0.0.1:{free_port()}", "--zk-timeout", "1", "peer", "list")
    assert code == 1 and "ZooKeeper at 127.0.0.1:" in err and "refused every connection" in err
    assert len(err.strip().splitlines()) == 1  # no kazoo warning lines before it


def test_queues_command(zk_hosts: str, zk: KazooClient, capsys: pytest.CaptureFixture[str]) -> None:
    g = ["--zk", zk_hosts]
    sink = ["--config", "walship.sink.thrift=h:9090"]
    assert run(capsys, *g, "peer", "add", "1", "--cluster-key", "h:1:/x", *sink)[0] == 0
    assert run(capsys, *g, "peer", "add", "2", "--cluster-key", "h:1:/y", *sink)[0] == 0
    layout = ZnodeLayout("/hbase")
    queues = ReplicationQueues(zk, layout)
    dead, live = server_name(7), server_name(1)
    w_dead = wal_name(dead, 1700000000000)
    w_live = wal_name(live, 1700000001000)
    queues.add_wal(dead, w_dead)
    queues.add_wal(live, w_live)
    queues.set_position(live, "1", w_live, 4242)
    queues.claim_queue(dead, "1", live)
    code, out, _ = run(capsys, *g, "queues", "--json")
    rows = json.loads(out)
    by_id = {(r["server"], r["queue_id"]): r for r in rows}
    assert set(by_id) == {(live, "1"), (live, "2"), (live, f"1-{dead}"), (dead, "2")}
    rec = by_id[(live, f"1-{dead}")]
    assert rec["recovered"] and rec["peer_id"] == "1" and rec["dead_servers"] == [dead]
    assert by_id[(live, "1")]["wals"] == [{"name": w_live, "position": 4242}]
    code, out, _ = run(capsys, *g, "queues", "--peer", "2")
    assert code == 0 and "2 queue(s)" in out and f"recovered from {dead}" not in out
    code, out, _ = run(capsys, *g, "queues", "--peer", "1")
    assert f"recovered from {dead}" in out and "position 4242" in out


def test_zookeeper_start_stop_by_pid(tmp_path: Path) -> None:
    port = free_port()
    data = tmp_path / "zk"

    def walship(*argv: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
        exe = Path(sys.executable).with_name("walship")
        return subprocess.run([str(exe), *argv], capture_output=True, text=True, timeout=timeout, check=False)

    where = ["--data-dir", str(data), "--port", str(port)]
    started = walship("zookeeper", "start", *where, timeout=90)
    assert started.returncode == 0, started.stderr
    assert json.loads(started.stdout)["zk"] == f"127.0.0.1:{port}"
    try:
        status = walship("zookeeper", "status", *where)
        assert status.returncode == 0 and "running" in status.stdout
        listed = walship("--zk", f"127.0.0.1:{port}", "peer", "list")
        assert listed.returncode == 0 and "0 peer(s)" in listed.stdout
    finally:
        stopped = walship("zookeeper", "stop", *where, timeout=60)
    assert stopped.returncode == 0 and "stopped" in stopped.stdout
    status = walship("zookeeper", "status", *where)
    assert status.returncode == 1
    assert not (data / "zookeeper.pid").exists()


def test_zookeeper_digest_auth(zk_hosts: str, capsys: pytest.CaptureFixture[str]) -> None:
    """A znode parent with a digest ACL: refused without credentials (naming the znode, nothing
    written); with --zk-auth the peer is added and its znodes get the parent's ACL."""
    from kazoo.exceptions import NoAuthError
    from kazoo.security import make_digest_acl

    from walship.zk import connect, zk_client

    acl = make_digest_acl("walship", "s3cret", all=True)
    with zk_client(zk_hosts, auth="digest:walship:s3cret") as client:
        client.create("/secure", b"", acl=[acl])
    g = ["--zk", zk_hosts, "--znode-parent", "/secure"]
    add = ["peer", "add", "1", "--cluster-key", "h:2181:/b", "--config", "walship.sink.thrift=h:9090"]
    code, _, err = run(capsys, *g, *add)
    assert code == 1
    assert "znode /secure" in err and "authentication failed or missing" in err and "s3cret" not in err
    code, _, err = run(capsys, *g, "--zk-auth", "digest:walship:wrong", *add)
    assert code == 1 and "znode /secure" in err and "wrong" not in err
    code, _, err = run(capsys, *g, "--zk-auth", "digest:walship:s3cret", *add)
    assert code == 0, err
    with zk_client(zk_hosts, auth="digest:walship:s3cret") as client:
        assert client.get_acls("/secure/replication/peers/1")[0] == [acl]  # the parent's ACL, inherited
    anonymous = connect(zk_hosts)
    try:
        with pytest.raises(NoAuthError):
            anonymous.get("/secure/replication/peers/1")
    finally:
        anonymous.stop()
        anonymous.close()
    code, _, err = run(capsys, *g, "--zk-auth", "nocolon", "peer", "list")
    assert code == 1 and "expected SCHEME:CREDENTIAL" in err


def test_zookeeper_sasl_auth(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """SASL (DIGEST-MD5) through kazoo, against a ZooKeeper with a JAAS login: znodes with a
    sasl ACL are refused without the login and written with it."""
    from kazoo.security import make_acl

    from walship.zk import zk_client
    from walship.zk.localserver import LocalZooKeeper

    server = LocalZooKeeper(tmp_path / "zk", free_port(), sasl_users={"walship": "s3cret"})
    server.start()
    try:
        with zk_client(server.hosts, auth="sasl:walship:s3cret") as client:
            client.create("/secure", b"", acl=[make_acl("sasl", "walship", all=True)])
        g = ["--zk", server.hosts, "--znode-parent", "/secure"]
        add = ["peer", "add", "1", "--cluster-key", "h:2181:/b", "--config", "walship.sink.thrift=h:9090"]
        code, _, err = run(capsys, *g, *add)
        assert code == 1 and "znode /secure" in err and "authentication failed or missing" in err
        code, _, err = run(capsys, *g, "--zk-auth", "sasl:walship:s3cret", *add)
        assert code == 0, err
        with zk_client(server.hosts, auth="sasl:walship:s3cret") as client:
            assert client.get_acls("/secure/replication/peers/1")[0] == [make_acl("sasl", "walship", all=True)]
        # a password no message's words contain ("wrong" is one: "wrong user or password")
        code, _, err = run(capsys, *g, "--zk-timeout", "3", "--zk-auth", "sasl:walship:n0t-1t", "peer", "list")
        assert code == 1 and "s3cret" not in err and "n0t-1t" not in err
        assert "SASL" in err or "authentication" in err
    finally:
        server.stop()
