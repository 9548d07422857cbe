"""Region moves, splits and merges, and the replication barriers they leave in ``hbase:meta``
for serial replication: one scenario on the minicluster and on real HBase 2.6, read back with
walship's BarrierReader over Thrift2 and held against the regions' WAL entries. Then
``walship minicluster move|split|merge`` and what they refuse."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from real_hbase import BACKENDS, cluster, managed_peer, unique, wait_queues_hold_current_wals
from region_ops import Source, create_scoped_table, thrift2_at, wals_by_server
from replication_helpers import Cluster
from waiting import wait_until

from walship.cli import main
from walship.errors import BarrierUnavailableError, ConfigError
from walship.protos import WAL_pb2
from walship.serial import BarrierReader, RegionBarriers
from walship.thrift.hbase2 import hbase2 as T
from walship.wal import METAFAMILY
from walship.wal.model import WalEntry
from walship_testing.minicluster import AdminClient
from walship_testing.minicluster.process import MiniClusterProcess

pytestmark = pytest.mark.integration

_EVENT = b"HBASE::REGION_EVENT::"


@pytest.fixture(params=BACKENDS)
def source(request: pytest.FixtureRequest) -> Iterator[Source]:
    table = unique("moves")
    if request.param == "real":
        a_hb, b_hb = request.getfixturevalue("real_hbase")
        create_scoped_table(a_hb.thrift2, table)
        a = cluster(a_hb, table)
        # a managed peer (HBase never ships it) keeps every WAL of the scenario from HBase's log cleaner
        with managed_peer(a, cluster(b_hb, table), unique("moves")) as peer:
            wait_queues_hold_current_wals(a, peer)
            yield Source(a, real=True)
        return
    mc = request.getfixturevalue("minicluster_factory")("A")
    create_scoped_table(mc.thrift2, table)
    yield Source(Cluster(mc, request.getfixturevalue("zk_hosts"), table.encode()), real=False)


# -- the WALs --------------------------------------------------------------------------------------


def region_event(entry: WalEntry) -> WAL_pb2.RegionEventDescriptor | None:
    cells = entry.cells
    if len(cells) == 1 and cells[0].family == METAFAMILY and cells[0].qualifier.startswith(_EVENT):
        return WAL_pb2.RegionEventDescriptor.FromString(cells[0].value)
    return None


@dataclass
class Open:
    """One open of a region as its server's WAL tells it: the REGION_OPEN marker's sequence
    number and entry, and the sequence ids of the region's entries after it on that server."""

    number: int
    marker_seq: int
    seqs: list[int]
    closed: bool = False


def opens_of(wals: dict[str, list[WalEntry]], encoded: str) -> list[Open]:
    """The opens of a region, by their numbers: each server's entries of the region, cut at
    its REGION_OPEN markers (an entry of the region before any on its server is a failure)."""
    opens = []
    for server, entries in wals.items():
        current: Open | None = None
        for e in entries:
            if e.key.encoded_region_name.decode() != encoded:
                continue
            event = region_event(e)
            if event is not None and event.event_type == WAL_pb2.RegionEventDescriptor.REGION_OPEN:
                assert event.log_sequence_number > 0 and event.server.host_name
                current = Open(event.log_sequence_number, e.key.sequence_id, [e.key.sequence_id])
                opens.append(current)
                continue
            assert current is not None, f"an entry of {encoded} on {server} before the region opened there: {e.key}"
            assert not current.closed, f"an entry of {encoded} on {server} after it closed there: {e.key}"
            current.seqs.append(e.key.sequence_id)
            if event is not None and event.event_type == WAL_pb2.RegionEventDescriptor.REGION_CLOSE:
                current.closed = True
                assert event.log_sequence_number == e.key.sequence_id - 1  # the highest id before it
    return sorted(opens, key=lambda o: o.number)


