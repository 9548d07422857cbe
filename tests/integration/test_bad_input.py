"""Bad input never loses or damages anything: every refusal is one line that names the bad
thing, exit code 1, no traceback, and ZooKeeper and the WAL root byte-identical afterwards.
Against a real ZooKeeper and a WAL root on disk; the cases the CLI fuzz run found, then a
property-based run over every subcommand with generated bad values."""

from __future__ import annotations

import hashlib
import os
import re
import socket
import string
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from cluster_state import offline
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kazoo.client import KazooClient

from walship.cli import main
from walship.peer import PeerConfig
from walship.servername import ServerName
from walship.wal import Cell, CellType, WalKey, WalWriter, build_wal_name
from walship.zk import ReplicationPeers, ReplicationQueues, ZnodeLayout, ensure_cluster_id, register_server

pytestmark = pytest.mark.integration

SRC = ZnodeLayout("/src")
SERVER = ServerName("rs1.example.com", 16020, 1)
LONG = "x" * 10_000

Snapshot = tuple[dict[str, bytes], dict[str, str]]


def _write_wal(path: Path, n: int) -> None:
    with open(path, "wb") as f, WalWriter(f) as w:
        for i in range(n):
            key = WalKey(b"0" * 32, b"t", i + 1, 1_700_000_000_000 + i, scopes={b"r": 1})
            w.append(key, [Cell(b"row%d" % i, b"r", b"q", 1000 + i, CellType.Put, b"v")])


@pytest.fixture
def world(zk: KazooClient, zk_hosts: str, tmp_path: Path) -> Iterator[tuple[list[str], Callable[[], Snapshot]]]:
    """A source with a peer, a queued WAL and an old archived one no queue holds (which any
    cleaner run with a TTL it understands keeps): the global flags, and a snapshot of the whole
    state (every znode of the test's chroot and every file of the WAL root)."""
    root = tmp_path / "wal"
    (root / "WALs" / str(SERVER)).mkdir(parents=True)
    (root / "oldWALs").mkdir()
    ensure_cluster_id(zk, SRC)
    register_server(zk, SRC, str(SERVER))
    ReplicationPeers(zk, SRC).add(
        PeerConfig("1", "127.0.0.1:2181:/peer", configuration={"walship.sink.thrift": "127.0.0.1:1"})
    )
    current = build_wal_name(SERVER, 1_700_000_000_000)
    ReplicationQueues(zk, SRC).add_wal(str(SERVER), current)
    _write_wal(root / "WALs" / str(SERVER) / current, 3)
    old = root / "oldWALs" / build_wal_name(SERVER, 1_600_000_000_000)
    _write_wal(old, 2)
    os.utime(old, (1_600_000_000, 1_600_000_000))

    def snapshot() -> Snapshot:
        nodes: dict[str, bytes] = {}
        stack = ["/"]
        while stack:
            path = stack.pop()
            data, _ = zk.get(path)
            nodes[path] = data
            stack.extend(f"{path.rstrip('/')}/{c}" for c in zk.get_children(path))
        files = {
            str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() for p in root.rglob("*") if p.is_file()
        }
        return nodes, files

    flags = ["--zk", zk_hosts, "--znode-parent", SRC.parent, "--wal-root", str(root)]
    yield flags, snapshot


def run(capsys: pytest.CaptureFixture[str], argv: list[str]) -> tuple[int, list[str]]:
    """``walship argv`` in this process: its exit code and its stderr lines. No cluster runs
    here: a command that changes peers is ``--offline``."""
    capsys.readouterr()
    try:
        code = main(offline(argv))
    except SystemExit as exc:  # argparse
        code = int(exc.code or 0)
    return code, capsys.readouterr().err.splitlines()


def refused(capsys: pytest.CaptureFixture[str], argv: list[str], *names: str) -> str:
    """Run ``argv``; assert exit 1 and one line, no traceback, naming each of ``names``."""
    code, lines = run(capsys, argv)
    assert code == 1, (argv[-4:], code, lines)
    assert len(lines) == 1, lines
    line = lines[0]
    assert line.startswith("walship") and "Traceback" not in line, line
    assert len(line) < 600, f"a long input is shortened: {len(line)} characters"
    for name in names:
        assert name in line, (name, line)
    return line


# -- damage ------------------------------------------------------------------------------------


