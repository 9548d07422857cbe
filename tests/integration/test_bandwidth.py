"""A peer's bandwidth with real miniclusters and ZooKeeper: the real Shipper ships a known
number of bytes no faster than the limit, reports the time it waited (summary, progress
record, status, metrics), never waits for an unlimited peer, and a running tailer takes a
changed limit from its next batch."""

from __future__ import annotations

import datetime as dt
import json
import threading
import time
from collections.abc import Sequence

import pytest
from kazoo.client import KazooClient
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families
from replication_helpers import Cluster, contents, tail_in_thread
from waiting import wait_until

from walship.cli import main
from walship.peer import PeerConfig
from walship.replicate import PeerSummary, Shipper, WalStore
from walship.replicate.replay import replay
from walship.replicate.throttle import CYCLE_S, ThrottledSink
from walship.sinks.base import ApplyStats, FilteredEntry
from walship.status import collect_status
from walship.status.metrics import status_registry
from walship.status.model import ReplicationStatus
from walship.zk import ZnodeLayout, zk_client
from walship.zk.records import ProgressStore

pytestmark = pytest.mark.integration

LIMIT = 200_000  # bytes a second: 20,000 a 100 ms cycle
VALUE = b"v" * 1000
ROWS = 600  # about 620 kB of cells: 3 s at the limit
BATCH_BYTES = 16 * 1024  # batches under a cycle's budget, as the limit's lower bound assumes


def row_key(i: int) -> bytes:
    return b"row%05d" % i


def keyvalue_size(row: bytes, family: bytes, qualifier: bytes, value: bytes) -> int:
    """A Put cell serialized as a KeyValue: lengths, key (row, family, qualifier, timestamp,
    type) and value."""
    return 4 + 4 + 2 + len(row) + 1 + len(family) + len(qualifier) + 8 + 1 + len(value)


def write_rows(a: Cluster, start: int, n: int) -> int:
    """Write rows of one 1 kB cell in family r (scope 1), each in a call of its own, so a WAL
    entry of its own (HBase logs a call's rows in one); the bytes the peer is to be sent."""
    with a.table().batch(batch_size=1) as batch:
        for i in range(start, start + n):
            batch.put(row_key(i), {b"r:q": VALUE})
    return sum(keyvalue_size(row_key(i), b"r", b"q", VALUE) for i in range(start, start + n))


def cli(a: Cluster, *argv: str) -> list[str]:
    return ["--zk", a.zk_hosts, "--znode-parent", a.parent, "--wal-root", str(a.mc.wal_root), *argv]


def ship_timed(a: Cluster) -> tuple[PeerSummary, float]:
    with zk_client(a.zk_hosts) as client:
        shipper = Shipper(client, ZnodeLayout(a.parent), WalStore(a.mc.wal_root), batch_bytes=BATCH_BYTES)
        t0 = time.monotonic()
        summary = shipper.ship_peer("1")
        return summary, time.monotonic() - t0


def status_of(a: Cluster) -> ReplicationStatus:
    with zk_client(a.zk_hosts) as client:
        return collect_status(client, ZnodeLayout(a.parent), WalStore(a.mc.wal_root), "1", probe_timeout=0)


def records(a: Cluster) -> list[dict[str, object]]:
    with zk_client(a.zk_hosts) as client:
        return ProgressStore(client, ZnodeLayout(a.parent)).list("1")


def metric(status: ReplicationStatus, name: str) -> float:
    text = generate_latest(status_registry(lambda: status)).decode()
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and sample.labels == {"peer": "1"}:
                return float(sample.value)
    raise AssertionError(f"no {name}{{peer=1}} in\n{text}")


def test_a_limited_peer_ships_no_faster_than_its_limit_and_reports_the_wait(
    ab: tuple[Cluster, Cluster], capsys: pytest.CaptureFixture[str]
) -> None:
    a, b = ab
    assert main(cli(a, "peer", "set", "1", "--bandwidth", str(LIMIT))) == 0
    assert f"bandwidth: unlimited -> {LIMIT} bytes/s" in capsys.readouterr().out
    total = write_rows(a, 0, ROWS)

    summary, elapsed = ship_timed(a)
    assert summary.status == "ok", summary.error
    assert summary.totals()["cells_shipped"] == ROWS
    assert set(contents(b)) == {row_key(i) for i in range(ROWS)}
    # every cycle of 100 ms took less than its budget of LIMIT/10 bytes (each batch being
    # smaller than the budget), so shipping `total` bytes took at least total/LIMIT - one cycle
    assert elapsed >= total / LIMIT - CYCLE_S, (elapsed, total)
    throttled = summary.to_json()["throttled_s"]
    assert 0 < throttled <= elapsed
    assert throttled == pytest.approx(sum(q.throttled_s for q in summary.queues), abs=0.01)
    assert all(q["throttled_s"] >= 0 for q in summary.to_json()["queues"])

    # the progress records and the status have it too
    recorded = sum(float(r["throttled_s"]) for r in records(a))  # type: ignore[arg-type]
    assert recorded == pytest.approx(throttled, abs=0.01 * len(summary.queues))
    status = status_of(a)
    (peer,) = status.peers
    assert peer.to_json()["throttled_s"] == pytest.approx(recorded, abs=0.01)
    assert all("throttled_s" in q for q in peer.to_json()["queues"])
    assert metric(status, "walship_throttled_seconds_total") == pytest.approx(peer.throttled_s)
    assert metric(status, "walship_peer_bandwidth_bytes") == LIMIT

    assert main(cli(a, "status", "--json")) == 0
    shown = json.loads(capsys.readouterr().out)["peers"][0]
    assert shown["throttled_s"] == pytest.approx(peer.throttled_s)
    assert sum(q["throttled_s"] for q in shown["queues"]) == pytest.approx(peer.throttled_s, abs=0.01)
    assert main(cli(a, "status")) == 0
    text = capsys.readouterr().out
    assert "THROTTLED" in text and f"bandwidth {LIMIT / 1024:.1f} KiB/s, throttled " in text


