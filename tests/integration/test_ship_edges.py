"""Shipping from WALs written here: the current WAL's incomplete tail, edits Thrift1 cannot
express under each ``walship.incompatible`` setting, and a missing WAL."""

from __future__ import annotations

import base64
import json
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import happybase
import pytest
from kazoo.client import KazooClient
from replication_helpers import add_peer, contents, make_cluster

from walship.cli import main
from walship.errors import WalMissingError
from walship.peer import PeerConfig
from walship.protos import WAL_pb2
from walship.replicate import Shipper, WalStore
from walship.replicate.deadletters import replay_dead_letters
from walship.replicate.summary import PeerSummary
from walship.replicate.throttle import CYCLE_S, cell_size
from walship.servername import ServerName
from walship.wal import Cell, CellType, WalKey, WalWriter, build_wal_name
from walship.wal.format import DEFAULT_CODEC, MAGIC, encode_varint
from walship.zk import ReplicationPeers, ReplicationQueues, ZnodeLayout, ensure_cluster_id, register_server, zk_client
from walship.zk.records import ProgressStore
from walship_testing.minicluster import AdminClient
from walship_testing.minicluster.process import MiniClusterProcess

pytestmark = pytest.mark.integration

SERVER = ServerName("rs1.example.com", 16020, 1)
SRC = ZnodeLayout("/src")


@pytest.fixture
def peer_b(minicluster_factory: Callable[..., MiniClusterProcess]) -> MiniClusterProcess:
    b = minicluster_factory("B")
    conn = happybase.Connection(*b.thrift)
    conn.create_table("t", {"r": {"max_versions": 5}})
    conn.close()
    AdminClient(b.admin).set_scope("t", "r", 1)
    return b


def setup_source(
    zk: KazooClient, zk_hosts: str, b: MiniClusterProcess, tmp_path: Path, **config: str
) -> tuple[Path, str]:
    ensure_cluster_id(zk, SRC)
    register_server(zk, SRC, str(SERVER))  # the region server writing these WALs is live
    chroot = zk_hosts.partition("/")[2]
    host, port = b.thrift
    ReplicationPeers(zk, SRC).add(
        PeerConfig(
            "1",
            f"{zk_hosts.partition('/')[0]}:/{chroot}/hbase-b",
            configuration={"walship.sink.thrift": f"{host}:{port}", **config},
        )
    )
    wal = build_wal_name(SERVER, 1_700_000_000_000)
    ReplicationQueues(zk, SRC).add_wal(str(SERVER), wal)
    d = tmp_path / "src" / "WALs" / str(SERVER)
    d.mkdir(parents=True)
    return d / wal, wal


def entry(i: int, cells: list[Cell]) -> tuple[WalKey, list[Cell]]:
    return WalKey(b"0" * 32, b"t", i, 1_700_000_000_000 + i, scopes={b"r": 1}), cells


def put(i: int) -> tuple[WalKey, list[Cell]]:
    return entry(i, [Cell(b"row%d" % i, b"r", b"q", 1000 + i, CellType.Put, b"v%d" % i)])


def shipper(zk: KazooClient, tmp_path: Path) -> Shipper:
    return Shipper(zk, SRC, WalStore(str(tmp_path / "src")))


def rows(b: MiniClusterProcess) -> dict[bytes, dict[bytes, list[tuple[bytes, int]]]]:
    """Every cell on the peer: row -> column -> every version (value, timestamp), newest first."""
    conn = happybase.Connection(*b.thrift)
    t = conn.table("t")
    out = {
        row: {col: t.cells(row, col, versions=5, include_timestamp=True) for col in sorted(data)}
        for row, data in t.scan()
    }
    conn.close()
    return out


def shipped(*ids: int) -> dict[bytes, dict[bytes, list[tuple[bytes, int]]]]:
    """What the peer holds once the puts ``put(i)`` of ``ids`` are applied: value and timestamp."""
    return {b"row%d" % i: {b"r:q": [(b"v%d" % i, 1000 + i)]} for i in ids}


