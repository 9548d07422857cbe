"""On real HBase 2.6: the WALs HBase itself wrote decode, cell for cell, with both decoders and
with ``walship wal dump``."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import happybase
import pytest
from real_hbase import Cells, all_wal_entries, cluster, create_table, unique, write_workload

from walship.replicate import WalStore
from walship.wal.model import METAFAMILY
from walship_testing.harness import HBaseProcess

pytestmark = pytest.mark.integration


def logged_cells(entries: list[Any], table: bytes) -> tuple[Cells, list[Any]]:
    cells: Cells = []
    keys = []
    for e in entries:
        if e.key.table != table or e.is_meta:
            continue
        keys.append(e.key)
        cells += [(c.row, c.family, c.qualifier, c.timestamp, int(c.type), c.value) for c in e.cells]
    return cells, keys


def test_every_wal_hbase_wrote_decodes_to_exactly_the_cells_written(
    real_hbase: tuple[HBaseProcess, HBaseProcess],
) -> None:
    a, _ = real_hbase
    a.call("create_namespace", namespace=(ns := unique("ns")))
    table = f"{ns}:walt"
    create_table(a, table, splits=[b"m"])
    expected = write_workload(a, table)
    a.call("roll")  # some WALs closed (with a trailer), the current ones still open
    a.call("flush", table=table)
    source = cluster(a, table)

    by_decoder = {d: all_wal_entries(source, d) for d in ("c", "python")}
    assert by_decoder["c"] == by_decoder["python"]
    cells, keys = logged_cells(by_decoder["c"], table.encode())
    # HBase logs each mutation's cells together; the order between rows follows the writes
    assert sorted(cells) == sorted(expected)
    assert [c for c in cells if c[0] == b"t2"] == [c for c in expected if c[0] == b"t2"]
    for key in keys:
        assert key.scopes == {b"r": 1}  # every family of the table whose scope is not LOCAL
        assert key.cluster_ids == ()  # written locally: consumed by no cluster yet
        assert key.write_time > 0 and key.sequence_id > 0
    # the markers HBase writes itself (region open, flush) are there too and are recognised as such
    assert any(e.is_meta and all(c.family == METAFAMILY for c in e.cells) for e in by_decoder["c"])


def test_wal_dump_reads_hbase_wals_open_and_closed(real_hbase: tuple[HBaseProcess, HBaseProcess]) -> None:
    a, _ = real_hbase
    table = unique("dump")
    create_table(a, table)
    conn = happybase.Connection(*a.thrift)
    conn.table(table).put(b"row", {b"r:q": b"value"}, timestamp=1234)
    conn.close()
    store = WalStore(a.wal_root)
    files = [p for p, archived in store.wal_files() if not archived and not p.rsplit("/", 1)[-1].startswith(".")]
    assert files
    found = 0
    for path in files:
        out = subprocess.run(
            [sys.executable, "-m", "walship.cli", "wal", "dump", "--json", path],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
        assert out.returncode == 0, out.stderr
        for line in out.stdout.splitlines():
            entry = json.loads(line)
            if entry["table"] == table and entry["cells"][0]["family"] != "METAFAMILY":
                assert entry["cells"][0]["value"] == "value" and entry["cells"][0]["timestamp"] == 1234
                assert entry["scopes"] == {"r": 1}
                found += 1
    assert found == 1  # the put is in exactly one WAL, an open one