def check_ranges(region: RegionBarriers, opens: list[Open], *, closed_for_good: bool) -> None:
    """The barriers are the opens' numbers (one per open), plus, for a split or merge parent,
    its highest sequence id + 1; each open's entries (its REGION_OPEN marker the first, at the
    number + 1) fall in [its barrier, the next one), and one that closed ends at the next - 1."""
    numbers = [o.number for o in opens]
    assert numbers, f"no open of {region.encoded} in the WALs"
    assert list(region.barriers) == sorted(region.barriers) and len(set(region.barriers)) == len(region.barriers)
    assert list(region.barriers[: len(numbers)]) == numbers, (region, numbers)
    assert len(region.barriers) == len(numbers) + (1 if closed_for_good else 0), (region, numbers)
    for i, o in enumerate(opens):
        assert o.marker_seq == o.number + 1
        assert min(o.seqs) >= region.barriers[i], (region, o)
        if i + 1 < len(region.barriers):
            assert o.closed and max(o.seqs) == region.barriers[i + 1] - 1, (region, o)
        else:
            assert not o.closed and max(o.seqs) >= o.number + 1


# -- the scenario ----------------------------------------------------------------------------------


def test_barriers_follow_every_open_split_and_merge(source: Source) -> None:
    (first,) = source.regions()
    source.write(range(0, 100, 3), 1)
    other = next(s for s in source.servers() if s != first["server"])
    source.move(first["region"], other)
    source.write(range(1, 100, 3), 2)
    source.split(first["region"], b"row050")
    low, high = source.regions()
    assert (low["end"], high["start"]) == (b"row050".hex(), b"row050".hex())
    source.write(range(0, 100, 2), 3)  # both daughters
    source.merge([low["region"], high["region"]])
    (merged,) = source.regions()
    source.write(range(0, 100, 5), 4)
    wals = wals_by_server(source.c.mc.wal_root)
    name = source.c.table_name

    with BarrierReader(source.c.thrift2_address()) as reader:
        parent = reader.region(name, b"row000", first["region"])
        daughters = [reader.region(name, b"row010", low["region"]), reader.region(name, b"row060", high["region"])]
        child = reader.region(name, b"row070", merged["region"])
        assert reader.region(name, b"row070", "0" * 32) == RegionBarriers("0" * 32, (), None, ())

        # the parent: opened at creation, then on the other server, then split
        parent_opens = opens_of(wals, first["region"])
        assert len(parent_opens) == 2 and parent_opens[1].number == parent_opens[0].seqs[-1] + 1
        check_ranges(parent, parent_opens, closed_for_good=True)
        # CLOSED as the split left it (HBase's CatalogJanitor may have removed the row's info since)
        assert parent.state in ("CLOSED", None) and parent.parents == ()
        highest = max(s for o in parent_opens for s in o.seqs)
        assert reader.parent(first["region"])[-1] - 1 == highest

        # the daughters: opened above the parent's highest id, then merged
        for d, info in zip(daughters, (low, high), strict=True):
            assert d.parents == (first["region"],)
            assert d.state is None  # the merge deleted their info family
            opens = opens_of(wals, info["region"])
            check_ranges(d, opens, closed_for_good=True)
            assert d.barriers[0] == parent.barriers[-1]
            assert reader.parent(info["region"])[-1] - 1 == max(s for o in opens for s in o.seqs)

        # the merged region: both parents, in key order, and open above both
        assert child.parents == (low["region"], high["region"]) and child.state == "OPEN"
        check_ranges(child, opens_of(wals, merged["region"]), closed_for_good=False)
        assert child.barriers[0] == max(d.barriers[-1] for d in daughters)

        # meta's row keys are region names, each encoded name the MD5 of the rest
        for encoded in (first["region"], low["region"], high["region"]):
            full = reader.region_name(encoded)
            assert full is not None and full.endswith(b".%s." % encoded.encode())
            assert hashlib.md5(full[: -len(encoded) - 2]).hexdigest() == encoded

    with BarrierReader(source.c.thrift2_address()) as fresh:  # no names known: found by a scan of meta
        assert fresh.parent(first["region"]) == parent.barriers
        assert fresh.parent(low["region"]) == daughters[0].barriers
        assert fresh.parent("f" * 32) == ()