def test_a_replay_keeps_to_the_peers_bandwidth(ab: tuple[Cluster, Cluster]) -> None:
    a, b = ab
    begin = dt.datetime.now(dt.UTC)  # before every write, after A's first WAL began
    total = write_rows(a, 0, ROWS)
    assert main(cli(a, "peer", "set", "1", "--bandwidth", str(LIMIT))) == 0

    with zk_client(a.zk_hosts) as client:
        end = dt.datetime.now(dt.UTC)  # after every write; the WAL being written covers until now
        t0 = time.monotonic()
        # batches of 16 rows (16 kB) stay under a cycle's budget, as the lower bound assumes
        report = replay(client, ZnodeLayout(a.parent), WalStore(a.mc.wal_root), "1", begin, end, batch_entries=16)
        elapsed = time.monotonic() - t0
    assert report.cells_shipped == ROWS and set(contents(b)) == {row_key(i) for i in range(ROWS)}
    assert elapsed >= total / LIMIT - CYCLE_S, (elapsed, total)
    assert 0 < report.to_json()["throttled_s"] <= elapsed


def test_an_unlimited_peer_is_never_throttled(ab: tuple[Cluster, Cluster], capsys: pytest.CaptureFixture[str]) -> None:
    a, b = ab
    write_rows(a, 0, ROWS)
    summary, _ = ship_timed(a)
    assert summary.status == "ok", summary.error
    assert len(contents(b)) == ROWS
    assert summary.to_json()["throttled_s"] == 0 and all(q.throttled_s == 0 for q in summary.queues)
    assert all(r["throttled_s"] == 0 for r in records(a))
    status = status_of(a)
    assert status.peers[0].to_json()["throttled_s"] == 0
    assert all(q["throttled_s"] == 0 for q in status.peers[0].to_json()["queues"])
    assert metric(status, "walship_throttled_seconds_total") == 0
    assert metric(status, "walship_peer_bandwidth_bytes") == 0
    assert main(cli(a, "status")) == 0
    assert "throttled" not in capsys.readouterr().out.split("\n")[0]  # no limit, never throttled


def test_a_running_tailer_takes_a_changed_bandwidth(ab: tuple[Cluster, Cluster]) -> None:
    a, b = ab
    stop = threading.Event()
    thread, out = tail_in_thread(a, duration=120, rediscover=0.3, stop=stop)
    try:
        write_rows(a, 0, 20)
        wait_until(lambda: len(contents(b)) == 20, what="the first 20 rows on B, unlimited")
        wait_until(lambda: records(a), what="a progress record of peer 1")
        assert all(r["throttled_s"] == 0 for r in records(a))

        assert main(cli(a, "peer", "set", "1", "--bandwidth", "20000")) == 0  # 2,000 bytes a cycle
        written = 20

        def throttled() -> bool:
            nonlocal written
            written += write_rows(a, written, 10) and 10  # 10 kB a time: 5 cycles' budget
            return any(float(r["throttled_s"]) > 0 for r in records(a))  # type: ignore[arg-type]

        wait_until(throttled, timeout=60, interval=0.2, what="the tailer's batches to wait for the new limit")
        wait_until(lambda: len(contents(b)) == written, timeout=60, what="every row on B")
    finally:
        stop.set()
        thread.join(timeout=60)
    assert out and out[0].status == "ok", out
    assert out[0].throttled_s > 0 and out[0].to_json()["throttled_s"] > 0  # the tail's summary says it waited


class Recording:
    def apply(self, entries: Sequence[FilteredEntry], wal: str) -> ApplyStats:
        return ApplyStats()

    def close(self) -> None:
        pass


def test_one_throttler_per_peer_in_a_shipper_following_the_peer(zk: KazooClient, tmp_path: object) -> None:
    shipper = Shipper(zk, ZnodeLayout("/hbase-x"), WalStore(str(tmp_path)), sink_factory=lambda peer: Recording())
    peer = PeerConfig("1", "h:2181:/b", bandwidth=1000)
    first, again = shipper.open_sink(peer), shipper.open_sink(peer)
    other = shipper.open_sink(PeerConfig("2", "h:2181:/c", bandwidth=1000))
    assert isinstance(first, ThrottledSink) and isinstance(again, ThrottledSink) and isinstance(other, ThrottledSink)
    assert first.throttler is again.throttler and other.throttler is not first.throttler
    # a changed peer (the tailer opens a new sink for it) changes the one throttler, at once
    changed = shipper.open_sink(PeerConfig("1", "h:2181:/b", bandwidth=5000))
    assert isinstance(changed, ThrottledSink) and changed.throttler is first.throttler
    assert first.throttler.bandwidth == 5000
    shipper.open_sink(PeerConfig("1", "h:2181:/b"))
    assert not first.throttler.enabled and other.throttler.bandwidth == 1000