@pytest.mark.parametrize("ttl", ["nan", "inf", "1e400", "-1", "-inf"])
def test_clean_refuses_a_ttl_it_cannot_compare_and_deletes_nothing(
    world: tuple[list[str], Callable[[], Snapshot]], capsys: pytest.CaptureFixture[str], ttl: str
) -> None:
    flags, snapshot = world
    before = snapshot()
    refused(capsys, [*flags, "clean", "--ttl", ttl], "--ttl")
    assert snapshot() == before
    code, _ = run(capsys, [*flags, "clean", "--ttl", "0", "--dry-run"])  # a TTL it understands would delete it
    assert code == 0


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["--config", "walship.sink.thrift="], "walship.sink.thrift"),
        (["--remove-config", "walship.sink.thrift"], "walship.sink.thrift"),
        (["--config", "walship.sink.protocol=thrift2"], "walship.sink.thrift2"),
        (["--config", "walship.wal.close-grace=abc"], "walship.wal.close-grace"),
        (["--config", "walship.wal.close-grace=nan"], "walship.wal.close-grace"),
        (["--config", "walship.wal.close-grace=-5"], "walship.wal.close-grace"),
        (["--config", "walship.deadletter.dir=bogus://x"], "walship.deadletter.dir"),
        (["--table-cfs", "t:"], "t:"),
        (["--table-cfs", "t:r,,l"], "t:r,,l"),
        (["--namespaces", "a/b"], "a/b"),
        (["--namespaces", "a,,b"], "a,,b"),
        (["--namespaces", ","], "--namespaces"),
        (["--config", "walship.="], "walship."),
        (["--config", "walship.no-such-key=1"], "walship.no-such-key"),
        (["--config", "walship.incompatible="], "walship.incompatible"),
    ],
)
def test_peer_set_writes_nothing_a_peer_cannot_work_with(
    world: tuple[list[str], Callable[[], Snapshot]], capsys: pytest.CaptureFixture[str], args: list[str], named: str
) -> None:
    flags, snapshot = world
    before = snapshot()
    refused(capsys, [*flags, "peer", "set", "1", *args], named)
    assert snapshot() == before


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["2", "--cluster-key", "h:2181:/x:extra"], "h:2181:/x:extra"),
        (["2", "--cluster-key", "127.0.0.1:2181:/.."], "127.0.0.1:2181:/.."),
        ([LONG, "--cluster-key", "127.0.0.1:2181:/p"], "10,000 characters"),
        (["2", "--cluster-key", "127.0.0.1:2181:/p", "--config", "a=b"], "walship.sink.thrift"),
        (["2", "--cluster-key", "127.0.0.1:2181:/p", "--config", "walship.sink.thrift=h:1", "--table-cfs", "t:"], "t:"),
        (["2", "--cluster-key", "127.0.0.1:2181:/p", "--config", "walship.sink.thrift=h:1", "--config", "walship.x=1"], "walship.x"),
    ],
)  # fmt: skip
def test_peer_add_refuses_what_cannot_ship(
    world: tuple[list[str], Callable[[], Snapshot]], capsys: pytest.CaptureFixture[str], args: list[str], named: str
) -> None:
    flags, snapshot = world
    before = snapshot()
    refused(capsys, [*flags, "peer", "add", *args], named)
    assert snapshot() == before


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["--start-time", "99999999999999999999999"], "--start-time"),
        (["--start-time", "10000-01-01T00:00:00Z"], "--start-time"),
        (["--filter", ""], "--filter"),
    ],
)
def test_subscription_add_is_all_or_nothing(
    world: tuple[list[str], Callable[[], Snapshot]],
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    args: list[str],
    named: str,
) -> None:
    flags, snapshot = world
    before = snapshot()
    refused(capsys, [*flags, "subscription", "add", "s1", "--parquet", str(tmp_path / "log"), *args], named)
    assert snapshot() == before


