"""`walship peer set`: one versioned write of the peer's znode per change, validated like
`peer add`, and picked up by a running tailer at its next rediscovery."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import replace

import pytest
from cluster_state import as_the_cluster_is
from kazoo.client import KazooClient
from replication_helpers import TABLE, Cluster, contents, current_wals_enqueued, make_cluster, raw_peer, tail_in_thread
from waiting import wait_until

from walship.cli import main
from walship.errors import InvalidPeerConfigError
from walship.peer import PeerConfig
from walship.protos import Replication_pb2
from walship.replicate.summary import TailSummary
from walship.sinks.registry import validate_sink_config
from walship.zk import ReplicationPeers, ReplicationQueues, ZnodeLayout, connect, zk_client
from walship.zk.encoding import encode_peer, encode_peer_state
from walship_testing.minicluster import AdminClient
from walship_testing.minicluster.process import MiniClusterProcess

pytestmark = pytest.mark.integration

PARENT = "/hbase-a"
LAYOUT = ZnodeLayout(PARENT)


def run(capsys: pytest.CaptureFixture[str], zk_hosts: str, *argv: str) -> tuple[int, str, str]:
    code = main(["--zk", zk_hosts, "--znode-parent", PARENT, *as_the_cluster_is(zk_hosts, PARENT, argv)])
    out, err = capsys.readouterr()
    return code, out, err


def pb_table_cfs(pb_items: object) -> dict[str, list[str]]:
    return {
        f"{t.table_name.namespace.decode()}:{t.table_name.qualifier.decode()}": [f.decode() for f in t.families]
        for t in pb_items  # type: ignore[attr-defined]
    }


def pb_config(pb: Replication_pb2.ReplicationPeer) -> dict[str, str]:
    return {p.name: p.value for p in pb.configuration}


@pytest.fixture
def peers(zk_hosts: str, zk: KazooClient, capsys: pytest.CaptureFixture[str]) -> ReplicationPeers:
    """Peer 1 (managed, replicates all) and peer 2 (managed, table-cfs t:r), added by the CLI."""
    for argv in (
        ["peer", "add", "1", "--cluster-key", "h:2181:/b", "--config", "walship.sink.thrift=127.0.0.1:9091"],
        [
            "peer",
            "add",
            "2",
            "--cluster-key",
            "h:2181:/c",
            "--table-cfs",
            "t:r",
            "--config",
            "walship.sink.thrift=h:9090",
        ],
    ):
        assert run(capsys, zk_hosts, *argv)[0] == 0
    return ReplicationPeers(zk, LAYOUT)


def test_each_flag_round_trips_with_one_write(
    zk_hosts: str, zk: KazooClient, peers: ReplicationPeers, capsys: pytest.CaptureFixture[str]
) -> None:
    _, version = raw_peer(zk, LAYOUT, "1")

    def set_1(*flags: str) -> tuple[str, Replication_pb2.ReplicationPeer, PeerConfig]:
        nonlocal version
        code, out, err = run(capsys, zk_hosts, "peer", "set", "1", *flags)
        assert code == 0, err
        pb, now = raw_peer(zk, LAYOUT, "1")
        assert now == version + 1, f"{flags}: {now - version} znode writes"  # exactly one write
        version = now
        return out, pb, peers.get("1")

    # table-cfs on a peer that replicates all: replicate_all goes false in the same write, and says so
    out, pb, peer = set_1("--table-cfs", "t1:f1,f2;ns.t2")
    assert "replicate_all: true -> false (table-cfs or namespaces set" in out
    assert "table_cfs: - -> default.t1:f1,f2;ns.t2" in out
    assert pb_table_cfs(pb.table_cfs) == {"default:t1": ["f1", "f2"], "ns:t2": []}
    assert pb.HasField("replicate_all") and pb.replicate_all is False
    assert peer.table_cfs == {"t1": ("f1", "f2"), "ns:t2": None} and peer.replicate_all is False

    out, pb, peer = set_1("--namespaces", "b,a")
    assert out.splitlines()[1:] == ["  namespaces: - -> a,b"]
    assert sorted(pb.namespaces) == [b"a", b"b"] and peer.namespaces == {"a", "b"}
    assert peer.table_cfs == {"t1": ("f1", "f2"), "ns:t2": None}  # flags not given stay as they were

    out, pb, peer = set_1("--table-cfs", "")
    assert "table_cfs: default.t1:f1,f2;ns.t2 -> -" in out
    assert list(pb.table_cfs) == [] and peer.table_cfs is None and peer.namespaces == {"a", "b"}

    out, pb, peer = set_1("--namespaces", "", "--replicate-all", "true")
    assert "replicate_all: false -> true" in out and "namespaces: a,b -> -" in out
    assert list(pb.namespaces) == [] and pb.replicate_all is True and peer.replicate_all is True

    out, pb, peer = set_1("--exclude-table-cfs", "t3:x", "--exclude-namespaces", "y,z")
    assert pb_table_cfs(pb.exclude_table_cfs) == {"default:t3": ["x"]}
    assert sorted(pb.exclude_namespaces) == [b"y", b"z"]
    assert peer.exclude_table_cfs == {"t3": ("x",)} and peer.exclude_namespaces == {"y", "z"}

    out, pb, peer = set_1("--exclude-namespaces", "")
    assert list(pb.exclude_namespaces) == [] and peer.exclude_namespaces is None and peer.exclude_table_cfs

    out, pb, peer = set_1("--config", "a.key=1", "--config", "walship.sink.thrift=127.0.0.1:9092")
    assert "configuration a.key: - -> 1" in out
    assert "configuration walship.sink.thrift: 127.0.0.1:9091 -> 127.0.0.1:9092" in out
    assert pb_config(pb) == {"walship.managed": "true", "walship.sink.thrift": "127.0.0.1:9092", "a.key": "1"}

    out, pb, peer = set_1("--remove-config", "a.key")
    assert out.splitlines()[1:] == ["  configuration a.key: 1 -> -"]
    assert "a.key" not in pb_config(pb) and "a.key" not in peer.configuration

    out, pb, peer = set_1("--exclude-table-cfs", "", "--replicate-all", "false")
    assert "note: peer 1 replicates no table now" in out
    assert pb.replicate_all is False and list(pb.exclude_table_cfs) == []

    code, out, _ = run(capsys, zk_hosts, "peer", "set", "1", "--json", "--namespaces", "ns1")
    assert code == 0 and json.loads(out) == peers.get("1").to_json()
    assert json.loads(out)["namespaces"] == ["ns1"] and raw_peer(zk, LAYOUT, "1")[1] == version + 1

    # set rewrites the peer's znode only: both switches and the other peer are as they were
    assert zk.get(LAYOUT.peer_state("1"))[0] == encode_peer_state(False)
    assert zk.get(LAYOUT.walship_peer_state("1"))[0] == encode_peer_state(True)
    assert peers.get("1").managed and raw_peer(zk, LAYOUT, "2")[1] == 0


@pytest.mark.parametrize(
    ("peer_id", "argv", "message"),
    [
        ("1", ["--table-cfs", "a:b:c:d"], "peer 1: --table-cfs: invalid table-cfs part 'a:b:c:d'"),
        ("1", ["--exclude-table-cfs", "bad table"], "peer 1: --exclude-table-cfs: invalid table 'bad table'"),
        ("1", ["--config", "walship.sink.protocol=nope"], "peer 1: no sink 'nope': walship.sink.protocol"),
        ("1", ["--config", "walship.sink.thrift=nohostport"], "invalid walship.sink.thrift of peer 1"),
        ("1", ["--config", "walship.incompatible=maybe"], "peer 1: walship.incompatible must be one of"),
        ("1", ["--config", "novalue"], "peer 1: invalid --config 'novalue'"),
        ("1", ["--remove-config", "no.such.key"], "peer 1: --remove-config no.such.key: the peer has no such"),
        ("1", ["--remove-config", "walship.managed"], "peer 1: walship.managed cannot be changed by 'peer set'"),
        ("1", ["--config", "walship.managed=false"], "peer 1: walship.managed cannot be changed by 'peer set'"),
        ("1", ["--config", "k=v", "--remove-config", "k"], "peer 1: k is both set (--config) and removed"),
        ("1", ["--replicate-all", "true", "--table-cfs", "t"], "peer 1: table-cfs or namespaces need replicate_all"),
        ("1", ["--replicate-all", "false", "--exclude-namespaces", "x"], "peer 1: exclude lists apply only"),
        ("2", ["--replicate-all", "true"], "peer 2: table-cfs or namespaces need replicate_all false (HBase: clean"),
        ("2", ["--exclude-namespaces", "x"], "peer 2: exclude lists apply only when replicating all tables"),
        ("42", ["--namespaces", "a"], "peer 42 does not exist"),
    ],
)
def test_bad_input_is_refused_and_writes_nothing(
    zk_hosts: str,
    zk: KazooClient,
    peers: ReplicationPeers,
    capsys: pytest.CaptureFixture[str],
    peer_id: str,
    argv: list[str],
    message: str,
) -> None:
    before = {p: zk.get(LAYOUT.peer(p)) for p in ("1", "2")}
    code, out, err = run(capsys, zk_hosts, "peer", "set", peer_id, *argv)
    assert code == 1 and out == ""
    assert message in err and err.count("\n") == 1  # one line, no traceback
    after = {p: zk.get(LAYOUT.peer(p)) for p in ("1", "2")}
    assert [(d, s.version) for d, s in after.values()] == [(d, s.version) for d, s in before.values()]


def test_a_table_on_a_peer_with_exclude_lists_needs_them_cleaned(
    zk_hosts: str, zk: KazooClient, peers: ReplicationPeers, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(capsys, zk_hosts, "peer", "set", "1", "--exclude-namespaces", "x")[0] == 0
    _, version = raw_peer(zk, LAYOUT, "1")
    code, _, err = run(capsys, zk_hosts, "peer", "set", "1", "--table-cfs", "t")
    assert code == 1 and "peer 1: exclude lists apply only when replicating all tables" in err
    assert raw_peer(zk, LAYOUT, "1")[1] == version
    code, out, _ = run(capsys, zk_hosts, "peer", "set", "1", "--table-cfs", "t", "--exclude-namespaces", "")
    assert code == 0 and "replicate_all: true -> false" in out and raw_peer(zk, LAYOUT, "1")[1] == version + 1


def test_no_flag_or_a_bad_boolean_is_a_usage_error(
    zk_hosts: str, zk: KazooClient, peers: ReplicationPeers, capsys: pytest.CaptureFixture[str]
) -> None:
    _, version = raw_peer(zk, LAYOUT, "1")
    for argv in (["peer", "set", "1"], ["peer", "set", "1", "--replicate-all", "maybe"]):
        with pytest.raises(SystemExit) as exc:
            run(capsys, zk_hosts, *argv)
        assert exc.value.code == 1
        err = capsys.readouterr().err
        assert len(err.splitlines()) == 1 and err.startswith("walship peer set: ")  # one line, the command named
        assert "give at least one of --table-cfs" in err or "expected true or false, got 'maybe'" in err
    assert raw_peer(zk, LAYOUT, "1")[1] == version


def test_the_command_as_a_process(zk_hosts: str, zk: KazooClient, peers: ReplicationPeers) -> None:
    # no master at PARENT: the cluster is down, so --offline
    g = [
        sys.executable,
        "-m",
        "walship.cli",
        "--zk",
        zk_hosts,
        "--znode-parent",
        PARENT,
        "peer",
        "set",
        "2",
        "--offline",
    ]
    done = subprocess.run([*g, "--table-cfs", "t:r,l;u"], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["updated peer 2", "  table_cfs: default.t:r -> default.t:r,l;default.u"]
    done = subprocess.run([*g, "--table-cfs", "t::"], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 1 and done.stderr.startswith("walship: peer 2: --table-cfs: invalid")
    assert "Traceback" not in done.stderr
    assert peers.get("2").table_cfs == {"t": ("r", "l"), "u": None}


def test_validation_runs_on_the_merged_config_inside_the_write_loop(
    zk_hosts: str, zk: KazooClient, peers: ReplicationPeers
) -> None:
    """A writer racing `set` makes the versioned write fail; the retry reads the peer again and
    runs the change and the validation on what that writer left."""
    other = connect(zk_hosts)  # a second session, as a second operator's tool
    try:
        racing = ReplicationPeers(other, LAYOUT)
        seen: list[PeerConfig] = []

        def change(current: PeerConfig) -> PeerConfig:
            if not seen:
                racing.update("1", bandwidth=1000)  # lands between our read and our write
            return replace(current, configuration={**current.configuration, "k": "v"})

        def validate(peer: PeerConfig) -> None:
            seen.append(peer)
            validate_sink_config(peer)

        _, version = raw_peer(zk, LAYOUT, "1")
        before, after = peers.modify("1", change, validate=validate)
        assert len(seen) == 2 and seen[1].bandwidth == 1000  # validated again, on the merged peer
        assert before.bandwidth == 1000 and after.bandwidth == 1000 and after.configuration["k"] == "v"
        assert raw_peer(zk, LAYOUT, "1")[1] == version + 2  # the racer's write, then ours

        # a racer leaves a sink setting walship refuses (as a raw znode write from another tool
        # would): the retry's validation sees the merged config and nothing is written
        calls = 0

        def change_and_break(current: PeerConfig) -> PeerConfig:
            nonlocal calls
            calls += 1
            if calls == 1:
                bad = replace(current, configuration={**current.configuration, "walship.sink.protocol": "nope"})
                _, stat = other.get(LAYOUT.peer("1"))
                other.set(LAYOUT.peer("1"), encode_peer(bad), version=stat.version)
            return replace(current, configuration={**current.configuration, "k2": "v2"})

        _, version = raw_peer(zk, LAYOUT, "1")
        with pytest.raises(InvalidPeerConfigError, match="peer 1: no sink 'nope'"):
            peers.modify("1", change_and_break, validate=validate_sink_config)
        assert calls == 2 and raw_peer(zk, LAYOUT, "1")[1] == version + 1  # the racer's write only
        assert "k2" not in peers.get("1").configuration
    finally:
        other.stop()
        other.close()


def test_update_keeps_working_and_cannot_change_management(zk: KazooClient, peers: ReplicationPeers) -> None:
    updated = peers.update("2", bandwidth=7)
    assert updated.bandwidth == 7 and peers.get("2") == updated
    bad = {"walship.managed": "true", "walship.sink.thrift": "x"}
    with pytest.raises(InvalidPeerConfigError, match="invalid walship.sink.thrift of peer 2"):
        peers.update("2", configuration=bad, validate=validate_sink_config)
    with pytest.raises(InvalidPeerConfigError, match="walship.managed cannot be changed by an update"):
        peers.update("2", configuration={})
    with pytest.raises(InvalidPeerConfigError, match="cannot change the peer id or its state"):
        peers.modify("2", lambda p: replace(p, enabled=not p.enabled))
    assert peers.get("2") == updated


# -- a running tailer ----------------------------------------------------------------------------

Factory = Callable[..., MiniClusterProcess]


@pytest.fixture
def abc(minicluster_factory: Factory, zk_hosts: str, capsys: pytest.CaptureFixture[str]) -> tuple[Cluster, Cluster]:
    """Source A (t: r and l both scoped 1) and peer B, peer 1 managed, added by the CLI."""
    a = make_cluster(minicluster_factory, zk_hosts, "A")
    b = make_cluster(minicluster_factory, zk_hosts, "B")
    AdminClient(a.mc.admin).set_scope(TABLE.decode(), "l", 1)
    code = main(["--zk", a.zk_hosts, "--znode-parent", a.parent, "peer", "add", "1", "--cluster-key", b.cluster_key,
                 "--config", f"walship.sink.thrift={b.thrift_address()}"])  # fmt: skip
    assert code == 0, capsys.readouterr().err
    with zk_client(a.zk_hosts) as client:
        queues = ReplicationQueues(client, ZnodeLayout(a.parent))
        wait_until(lambda: current_wals_enqueued(a, queues, "1"), what="A's current WALs in peer 1's queues")
    return a, b


@pytest.fixture
def tailing(abc: tuple[Cluster, Cluster]) -> Iterator[tuple[threading.Event, list[TailSummary], threading.Thread]]:
    """Tail peer 1 of A in a thread (rediscovery every 0.3 s) until the test sets the event."""
    a, _ = abc
    stop = threading.Event()
    thread, out = tail_in_thread(a, duration=120, rediscover=0.3, stop=stop)
    yield stop, out, thread
    stop.set()
    thread.join(timeout=60)


def set_peer(cluster: Cluster, *flags: str) -> None:
    assert main(["--zk", cluster.zk_hosts, "--znode-parent", cluster.parent, "peer", "set", "1", *flags]) == 0


def test_a_running_tailer_picks_up_a_table_cfs_change(
    abc: tuple[Cluster, Cluster], tailing: tuple[threading.Event, list[TailSummary], threading.Thread]
) -> None:
    a, b = abc
    stop, out, thread = tailing
    ta, tb = a.table(), b.table()
    ta.put(b"before", {b"r:q": b"1", b"l:q": b"1"})
    wait_until(lambda: tb.row(b"before") == {b"r:q": b"1", b"l:q": b"1"}, what="both families of 'before' on B")

    set_peer(a, "--table-cfs", "t:r")  # family l is no longer replicated
    # keep writing until a row arrives without its l cell: the tailer has taken the change
    probes: list[bytes] = []

    def picked_up() -> bool:
        row = b"probe-%03d" % len(probes)
        probes.append(row)
        ta.put(row, {b"r:q": row, b"l:q": row})
        return any(tb.row(p) == {b"r:q": p} for p in probes)

    wait_until(picked_up, interval=0.1, what="a row shipped without family l")
    for i in range(20):
        ta.put(b"after-%02d" % i, {b"r:q": b"%d" % i, b"l:q": b"%d" % i})
    wait_until(lambda: all(tb.row(b"after-%02d" % i) for i in range(20)), what="the 20 rows written after the change")
    on_b = contents(b)
    assert all(b"l:q" not in on_b[b"after-%02d" % i] for i in range(20))  # l stopped arriving
    first = next(i for i, p in enumerate(probes) if b"l:q" not in on_b[p])
    assert all(b"l:q" not in on_b[p] for p in probes[first:])  # once taken, the change holds
    assert b"l:q" in on_b[b"before"]

    set_peer(a, "--table-cfs", "", "--replicate-all", "true")  # and back: l arrives again

    def l_again() -> bool:
        ta.put(b"again", {b"r:q": b"x", b"l:q": b"y"})
        return b"l:q" in tb.row(b"again")

    wait_until(l_again, interval=0.1, what="family l replicated again")
    # no position lost or skipped: every r cell written reaches B, with its timestamp
    wait_until(lambda: contents(b, b"r") == contents(a, b"r"), what="every r cell of A on B")
    stop.set()
    thread.join(timeout=60)
    assert out and out[0].status == "ok", out


def test_a_running_tailer_picks_up_a_sink_change(
    abc: tuple[Cluster, Cluster],
    minicluster_factory: Factory,
    zk_hosts: str,
    tailing: tuple[threading.Event, list[TailSummary], threading.Thread],
) -> None:
    a, b = abc
    c = make_cluster(minicluster_factory, zk_hosts, "C")
    stop, out, thread = tailing
    ta = a.table()
    ta.put(b"to-b", {b"r:q": b"1"})
    wait_until(lambda: b.table().row(b"to-b"), what="to-b on B")

    set_peer(a, "--config", f"walship.sink.thrift={c.thrift_address()}")  # same peer, other Thrift servers
    n = 0

    def on_c() -> bool:
        nonlocal n
        n += 1
        ta.put(b"probe-%03d" % n, {b"r:q": b"%d" % n})
        return bool(contents(c))

    wait_until(on_c, interval=0.1, what="the tailer's new sink to write to C")
    ta.put(b"to-c", {b"r:q": b"2"})
    # every row goes to B or to C, none lost at the switch
    wait_until(lambda: set(contents(b)) | set(contents(c)) == set(contents(a, b"r")), what="every row on B or C")
    stop.set()
    thread.join(timeout=60)
    assert out and out[0].status == "ok", out
    assert c.table().row(b"to-c") and not b.table().row(b"to-c")  # the old sink is gone
