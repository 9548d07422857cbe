"""``walship wait-drained`` against a live cluster that keeps writing, and ``walship metrics
serve`` scraped over HTTP, with real miniclusters."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families
from replication_helpers import Cluster, LockstepShipper

from walship.cli import main
from walship.replicate import Shipper, WalStore
from walship.status import collect_status
from walship.zk import ZnodeLayout, zk_client
from walship.zk.records import ProgressStore

pytestmark = pytest.mark.integration


def write(a: Cluster, start: int, n: int, prefix: bytes = b"row") -> None:
    t = a.table()
    for i in range(start, start + n):
        t.put(prefix + b"%05d" % i, {b"r:q": b"v%d" % i})


def cli_args(a: Cluster) -> list[str]:
    return ["--zk", a.zk_hosts, "--znode-parent", a.parent, "--wal-root", str(a.mc.data_dir)]


def test_wait_drained_returns_once_every_earlier_row_is_on_the_peer(
    ab: tuple[Cluster, Cluster], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    a, b = ab
    write(a, 0, 300)
    stop = threading.Event()

    def keep_writing() -> None:  # writes go on through the whole wait
        i = 0
        while not stop.is_set():
            write(a, i, 5, prefix=b"late")
            i += 5

    writer = threading.Thread(target=keep_writing)
    writer.start()
    try:
        with LockstepShipper(a, b, monkeypatch, batch_entries=20) as shipper:
            code = main([*cli_args(a), "wait-drained", "--peer", "1", "--timeout", "90", "--json", "--poll", "0.05"])
    finally:
        stop.set()
        writer.join()
    out = capsys.readouterr().out
    assert code == 0, out
    result = json.loads(out)
    assert result["drained"] and result["cut"]["points"] and result["seconds"] > 0
    assert shipper.batches > 3  # it had to wait for several batches
    on_peer = shipper.on_peer  # the peer when wait-drained said drained, no batch shipped since
    assert on_peer is not None
    missing = [i for i in range(300) if on_peer.get(b"row%05d" % i, {}).get(b"r:q", [(b"", 0)])[0][0] != b"v%d" % i]
    assert not missing, f"{len(missing)} rows written before the call were not on the peer when it returned"
    assert not shipper.failures


def test_wait_drained_times_out_with_exit_2_naming_each_queue(
    ab: tuple[Cluster, Cluster], capsys: pytest.CaptureFixture[str]
) -> None:
    a, _ = ab
    write(a, 0, 40)
    code = main([*cli_args(a), "wait-drained", "--peer", "1", "--timeout", "0.5", "--json"])
    captured = capsys.readouterr()
    assert code == 2
    result = json.loads(captured.out)
    assert not result["drained"] and result["behind"]
    for behind in result["behind"]:
        assert f"queue {behind['server']}/{behind['queue_id']} is" in captured.err
    assert "bytes behind the cut" in captured.err
    assert main([*cli_args(a), "wait-drained", "--peer", "9"]) == 1
    assert "peer 9 does not exist" in capsys.readouterr().err


def scrape(url: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    with urllib.request.urlopen(url, timeout=10) as resp:
        text = resp.read().decode()
    out = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return out


def test_metrics_serve_shows_the_status_model(ab: tuple[Cluster, Cluster]) -> None:
    a, _ = ab
    write(a, 0, 60)
    with zk_client(a.zk_hosts) as client:  # some shipped, some queued
        Shipper(client, ZnodeLayout(a.parent), WalStore(str(a.mc.data_dir)), batch_entries=20).ship_peer(
            "1", max_batches=1
        )
    with subprocess.Popen(
        [sys.executable, "-m", "walship.cli", *cli_args(a), "metrics", "serve", "--port", "0", "--host", "127.0.0.1"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    ) as proc:
        try:
            check_scrape(a, proc)
        finally:
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=30) == 0


def check_scrape(a: Cluster, proc: subprocess.Popen[str]) -> None:
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line.startswith("walship metrics on http://127.0.0.1:"), (line, proc.stderr.read() if proc.stderr else "")
    url = line.split()[-1]
    metrics = scrape(url)
    with zk_client(a.zk_hosts) as client:
        status = collect_status(client, ZnodeLayout(a.parent), WalStore(str(a.mc.data_dir)))
    assert metrics[("walship_status_up", ())] == 1
    assert metrics[("walship_peer_enabled", (("peer", "1"),))] == 1
    (peer,) = status.peers
    for q in peer.queues:
        labels = (("peer", "1"), ("queue", q.queue_id), ("server", q.server))
        assert metrics[("walship_queue_bytes", labels)] == q.bytes_queued
        assert metrics[("walship_queue_wals", labels)] == q.wals
        assert metrics[("walship_shipped_cells_total", labels)] == q.cells_shipped
        assert metrics[("walship_shipped_bytes_total", labels)] == q.bytes_shipped
        assert abs(metrics[("walship_queue_lag_seconds", labels)] - q.lag_s) < 5
        assert ("walship_age_of_last_shipped_op_seconds", labels) in metrics
    assert sum(q.bytes_queued for q in peer.queues) > 0
    # one batch of 20 entries per queue with entries: about 20 cells (markers are filtered)
    assert 0 < sum(metrics[k] for k in metrics if k[0] == "walship_shipped_cells_total") <= 20


def test_shipped_bytes_count_the_cells_the_peer_takes(ab: tuple[Cluster, Cluster]) -> None:
    """Each row holds a replicated cell (family r) and one as large that is not (family l,
    scope 0): a queue's ``bytes_shipped`` is the replicated cells' share of the WAL bytes it
    read, about half of them, not every byte read."""
    a, _ = ab
    t = a.table()
    for i in range(200):
        t.put(b"row%05d" % i, {b"r:q": b"v" * 200, b"l:q": b"w" * 200})
    with zk_client(a.zk_hosts) as client:
        summary = Shipper(client, ZnodeLayout(a.parent), WalStore(str(a.mc.data_dir))).ship_peer("1")
        records = [ProgressStore(client, ZnodeLayout(a.parent)).get("1", q.server, q.queue_id) for q in summary.queues]
    assert summary.totals()["cells_shipped"] == 200
    shipped = sum(int(r["bytes_shipped"]) for r in records if r)
    read = summary.totals()["bytes_read"]
    assert 0.4 * read < shipped < 0.6 * read, (shipped, read)