def test_subscription_add_refuses_unusable_targets(
    world: tuple[list[str], Callable[[], Snapshot]], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    flags, snapshot = world
    a_file = tmp_path / "a-file"
    a_file.write_text("x")
    before = snapshot()
    for target in ("file:///proc/x", "/dev/null/x", str(a_file), "bogus://x"):
        refused(capsys, [*flags, "subscription", "add", "s1", "--parquet", target], "--parquet")
    assert snapshot() == before


# -- tracebacks, hangs and silent successes ------------------------------------------------------


@pytest.fixture
def busy_port() -> Iterator[int]:
    with socket.socket() as s:
        s.bind(("0.0.0.0", 0))
        s.listen(1)
        yield s.getsockname()[1]


def test_each_found_case_is_one_line_and_changes_nothing(
    world: tuple[list[str], Callable[[], Snapshot]],
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    busy_port: int,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    flags, snapshot = world
    zk_flags = flags[:4]
    before = snapshot()
    for size in (0, 5, 100):
        (tmp_path / f"f{size}").write_bytes(b"PWAL"[:size] + bytes(max(0, size - 4)))
    cases: list[tuple[list[str], tuple[str, ...]]] = [
        (["wal", "dump", str(tmp_path)], ("a folder",)),
        (["wal", "dump", ".."], ("..",)),
        (["wal", "dump", "file://"], ("file://",)),
        (["wal", "dump", "/" + LONG], ("10,001 characters",)),
        (["wal", "dump", "s3://bucket/x"], ("s3://",)),
        (["wal", "dump", "bogus://x"], ("bogus",)),
        (["wal", "dump", "/proc/self/mem"], ("/proc/self/mem",)),
        (["wal", "dump", str(tmp_path / "f0")], ("0 bytes",)),
        (["wal", "dump", str(tmp_path / "f5")], ("f5",)),
        (["wal", "dump", str(tmp_path / "f100")], ("f100",)),
        (["--zk", "127.0.0.1:99999", "peer", "list"], ("--zk", "99999")),
        ([*zk_flags[:2], "--znode-parent", "/src/../other", "peer", "list"], ("--znode-parent",)),
        ([*zk_flags, "--wal-root", "bogus://x", "status"], ("--wal-root", "bogus")),
        ([*zk_flags, "--wal-root", str(tmp_path / "f5"), "status"], ("f5",)),
        ([*flags, "ship", "--peer", "1", "--lock-wait", "nan"], ("--lock-wait",)),
        ([*flags, "ship", "--peer", "1", "--lock-wait", "inf"], ("--lock-wait",)),
        ([*flags, "ship", "--peer", "1", "--lock-wait", "1e309"], ("--lock-wait",)),
        ([*flags, "ship", "--peer", "1", "--parallel", "0"], ("--parallel", "1 to 64")),
        ([*flags, "ship", "--peer", "1", "--parallel", "65"], ("--parallel", "1 to 64")),
        ([*flags, "--source-thrift2", "127.0.0.1:1", "scope", "audit", "--peer", "1"], ("127.0.0.1:1",)),
        ([*flags, "--source-thrift2", "127.0.0.1:1", "scope", "enforce", "--peer", "1"], ("127.0.0.1:1",)),
        ([*flags, "verify", "--peer", "1", "--versions", "99999999999999999999999"], ("--versions",)),
        ([*flags, "verify", "--peer", "1", "--report", "s3://bucket/x"], ("--report",)),
        ([*flags, "verify", "--peer", "1"], ("walship peer set 1",)),
        ([*flags, "copy", "--peer", "1", "--until", "yesterday"], ("--until", "yesterday")),
        ([*flags, "copy", "--peer", "1"], ("walship peer set 1",)),
        ([*flags, "--source-thrift2", "127.0.0.1:1", "copy", "--peer", "9"], ("peer 9",)),
        ([*flags, "peer", "add", "3", "--cluster-key", "h:2181:/b", "--print-hbase-shell"], ("walship.sink.thrift",)),
        (["minicluster", "roll", "--admin", LONG], ("10,000 characters",)),
        (["minicluster", "roll", "--admin", "127.0.0.1:1", ""], ("server name",)),
        ([*flags, "metrics", "serve", "--port", str(busy_port)], (str(busy_port),)),
        ([*flags, "metrics", "serve", "--port", "0", "--host", "no-such-host.invalid"], ("no-such-host.invalid",)),
        ([*flags, "metrics", "serve", "--peer", "nonexistent", "--port", "0"], ("nonexistent",)),
        ([*flags, "tail", "--peer", "1", "--duration", "inf"], ("--duration",)),
        ([*flags, "tail", "--peer", "1", "--duration", "-1"], ("--duration",)),
        ([*flags, "tail", "--peer", "1", "--duration", "nan"], ("--duration",)),
        ([*flags, "tail", "--peer", "1", "--gather", "-0.1"], ("--gather",)),
        (["--zk", "127.0.0.1:1", "--zk-timeout", "5", "peer", "list"], ("127.0.0.1:1",)),
    ]
    for argv, names in cases:
        refused(capsys, argv, *names)
    monkeypatch.setenv("WALSHIP_WAL_ROOT", "bogus://x")
    refused(capsys, [*zk_flags, "status"], "WALSHIP_WAL_ROOT")
    monkeypatch.setenv("WALSHIP_ZK", "127.0.0.1:99999")
    refused(capsys, ["peer", "list"], "WALSHIP_ZK")
    assert snapshot() == before


# -- every subcommand, generated bad values ----------------------------------------------------------

#: Values no flag of its kind takes.
BAD_NUMBERS = st.sampled_from(["nan", "inf", "-inf", "1e400", "-1", "1e309", "", "abc", "0x10", "99999999999999999999"])
BAD_TEXT = st.one_of(
    st.sampled_from(["", ",", "..", "/", "a/b", "bogus://x", "s3://b/x", "\x00", LONG, "t:r,,l", "-"]),
    st.text(alphabet=string.punctuation + " \t", min_size=1, max_size=20),
)


def _not(pattern: str) -> Callable[[str], bool]:
    """Keeps a generated value only when it is not a valid one of its kind."""
    valid = re.compile(pattern)
    return lambda v: not valid.fullmatch(v)


def _commands(flags: list[str]) -> st.SearchStrategy[list[str]]:
    """A subcommand with one bad value where it takes a number, an id, a name or a URL."""
    number = BAD_NUMBERS
    text = BAD_TEXT
    ident = BAD_TEXT.filter(_not(r"[A-Za-z0-9_.]+"))  # peer ids, families, namespaces
    parent = BAD_TEXT.filter(_not(r"(/[^/\x00-\x1f]+)+"))
    # HBase's family names: no control characters, '\\' or '/', no leading '.' (a ':' is not
    # generated: "t:a:b" is the valid namespace:table:family form)
    family = st.one_of(
        st.sampled_from(["", ".hidden", "a/b", "a\\b", "a\x01b", "r,,l", "r,"]),
        st.text(alphabet="/\\\x01\x7f", min_size=1, max_size=8),
    )
    return st.one_of(
        number.map(lambda v: [*flags, "clean", "--ttl", v]),
        number.map(lambda v: [*flags, "clean", "--disabled-peer-limit", v]),
        number.map(lambda v: [*flags, "ship", "--peer", "1", "--lock-wait", v]),
        number.map(lambda v: [*flags, "ship", "--peer", "1", "--batch-bytes", v]),
        number.map(lambda v: [*flags, "tail", "--peer", "1", "--duration", v]),
        number.map(lambda v: [*flags, "tail", "--peer", "1", "--gather", v]),
        number.map(lambda v: [*flags, "wait-drained", "--peer", "1", "--timeout", v]),
        number.map(lambda v: [*flags, "metrics", "serve", "--port", v]),
        number.map(lambda v: [*flags, "verify", "--peer", "1", "--versions", v]),
        number.map(lambda v: [*flags, "subscription", "add", "s1", "--listener", "m:f", "--threads", v]),
        ident.map(lambda v: [*flags, "peer", "add", v, "--cluster-key", "127.0.0.1:2181:/p",
                            "--config", "walship.sink.thrift=h:1"]),
        text.map(lambda v: [*flags, "peer", "add", "2", "--cluster-key", v, "--config", "walship.sink.thrift=h:1"]),
        text.map(lambda v: [*flags, "peer", "set", "1", "--config", f"walship.sink.thrift={v}"]),
        family.map(lambda v: [*flags, "peer", "set", "1", "--table-cfs", f"t:{v}"]),
        ident.map(lambda v: [*flags, "peer", "set", "1", "--namespaces", f"{v},ns"]),
        text.map(lambda v: [*flags, "peer", "set", "1", "--config", f"walship.wal.close-grace={v}"]),
        text.map(lambda v: [*flags, "subscription", "add", "s1", "--parquet", f"/dev/null/x{v}"]),
        text.map(lambda v: [*flags, "replay", "--peer", "1", "--from", v, "--to", "2030-01-01T00:00:00Z"]),
        text.map(lambda v: [*flags, "copy", "--peer", "1", "--until", v]),
        ident.map(lambda v: [*flags, "copy", "--peer", v]),
        text.map(lambda v: ["--zk", v, "peer", "list"]),
        parent.map(lambda v: [*flags[:2], "--znode-parent", v, "peer", "list"]),
        text.map(lambda v: [*flags[:4], "--wal-root", v + "://x", "status"]),
    )  # fmt: skip


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_every_subcommand_refuses_generated_bad_values_in_one_line_changing_nothing(
    world: tuple[list[str], Callable[[], Snapshot]], capsys: pytest.CaptureFixture[str], data: st.DataObject
) -> None:
    flags, snapshot = world
    before = snapshot()
    argv = data.draw(_commands(flags))
    code, lines = run(capsys, argv)
    assert code == 1, (argv[len(flags) :], code, lines)
    assert len(lines) == 1 and lines[0].startswith("walship") and "Traceback" not in lines[0], lines
    assert len(lines[0]) < 600
    assert snapshot() == before
