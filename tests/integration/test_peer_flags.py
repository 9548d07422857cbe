"""`walship peer add|set --bandwidth|--serial` and `walship subscription add [--no-serial]`:
fields 7 (bandwidth) and 11 (serial) of HBase's ReplicationPeer, written in one versioned
write, shown by `peer list|show`; bad input refused in one line, nothing written."""

from __future__ import annotations

import json

import pytest
from cluster_state import as_the_cluster_is
from kazoo.client import KazooClient
from replication_helpers import raw_peer

from walship.cli import main
from walship.protos import Replication_pb2
from walship.zk import ZnodeLayout
from walship_testing.minicluster.process import MiniClusterProcess

pytestmark = pytest.mark.integration

PARENT = "/hbase-a"
LAYOUT = ZnodeLayout(PARENT)
LISTENER = "sep_listeners:JsonLinesListener"


def run(capsys: pytest.CaptureFixture[str], zk_hosts: str, *argv: str) -> tuple[int, str, str]:
    code = main(["--zk", zk_hosts, "--znode-parent", PARENT, *as_the_cluster_is(zk_hosts, PARENT, argv)])
    out, err = capsys.readouterr()
    return code, out, err


def refused(capsys: pytest.CaptureFixture[str], zk_hosts: str, *argv: str) -> str:
    """A usage error: exit 1, one line on stderr naming the command, nothing on stdout."""
    with pytest.raises(SystemExit) as exc:
        run(capsys, zk_hosts, *argv)
    assert exc.value.code == 1
    out, err = capsys.readouterr()
    assert out == "" and len(err.splitlines()) == 1 and "Traceback" not in err, err
    return err


@pytest.fixture
def source_thrift2(minicluster: MiniClusterProcess, monkeypatch: pytest.MonkeyPatch) -> str:
    """A source cluster at PARENT whose hbase:meta a serial peer starts from, named by
    WALSHIP_SOURCE_THRIFT2 (as an operator's environment would)."""
    host, port = minicluster.thrift2
    monkeypatch.setenv("WALSHIP_SOURCE_THRIFT2", f"{host}:{port}")
    return f"{host}:{port}"


def add(capsys: pytest.CaptureFixture[str], zk_hosts: str, peer_id: str, *flags: str) -> str:
    code, out, err = run(
        capsys, zk_hosts, "peer", "add", peer_id, "--cluster-key", "h:2181:/b",
        "--config", "walship.sink.thrift=127.0.0.1:9091", *flags,
    )  # fmt: skip
    assert code == 0, err
    return out


def test_peer_add_writes_bandwidth_and_serial_and_list_and_show_print_them(
    zk_hosts: str, zk: KazooClient, capsys: pytest.CaptureFixture[str], source_thrift2: str
) -> None:
    out = add(capsys, zk_hosts, "1", "--bandwidth", "1048576", "--serial")
    assert out.strip().endswith("-> h:2181:/b; serial; bandwidth 1048576 bytes/s")
    assert add(capsys, zk_hosts, "2").strip().endswith("-> h:2181:/b")  # as before without them
    pb, _ = raw_peer(zk, LAYOUT, "1")
    assert pb.HasField("bandwidth") and pb.bandwidth == 1048576 and pb.serial is True
    pb, _ = raw_peer(zk, LAYOUT, "2")
    assert pb.bandwidth == 0 and pb.serial is False

    code, out, _ = run(capsys, zk_hosts, "peer", "list", "--json")
    assert code == 0
    listed = {p["peer_id"]: p for p in json.loads(out)}
    assert (listed["1"]["bandwidth"], listed["1"]["serial"]) == (1048576, True)
    assert (listed["2"]["bandwidth"], listed["2"]["serial"]) == (0, False)
    code, out, _ = run(capsys, zk_hosts, "peer", "list")
    assert code == 0
    header, first, second, count = out.splitlines()
    assert header.split()[-3:] == ["SERIAL", "BANDWIDTH", "SINK"] and count == "2 peer(s)"
    assert first.split()[-4:] == ["true", "1048576", "thrift1", "127.0.0.1:9091"]
    assert second.split()[-4:] == ["false", "-", "thrift1", "127.0.0.1:9091"]

    code, out, _ = run(capsys, zk_hosts, "peer", "show", "1", "--json")
    assert code == 0
    shown = json.loads(out)
    assert (shown["bandwidth"], shown["serial"]) == (1048576, True)
    code, out, _ = run(capsys, zk_hosts, "peer", "show", "1")
    assert code == 0
    lines = {line.split()[0]: line.split()[1] for line in out.splitlines() if line.strip()}
    assert lines["bandwidth"] == "1048576" and lines["serial"] == "True"


