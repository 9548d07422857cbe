"""On real HBase 2.6 with its WALs on HDFS (a MiniDFSCluster): walship reads them over WebHDFS
and through pyarrow's HDFS client (libhdfs), decodes them cell for cell and ships them. The
WAL HBase is writing counts for what HBase hflushed, never for the NameNode's length of it
(which lags: 0 bytes until the WAL's first block is complete)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from real_hbase import (
    all_wal_entries,
    layout,
    managed_peer,
    table_on_both,
    unique,
    wait_queues_hold_current_wals,
)
from replication_helpers import contents, ship, tail_in_thread

from walship.replicate import Planner, WalStore
from walship.status import collect_status, take_cut, wait_drained
from walship.wal import WalReader
from walship.zk import ReplicationPeers, ReplicationQueues, zk_client
from walship_testing.harness import HBaseProcess, harness_dir

pytestmark = pytest.mark.integration

#: Where `make setup` (scripts/libhdfs.sh) builds libhdfs.so for pyarrow's HDFS client.
LIBHDFS_DIR = Path(sys.prefix) / "libhdfs"


@pytest.fixture
def hdfs_source(real_hdfs: HBaseProcess) -> HBaseProcess:
    return real_hdfs


def test_wals_on_hdfs_are_read_over_webhdfs_and_shipped(
    hdfs_source: HBaseProcess, real_hbase: tuple[HBaseProcess, HBaseProcess]
) -> None:
    _, b_hb = real_hbase
    assert hdfs_source.wal_root.startswith("webhdfs://") and hdfs_source.ready["wal_root"].startswith("hdfs://")
    h, b = table_on_both(hdfs_source, b_hb, "hdfs")
    table = h.table_name.decode()
    with managed_peer(h, b, unique("h")) as peer:
        wait_queues_hold_current_wals(h, peer)
        conn = h.conn()
        for ts in (100, 200):
            for i in range(100):
                conn.table(table).put(b"row%03d" % i, {b"r:q": b"v%d" % ts, b"l:x": b"local"}, timestamp=ts)
        conn.close()
        hdfs_source.call("roll")
        cells = [
            (c.row, c.family, c.timestamp)
            for e in all_wal_entries(h)
            if e.key.table == table.encode() and not e.is_meta
            for c in e.cells
        ]
        assert sorted(cells) == sorted(
            (b"row%03d" % i, f, ts) for ts in (100, 200) for i in range(100) for f in (b"l", b"r")
        )
        summary = ship(h, peer)
        assert summary.status == "ok", summary.error
        assert len(contents(b)) == 100 and contents(b, versions=5) == contents(h, b"r", versions=5)


def hdfs_client_env(tmp: Path) -> dict[str, str]:
    """What pyarrow's HDFS client needs, for a walship process of its own (its JVM stays out of
    pytest's): libhdfs.so, and the Hadoop client jars the harness resolved from Maven Central.
    The JVM logs to stderr, as with Hadoop's own log4j.properties (a test jar of the harness's
    classpath carries one that logs to stdout)."""
    if not (LIBHDFS_DIR / "libhdfs.so").is_file():
        pytest.fail(f"no {LIBHDFS_DIR}/libhdfs.so: `make setup` builds it (scripts/libhdfs.sh)")
    classpath = (harness_dir() / "target" / "classpath.txt").read_text().strip()
    log4j = tmp / "log4j.properties"
    log4j.write_text(
        "log4j.rootLogger=WARN,err\nlog4j.appender.err=org.apache.log4j.ConsoleAppender\n"
        "log4j.appender.err.target=System.err\nlog4j.appender.err.layout=org.apache.log4j.PatternLayout\n"
    )
    return {
        **os.environ,
        "ARROW_LIBHDFS_DIR": str(LIBHDFS_DIR),
        "CLASSPATH": classpath,
        "LIBHDFS_OPTS": f"-Dlog4j.configuration=file:{log4j}",
    }


def test_an_open_wal_counts_for_what_hbase_hflushed_not_for_the_namenodes_length(
    hdfs_source: HBaseProcess, real_hbase: tuple[HBaseProcess, HBaseProcess], tmp_path: Path
) -> None:
    _, b_hb = real_hbase
    h, b = table_on_both(hdfs_source, b_hb, "open")
    table = h.table_name.decode()
    store = WalStore(hdfs_source.wal_root)
    with managed_peer(h, b, unique("o")) as peer:
        wait_queues_hold_current_wals(h, peer)
        conn = h.conn()
        for i in range(200):  # ~200 KiB acknowledged, no roll: the WAL stays open
            conn.table(table).put(b"row%03d" % i, {b"r:q": b"v" * 1000})
        conn.close()
        with zk_client(h.zk_hosts) as client:
            (q,) = ReplicationQueues(client, layout(h)).list_queues(peer)
            (wp,) = q.wals  # the WAL HBase is writing

            def decoded() -> tuple[int, int, set[bytes]]:
                """Where a reader's header and last complete entry end, and the table's rows it decodes."""
                loc = store.locate(wp.name, q.server)
                with store.open(loc) as f:
                    reader = WalReader(f, loc.path)
                    rows = {
                        c.row
                        for e in reader.entries()
                        if e.key.table == table.encode() and not e.is_meta
                        for c in e.cells
                    }
                return reader.header_end, reader.stop_offset, rows

            listed = store.listing()[wp.name]
            header, before, rows = decoded()
            status = collect_status(client, layout(h), store, peer, probe_timeout=0)
            backlog = Planner(client, layout(h), store).backlog(q)  # the sensor's
            # the same through pyarrow's HDFS client (libhdfs), at the hdfs:// root
            flags = ["--zk", h.zk_hosts, "--znode-parent", h.parent, "--wal-root", hdfs_source.ready["wal_root"]]
            run = subprocess.run(
                [sys.executable, "-m", "walship.cli", *flags, "status", "--peer", peer, "--json"],
                env=hdfs_client_env(tmp_path), capture_output=True, text=True, timeout=180,
            )  # fmt: skip
            _, after, _ = decoded()
    assert rows == {b"row%03d" % i for i in range(200)}
    assert not listed.archived and not listed.visible and listed.size < before  # the NameNode's lags
    (qs,) = status.peers[0].queues
    assert before - wp.position <= qs.bytes_queued <= after - wp.position
    assert qs.unshipped and qs.lag_s > 0 and qs.progress_pct < 100
    start = max(wp.position, header)
    assert before - start <= backlog <= after - start
    assert run.returncode == 0, run.stderr
    (qj,) = json.loads(run.stdout)["peers"][0]["queues"]
    assert before - wp.position <= qj["bytes_queued"] <= after - wp.position


def test_wait_drained_on_hdfs_returns_with_every_acknowledged_write_on_b_without_a_roll(
    hdfs_source: HBaseProcess, real_hbase: tuple[HBaseProcess, HBaseProcess]
) -> None:
    _, b_hb = real_hbase
    h, b = table_on_both(hdfs_source, b_hb, "drain")
    table = h.table_name.decode()
    store = WalStore(hdfs_source.wal_root)
    with managed_peer(h, b, unique("d")) as peer, zk_client(h.zk_hosts) as client:
        wait_queues_hold_current_wals(h, peer)
        peers = ReplicationPeers(client, layout(h))
        # walship's switch off: the tailer ships nothing until the cut is taken, so the cut
        # has unshipped bytes of the open WAL to wait for
        peers.disable(peer)
        stop = threading.Event()
        tailer, summaries = tail_in_thread(h, peer, duration=600, stop=stop, rediscover=0.2)
        try:
            conn = h.conn()
            for i in range(300):
                conn.table(table).put(b"row%03d" % i, {b"r:q": b"v%d" % i})
            conn.close()
            acknowledged = {b"row%03d" % i for i in range(300)}
            cut = take_cut(client, layout(h), store, peer)  # what `walship wait-drained` does
            (point,) = cut.points
            listed = store.listing()[point.wal]
            assert not listed.archived and listed.size < point.offset  # past the NameNode's length
            peers.enable(peer)
            result = wait_drained(client, layout(h), cut, timeout=120)
            on_b = set(contents(b))  # at once, while the tailer goes on
        finally:
            stop.set()
            tailer.join(timeout=120)
    assert result.drained, result.message()
    assert acknowledged <= on_b, f"{len(acknowledged - on_b)} acknowledged rows are not on B"
    assert summaries and summaries[0].status == "ok", summaries