def test_a_pre_split_table_logs_each_row_in_the_region_holding_it(source: Source) -> None:
    table = unique("presplit")
    create_scoped_table(source.c.mc.thrift2, table, [b"row060", b"row030"])
    split = Source(Cluster(source.c.mc, source.c.zk_hosts, table.encode()), source.real)
    wait_until(lambda: len(split.regions()) == 3, what="three regions online")
    regions = split.regions()
    assert [(r["start"], r["end"]) for r in regions] == [
        ("", b"row030".hex()),
        (b"row030".hex(), b"row060".hex()),
        (b"row060".hex(), ""),
    ]
    split.write(range(100), 1)
    wals = wals_by_server(source.c.mc.wal_root)
    with BarrierReader(source.c.thrift2_address()) as reader:
        for region in regions:
            start, end = bytes.fromhex(region["start"]), bytes.fromhex(region["end"])
            rows = {
                c.row
                for entries in wals.values()
                for e in entries
                if e.key.encoded_region_name.decode() == region["region"] and region_event(e) is None
                for c in e.cells
                if c.family != METAFAMILY
            }
            assert rows == {
                b"row%03d" % i for i in range(100) if start <= b"row%03d" % i and (not end or b"row%03d" % i < end)
            }
            found = reader.region(table.encode(), start or b"row000", region["region"])
            check_ranges(found, opens_of(wals, region["region"]), closed_for_good=False)
            assert found.state == "OPEN" and found.parents == ()


def test_meta_reads_over_thrift2_as_hbase_serves_them(source: Source) -> None:
    """What the reader relies on, asked directly: rows keyed by region names, reversed scans,
    every version of ``rep_barrier``, ``info:state``, and a missing family refused."""
    (first,) = source.regions()
    source.write(range(10), 1)
    source.move(first["region"], next(s for s in source.servers() if s != first["server"]))
    client = thrift2_at(source.c.mc.thrift2)
    try:
        name = source.c.table_name
        scan = T.TScan(
            startRow=name + b",row005,99999999999999",
            stopRow=name + b",,",
            columns=[T.TColumn(b"info", b"state"), T.TColumn(b"rep_barrier")],
            maxVersions=100,
            reversed=True,
        )
        (result,) = client.getScannerResults(b"hbase:meta", scan, 10)
        assert result.row.endswith(b".%s." % first["region"].encode()) and result.row.startswith(name + b",,")
        barriers = [
            cv for cv in result.columnValues if (cv.family, cv.qualifier) == (b"rep_barrier", b"seqnumDuringOpen")
        ]
        assert len(barriers) == 2 and all(len(cv.value) == 8 for cv in barriers)
        states = [cv.value for cv in result.columnValues if (cv.family, cv.qualifier) == (b"info", b"state")]
        assert states[:2] == [b"OPEN", b"OPENING"]  # meta's info keeps 3 versions: the open's two
        got = client.get(b"hbase:meta", T.TGet(row=result.row, columns=[T.TColumn(b"rep_barrier")], maxVersions=1))
        assert [cv.value for cv in got.columnValues] == [barriers[0].value]  # the newest version only
        forward = T.TScan(startRow=name + b",,", stopRow=name + b",~", columns=[T.TColumn(b"info", b"state")])
        assert [r.row for r in client.getScannerResults(b"hbase:meta", forward, 10)] == [result.row]
        with pytest.raises(T.TIOError):
            client.get(b"hbase:meta", T.TGet(row=result.row, columns=[T.TColumn(b"nosuchfamily")]))
        # deleting the table deletes its rows of meta, barriers and all
        tname = T.TTableName(ns=b"default", qualifier=name)
        client.disableTable(tname)
        client.deleteTable(tname)
        assert client.getScannerResults(b"hbase:meta", forward, 10) == []
    finally:
        client.close()
    with BarrierReader(source.c.thrift2_address()) as reader:
        assert reader.region(name, b"row005", first["region"]) == RegionBarriers(first["region"], (), None, ())


