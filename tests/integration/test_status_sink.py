"""The sink side of status with real miniclusters and real shipping: when walship last applied
a batch to each peer and the age of its last edit, in HBase's SINK line, the JSON and the
metrics; a peer never applied to in HBase's "Waiting for OPs" form; old progress records."""

from __future__ import annotations

import datetime as dt
import json
import re
import time
from collections.abc import Sequence
from typing import Any

import pytest
from region_ops import wals_by_server
from replication_helpers import Cluster, add_peer, ship
from waiting import wait_until

from walship.cli import main
from walship.peer import PeerConfig
from walship.replicate import Shipper, WalStore
from walship.sinks.base import ApplyStats, FilteredEntry
from walship.status import collect_status
from walship.status.metrics import status_registry
from walship.status.model import ReplicationStatus, iso_ms
from walship.zk import ReplicationQueues, ZnodeLayout, zk_client
from walship.zk.records import ProgressStore

pytestmark = pytest.mark.integration

SINK_KEYS = {"timestamp_started", "last_applied_at", "last_applied_write_time", "age_of_last_applied_op_s"}
APPLIED = re.compile(r"^      SINK: TimeStampStarted=(\d+), AgeOfLastAppliedOp=(\d+), TimeStampsOfLastAppliedOp=(.+)$")


def now_ms() -> int:
    return int(time.time() * 1000)


def java_date(ms: int) -> str:
    """``java.util.Date.toString()`` in UTC, worked out here, not with walship's helper."""
    return dt.datetime.fromtimestamp(ms / 1000, dt.UTC).strftime("%a %b %d %H:%M:%S UTC %Y")


def peer_started(a: Cluster, peer_id: str) -> int:
    with zk_client(a.zk_hosts) as client:
        return int(client.get(ZnodeLayout(a.parent).peer(peer_id))[1].ctime)


def status_of(a: Cluster) -> ReplicationStatus:
    with zk_client(a.zk_hosts) as client:
        return collect_status(client, ZnodeLayout(a.parent), WalStore(a.mc.wal_root))


def cli(a: Cluster, capsys: pytest.CaptureFixture[str], *args: str) -> str:
    capsys.readouterr()
    assert main(["--zk", a.zk_hosts, "--znode-parent", a.parent, "--wal-root", a.mc.wal_root, "status", *args]) == 0
    return capsys.readouterr().out


def sink_block(text: str, peer_id: str) -> list[str]:
    """The header line of the peer's block in HBase's layout and the SINK line under it."""
    lines = text.splitlines()
    (i,) = [i for i, line in enumerate(lines) if line.startswith(f"    peer {peer_id} -> ")]
    return lines[i : i + 2]


def last_r_write_time(a: Cluster) -> tuple[str, int]:
    """The server whose WALs hold table t's edits of family r (replicated), and the write time
    of the last of them."""
    found = {
        server: max(e.key.write_time for e in kept)
        for server, entries in wals_by_server(a.mc.wal_root).items()
        if (kept := [e for e in entries if e.key.table == b"t" and any(c.family == b"r" for c in e.cells)])
    }
    assert len(found) == 1, found  # one region: one queue ships them all, the last applied is exact
    return next(iter(found.items()))


def write_then_unreplicated(a: Cluster, start: int, n: int) -> tuple[int, int]:
    """``n`` rows of family r (replicated), then, a millisecond later at least, one cell of
    family l (scope 0) on the last of them: read by the shipper, filtered out, never applied.
    Returns the write times of the last r edit and of the l edit."""
    t = a.table()
    for i in range(start, start + n):
        t.put(b"row%05d" % i, {b"r:q": b"v%d" % i})
    _, last_r = last_r_write_time(a)
    wait_until(lambda: now_ms() > last_r, what="the clock past the last replicated edit")
    t.put(b"row%05d" % (start + n - 1), {b"l:q": b"not replicated"})
    l_times = [
        e.key.write_time
        for entries in wals_by_server(a.mc.wal_root).values()
        for e in entries
        if e.key.table == b"t" and any(c.family == b"l" for c in e.cells)
    ]
    assert l_times and max(l_times) > last_r
    return last_r, max(l_times)


