"""Bulk loads: HFiles reach the source without their cells passing through the WAL, which holds
only a BULK_LOAD marker. walship never drops one unseen: every pass counts it (ship summary,
progress record, status, metrics), logs its table, region, families and HFiles, and names
``walship verify`` as the repair; verify then finds exactly the rows it left behind and
repairs them. On real HBase 2.6 (a real bulk load of real HFiles) and on the minicluster."""

from __future__ import annotations

import logging

import pytest
from prometheus_client import generate_latest
from real_hbase import BACKENDS
from replication_helpers import Cluster, contents, ship
from test_verify import counters, run_verify

from walship.replicate import WalStore
from walship.status import collect_status
from walship.status.metrics import status_registry
from walship.zk import ZnodeLayout, zk_client
from walship_testing.harness import HBaseProcess
from walship_testing.minicluster import AdminClient

pytestmark = pytest.mark.integration


@pytest.fixture
def sink_protocol() -> str:
    return "thrift2"  # verify reads the peer over Thrift2


def bulk_load(a: Cluster, cells: list[tuple[bytes, bytes, bytes, bytes, int]]) -> None:
    """Bulk-load ``(family, row, qualifier, value, ts)`` puts into A's table."""
    table = a.table_name.decode()
    if isinstance(a.mc, HBaseProcess):
        a.mc.call(
            "bulk_load", table=table, cells=[[f.hex(), r.hex(), q.hex(), v.hex(), ts] for f, r, q, v, ts in cells]
        )
    else:
        AdminClient(a.mc.admin).bulk_load(table, cells)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_bulk_load_is_counted_named_and_repaired_by_verify(
    ab: tuple[Cluster, Cluster], caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    a, b = ab
    conn = a.conn()
    for i in range(10):
        conn.table(a.table_name).put(b"put%02d" % i, {b"r:q": b"p%d" % i}, timestamp=1000)
    conn.close()
    loaded = [(b"r", b"bulk%02d" % i, b"q", b"b%d" % i, 2000) for i in range(20)]
    bulk_load(a, [*loaded, (b"l", b"bulk00", b"x", b"local", 2000)])
    conn = a.conn()
    conn.table(a.table_name).put(b"put99", {b"r:q": b"after"}, timestamp=3000)
    conn.close()

    with caplog.at_level(logging.WARNING, logger="walship.replicate.batcher.member"):
        summary = ship(a)
    assert summary.status == "ok", summary.error
    assert summary.totals()["bulk_loads"] == 1
    # the edits around it were shipped; the bulk-loaded rows were not (their cells are not in the WAL)
    assert set(contents(b)) == {b"put%02d" % i for i in range(10)} | {b"put99"}
    (message,) = [r.getMessage() for r in caplog.records if "bulk load" in r.getMessage()]
    table = a.table_name.decode()
    # HBase writes the marker without scopes: every family the peer's table-cfs select is named
    assert f"table {table} region " in message and "families [l, r]" in message
    assert "r/" in message and "_SeqId_" in message  # the HFiles, as HBase named them in the region
    assert f"walship verify --peer 1 --table {table} --repair" in message

    with zk_client(a.zk_hosts) as client:
        status = collect_status(client, ZnodeLayout(a.parent), WalStore(a.mc.wal_root), "1", probe_timeout=0)
    (peer,) = status.to_json()["peers"]
    assert sum(q["bulk_loads"] for q in peer["queues"]) == 1
    metrics = generate_latest(status_registry(lambda: status)).decode()
    loads = [
        float(line.rsplit(" ", 1)[1]) for line in metrics.splitlines() if line.startswith("walship_bulk_loads_total{")
    ]
    assert sum(loads) == 1.0

    # a second pass has nothing new: the count stays (the marker is behind the position)
    assert ship(a).totals()["bulk_loads"] == 0

    code, out = run_verify(a, capsys)
    assert code != 0 and out["counters"] == counters(good=11, src=20)
    code, out = run_verify(a, capsys, "--repair")
    _, out = run_verify(a, capsys)
    assert out["counters"] == counters(good=31)
    assert contents(b) == contents(a, b"r")
