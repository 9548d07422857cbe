"""An idle tailer's wait ends when a WAL grows: it lists the WAL folders of its queues'
servers, so a write is shipped without waiting out ``idle_sleep``; while nothing grows it
does not pass again before ``idle_sleep`` is out (no busy loop), and its deadline and stop
event still end the wait. WALs on a local disk are probed by default, others not."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from kazoo.client import KazooClient
from replication_helpers import Cluster, contents, tail_in_thread
from waiting import wait_until

from walship.defaults import TAIL_IDLE_SLEEP, TAIL_PROBED_IDLE_SLEEP
from walship.errors import ConfigError
from walship.replicate import WalStore
from walship.replicate.summary import TailSummary
from walship.replicate.tailer import PROBE_INTERVAL, Tailer
from walship.zk import ZnodeLayout

pytestmark = pytest.mark.integration

#: Far longer than any wait below: a row shipped within them was not shipped by the idle sleep.
IDLE_SLEEP = 600.0


@pytest.fixture
def sink_protocol() -> str:
    return "thrift1"


def start(
    a: Cluster, duration: float, stop: threading.Event, tailers: list[Tailer] | None = None
) -> tuple[threading.Thread, list[TailSummary]]:
    return tail_in_thread(a, duration=duration, idle_sleep=IDLE_SLEEP, stop=stop, tailers=tailers)


def test_a_write_ends_the_idle_wait(ab: tuple[Cluster, Cluster]) -> None:
    a, b = ab
    stop = threading.Event()
    running: list[Tailer] = []
    tailer, out = start(a, duration=120, stop=stop, tailers=running)
    try:
        tb = b.table()
        for i in range(3):
            # each write lands while the tailer waits, idle, after a pass that found nothing
            wait_until(lambda: running and running[0].idle.is_set(), what="the tailer to wait idle")
            a.table().put(b"row-%d" % i, {b"r:q": b"%d" % i})
            wait_until(lambda i=i: tb.row(b"row-%d" % i), timeout=30, what=f"row-{i} on B")
    finally:
        stop.set()  # ends the idle wait too
        tailer.join(timeout=60)
    assert not tailer.is_alive()
    summary = out[0]
    assert summary.status == "ok"
    # a pass that ships and one that finds nothing, at the start and for each write (three
    # for a write landing while a pass reads): a few passes in all, not a busy loop
    assert summary.passes <= 3 * (1 + 3), summary
    assert contents(b) == contents(a, b"r")


def test_the_deadline_ends_the_idle_wait(ab: tuple[Cluster, Cluster]) -> None:
    a, _ = ab
    tailer, out = start(a, duration=2, stop=threading.Event())
    tailer.join(timeout=60)
    assert not tailer.is_alive()
    # a pass ships what the setup wrote, the next finds nothing and waits for the deadline
    assert out[0].status == "ok" and out[0].passes <= 3


def test_local_wals_are_probed_by_default_others_not(zk: KazooClient, layout: ZnodeLayout, tmp_path: Path) -> None:
    assert Tailer(zk, layout, WalStore(str(tmp_path)), "1").probe_interval == PROBE_INTERVAL
    assert Tailer(zk, layout, WalStore("memory://walship-probe"), "1").probe_interval == 0
    # probed, a write ends the idle wait: the sleep itself is long; unprobed it stays short
    assert Tailer(zk, layout, WalStore(str(tmp_path)), "1").idle_sleep == TAIL_PROBED_IDLE_SLEEP
    assert Tailer(zk, layout, WalStore("memory://walship-probe"), "1").idle_sleep == TAIL_IDLE_SLEEP
    given = Tailer(zk, layout, WalStore(str(tmp_path)), "1", idle_sleep=0.02)
    assert given.idle_sleep == 0.02 and given.first_backoff == 0.02
    assert Tailer(zk, layout, WalStore(str(tmp_path)), "1").first_backoff == TAIL_IDLE_SLEEP  # outages: as before
    assert Tailer(zk, layout, WalStore("memory://walship-probe"), "1", probe_interval=0.05).probe_interval == 0.05
    with pytest.raises(ConfigError, match="probe interval"):
        Tailer(zk, layout, WalStore(str(tmp_path)), "1", probe_interval=-1)


def test_the_probe_lists_what_the_file_system_lists(tmp_path: Path) -> None:
    """On a local disk the probe scans the folder itself: the same paths and sizes as fsspec's
    listing (a WAL that grows or appears changes it), and a missing folder says so."""
    store = WalStore(str(tmp_path))
    folder = tmp_path / "WALs" / "rs1,16020,1"
    folder.mkdir(parents=True)
    (folder / "rs1%2C16020%2C1.1700000000000").write_bytes(b"x" * 10)
    (folder / "rs1%2C16020%2C1.1700000000001").write_bytes(b"")
    listed = {(e["name"], int(e["size"])) for e in store.fs.ls(str(folder), detail=True)}
    first = set(store.file_sizes(str(folder)))
    assert first == listed and len(first) == 2
    with open(folder / "rs1%2C16020%2C1.1700000000001", "ab") as f:
        f.write(b"grown")
    assert set(store.file_sizes(str(folder))) - first == {(str(folder / "rs1%2C16020%2C1.1700000000001"), 5)}
    with pytest.raises(FileNotFoundError):
        store.file_sizes(str(tmp_path / "WALs" / "gone"))