def ship_one_entry_batches(a: Cluster) -> None:
    """Ship peer 1 in batches of one entry: each full batch is applied in the background while
    the next is read (the pipelined path), its position committed later."""
    with (
        zk_client(a.zk_hosts) as client,
        Shipper(
            client, ZnodeLayout(a.parent), WalStore(a.mc.wal_root), batch_entries=1, source_thrift2=a.thrift2_address()
        ) as shipper,
    ):
        summary = shipper.ship_peer("1")
    assert summary.status == "ok", summary.error


def check_applied(
    ab: tuple[Cluster, Cluster], capsys: pytest.CaptureFixture[str], window: tuple[int, int], write_time: int
) -> int:
    """The SINK line, the JSON and the metric of peer 1 (A to B) say a batch was applied within
    ``window`` (epoch ms) whose last edit was written at ``write_time``; returns the apply time."""
    a, b = ab
    (peer,) = [p for p in json.loads(cli(a, capsys, "--json"))["peers"] if p["peer_id"] == "1"]
    sink = peer["sink"]
    assert set(sink) == SINK_KEYS
    assert sink["last_applied_write_time"] == iso_ms(write_time)
    assert sink["timestamp_started"] == iso_ms(peer_started(a, "1"))
    status = status_of(a)
    (ours,) = [p.sink for p in status.peers if p.peer_id == "1"]
    assert ours.last_applied_at is not None and window[0] <= ours.last_applied_at <= window[1]
    assert sink["last_applied_at"] == iso_ms(ours.last_applied_at)
    age = ours.last_applied_at - write_time
    assert age >= 0 and sink["age_of_last_applied_op_s"] == age / 1000
    header, line = sink_block(cli(a, capsys, "--format", "hbase"), "1")
    assert header == f"    peer 1 -> {b.cluster_key}:"
    match = APPLIED.match(line)
    assert match, line
    assert match.groups() == (str(peer_started(a, "1")), str(age), java_date(write_time))
    sample = status_registry(lambda: status).get_sample_value("walship_age_of_last_applied_op_seconds", {"peer": "1"})
    assert sample == age / 1000
    return ours.last_applied_at


def test_sink_lines_show_the_last_applied_batch_per_peer(
    ab: tuple[Cluster, Cluster], capsys: pytest.CaptureFixture[str]
) -> None:
    a, b = ab
    add_peer(a, b, "2")  # never shipped
    before = cli(a, capsys, "--format", "hbase")
    for pid in ("1", "2"):
        header, line = sink_block(before, pid)
        assert header == f"    peer {pid} -> {b.cluster_key}:"
        assert line == f"      SINK: TimeStampStarted={peer_started(a, pid)}, Waiting for OPs... "
    data = json.loads(cli(a, capsys, "--json"))
    for p in data["peers"]:
        assert p["sink"] == {
            "timestamp_started": iso_ms(peer_started(a, p["peer_id"])),
            "last_applied_at": None,
            "last_applied_write_time": None,
            "age_of_last_applied_op_s": None,
        }
    never = status_registry(lambda: status_of(a)).get_sample_value(
        "walship_age_of_last_applied_op_seconds", {"peer": "1"}
    )
    assert never is not None and never != never  # NaN before anything was applied
    assert "sink: no batch applied yet" in cli(a, capsys)

    # pipelined: batches of one entry applied in the background; the last one read (family l)
    # is filtered out, so the last applied edit is the last r edit, not the last edit read
    last_r, _ = write_then_unreplicated(a, 0, 20)
    t0 = now_ms()
    ship_one_entry_batches(a)
    first = check_applied(ab, capsys, (t0, now_ms()), last_r)
    assert "Waiting for OPs... " in sink_block(cli(a, capsys, "--format", "hbase"), "2")[1]
    table = cli(a, capsys)
    assert f"sink: last batch applied {iso_ms(first)}, its last edit written {iso_ms(last_r)}" in table

    # a pass whose batches the filters leave empty applies nothing: the sink stays as it was
    a.table().put(b"row00000", {b"l:q": b"again"})
    assert ship(a).status == "ok"
    assert check_applied(ab, capsys, (first, first), last_r) == first

    # one batch applied then committed (not pipelined): the newer batch replaces the older
    last_r, _ = write_then_unreplicated(a, 20, 5)
    t1 = now_ms()
    assert ship(a).status == "ok"
    assert check_applied(ab, capsys, (max(t1, first), now_ms()), last_r) > first


