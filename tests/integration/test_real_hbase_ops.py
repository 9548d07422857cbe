"""On real HBase 2.6: what HBase does beside walship. A managed peer's WALs are enqueued and
kept by HBase but never shipped by it; HBase's own log cleaner deletes them once walship has
shipped them; a peer written straight into ZooKeeper is not seen by a running HBase; a dead
region server's queue is claimed by HBase's master alone (walship idle, or tailing and
shipping as it happens), then drained by walship, losing no acknowledged write."""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import happybase
import pytest
from real_hbase import (
    ABORT_TIMEOUT_WARNING,
    BIG,
    cluster,
    create_table,
    keep_servers,
    layout,
    managed_peer,
    queued_wals,
    table_on_both,
    unique,
    wait_queues_hold_current_wals,
)
from replication_helpers import contents, ship, tail_in_thread
from sep_listeners import OUT_ENV, read_events
from waiting import wait_until

from walship.cli import main
from walship.errors import HarnessError
from walship.peer import MANAGED_KEY, PeerConfig
from walship.replicate import WalStore
from walship.replicate.planner import Planner
from walship.zk import ReplicationPeers, ReplicationQueues, live_servers, zk_client
from walship.zk.cluster import server_version
from walship_testing.harness import HBaseProcess

pytestmark = pytest.mark.integration


def wal_names(hb: HBaseProcess, archived: bool | None = None) -> set[str]:
    """Names of the cluster's WAL files (no checksum files, no hbase:meta WALs)."""
    out = set()
    for path, is_archived in WalStore(hb.wal_root).wal_files():
        name = path.rsplit("/", 1)[-1]
        if name.startswith(".") or name.endswith(".meta") or (archived is not None and is_archived != archived):
            continue
        out.add(name)
    return out


def test_hbase_keeps_a_managed_peers_wals_never_ships_them_and_cleans_them_once_shipped(
    real_hbase: tuple[HBaseProcess, HBaseProcess],
) -> None:
    a_hb, b_hb = real_hbase
    table = unique("keep")
    for hb in real_hbase:
        create_table(hb, table)
    a, b = cluster(a_hb, table), cluster(b_hb, table)
    # WALs from before the peer: once rolled (everything flushed), archived and held by no queue
    before = wal_names(a_hb, archived=False)
    a_hb.call("flush")
    a_hb.call("roll")
    with managed_peer(a, b, unique("keep")) as peer:
        wait_queues_hold_current_wals(a, peer)
        held = {w for wals in queued_wals(a, peer).values() for w in wals}
        assert held and not held & before
        conn = a.conn()
        for i in range(50):
            conn.table(table).put(b"row%02d" % i, {b"r:q": b"v%d" % i})
        conn.close()
        a_hb.call("flush")
        a_hb.call("roll")  # the held WALs are rolled, flushed, so archived
        wait_until(lambda: held <= wal_names(a_hb, archived=True), what="the held WALs archived")
        # HBase's log cleaner (TTL 2 s) deletes the WALs no queue holds, and keeps the held ones
        wait_until(lambda: not before & wal_names(a_hb), timeout=60, what="HBase's cleaner deleting unheld WALs")
        assert held <= wal_names(a_hb, archived=True)
        assert contents(b) == {}  # HBase did not ship the managed peer (its peer-state is DISABLED)
        (listed,) = [p for p in a_hb.call("list_peers") if p["peer"] == peer]
        assert listed["state"] == "DISABLED" and listed["configuration"]["walship.managed"] == "true"

        summary = ship(a, peer)
        assert summary.status == "ok", summary.error
        assert len(contents(b)) == 50 and contents(b) == contents(a, b"r")
        # shipped and archived: out of the queue, then deleted by HBase's own cleaner
        assert not held & {w for wals in queued_wals(a, peer).values() for w in wals}
        wait_until(lambda: not held & wal_names(a_hb), timeout=60, what="HBase's cleaner deleting shipped WALs")