def test_a_reader_of_a_server_that_does_not_answer_says_which(minicluster: MiniClusterProcess) -> None:
    with pytest.raises(BarrierUnavailableError, match=r"127\.0\.0\.1:1\b"):
        BarrierReader("127.0.0.1:1", timeout=2)
    host, port = minicluster.thrift  # a Thrift1 server: it knows no openScanner
    with BarrierReader(f"{host}:{port}") as reader, pytest.raises(BarrierUnavailableError, match=f"{host}:{port}"):
        reader.region(b"t", b"r", "0" * 32)
    with pytest.raises(ConfigError, match="no-port"):
        BarrierReader("no-port")


# -- the minicluster's other opens: a crashed server's regions, a restart -------------------------


def meta_states(thrift2: tuple[str, int], table: bytes, encoded: str) -> list[bytes]:
    """The versions ``info:state`` keeps (3), newest first."""
    client = thrift2_at(thrift2)
    scan = T.TScan(startRow=table + b",,", stopRow=table + b",~", columns=[T.TColumn(b"info", b"state")], maxVersions=3)
    rows = [r for r in client.getScannerResults(b"hbase:meta", scan, 100) if r.row.endswith(b".%s." % encoded.encode())]
    client.close()
    return [cv.value for r in rows for cv in r.columnValues]


def test_an_aborted_servers_region_opens_again_above_its_highest_id(
    mini: tuple[MiniClusterProcess, str], zk_hosts: str
) -> None:
    mc, table = mini
    source = Source(Cluster(mc, zk_hosts, table.encode()), real=False)
    admin = AdminClient(mc.admin)
    (region,) = admin.regions(table)
    source.write(range(20), 1)
    admin.abort_rs(region["server"])
    (moved,) = admin.regions(table)
    assert moved["region"] == region["region"] and moved["server"] not in (None, region["server"])
    assert meta_states(mc.thrift2, table.encode(), region["region"]) == [b"OPEN", b"OPENING", b"ABNORMALLY_CLOSED"]
    source.write(range(20), 2)
    opens = opens_of(wals_by_server(mc.wal_root), region["region"])
    with BarrierReader(source.c.thrift2_address()) as reader:
        found = reader.region(table.encode(), b"row000", region["region"])
    assert found.state == "OPEN" and found.barriers == tuple(o.number for o in opens) and len(opens) == 2
    crashed, now = opens
    assert not crashed.closed and now.number == max(crashed.seqs) + 1  # no REGION_CLOSE: it crashed
    assert min(now.seqs) == now.number + 1 and len(now.seqs) == 21


def test_a_restart_opens_every_region_again_above_its_highest_id(
    mini: tuple[MiniClusterProcess, str], zk_hosts: str
) -> None:
    mc, table = mini
    source = Source(Cluster(mc, zk_hosts, table.encode()), real=False)
    AdminClient(mc.admin).split_region(table, b"row010")
    source.write(range(20), 1)
    mc.stop()
    mc.start()
    source.write(range(20), 2)
    wals = wals_by_server(mc.wal_root)
    with BarrierReader(source.c.thrift2_address()) as reader:
        for region in AdminClient(mc.admin).regions(table):
            found = reader.region(table.encode(), bytes.fromhex(region["start"]), region["region"])
            before, after = opens_of(wals, region["region"])
            assert found.barriers == (before.number, after.number) and found.state == "OPEN"
            assert after.number == max(before.seqs) + 1 and min(after.seqs) == after.number + 1


# -- walship minicluster move|split|merge ----------------------------------------------------------


def run(capsys: pytest.CaptureFixture[str], argv: list[str]) -> tuple[int, Any, list[str]]:
    capsys.readouterr()
    code = main(argv)
    out, err = capsys.readouterr()
    return code, json.loads(out) if code == 0 else None, err.strip().splitlines()


@pytest.fixture
def mini(minicluster_factory: Callable[..., MiniClusterProcess]) -> tuple[MiniClusterProcess, str]:
    mc = minicluster_factory("A")
    table = unique("cli")
    create_scoped_table(mc.thrift2, table)
    return mc, table