def test_records_written_before_applies_were_recorded_still_read(
    ab: tuple[Cluster, Cluster], capsys: pytest.CaptureFixture[str]
) -> None:
    a, _ = ab
    with zk_client(a.zk_hosts) as client:
        layout = ZnodeLayout(a.parent)
        q = ReplicationQueues(client, layout).list_queues("1")[0]
        path = layout.queue_progress("1", q.server, str(q.queue_id))
        old: dict[str, Any] = {
            "peer_id": "1", "server": q.server, "queue_id": str(q.queue_id), "last_shipped_wal": q.wals[0].name,
            "last_shipped_position": 0, "last_shipped_write_time": 1767225600000, "batches": 1,
            "entries_shipped": 1, "cells_shipped": 1, "bytes_shipped": 10, "bulk_loads": 0, "throttled_s": 0.0,
            "last_shipped_at": 1767225601000, "updated_at": 1767225601000, "last_error": None, "last_backoff": None,
        }  # fmt: skip
        client.create(path, json.dumps(old).encode(), makepath=True)
        status = status_of(a)
        (peer,) = status.peers
        assert not peer.sink.applied and peer.sink.age_of_last_applied_op_ms is None
        assert sum(qs.cells_shipped for qs in peer.queues) == 1
        assert sink_block(cli(a, capsys, "--format", "hbase"), "1")[1].endswith(", Waiting for OPs... ")

        store = ProgressStore(client, layout)
        written = store.record("1", q.server, str(q.queue_id), applied=(1767225602000, 1767225601500))
        assert {k: written[k] for k in old if k != "updated_at"} == {k: v for k, v in old.items() if k != "updated_at"}
        assert (written["last_applied_at"], written["last_applied_write_time"]) == (1767225602000, 1767225601500)
        # an older apply (a record written late) never replaces a newer one
        store.record("1", q.server, str(q.queue_id), applied=(1767225601900, 1767225601000))
        again = store.record("1", q.server, str(q.queue_id), counters={"batches": 1})
        assert (again["last_applied_at"], again["last_applied_write_time"]) == (1767225602000, 1767225601500)
    (peer,) = status_of(a).peers
    assert peer.sink.age_of_last_applied_op_ms == 500
    match = APPLIED.match(sink_block(cli(a, capsys, "--format", "hbase"), "1")[1])
    assert match and match.groups() == (str(peer_started(a, "1")), "500", java_date(1767225601500))


class PassingOver:
    """A sink with nothing to do for any entry (as a Thrift1 peer for cells it cannot take)."""

    def __init__(self, peer: PeerConfig) -> None:
        self.peer = peer

    def apply(self, entries: Sequence[FilteredEntry], wal: str) -> ApplyStats:
        return ApplyStats(passed_over=len(entries))

    def close(self) -> None:
        pass


def test_a_batch_whose_every_entry_the_sink_passed_over_is_no_apply(
    ab: tuple[Cluster, Cluster], capsys: pytest.CaptureFixture[str]
) -> None:
    a, _ = ab
    write_then_unreplicated(a, 0, 5)
    with zk_client(a.zk_hosts) as client:
        layout = ZnodeLayout(a.parent)
        with Shipper(client, layout, WalStore(a.mc.wal_root), sink_factory=PassingOver) as shipper:
            summary = shipper.ship_peer("1")
        assert summary.status == "ok", summary.error
        records = ProgressStore(client, layout).list("1")
    assert any(r["last_shipped_wal"] for r in records)  # the pass was recorded: its batches were read
    assert all(r["last_applied_at"] is None for r in records)
    assert sink_block(cli(a, capsys, "--format", "hbase"), "1")[1].endswith(", Waiting for OPs... ")