def test_peer_set_changes_bandwidth_and_serial_in_one_write_each(
    zk_hosts: str, zk: KazooClient, capsys: pytest.CaptureFixture[str], source_thrift2: str
) -> None:
    add(capsys, zk_hosts, "1")
    _, version = raw_peer(zk, LAYOUT, "1")

    def set_1(*flags: str) -> tuple[list[str], Replication_pb2.ReplicationPeer]:
        nonlocal version
        code, out, err = run(capsys, zk_hosts, "peer", "set", "1", *flags)
        assert code == 0, err
        pb, now = raw_peer(zk, LAYOUT, "1")
        assert now == version + 1, f"{flags}: {now - version} znode writes"
        version = now
        return out.splitlines(), pb

    lines, pb = set_1("--bandwidth", "200000")
    assert lines == ["updated peer 1", "  bandwidth: unlimited -> 200000 bytes/s"] and pb.bandwidth == 200000
    lines, pb = set_1("--serial", "true")
    assert lines == ["updated peer 1", "  serial: false -> true"] and pb.serial is True
    assert pb.bandwidth == 200000  # the other field stays
    lines, pb = set_1("--serial", "FALSE", "--bandwidth", "0")
    assert lines == ["updated peer 1", "  serial: true -> false", "  bandwidth: 200000 bytes/s -> unlimited"]
    assert pb.serial is False and pb.bandwidth == 0
    code, out, err = run(capsys, zk_hosts, "peer", "set", "1", "--bandwidth", "0")
    assert code == 0 and out.splitlines() == ["updated peer 1: nothing changed"], err
    assert raw_peer(zk, LAYOUT, "1")[1] == version  # through the master, no change sends no update
    code, out, _ = run(capsys, zk_hosts, "peer", "set", "1", "--bandwidth", "5", "--json")
    assert code == 0 and json.loads(out)["bandwidth"] == 5 and json.loads(out)["serial"] is False


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--bandwidth", "-5"], "argument --bandwidth: expected bytes per second, 0 (unlimited) to"),
        (["--bandwidth", "1.5"], "argument --bandwidth: expected bytes per second, an integer >= 0"),
        (["--bandwidth", "1MB"], "argument --bandwidth: expected bytes per second, an integer >= 0"),
        (["--bandwidth", ""], "argument --bandwidth: expected bytes per second, an integer >= 0"),
        (["--bandwidth", str(2**63)], "argument --bandwidth: expected bytes per second, 0 (unlimited) to"),
        (["--serial", "maybe"], "argument --serial: expected true or false, got 'maybe'"),
        (["--serial"], "argument --serial: expected one argument"),
    ],
)
def test_peer_set_refuses_bad_input_and_writes_nothing(
    zk_hosts: str, zk: KazooClient, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    add(capsys, zk_hosts, "1", "--bandwidth", "1000")
    before = zk.get(LAYOUT.peer("1"))
    err = refused(capsys, zk_hosts, "peer", "set", "1", *argv)
    assert err.startswith("walship peer set: ") and message in err
    data, stat = zk.get(LAYOUT.peer("1"))
    assert (data, stat.version) == (before[0], before[1].version)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--bandwidth", "-1"], "argument --bandwidth: expected bytes per second, 0 (unlimited) to"),
        (["--bandwidth", "fast"], "argument --bandwidth: expected bytes per second, an integer >= 0"),
        (["--serial", "true"], "unrecognized arguments: true"),  # a switch: --serial, or leave it out
    ],
)
def test_peer_add_refuses_bad_input_and_writes_nothing(
    zk_hosts: str, zk: KazooClient, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    err = refused(capsys, zk_hosts, "peer", "add", "7", "--cluster-key", "h:2181:/b", *argv)
    assert err.startswith("walship") and message in err
    assert zk.exists(LAYOUT.peer("7")) is None


def test_print_hbase_shell_carries_serial_and_says_how_to_set_bandwidth(
    zk_hosts: str, zk: KazooClient, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(
        capsys, zk_hosts, "peer", "add", "1", "--cluster-key", "h:2181:/b", "--bandwidth", "1000", "--serial",
        "--config", "walship.sink.thrift=127.0.0.1:9091", "--print-hbase-shell",
    )  # fmt: skip
    assert code == 0 and out.startswith("add_peer '1'") and out.strip().endswith("SERIAL => true")
    assert "then run: walship peer adopt 1 && walship peer set 1 --bandwidth 1000\n" in err
    assert zk.exists(LAYOUT.peer("1")) is None


def test_a_subscription_is_serial_unless_told_otherwise(
    zk_hosts: str, zk: KazooClient, capsys: pytest.CaptureFixture[str], source_thrift2: str
) -> None:
    code, _, err = run(capsys, zk_hosts, "subscription", "add", "s1", "--listener", LISTENER)
    assert code == 0, err
    code, _, err = run(capsys, zk_hosts, "subscription", "add", "s2", "--listener", LISTENER, "--no-serial")
    assert code == 0, err
    assert raw_peer(zk, LAYOUT, "s1")[0].serial is True and raw_peer(zk, LAYOUT, "s2")[0].serial is False
    code, out, _ = run(capsys, zk_hosts, "subscription", "show", "s1", "--json")
    assert code == 0 and json.loads(out)["serial"] is True
    code, out, _ = run(capsys, zk_hosts, "subscription", "list", "--json")
    assert code == 0 and {s["name"]: s["serial"] for s in json.loads(out)} == {"s1": True, "s2": False}
    code, out, _ = run(capsys, zk_hosts, "peer", "list", "--json")
    assert code == 0 and {p["peer_id"]: p["serial"] for p in json.loads(out)} == {"s1": True, "s2": False}
    err = refused(capsys, zk_hosts, "subscription", "add", "s3", "--listener", LISTENER, "--no-serial", "x")
    assert "unrecognized arguments: x" in err and zk.exists(LAYOUT.peer("s3")) is None


def test_a_serial_peer_without_a_source_thrift2_is_refused_and_nothing_written(
    zk_hosts: str, zk: KazooClient, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("WALSHIP_SOURCE_THRIFT2", raising=False)
    code, out, err = run(
        capsys, zk_hosts, "peer", "add", "7", "--cluster-key", "h:2181:/b",
        "--config", "walship.sink.thrift=127.0.0.1:9091", "--serial",
    )  # fmt: skip
    assert code == 1 and out == "" and "peer 7 is serial" in err and "--source-thrift2" in err
    assert zk.exists(LAYOUT.peer("7")) is None
    code, _, err = run(capsys, zk_hosts, "subscription", "add", "s7", "--listener", LISTENER)
    assert code == 1 and "--source-thrift2" in err and zk.exists(LAYOUT.peer("s7")) is None
    add(capsys, zk_hosts, "8")
    code, _, err = run(capsys, zk_hosts, "peer", "set", "8", "--serial", "true")
    assert code == 1 and "peer 8 is serial" in err
    assert raw_peer(zk, LAYOUT, "8")[0].serial is False


def test_a_serial_peer_whose_source_does_not_answer_is_refused_and_nothing_written(
    zk_hosts: str, zk: KazooClient, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """hbase:meta is read before a serial peer is written: a source Thrift2 server that does not
    answer leaves no peer half made (serial, without its start)."""
    from walship.zk.localserver import free_port

    monkeypatch.setenv("WALSHIP_SOURCE_THRIFT2", f"127.0.0.1:{free_port()}")
    code, out, err = run(
        capsys, zk_hosts, "peer", "add", "7", "--cluster-key", "h:2181:/b",
        "--config", "walship.sink.thrift=127.0.0.1:9091", "--serial",
    )  # fmt: skip
    assert code == 1 and out == "" and "Thrift2" in err and "Traceback" not in err, err
    assert zk.exists(LAYOUT.peer("7")) is None
    add(capsys, zk_hosts, "8")
    code, _, err = run(capsys, zk_hosts, "peer", "set", "8", "--serial", "true")
    assert code == 1 and "Thrift2" in err
    assert raw_peer(zk, LAYOUT, "8")[0].serial is False
    code, _, err = run(capsys, zk_hosts, "subscription", "add", "s9", "--listener", LISTENER)
    assert code == 1 and zk.exists(LAYOUT.peer("s9")) is None