def test_cli_moves_splits_and_merges(capsys: pytest.CaptureFixture[str], mini: tuple[MiniClusterProcess, str]) -> None:
    mc, table = mini
    flags = ["minicluster"]
    admin = ["--admin", mc.admin, "--table", table]
    (region,) = AdminClient(mc.admin).regions(table)
    code, moved, _ = run(capsys, [*flags, "move", *admin, "--region", region["region"]])
    assert code == 0 and moved["from"] == region["server"] and moved["to"] != region["server"]
    assert moved["open_seq"] == moved["closed_at"] + 1
    code, back, _ = run(capsys, [*flags, "move", *admin, "--region", region["region"], "--to", region["server"]])
    assert code == 0 and back["to"] == region["server"] and back["open_seq"] > moved["open_seq"]

    code, split, _ = run(capsys, [*flags, "split", *admin, "--row", "m\\x00"])
    assert (
        code == 0 and split["parent"] == region["region"] and split["parent_barrier"] == split["parent_closed_at"] + 1
    )
    low, high = split["daughters"]
    assert (low["start"], low["end"], high["start"], high["end"]) == ("", b"m\x00".hex(), b"m\x00".hex(), "")
    assert low["open_seq"] == high["open_seq"] == split["parent_barrier"]
    assert low["server"] == high["server"] == split["server"] == region["server"]

    code, split2, _ = run(capsys, [*flags, "split", *admin, "--row", "x", "--region", high["region"]])
    assert code == 0 and split2["parent"] == high["region"]
    mid, top = split2["daughters"]
    code, merged, _ = run(capsys, [*flags, "merge", *admin, "--regions", f"{mid['region']},{low['region']}"])
    assert code == 0 and [p["region"] for p in merged["parents"]] == [low["region"], mid["region"]]
    assert merged["merged"]["start"] == "" and merged["merged"]["end"] == b"x".hex()
    assert merged["merged"]["open_seq"] == max(p["barrier"] for p in merged["parents"])
    assert [r["region"] for r in AdminClient(mc.admin).regions(table)] == [merged["merged"]["region"], top["region"]]


def test_cli_refuses_bad_input_in_one_line(
    capsys: pytest.CaptureFixture[str], mini: tuple[MiniClusterProcess, str]
) -> None:
    mc, table = mini
    base = ["minicluster"]
    admin = ["--admin", mc.admin]
    (region,) = AdminClient(mc.admin).regions(table)
    enc = region["region"]
    split = AdminClient(mc.admin).split_region(table, b"k")
    AdminClient(mc.admin).split_region(table, b"t")
    low, mid, top = (r["region"] for r in AdminClient(mc.admin).regions(table))
    cases = [
        ([*base, "move", *admin, "--table", "nosuch", "--region", enc], ["nosuch", "does not exist"]),
        ([*base, "move", *admin, "--table", table, "--region", enc], [enc]),  # split away since
        ([*base, "move", *admin, "--table", table, "--region", low, "--to", "nohost,1,2"], ["nohost,1,2"]),
        ([*base, "move", *admin, "--table", table, "--region", low, "--to", split["server"]], [low, "already"]),
        ([*base, "split", *admin, "--table", table, "--row", "k"], ["start key", mid]),
        ([*base, "split", *admin, "--table", table, "--row", "z", "--region", low], ["not inside", low]),
        ([*base, "split", *admin, "--table", table, "--row", ""], ["--row"]),
        ([*base, "split", *admin, "--table", "nosuch", "--row", "a"], ["nosuch"]),
        ([*base, "merge", *admin, "--table", table, "--regions", f"{low},{top}"], ["not adjacent", low, top]),
        ([*base, "merge", *admin, "--table", table, "--regions", low], ["--regions"]),
        ([*base, "merge", *admin, "--table", table, "--regions", f"{low},{low}"], ["twice"]),
        ([*base, "merge", *admin, "--table", table, "--regions", f"{low},{'9' * 32}"], ["9" * 32]),
    ]
    for argv, names in cases:
        code, _, lines = run(capsys, argv)
        assert code == 1 and len(lines) == 1, (argv, code, lines)
        assert lines[0].startswith("walship: ") and "Traceback" not in lines[0], lines
        for n in names:
            assert n in lines[0], (n, lines[0])
    assert [r["region"] for r in AdminClient(mc.admin).regions(table)] == [low, mid, top]  # nothing changed
