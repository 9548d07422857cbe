"""Serial peers keep each row's order across region moves, a split, a merge and a crash; a
non-serial peer under the same workload does not (so these tests would catch a serial peer
that is not serial). On the minicluster and on real HBase 2.6.

A writer increments one counter per row (and writes and deletes a second column) while the
table's regions move between servers, one splits, two merge and a region server is aborted.
Then the queues are shipped in one pass each: queues go one after another in server order, so
a region's newer edits in a lower-named server's queue would go before its older ones. What the
peer applied, in the order it applied it, is read back from the peer cluster's own WAL; a SEP
listener writes the events it gets in the order it gets them.
"""

from __future__ import annotations

import itertools
import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from real_hbase import (
    BACKENDS,
    add_managed_serial,
    create_table,
    keep_servers,
    remove_peer,
    unique,
    wait_queues_hold_current_wals,
)
from region_ops import Source, create_scoped_table, wals_by_server
from replication_helpers import Cluster, contents, current_wals_enqueued, tail_in_thread
from sep_listeners import OUT_ENV, read_events
from waiting import wait_until

from walship.cli import main
from walship.peer import MANAGED_KEY, PeerConfig
from walship.sep.subscriptions import Subscriptions
from walship.serial import BarrierReader
from walship.zk import ReplicationQueues, ZnodeLayout, zk_client
from walship.zk.lastpushed import LastPushedIds
from walship_testing.minicluster import AdminClient

pytestmark = pytest.mark.integration

ROWS = [b"row%02d" % i for i in range(12)]
SPLITS = [b"row04", b"row08"]
LISTENER = "sep_listeners:JsonLinesListener"
LOOSE_LISTENER = "sep_listeners:SecondJsonLinesListener"
COUNTER = b"r:c"
WRITE_STALL = 60.0  # s: longer than a write waits on a region in transition before it fails


@dataclass
class Scenario:
    a: Source
    b: Cluster
    events: Path  # the serial subscription's listener writes here, the loose one's to <events>.second
    peers: list[str] = field(default_factory=lambda: ["1", "subs", "loose"])


def _subscription(a: Cluster, name: str, listener: str, serial: bool) -> PeerConfig:
    with zk_client(a.zk_hosts) as client:
        return Subscriptions(client, ZnodeLayout(a.parent), a.zk_hosts).config(
            name, listener=listener, serial=serial, table_cfs={a.table_name.decode(): None}
        )


def _queued(a: Cluster, peers: list[str]) -> None:
    with zk_client(a.zk_hosts) as client:
        queues = ReplicationQueues(client, ZnodeLayout(a.parent))
        for peer in peers:
            wait_until(lambda p=peer: current_wals_enqueued(a, queues, p), what=f"WALs queued for {peer}")


@pytest.fixture(params=BACKENDS)
def scenario(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Scenario]:
    events = tmp_path / "events.jsonl"
    monkeypatch.setenv(OUT_ENV, str(events))
    table = unique("serial")
    if request.param == "real":
        a_hb, b_hb = request.getfixturevalue("real_hbase")
        create_table(a_hb, table, SPLITS)
        create_table(b_hb, table)
        a = Cluster(a_hb, a_hb.zk_hosts, table.encode())
        b = Cluster(b_hb, b_hb.zk_hosts, table.encode())
        names = [unique("serial"), unique("subs"), unique("loose")]
        added = [
            PeerConfig(names[0], b.cluster_key, configuration={MANAGED_KEY: "true", **b.sink_config()}, serial=True),
            _subscription(a, names[1], LISTENER, True),
            _subscription(a, names[2], LOOSE_LISTENER, False),
        ]
        try:
            for config in added:
                add_managed_serial(a, config)
                wait_queues_hold_current_wals(a, config.peer_id)
            yield Scenario(Source(a, real=True), b, events, names)
        finally:
            try:
                for name in names:
                    remove_peer(a, name)
            finally:
                keep_servers(a_hb)  # the aborted one's place
        return
    factory = request.getfixturevalue("minicluster_factory")
    zk_hosts = request.getfixturevalue("zk_hosts")
    mc_a, mc_b = factory("A"), factory("B")
    create_scoped_table(mc_a.thrift2, table, SPLITS)
    create_scoped_table(mc_b.thrift2, table)
    a, b = Cluster(mc_a, zk_hosts, table.encode()), Cluster(mc_b, zk_hosts, table.encode())
    flags = a.cli_flags()
    sink = f"walship.sink.thrift={b.thrift_address()}"
    assert main([*flags, "peer", "add", "1", "--cluster-key", b.cluster_key, "--config", sink, "--serial"]) == 0
    assert main([*flags, "subscription", "add", "subs", "--listener", LISTENER, "--table-cfs", table]) == 0
    assert (
        main(
            [*flags, "subscription", "add", "loose", "--listener", LOOSE_LISTENER, "--table-cfs", table, "--no-serial"]
        )
        == 0
    )
    _queued(a, ["1", "subs", "loose"])
    yield Scenario(Source(a, real=False), b, events)