def test_current_wal_incomplete_tail(
    zk: KazooClient, zk_hosts: str, peer_b: MiniClusterProcess, tmp_path: Path
) -> None:
    path, wal = setup_source(zk, zk_hosts, peer_b, tmp_path)
    f = open(path, "wb")  # noqa: SIM115 - the WAL a region server is still writing
    writer = WalWriter(f)
    for i in range(3):
        writer.append(*put(i))
    from walship.wal.writer import encode_cell, encode_key

    k, cells = put(3)
    torn = encode_key(k, 1) + encode_cell(cells[0])
    f.write(torn[:9])  # half an entry: the writer is in the middle of an append
    f.flush()
    complete_end = writer.offset
    s = shipper(zk, tmp_path).ship_peer("1")
    assert s.status == "ok", s.error
    assert rows(peer_b) == shipped(0, 1, 2)
    queues = ReplicationQueues(zk, SRC)
    assert queues.get_position(str(SERVER), "1", wal)[0] == complete_end  # stops before the tail
    assert [w.name for w in queues.wals(str(SERVER), "1")] == [wal]  # still the current WAL
    f.write(torn[9:])  # the append completes
    writer.append(*put(4))
    f.flush()
    s = shipper(zk, tmp_path).ship_peer("1")
    assert rows(peer_b) == shipped(*range(5))
    assert s.totals()["entries_shipped"] == 2
    writer.close()
    f.close()
    s = shipper(zk, tmp_path).ship_peer("1")  # closed with a trailer: shipped and removed
    assert s.queues[0].wals_removed == [wal]
    assert queues.wals(str(SERVER), "1") == []


#: what Thrift1 cannot express: a Delete of one version, a DeleteFamilyVersion
INCOMPATIBLE = [
    Cell(b"row1", b"r", b"q", 1001, CellType.Delete),
    Cell(b"row1", b"r", b"", 1002, CellType.DeleteFamilyVersion),
]


def write_with_incompatible(path: Path) -> None:
    with open(path, "wb") as f, WalWriter(f) as w:
        w.append(*put(1))
        w.append(*entry(2, [INCOMPATIBLE[0]]))
        w.append(*entry(3, [INCOMPATIBLE[1]]))
        w.append(*put(4))


def test_incompatible_fail_stops_the_queue_naming_wal_and_offset(
    zk: KazooClient, zk_hosts: str, peer_b: MiniClusterProcess, tmp_path: Path
) -> None:
    path, wal = setup_source(zk, zk_hosts, peer_b, tmp_path)
    write_with_incompatible(path)
    s = shipper(zk, tmp_path).ship_peer("1")
    assert s.status == "error"
    assert s.error is not None and wal in s.error and "byte offset" in s.error and "Delete" in s.error
    assert rows(peer_b) == {}  # nothing of the batch was applied
    assert ReplicationQueues(zk, SRC).get_position(str(SERVER), "1", wal)[0] == 0  # position kept


def test_incompatible_skip_counts(zk: KazooClient, zk_hosts: str, peer_b: MiniClusterProcess, tmp_path: Path) -> None:
    path, wal = setup_source(zk, zk_hosts, peer_b, tmp_path, **{"walship.incompatible": "skip"})
    write_with_incompatible(path)
    s = shipper(zk, tmp_path).ship_peer("1")
    assert s.status == "ok" and s.totals()["incompatible_skipped"] == 2
    assert s.totals()["entries_shipped"] == 2 and s.totals()["cells_shipped"] == 2  # the two puts
    assert rows(peer_b) == shipped(1, 4)
    assert s.queues[0].wals_removed == [wal]
    # the skipped entries' bytes are not counted as shipped: half of the batch's four entries
    record = ProgressStore(zk, SRC).get("1", str(SERVER), "1")
    assert record is not None and record["bytes_shipped"] == s.totals()["bytes_read"] * 2 // 4


def dead_letter_files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*.jsonl"))