def test_a_peer_written_into_zookeeper_is_not_seen_by_a_running_hbase(
    real_hbase: tuple[HBaseProcess, HBaseProcess], capsys: pytest.CaptureFixture[str]
) -> None:
    """Why peer changes go through the master, and ``--offline`` is refused while one runs: a
    peer written into ZooKeeper behind a running master (what ``--offline`` writes) is not seen."""
    a_hb, b_hb = real_hbase
    table = unique("zkpeer")
    create_table(a_hb, table)
    a, b = cluster(a_hb, table), cluster(b_hb, table)
    peer = unique("zk")
    flags = ["--zk", a.zk_hosts, "--znode-parent", a.parent, "--wal-root", a_hb.wal_root]
    add = [*flags, "peer", "add", peer, "--cluster-key", b_hb.cluster_key, "--table-cfs", table, "--offline"]
    assert main([*add, "--config", f"walship.sink.thrift={b.thrift_address()}"]) == 1  # refused: a master runs
    assert f"{a.parent}/master" in capsys.readouterr().err
    config = PeerConfig(
        peer,
        b_hb.cluster_key,
        table_cfs={table: None},
        configuration={MANAGED_KEY: "true", "walship.sink.thrift": b.thrift_address()},
    )
    with zk_client(a.zk_hosts) as client:
        peers = ReplicationPeers(client, layout(a))
        peers.add(config)  # the znodes --offline would write
        try:
            a_hb.call("roll")
            # HBase 2.x's master keeps peers in memory and region servers learn them through its
            # procedures: this peer is in ZooKeeper only, so no server enqueues a WAL for it
            assert peer not in {p["peer"] for p in a_hb.call("list_peers")}
            assert ReplicationQueues(client, layout(a)).list_queues(peer) == []
        finally:
            peers.remove(peer)
    capsys.readouterr()


@pytest.fixture
def servers_kept(real_hbase: tuple[HBaseProcess, HBaseProcess]) -> Iterator[tuple[HBaseProcess, HBaseProcess]]:
    """The session's pair, A given back its region servers afterwards (a test aborts one)."""
    yield real_hbase
    keep_servers(real_hbase[0])


def victim_of(hb: HBaseProcess, table: str) -> str:
    """A live region server holding some of ``table``'s regions and not hbase:meta."""
    meta = {r["server"] for r in hb.call("regions", table="hbase:meta")}
    return next(r["server"] for r in hb.call("regions", table=table) if r["server"] not in meta)


def recovered_queue_of(source: Any, peer: str, victim: str) -> str | None:
    """``server/queue id`` of the one queue of ``peer`` holding ``victim``'s WALs once HBase's
    master claimed it (``<peer>-<victim>`` under a live server), or ``None`` before the claim.
    Fails when the victim's queue is found in two places."""
    keys = [key for key in queued_wals(source, peer) if victim in key]
    assert len(keys) <= 1, f"the queue of {victim} is in {len(keys)} places: {keys}"
    if keys and keys[0] == f"{keys[0].split('/')[0]}/{peer}-{victim}" and not keys[0].startswith(victim):
        return keys[0]
    return None


def test_a_server_aborted_while_walship_is_idle_has_its_queue_claimed_by_hbase_then_shipped_by_walship(
    servers_kept: tuple[HBaseProcess, HBaseProcess],
) -> None:
    """HBase 2.6's master claims a dead server's queue (its ServerCrashProcedure's
    ClaimReplicationQueuesProcedure moves it under a live server as ``<peer>-<dead>``) before
    walship runs at all; walship then ships the recovered queue, claims nothing itself, and
    removes the queue once drained."""
    a_hb, b_hb = servers_kept
    table = unique("idle")
    create_table(a_hb, table, splits=[b"row%03d" % i for i in range(50, 300, 50)])
    create_table(b_hb, table)
    a, b = cluster(a_hb, table), cluster(b_hb, table)
    victim = victim_of(a_hb, table)
    with managed_peer(a, b, unique("idle")) as peer:
        wait_queues_hold_current_wals(a, peer)
        with a.table().batch() as batch:
            for i in range(300):
                batch.put(b"row%03d" % i, {b"r:q": b"v%d" % i, b"l:x": b"local"})
        assert f"{victim}/{peer}" in queued_wals(a, peer)
        a_hb.call("abort_rs", server=victim)
        claimed = wait_until(
            lambda: recovered_queue_of(a, peer, victim), timeout=180, interval=0.5,
            what=f"HBase's master claiming the queue of {victim} for peer {peer}",
        )  # fmt: skip
        assert claimed.split("/")[0] in a_hb.servers()
        assert contents(b) == {}  # walship has not run

        summary = ship(a, peer)

        assert summary.status == "ok", summary.error
        assert summary.claimed == [] and summary.claim_failures == []  # the master's claim, not walship's
        (drained,) = [q for q in summary.queues if victim in q.queue_id]
        assert f"{drained.server}/{drained.queue_id}" == claimed and drained.queue_removed
        assert len(contents(b)) == 300 and contents(b) == contents(a, b"r")
        assert not any(victim in key for key in queued_wals(a, peer))