class Writer(threading.Thread):
    """Increments every row's counter in turn; every fifth write also puts, and the next but
    one deletes, a second column. Counts its writes; keeps the first error."""

    def __init__(self, c: Cluster) -> None:
        super().__init__(daemon=True)
        self.c = c
        self.stop = threading.Event()
        self.count = 0
        self.error: BaseException | None = None

    def run(self) -> None:
        conn = self.c.conn()
        table = conn.table(self.c.table_name)
        try:
            while not self.stop.is_set():
                row = ROWS[self.count % len(ROWS)]
                table.counter_inc(row, COUNTER)
                if self.count % 5 == 0:
                    table.put(row, {b"r:d": b"d%d" % self.count})
                elif self.count % 5 == 2:
                    table.delete(row, columns=[b"r:d"])
                self.count += 1
        except BaseException as exc:
            self.error = exc
        finally:
            conn.close()

    def wait_for(self, writes: int) -> None:
        """Until ``writes`` more writes are made (many a second: each region gets some). A write
        to a region in transition waits for it as long as A's Thrift server retries (about 38 s,
        then the writer keeps the error), so this fails when no write is made for longer."""
        start = self.count
        while self.count < start + writes and self.error is None:
            made = self.count
            wait_until(
                lambda made=made: self.count > made or self.error is not None,
                timeout=WRITE_STALL,
                what=f"the writer's next write ({made - start} of {writes} made)",
            )
        assert self.error is None, self.error


def region_of(source: Source, row: bytes) -> dict[str, Any]:
    for r in source.regions():
        if bytes.fromhex(r["start"]) <= row and (not r["end"] or row < bytes.fromhex(r["end"])):
            return r
    raise AssertionError(f"no region holds {row!r}")


def run_workload(source: Source) -> None:
    """Moves (one of them down the servers' order), a split, a merge, a crash, writes between."""
    writer = Writer(source.c)
    writer.start()
    try:
        servers = wait_until(  # the moves below need three (a real A's third may still be starting)
            lambda: live if len(live := sorted(source.servers())) >= 3 else None,
            what="three live region servers in A",
        )
        writer.wait_for(40)
        first = region_of(source, ROWS[0])
        been = {first["server"]}
        if first["server"] != servers[-1]:
            source.move(first["region"], servers[-1])
            been.add(servers[-1])
            writer.wait_for(40)
        # down the order (newer edits now in the queue shipped first), and never back to a server
        # the region was on: each region server remembers for minutes where a region moved from
        # it, and after the merge below two such notes pointing at each other would send A's
        # clients from one server to the other until their retries ran out (seen on HBase 2.6)
        source.move(first["region"], min(s for s in servers if s not in been))
        writer.wait_for(40)
        last = region_of(source, ROWS[-1])
        source.split(last["region"], b"row10")
        writer.wait_for(40)
        low, high = region_of(source, ROWS[0]), region_of(source, ROWS[4])
        source.merge([low["region"], high["region"]])
        writer.wait_for(40)
        merged = region_of(source, ROWS[0])
        source.move(merged["region"], next(s for s in servers if s != merged["server"]))
        writer.wait_for(40)
        victim = region_of(source, ROWS[11])["server"]
        source.abort(victim)
        writer.wait_for(40)
    finally:
        writer.stop.set()
        writer.join()
    assert writer.error is None, writer.error