def test_incompatible_deadletter_keeps_them_under_the_wal_root_by_default(
    zk: KazooClient, zk_hosts: str, peer_b: MiniClusterProcess, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path, wal = setup_source(zk, zk_hosts, peer_b, tmp_path, **{"walship.incompatible": "deadletter"})
    write_with_incompatible(path)
    scratch = tmp_path / "scratch"  # a Spark executor's working directory, removed when the app ends
    scratch.mkdir()
    monkeypatch.chdir(scratch)
    s = shipper(zk, tmp_path).ship_peer("1")
    assert s.status == "ok" and s.totals()["deadlettered"] == 2
    assert s.totals()["entries_shipped"] == 2  # the two puts; the dead-lettered deletes were not shipped
    assert list(scratch.iterdir()) == []  # nothing in the process's working directory
    files = dead_letter_files(tmp_path / "src" / "walship-deadletter")
    assert len(files) == 1 and files[0].parts[-4:-1] == ("peer-1", "pending", wal)
    records = [json.loads(line) for line in files[0].read_text().splitlines()]
    assert [r["type"] for r in records] == ["Delete", "DeleteFamilyVersion"]
    assert all(r["wal"] == wal and r["offset"] > 0 for r in records)
    assert base64.b64decode(records[0]["row"]) == b"row1" and records[0]["timestamp"] == 1001
    assert records[0]["cluster_ids"]  # the source's id was added, as for any shipped edit
    uuid.UUID(records[0]["cluster_ids"][-1])
    # the position moved past them only because they are on disk
    assert ReplicationQueues(zk, SRC).wals(str(SERVER), "1") == []


def test_deadletter_dir_takes_an_fsspec_url_and_a_reship_writes_no_duplicate(
    zk: KazooClient, zk_hosts: str, peer_b: MiniClusterProcess, tmp_path: Path
) -> None:
    import fsspec

    url = f"memory://walship-test-{uuid.uuid4().hex}/dead"
    path, wal = setup_source(
        zk, zk_hosts, peer_b, tmp_path, **{"walship.incompatible": "deadletter", "walship.deadletter.dir": url}
    )
    write_with_incompatible(path)
    assert shipper(zk, tmp_path).ship_peer("1").totals()["deadlettered"] == 2
    # a crash after the apply and before the position commit: the batch is shipped again
    ReplicationQueues(zk, SRC).add_wal(str(SERVER), wal, peer_ids=["1"])
    assert shipper(zk, tmp_path).ship_peer("1").totals()["deadlettered"] == 2
    fs = fsspec.filesystem("memory")
    found = [p for p in fs.find(url.removeprefix("memory:/")) if p.endswith(".jsonl")]
    assert len(found) == 1  # the same batch rewrote the same file
    assert len(fs.cat(found[0]).decode().splitlines()) == 2


def test_missing_wal_is_an_error_naming_where_it_looked(
    zk: KazooClient, zk_hosts: str, peer_b: MiniClusterProcess, tmp_path: Path
) -> None:
    _, wal = setup_source(zk, zk_hosts, peer_b, tmp_path)  # the queue names a WAL never written
    s = shipper(zk, tmp_path).ship_peer("1")
    assert s.status == "error" and s.error is not None
    assert f"WAL {wal} not found" in s.error and "oldWALs" in s.error
    with pytest.raises(WalMissingError):
        WalStore(str(tmp_path / "src")).locate(wal)


class ArchivedAtFirstOpen(WalStore):
    """A WAL root where HBase archives the WAL between walship's lookup and its first read (over
    WebHDFS a file is opened by its first read, so the move shows then): the one fault here
    that real HBase cannot be timed to make."""

    def __init__(self, root: str) -> None:
        super().__init__(root)
        self.moved: list[str] = []

    def open(self, location: Any, stats: Any = None) -> Any:
        if not self.moved and not location.archived:
            name = location.path.rsplit("/", 1)[-1]
            archive = Path(self.base) / "oldWALs"
            archive.mkdir(exist_ok=True)
            Path(location.path).rename(archive / name)
            self.moved.append(name)
        return super().open(location, stats)


def test_a_wal_archived_between_lookup_and_read_is_read_from_oldwals_next_pass(
    zk: KazooClient, zk_hosts: str, peer_b: MiniClusterProcess, tmp_path: Path
) -> None:
    path, wal = setup_source(zk, zk_hosts, peer_b, tmp_path)
    with open(path, "wb") as f, WalWriter(f) as w:
        for i in range(3):
            w.append(*put(i))
    store = ArchivedAtFirstOpen(str(tmp_path / "src"))
    first = Shipper(zk, SRC, store).ship_peer("1")
    assert store.moved == [wal]
    assert first.status == "ok", first.error  # no error: the WAL waits for the next pass
    assert first.totals()["entries_shipped"] == 0 and rows(peer_b) == {}
    assert ReplicationQueues(zk, SRC).get_position(str(SERVER), "1", wal)[0] == 0
    second = Shipper(zk, SRC, store).ship_peer("1")  # found in oldWALs/, read from its position
    assert second.status == "ok", second.error
    assert rows(peer_b) == shipped(0, 1, 2)
    assert second.queues[0].wals_removed == [wal]


def test_corrupt_wal_stops_the_queue_with_file_and_offset(
    zk: KazooClient, zk_hosts: str, peer_b: MiniClusterProcess, tmp_path: Path
) -> None:
    path, wal = setup_source(zk, zk_hosts, peer_b, tmp_path)
    with open(path, "wb") as f, WalWriter(f) as w:
        w.append(*put(1))
        second = w.offset
        w.append(*put(2))
        w.append(*put(3))
    data = bytearray(path.read_bytes())
    data[second + 1 : second + 5] = b"\xff\xff\xff\xff"
    path.write_bytes(bytes(data))
    s = shipper(zk, tmp_path).ship_peer("1")
    assert s.status == "error" and s.error is not None
    assert f"byte offset {second}" in s.error and wal in s.error
    assert rows(peer_b) == shipped(1)  # what came before was shipped, nothing after
    assert ReplicationQueues(zk, SRC).get_position(str(SERVER), "1", wal)[0] == second


def sink_over_thrift2(zk: KazooClient, b: MiniClusterProcess, **changes: Any) -> None:
    """Peer 1's sink switched to B's Thrift2 server (which applies every delete exactly), with
    ``changes`` to other fields of the peer."""
    peers = ReplicationPeers(zk, SRC)
    host, port = b.thrift2
    sink = {"walship.sink.protocol": "thrift2", "walship.sink.thrift2": f"{host}:{port}"}
    peers.update("1", configuration={**peers.get("1").configuration, **sink}, **changes)


def test_dead_letters_are_listed_and_replayed_exactly(
    zk: KazooClient, zk_hosts: str, peer_b: MiniClusterProcess, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path, wal = setup_source(zk, zk_hosts, peer_b, tmp_path, **{"walship.incompatible": "deadletter"})
    write_with_incompatible(path)
    assert shipper(zk, tmp_path).ship_peer("1").totals()["deadlettered"] == 2
    flags = ["--zk", zk_hosts, "--znode-parent", SRC.parent, "--wal-root", str(tmp_path / "src")]
    capsys.readouterr()
    assert main([*flags, "deadletter", "list", "--peer", "1", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [(d["wal"], d["row"], d["type"]) for d in listed] == [
        (wal, "row1", "Delete"),
        (wal, "row1", "DeleteFamilyVersion"),
    ]
    assert all(d["offset"] > 0 and "Thrift1 cannot express" in d["reason"] for d in listed)
    # the Thrift1 sink still cannot apply them: the replay says so and keeps every one
    assert main([*flags, "deadletter", "replay", "--peer", "1"]) == 1
    err = capsys.readouterr().err
    assert "not replayed" in err and "Thrift1" in err and "nothing lost" in err
    assert main([*flags, "deadletter", "list", "--peer", "1", "--json"]) == 0
    assert len(json.loads(capsys.readouterr().out)) == 2
    # the Thrift2 sink can: on B each delete masks exactly the version it names
    b = happybase.Connection(*peer_b.thrift)
    t = b.table("t")
    t.put(b"row1", {b"r:q": b"older"}, timestamp=1000)
    t.put(b"row1", {b"r:z": b"z1"}, timestamp=1001)
    t.put(b"row1", {b"r:z": b"z2"}, timestamp=1002)
    b.close()
    assert rows(peer_b)[b"row1"] == {b"r:q": [(b"v1", 1001), (b"older", 1000)], b"r:z": [(b"z2", 1002), (b"z1", 1001)]}
    sink_over_thrift2(zk, peer_b)
    assert main([*flags, "deadletter", "replay", "--peer", "1"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["cells_applied"] == 2 and len(report["files_replayed"]) == 1
    # the Delete of r:q at 1001 and the DeleteFamilyVersion of r at 1002, nothing more
    assert rows(peer_b) == {b"row1": {b"r:q": [(b"older", 1000)], b"r:z": [(b"z1", 1001)]}, **shipped(4)}
    assert main([*flags, "deadletter", "list", "--peer", "1", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == []  # nothing pending; kept under replayed/
    assert len(list((tmp_path / "src" / "walship-deadletter" / "peer-1" / "replayed").rglob("*.jsonl"))) == 1


def test_a_dead_letter_replay_keeps_to_the_peers_bandwidth(
    zk: KazooClient, zk_hosts: str, peer_b: MiniClusterProcess, tmp_path: Path
) -> None:
    path, _ = setup_source(zk, zk_hosts, peer_b, tmp_path, **{"walship.incompatible": "deadletter"})
    write_with_incompatible(path)
    second = build_wal_name(SERVER, 1_700_000_000_001)  # the server's next WAL, with two of its own
    ReplicationQueues(zk, SRC).add_wal(str(SERVER), second)
    write_with_incompatible(path.parent / second)
    assert shipper(zk, tmp_path).ship_peer("1").totals()["deadlettered"] == 4
    # each file is one batch of a Delete and a DeleteFamilyVersion; a bandwidth of half that
    # size a second holds the second file back for twenty 100 ms cycles from the first's start
    size = sum(cell_size(c) for c in INCOMPATIBLE)
    sink_over_thrift2(zk, peer_b, bandwidth=size // 2)
    t0 = time.monotonic()
    report = replay_dead_letters(zk, SRC, WalStore(str(tmp_path / "src")), "1")
    elapsed = time.monotonic() - t0
    assert report.cells_applied == 4 and len(report.files_replayed) == 2 and report.files_left == []
    assert elapsed >= 2.0 - CYCLE_S, elapsed
    assert 0 < report.to_json()["throttled_s"] <= elapsed


def test_an_unknown_sink_protocol_is_refused_before_the_peer_is_written(
    zk: KazooClient, zk_hosts: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["--zk", zk_hosts, "--znode-parent", SRC.parent, "peer", "add", "9", "--cluster-key", "h:2181:/hbase",
                 "--config", "walship.sink.protocol=nope"])  # fmt: skip
    assert code == 1
    err = capsys.readouterr().err
    assert "peer 9" in err and "no sink 'nope'" in err and "thrift1" in err
    assert not ReplicationPeers(zk, SRC).exists("9")


def test_a_rolled_wal_is_finished_only_once_closed(
    zk: KazooClient, zk_hosts: str, peer_b: MiniClusterProcess, tmp_path: Path
) -> None:
    """HBase enqueues the new WAL before the old one gets its last entries and trailer: a WAL
    followed by another is not finished until it has a trailer, is archived, its server is
    gone, or it stopped growing for the grace period while the next WAL has entries."""
    path, wal = setup_source(zk, zk_hosts, peer_b, tmp_path)
    old = open(path, "wb")  # noqa: SIM115 - the rolled WAL, still being written
    w_old = WalWriter(old)
    w_old.append(*put(1))
    old.flush()
    newer = build_wal_name(SERVER, 1_700_000_000_500)  # the roll: the new WAL is enqueued first
    ReplicationQueues(zk, SRC).add_wal(str(SERVER), newer)
    new_path = path.parent / newer
    with open(new_path, "wb") as f:
        WalWriter(f).sync()
    s = shipper(zk, tmp_path).ship_peer("1")
    assert s.status == "ok" and s.queues[0].wals_removed == []  # not closed yet: kept
    w_old.append(*put(2))  # the last entries of the old WAL land after the roll
    old.flush()
    w_old.close()  # and its trailer
    old.close()
    s = shipper(zk, tmp_path).ship_peer("1")
    assert s.queues[0].wals_removed == [wal]
    assert rows(peer_b) == shipped(1, 2)  # nothing lost


def test_a_rolled_wal_without_trailer_is_finished_after_the_grace_or_when_its_server_is_gone(
    zk: KazooClient, zk_hosts: str, peer_b: MiniClusterProcess, tmp_path: Path
) -> None:
    path, wal = setup_source(zk, zk_hosts, peer_b, tmp_path, **{"walship.wal.close-grace": "3600"})
    with open(path, "wb") as f:
        w = WalWriter(f)
        w.append(*put(1))  # never closed: the writer died before its trailer
    newer = build_wal_name(SERVER, 1_700_000_000_500)
    ReplicationQueues(zk, SRC).add_wal(str(SERVER), newer)
    with open(path.parent / newer, "wb") as f, WalWriter(f) as w2:
        w2.append(*put(2))
    shipper(zk, tmp_path).ship_peer("1")
    queues = ReplicationQueues(zk, SRC)
    assert wal in {w.name for w in queues.wals(str(SERVER), "1")}  # within the grace: kept
    peer = ReplicationPeers(zk, SRC).get("1")
    ReplicationPeers(zk, SRC).update("1", configuration={**peer.configuration, "walship.wal.close-grace": "0"})
    s = shipper(zk, tmp_path).ship_peer("1")
    assert wal in s.queues[0].wals_removed  # unchanged past the grace while the next WAL has entries
    assert rows(peer_b) == shipped(1, 2)


def test_a_dead_servers_current_wal_is_finished(
    zk: KazooClient, zk_hosts: str, peer_b: MiniClusterProcess, tmp_path: Path
) -> None:
    path, wal = setup_source(zk, zk_hosts, peer_b, tmp_path)
    with open(path, "wb") as f:
        WalWriter(f).append(*put(1))  # no trailer: the server crashed
    s = shipper(zk, tmp_path).ship_peer("1")
    assert s.queues[0].wals_removed == []  # its server is live: it may still grow
    zk.delete(SRC.live_server(str(SERVER)))  # the server's ephemeral znode goes
    s = shipper(zk, tmp_path).ship_peer("1")
    assert s.queues[0].wals_removed == [wal] and rows(peer_b) == shipped(1)


def test_close_grace_must_be_seconds(
    zk: KazooClient, zk_hosts: str, peer_b: MiniClusterProcess, tmp_path: Path
) -> None:
    setup_source(zk, zk_hosts, peer_b, tmp_path, **{"walship.wal.close-grace": "soon"})
    s = shipper(zk, tmp_path).ship_peer("1")
    assert s.status == "error" and "walship.wal.close-grace must be a finite number of seconds >= 0, got 'soon'" in (
        s.error or ""
    )


def test_the_wal_root_may_be_any_fsspec_url(
    zk: KazooClient, zk_hosts: str, peer_b: MiniClusterProcess, tmp_path: Path
) -> None:
    """WALs read through fsspec: here its in-memory file system, as HDFS would be."""
    import fsspec

    local, wal = setup_source(zk, zk_hosts, peer_b, tmp_path)
    root = f"memory://walship-{uuid.uuid4().hex[:8]}/hbase"
    fs = fsspec.filesystem("memory")
    with fs.open(f"{root}/WALs/{SERVER}/{wal}", "wb") as f, WalWriter(f) as w:
        w.append(*put(1))
        w.append(*put(2))
    s = Shipper(zk, SRC, WalStore(root)).ship_peer("1")
    assert s.status == "ok", s.error
    assert rows(peer_b) == shipped(1, 2) and s.queues[0].wals_removed == [wal]
    local.write_bytes(b"")
    assert WalStore(f"file://{tmp_path / 'src'}").locate(wal).path == str(local)  # file:// URLs too


def test_a_wal_walship_cannot_read_stops_its_queue_naming_file_and_setting_and_others_go_on(
    zk: KazooClient, zk_hosts: str, peer_b: MiniClusterProcess, tmp_path: Path
) -> None:
    path, wal = setup_source(zk, zk_hosts, peer_b, tmp_path)
    head = WAL_pb2.WALHeader(
        has_compression=False, has_tag_compression=False, writer_cls_name="ProtobufLogWriter",
        cell_codec_cls_name=DEFAULT_CODEC, encryption_key=b"wrapped key",
    ).SerializeToString()  # fmt: skip
    path.write_bytes(MAGIC + encode_varint(len(head)) + head + b"\x00" * 64)  # an encrypted WAL
    other = ServerName("rs2.example.com", 16020, 1)
    register_server(zk, SRC, str(other))
    wal2 = build_wal_name(other, 1_700_000_000_000)
    ReplicationQueues(zk, SRC).add_wal(str(other), wal2)
    d = tmp_path / "src" / "WALs" / str(other)
    d.mkdir(parents=True)
    with open(d / wal2, "wb") as f, WalWriter(f) as w:
        w.append(*put(7))
    s = shipper(zk, tmp_path).ship_peer("1")
    by_server = {q.server: q for q in s.queues}
    bad, good = by_server[str(SERVER)], by_server[str(other)]
    assert bad.status == "error" and bad.error is not None
    assert wal in bad.error and "encrypted" in bad.error and "hbase.regionserver.wal.encryption" in bad.error
    assert ReplicationQueues(zk, SRC).get_position(str(SERVER), "1", wal)[0] == 0  # nothing skipped
    assert good.status == "shipped" and rows(peer_b) == shipped(7)


def test_a_server_that_dies_while_its_wal_is_read_loses_nothing(
    minicluster_factory: Callable[..., MiniClusterProcess], zk_hosts: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The server writes more and dies after the pass read its WAL to the end, before the pass
    decides whether the WAL is finished: the WAL stays in the queue (it was live when the read
    began) and the next pass ships what was written after the read."""
    from replication_helpers import add_peer, contents, make_cluster, ship

    from walship.replicate.planner import Planner

    a = make_cluster(minicluster_factory, zk_hosts, "A")
    b = make_cluster(minicluster_factory, zk_hosts, "B")
    add_peer(a, b)
    t = a.table()
    t.put(b"row-before", {b"r:q": b"1"})
    admin = AdminClient(a.mc.admin)
    holder = next(rs["name"] for rs in admin.info()["regionservers"] if rs["alive"] and rs["regions"])
    original = Planner.wal_finished
    done: list[str] = []

    def late_writes_then_crash(self: Planner, queue: Any, *args: Any, **kwargs: Any) -> str | None:
        if queue.server == holder and not done:
            done.append(holder)
            t.put(b"row-late", {b"r:q": b"2"})  # past what the read saw
            admin.abort_rs(holder)
        return original(self, queue, *args, **kwargs)

    monkeypatch.setattr(Planner, "wal_finished", late_writes_then_crash)
    ship(a)
    assert done == [holder]
    monkeypatch.setattr(Planner, "wal_finished", original)
    ship(a)
    assert b"row-late" in contents(b, b"r")
    assert contents(b, b"r") == contents(a, b"r")


def test_nothing_after_a_batch_the_peer_refuses_reaches_it_while_batches_queue_behind_it(
    minicluster_factory: Callable[..., MiniClusterProcess], zk_hosts: str
) -> None:
    """Batches of one entry, each applied in the background and the next queued behind it: the
    peer refuses one (its table is not there), so the batches queued behind it are not applied,
    and the queue stops at the entry before it; once the table is there, the next pass ships
    the rest, in order."""
    a = make_cluster(minicluster_factory, zk_hosts, "A", regionservers=1)  # one queue: both tables' edits
    b = make_cluster(minicluster_factory, zk_hosts, "B")
    add_peer(a, b)
    a.conn().create_table("gone", {"r": {}})
    AdminClient(a.mc.admin).set_scope("gone", "r", 1)
    table = a.table()
    for i in range(40):
        table.put(b"row%02d" % i, {b"r:q": b"v%d" % i})
    a.conn().table("gone").put(b"refused", {b"r:q": b"x"})
    for i in range(40, 80):
        table.put(b"row%02d" % i, {b"r:q": b"v%d" % i})

    def ship_one_entry_batches() -> PeerSummary:
        with (
            zk_client(a.zk_hosts) as client,
            Shipper(client, ZnodeLayout(a.parent), WalStore(a.mc.wal_root), batch_entries=1) as shipper,
        ):
            return shipper.ship_peer("1")

    summary = ship_one_entry_batches()
    assert summary.status == "error" and "gone" in (summary.error or ""), summary
    assert sorted(contents(b)) == [b"row%02d" % i for i in range(40)]

    b.conn().create_table("gone", {"r": {}})
    assert ship_one_entry_batches().status == "ok"
    assert contents(b) == contents(a, b"r") and len(contents(b)) == 80
    assert b.conn().table("gone").row(b"refused") == {b"r:q": b"x"}