def test_walship_reads_that_hbase_2_6s_master_claims_and_claims_nothing_itself(
    real_hbase: tuple[HBaseProcess, HBaseProcess],
) -> None:
    """HBase 2.6's region servers announce their version in their znodes (RegionServerInfo):
    walship reads it, and leaves a dead server's queue of a managed peer where it is for the
    master, where it would claim it on the embedded cluster. The dead server here is one the
    master never knew, so only walship could have moved its queue."""
    a_hb, b_hb = real_hbase
    a, b = table_on_both(a_hb, b_hb, "who")
    dead = "gone.example.com,16020,1600000000000"
    with managed_peer(a, b, unique("who")) as peer, zk_client(a.zk_hosts) as client:
        queues = ReplicationQueues(client, layout(a))
        queues.add_wal(dead, "gone.example.com%2C16020%2C1600000000000.1600000000001", [peer])
        try:
            live = live_servers(client, layout(a))
            assert live and {server_version(client, layout(a), s) for s in live} == {(2, 6)}

            result = Planner(client, layout(a), WalStore(a_hb.wal_root)).failover()

            assert (result.left_to_master, result.claimed, result.failures) == (True, [], [])
            assert [str(q.queue_id) for q in queues.list_queues(peer) if q.server == dead] == [peer]
        finally:
            client.delete(layout(a).replicator(dead), recursive=True)