def ship(scenario: Scenario, peers: list[str], capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    """One pass; its queues one after another in server order (``--parallel 1``: a non-serial
    peer's queues would otherwise go at once, a serial peer's go one after another anyway)."""
    capsys.readouterr()
    code = main([*scenario.a.c.cli_flags(), "ship", "--peer", ",".join(peers), "--parallel", "1"])
    out, err = capsys.readouterr()
    assert code == 0, err
    summary: dict[str, Any] = json.loads(out)
    return summary


def counters_in_peer_wal(b: Cluster) -> dict[bytes, list[int]]:
    """Each row's counter values in the order the peer cluster logged (applied) them."""
    out: dict[bytes, list[int]] = {}
    for entries in wals_by_server(b.mc.wal_root).values():
        for e in entries:
            if e.key.table.removeprefix(b"default:") != b.table_name:
                continue
            for c in e.cells:
                if c.family + b":" + c.qualifier == COUNTER and c.value:
                    out.setdefault(c.row, []).append(int.from_bytes(c.value, "big"))
    return out


def counters_in_events(path: Path) -> dict[bytes, list[tuple[int, int]]]:
    """Each row's (counter value, sequence id) in the order the listener got them."""
    out: dict[bytes, list[tuple[int, int]]] = {}
    for e in read_events(str(path)):
        for family, qualifier, _ts, _type, value in e["cells"]:
            if f"{family}:{qualifier}".encode() == COUNTER and value:
                out.setdefault(e["row"].encode("latin-1"), []).append(
                    (int.from_bytes(value.encode("latin-1"), "big"), e["seqid"])
                )
    return out


def finals(a: Cluster) -> dict[bytes, int]:
    conn = a.conn()
    try:
        return {row: int.from_bytes(data[COUNTER], "big") for row, data in conn.table(a.table_name).scan()}
    finally:
        conn.close()


def increasing(values: list[int]) -> bool:
    return all(x < y for x, y in itertools.pairwise(values))


def test_each_row_arrives_in_order_on_a_serial_peer_and_not_on_a_loose_one(
    scenario: Scenario, capsys: pytest.CaptureFixture[str]
) -> None:
    run_workload(scenario.a)
    serial_peer, subs, loose = scenario.peers
    # a queue may wait for one a pass ships after it (the aborted server's, which HBase's master
    # claims within seconds of the abort): a later pass ships it, as HBase's readers retry
    passes = [ship(scenario, [serial_peer, subs], capsys)]
    while len(passes) < 3 and any(q["status"] == "waiting-serial" for p in passes[-1]["peers"] for q in p["queues"]):
        passes.append(ship(scenario, [serial_peer, subs], capsys))
    for peer in passes[-1]["peers"]:
        waiting = [q for q in peer["queues"] if q["status"] == "waiting-serial"]
        assert peer["status"] == "ok" and not waiting, peer
    assert any(q["status"] == "shipped" for s in passes for p in s["peers"] for q in p["queues"])
    ship(scenario, [loose], capsys)

    final = finals(scenario.a.c)
    assert set(final) == set(ROWS) and all(v > 3 for v in final.values())
    applied = counters_in_peer_wal(scenario.b)
    for row in ROWS:
        assert increasing(applied[row]), (row, applied[row])
        assert applied[row][-1] == final[row]
    assert contents(scenario.b, b"r") == contents(scenario.a.c, b"r")

    got = counters_in_events(scenario.events)
    for row in ROWS:
        values = [v for v, _ in got[row]]
        assert values == list(range(1, final[row] + 1)), (row, values)  # each once, in order
        assert increasing([s for _, s in got[row]])
    loose_got = counters_in_events(Path(f"{scenario.events}.second"))
    assert {row: sorted(v for v, _ in loose_got[row]) for row in ROWS} == {
        row: list(range(1, final[row] + 1)) for row in ROWS
    }
    reordered = [row for row in ROWS if not increasing([v for v, _ in loose_got[row]])]
    assert reordered, "the non-serial subscription got every row in order: the workload proves nothing"


# -- a queue that waits, on the minicluster ----------------------------------------------------------


@pytest.fixture
def mini(minicluster_factory: Any, zk_hosts: str) -> tuple[Source, Cluster]:
    """A (three servers, the table in three regions) and B, no peer yet."""
    table = unique("wait")
    mc_a, mc_b = minicluster_factory("A"), minicluster_factory("B")
    create_scoped_table(mc_a.thrift2, table, SPLITS)
    create_scoped_table(mc_b.thrift2, table)
    return Source(Cluster(mc_a, zk_hosts, table.encode()), real=False), Cluster(mc_b, zk_hosts, table.encode())


def add_serial_peer(a: Cluster, b: Cluster, capsys: pytest.CaptureFixture[str]) -> None:
    flags = a.cli_flags()
    sink = f"walship.sink.thrift={b.thrift_address()}"
    assert main([*flags, "peer", "add", "1", "--cluster-key", b.cluster_key, "--config", sink, "--serial"]) == 0
    _queued(a, ["1"])
    capsys.readouterr()


def status_json(a: Cluster, capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    capsys.readouterr()
    assert main([*a.cli_flags(), "status", "--json", "--peer", "1"]) == 0
    data: dict[str, Any] = json.loads(capsys.readouterr().out)["peers"][0]
    return data


def test_a_queue_waits_for_the_range_before_and_never_skips_it(
    mini: tuple[Source, Cluster], capsys: pytest.CaptureFixture[str]
) -> None:
    """A region's first range is in one server's queue, its second in another's: shipped
    alone, the second queue sends what comes before the region's entry and stops there
    (waiting-serial in its summary, status and metrics), until the first queue has shipped."""
    source, b = mini
    a = source.c
    add_serial_peer(a, b, capsys)
    region = region_of(source, ROWS[0])
    old = region["server"]
    new = next(s for s in source.servers() if s != old)
    t = a.table()
    for _ in range(5):
        t.counter_inc(ROWS[0], COUNTER)
    t.put(ROWS[5], {b"r:x": b"before"})  # another region on the new server: free to go
    source.move(region["region"], new)
    for _ in range(5):
        t.counter_inc(ROWS[0], COUNTER)
    capsys.readouterr()
    assert main([*a.cli_flags(), "ship", "--peer", "1", "--queue", f"{new}/1"]) == 0
    shipped = json.loads(capsys.readouterr().out)
    (q,) = shipped["queues"]
    assert q["status"] == "waiting-serial" and region["region"] in q["message"], q
    assert counters_in_peer_wal(b).get(ROWS[0], []) == []  # not one of the newer edits went
    status = status_json(a, capsys)
    (waiting,) = [s for s in status["queues"] if s["server"] == new]
    assert waiting["state"] == "waiting-serial" and waiting["waiting_serial"]["region"] == region["region"]
    assert waiting["waiting_serial"]["waits_for"] == region["region"]
    assert waiting["bytes_queued"] > 0
    capsys.readouterr()
    assert main([*a.cli_flags(), "status", "--peer", "1"]) == 0
    assert "waits for its previous range" in capsys.readouterr().out

    assert main([*a.cli_flags(), "ship", "--peer", "1", "--queue", f"{old}/1"]) == 0
    assert main([*a.cli_flags(), "ship", "--peer", "1"]) == 0
    assert counters_in_peer_wal(b)[ROWS[0]] == list(range(1, 11))
    assert status_json(a, capsys)["totals"]["drained"]


def test_a_peer_made_serial_after_moves_starts_at_each_regions_current_open(
    mini: tuple[Source, Cluster], capsys: pytest.CaptureFixture[str]
) -> None:
    """Regions moved before the peer became serial: their older edits are in WALs the peer
    never held; each region's last pushed id starts at its last barrier - 1 (as HBase sets it),
    so the newer edits go at once."""
    source, b = mini
    a = source.c
    region = region_of(source, ROWS[0])
    t = a.table()
    t.counter_inc(ROWS[0], COUNTER)
    source.move(region["region"], next(s for s in source.servers() if s != region["server"]))
    AdminClient(a.mc.admin).roll(region["server"])  # the first range's WAL is in no queue of the peer
    flags = a.cli_flags()
    sink = f"walship.sink.thrift={b.thrift_address()}"
    assert main([*flags, "peer", "add", "1", "--cluster-key", b.cluster_key, "--config", sink]) == 0
    _queued(a, ["1"])
    assert main([*flags, "peer", "set", "1", "--serial", "true"]) == 0
    with zk_client(a.zk_hosts) as client, BarrierReader(a.thrift2_address()) as reader:
        last = reader.region(a.table_name, ROWS[0], region["region"]).barriers[-1]
        assert LastPushedIds(client, ZnodeLayout(a.parent)).get(region["region"], "1") == last - 1
    for _ in range(3):
        t.counter_inc(ROWS[0], COUNTER)
    capsys.readouterr()
    assert main([*flags, "ship", "--peer", "1"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert all(q["status"] != "waiting-serial" for q in out["queues"]), out
    assert counters_in_peer_wal(b)[ROWS[0]] == [2, 3, 4]
    assert main([*flags, "peer", "set", "1", "--serial", "false"]) == 0
    with zk_client(a.zk_hosts) as client:
        assert LastPushedIds(client, ZnodeLayout(a.parent)).get(region["region"], "1") == -1


@pytest.mark.parametrize("scenario", ["mini"], indirect=True)
def test_a_tailer_keeps_the_order_while_regions_move(scenario: Scenario) -> None:
    """Continuous mode: a tailer ships the serial peer and subscription while the workload
    runs (queues waiting for each other pass after pass), and they end in order and whole."""
    serial_peer, subs, _ = scenario.peers
    stop = threading.Event()
    thread, out = tail_in_thread(scenario.a.c, [serial_peer, subs], duration=300, idle_sleep=0.05, stop=stop)
    try:
        run_workload(scenario.a)
        final = finals(scenario.a.c)

        def caught_up() -> bool:
            got = counters_in_events(scenario.events)
            applied = counters_in_peer_wal(scenario.b)
            return all(
                got.get(row, [(0, 0)])[-1][0] == final[row] and applied.get(row, [0])[-1] == final[row] for row in ROWS
            )

        wait_until(caught_up, timeout=120, what="the tailer to ship every increment")
    finally:
        stop.set()
        thread.join()
    (summary,) = out
    assert summary.status == "ok", summary.errors
    applied = counters_in_peer_wal(scenario.b)
    got = counters_in_events(scenario.events)
    for row in ROWS:
        assert increasing(applied[row]), (row, applied[row])
        assert [v for v, _ in got[row]] == list(range(1, final[row] + 1)), row


def test_a_table_the_peer_does_not_take_never_holds_it_back(
    mini: tuple[Source, Cluster], capsys: pytest.CaptureFixture[str]
) -> None:
    """Another scoped table's region moved before the peer was added, its first range in a WAL
    no queue of the peer holds: the peer takes only its own table, so that region's entries in
    the queue are not held to its order (HBase checks what the table filter lets through)."""
    source, b = mini
    a = source.c
    other = Source(Cluster(a.mc, a.zk_hosts, b"other"), real=False)
    create_scoped_table(a.mc.thrift2, "other")
    region = region_of(other, b"x")
    conn = a.conn()
    conn.table("other").put(b"x", {b"r:q": b"1"})
    other.move(region["region"], next(s for s in other.servers() if s != region["server"]))
    AdminClient(a.mc.admin).roll(region["server"])
    flags = a.cli_flags()
    sink = f"walship.sink.thrift={b.thrift_address()}"
    table = a.table_name.decode()
    argv = ["peer", "add", "1", "--cluster-key", b.cluster_key, "--config", sink, "--serial", "--table-cfs", table]
    assert main([*flags, *argv]) == 0
    _queued(a, ["1"])
    conn.table("other").put(b"x", {b"r:q": b"2"})  # the moved region's second range, in a queued WAL
    for _ in range(3):
        conn.table(a.table_name).counter_inc(ROWS[0], COUNTER)
    conn.close()
    capsys.readouterr()
    assert main([*flags, "ship", "--peer", "1"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert all(q["status"] != "waiting-serial" for q in out["queues"]), out
    assert counters_in_peer_wal(b)[ROWS[0]] == [1, 2, 3]


def test_with_multiwal_a_waiting_wal_group_lets_the_others_go(
    minicluster_factory: Any, zk_hosts: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """One region server writing two WAL groups (multiwal): a split's daughters open in the
    other group than their parent, so a daughter's first entry can lie in a WAL read before the
    parent's last ones. Its group waits; the parent's group goes on in the same pass; all of it
    ships, in order."""
    table = unique("multi")
    mc_a = minicluster_factory("A", regionservers=1, wal_groups=2)
    mc_b = minicluster_factory("B")
    # groups go round robin as regions first write: another table's region takes the first
    # group's (older) WAL, the parent the second's, and the first daughter the older again
    create_scoped_table(mc_a.thrift2, unique("first"))
    create_scoped_table(mc_a.thrift2, table)
    create_scoped_table(mc_b.thrift2, table)
    source = Source(Cluster(mc_a, zk_hosts, table.encode()), real=False)
    b = Cluster(mc_b, zk_hosts, table.encode())
    a = source.c
    add_serial_peer(a, b, capsys)
    t = a.table()
    for _ in range(3):
        for row in ROWS:
            t.counter_inc(row, COUNTER)
    source.split(region_of(source, ROWS[0])["region"], b"row06")
    for _ in range(3):
        for row in ROWS:
            t.counter_inc(row, COUNTER)
    capsys.readouterr()
    assert main([*a.cli_flags(), "ship", "--peer", "1"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert all(q["status"] != "waiting-serial" for q in out["queues"]), out
    applied = counters_in_peer_wal(b)
    assert {row: applied[row] for row in ROWS} == {row: [1, 2, 3, 4, 5, 6] for row in ROWS}