def test_an_aborted_region_server_loses_no_acknowledged_write(servers_kept: tuple[HBaseProcess, HBaseProcess]) -> None:
    """A region server aborted under writes while a tail and ``ship`` passes run: HBase's
    master claims its queue, once, into one recovered queue; walship ships the queue where it
    is until then and the recovered queue after, claims nothing itself, loses no acknowledged
    write and leaves no queue of the dead server."""
    a_hb, b_hb = servers_kept
    table = unique("abort")
    splits = [b"row%04d" % i for i in range(100, 1000, 100)]
    create_table(a_hb, table, splits=splits)
    create_table(b_hb, table)
    a, b = cluster(a_hb, table), cluster(b_hb, table)
    victim = victim_of(a_hb, table)
    acknowledged: list[bytes] = []
    errors: list[str] = []
    stop_writing = threading.Event()

    def write() -> None:
        i = 0
        while not stop_writing.is_set() and i < 1000:
            row = b"row%04d" % i
            conn = happybase.Connection(*a_hb.thrift, timeout=60000)
            try:
                conn.table(table).put(row, {b"r:q": b"v%d" % i})
                acknowledged.append(row)
            except Exception as e:  # the write failed; it is not acknowledged
                errors.append(f"{row!r}: {e}")
            finally:
                conn.close()
            i += 1

    with managed_peer(a, b, unique("ab")) as peer:
        wait_queues_hold_current_wals(a, peer)
        a_hb.call("update_peer", peer=peer, bandwidth=2_000_000)  # walship ships 2 MB/s a queue
        stop = threading.Event()
        tailer, summaries = tail_in_thread(a, peer, duration=600, stop=stop)
        ships: list[Any] = []
        seen: set[str] = set()  # every server/queue id holding the victim's WALs, as it moved

        def ship_passes() -> None:
            while not stop.is_set():
                ships.append(ship(a, peer))
                stop.wait(0.5)  # the tail holds the queues most of the time: the pass finds them busy

        def watch() -> None:
            while not stop.is_set():
                seen.update(key for key in queued_wals(a, peer) if victim in key)
                stop.wait(0.05)

        helpers = [threading.Thread(target=f) for f in (write, ship_passes, watch)]
        for thread in helpers:
            thread.start()
        try:
            wait_until(lambda: len(acknowledged) >= 200, timeout=120, what="200 writes before the abort")
            # 30 MB more in the victim's last WAL, 15 s to ship: still shipped where it is when
            # HBase's master claims the queue (about 3 s after the abort)
            with a.table().batch() as batch:
                for i, region in enumerate(r for r in a_hb.call("regions", table=table) if r["server"] == victim):
                    for j in range(20 // (i + 1)):
                        batch.put(bytes.fromhex(region["start"]) + b"big%02d" % j, {b"r:q": BIG})
            a_hb.call("abort_rs", server=victim)
            helpers[0].join(timeout=300)
            assert not helpers[0].is_alive()

            def all_on_b() -> bool:
                return set(acknowledged) <= set(contents(b))

            wait_until(all_on_b, timeout=180, interval=1.0, what="every acknowledged write on B")
            # the dead server's queue was claimed as a recovered queue, shipped and removed once drained
            wait_until(
                lambda: not any(victim in key for key in queued_wals(a, peer)),
                timeout=120,
                interval=0.5,
                what=f"no queue of {victim} left for peer {peer}",
            )
        finally:
            stop_writing.set()
            stop.set()
            for thread in (tailer, *helpers):
                thread.join(timeout=120)
        (summary,) = summaries
        assert summary.status == "ok", summary.errors
        assert ships and all(s.status == "ok" for s in ships), [s.error for s in ships if s.status != "ok"]
        # HBase's master claimed the queue, once, as walship shipped it where it was: it was
        # under the victim, then under one live server as <peer>-<victim>, and nowhere else
        recovered = seen - {f"{victim}/{peer}"}
        assert f"{victim}/{peer}" in seen and len(recovered) == 1, seen
        (moved,) = recovered
        assert moved.endswith(f"/{peer}-{victim}") and moved.split("/")[0] != victim, seen
        assert summary.claimed == [] and summary.claim_failures == []
        assert all(s.claimed == [] and s.claim_failures == [] for s in ships)
        # walship shipped the dead server's queue where it was, then the recovered queue
        shipped = set(summary.queues) | {f"{q.server}/{q.queue_id}" for s in ships for q in s.queues}
        assert seen <= shipped, (seen, shipped)
        assert len(acknowledged) >= 200
        assert contents(b) == contents(a, b"r")
        # the aborted server's abort timeout ran (3 s after the abort): the cluster's JVM, which
        # holds every server, lives on (HBase's own task would have halted it)
        wait_until(
            lambda: ABORT_TIMEOUT_WARNING in a_hb.log_file.read_text(errors="replace"),
            timeout=60,
            what="the abort timeout task's warning in A's log",
        )
        assert a_hb.servers()  # it answers


def test_a_sep_listener_gets_every_row_event_in_order(
    real_hbase: tuple[HBaseProcess, HBaseProcess],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    a_hb, _ = real_hbase
    table = unique("sep")
    create_table(a_hb, table)
    a = cluster(a_hb, table)
    out = tmp_path / "events.jsonl"
    monkeypatch.setenv(OUT_ENV, str(out))
    name = unique("sub")
    # on a running HBase the subscription's peer goes through HBase's master, as any managed peer
    flags = ["--zk", a.zk_hosts, "--znode-parent", a.parent]
    add = ["subscription", "add", name, "--listener", "sep_listeners:JsonLinesListener", "--table-cfs", table]
    assert main([*flags, *add, "--no-serial"]) == 0
    try:
        seen = [p for p in a_hb.call("list_peers") if p["peer"] == name]
        assert seen and seen[0]["state"] == "DISABLED" and seen[0]["configuration"]["walship.managed"] == "true"
        wait_queues_hold_current_wals(a, name)
        t = a.table()
        written: dict[str, list[tuple[str, int, str]]] = {}
        for ts in (100, 200, 300):
            for i in range(20):
                row = b"row%02d" % i
                t.put(row, {b"r:a": b"a%d" % ts, b"l:x": b"local"}, timestamp=ts)
                written.setdefault(row.decode(), []).append(("a", ts, "Put"))
        for i in range(0, 20, 3):
            t.delete(b"row%02d" % i, columns=[b"r:a"], timestamp=250)
            written[f"row{i:02d}"].append(("a", 250, "DeleteColumn"))
        capsys.readouterr()
        assert (
            main(["--zk", a.zk_hosts, "--znode-parent", a.parent, "--wal-root", a_hb.wal_root, "ship", "--peer", name])
            == 0
        )
        events = read_events(str(out))
        got: dict[str, list[tuple[str, int, str]]] = {}
        for e in events:
            assert e["table"] == table
            for family, qualifier, ts, kind, _value in e["cells"]:
                assert family == "r"  # family l is scope 0
                got.setdefault(e["row"], []).append((qualifier, ts, kind))
        assert got == written  # every row event, each row's in the order written
        for row in written:
            mine = [(e["wal"], e["offset"]) for e in events if e["row"] == row]
            assert mine == sorted(mine)
    finally:
        assert main([*flags, "subscription", "remove", name]) == 0
        assert name not in {p["peer"] for p in a_hb.call("list_peers")}
        with zk_client(a.zk_hosts) as client:
            assert client.exists(layout(a).subscription(name)) is None


def test_rolls_every_second_under_load_lose_nothing(real_hbase: tuple[HBaseProcess, HBaseProcess]) -> None:
    a_hb, b_hb = real_hbase
    table = unique("rolls")
    for hb in real_hbase:
        create_table(hb, table, splits=[b"row1", b"row2"])
    a, b = cluster(a_hb, table), cluster(b_hb, table)
    stop = threading.Event()
    rolls = 0

    def roll() -> None:  # HBase's own roll order: the new WAL is enqueued before the old one is closed
        nonlocal rolls
        while not stop.wait(1.0):
            a_hb.call("roll")
            rolls += 1

    with managed_peer(a, b, unique("rl")) as peer:
        wait_queues_hold_current_wals(a, peer)
        stop_tailing = threading.Event()
        tailer, summaries = tail_in_thread(a, peer, duration=600, stop=stop_tailing)
        roller = threading.Thread(target=roll)
        roller.start()
        written = 0
        try:
            conn = a.conn()
            t = conn.table(table)
            while rolls < 8:
                with t.batch(batch_size=20) as batch:
                    for _ in range(20):
                        batch.put(b"row%d-%06d" % (written % 3, written), {b"r:q": b"v%d" % written})
                        written += 1
            conn.close()
            stop.set()
            roller.join()
            wait_until(lambda: len(contents(b)) == written, timeout=120, interval=0.5, what=f"{written} rows on B")
        finally:
            stop.set()
            stop_tailing.set()
            tailer.join(timeout=120)
            roller.join(timeout=60)
        (summary,) = summaries
        assert summary.status == "ok", summary.errors
        assert contents(b) == contents(a, b"r")


def test_status_agrees_with_hbase_and_wait_drained_waits_for_every_acknowledged_write(
    real_hbase: tuple[HBaseProcess, HBaseProcess], capsys: pytest.CaptureFixture[str]
) -> None:
    a_hb, b_hb = real_hbase
    table = unique("st")
    for hb in real_hbase:
        create_table(hb, table)
    a, b = cluster(a_hb, table), cluster(b_hb, table)
    flags = ["--zk", a.zk_hosts, "--znode-parent", a.parent, "--wal-root", a_hb.wal_root]
    with managed_peer(a, b, unique("st")) as peer:
        wait_queues_hold_current_wals(a, peer)
        conn = a.conn()
        for i in range(100):
            conn.table(table).put(b"row%03d" % i, {b"r:q": b"v"})
        a_hb.call("roll")
        for i in range(100, 200):
            conn.table(table).put(b"row%03d" % i, {b"r:q": b"v"})
        # a quiet moment: HBase's own numbers of the peer's log queue against walship's
        capsys.readouterr()
        assert main([*flags, "status", "--peer", peer, "--format", "hbase"]) == 0
        text = capsys.readouterr().out

        def hbase_load() -> dict[str, list[dict[str, Any]]]:
            return {s: [q for q in qs if q["peer"] == peer] for s, qs in a_hb.call("replication_load").items()}

        ours = {
            server: len(wals) for server, wals in ((k.split("/", 1)[0], v) for k, v in queued_wals(a, peer).items())
        }
        sizes = [int(n) for n in re.findall(r"SizeOfLogQueue=(\d+)", text)]
        assert sorted(sizes) == sorted(ours.values()) and sum(sizes) > len(ours)  # the roll added a WAL each

        # HBase's test cluster runs its region servers in one JVM, where a peer's source metrics
        # are one shared registry entry: each server reports the sum over the JVM's servers.
        # Region servers report to the master every few seconds: wait for the report after the roll.
        def hbase_agrees() -> bool:
            load = hbase_load()
            return set(load) == set(ours) and all(
                [s["size_of_log_queue"] for s in sources] == [sum(sizes)] for sources in load.values()
            )

        wait_until(hbase_agrees, what=f"HBase's SizeOfLogQueue of peer {peer} = {sum(sizes)} on every server")
        # wait-drained under writes: every write acknowledged before the call is on B when it returns
        stop_tailing = threading.Event()
        tailer, _ = tail_in_thread(a, peer, duration=600, stop=stop_tailing)
        try:
            for i in range(200, 300):
                conn.table(table).put(b"row%03d" % i, {b"r:q": b"v"})
            acknowledged = {b"row%03d" % i for i in range(300)}
            assert main([*flags, "wait-drained", "--peer", peer, "--timeout", "120"]) == 0
            assert acknowledged <= set(contents(b))
        finally:
            stop_tailing.set()
            tailer.join(timeout=120)
            conn.close()


def test_regions_split_moved_and_merged_while_writing_lose_nothing(
    real_hbase: tuple[HBaseProcess, HBaseProcess],
) -> None:
    a_hb, b_hb = real_hbase
    table = unique("reg")
    for hb in real_hbase:
        create_table(hb, table)
    a, b = cluster(a_hb, table), cluster(b_hb, table)
    written = 0

    def write(n: int) -> None:
        nonlocal written
        conn = a.conn()
        for _ in range(n):
            conn.table(table).put(b"row%04d" % (written * 7 % 1000), {b"r:q": b"v%d" % written})
            written += 1
        conn.close()

    with managed_peer(a, b, unique("reg")) as peer:
        wait_queues_hold_current_wals(a, peer)
        write(100)
        (region,) = a_hb.call("regions", table=table)
        a_hb.call("split_region", region=region["region"], split_key=b"row0500".hex())
        regions = wait_until(lambda: len(r := a_hb.call("regions", table=table)) == 2 and r, what="two regions")
        assert [r["end"] for r in regions] == [b"row0500".hex(), ""]
        write(100)
        first = regions[0]
        other = next(s for s in a_hb.servers() if s != first["server"])
        a_hb.call("move_region", region=first["region"], server=other)
        wait_until(
            lambda: {r["region"]: r["server"] for r in a_hb.call("regions", table=table)}.get(first["region"]) == other,
            what=f"region {first['region']} on {other}",
        )
        write(100)
        # HBase merges no region that still holds references to its split parent: compact them away
        a_hb.call("major_compact", table=table)
        a_hb.call("merge_regions", regions=[r["region"] for r in regions])
        wait_until(lambda: len(a_hb.call("regions", table=table)) == 1, what="one region again")
        write(100)
        summary = ship(a, peer)
        assert summary.status == "ok", summary.error
        assert contents(b) == contents(a, b"r") and len(contents(b)) == len({i * 7 % 1000 for i in range(written)})


def test_a_command_hbase_refuses_is_one_error_naming_the_cluster_and_the_command(
    real_hbase: tuple[HBaseProcess, HBaseProcess],
) -> None:
    a_hb, _ = real_hbase
    with pytest.raises(
        HarnessError, match="HBase cluster A: nope failed: IllegalArgumentException: unknown command nope"
    ):
        a_hb.call("nope")
    with pytest.raises(HarnessError, match="HBase cluster A: create_table failed: .*needs families"):
        a_hb.call("create_table", table=unique("nofam"))
    assert a_hb.servers()  # the cluster goes on serving
