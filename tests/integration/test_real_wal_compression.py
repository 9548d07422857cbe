"""On real HBase 2.6 with WAL compression (``hbase.regionserver.wal.enablecompression``): the WALs
HBase writes decode, cell for cell and with both decoders, to exactly the cells written, from
the first entry and from any entry; and HBase's own WALPrettyPrinter reads the compressed WALs
walship writes.

One single-server cluster per setting, started once for this module: dictionaries alone; with
tag compression and each value codec walship reads (gz, snappy, lz4, and zstd through HBase's
``ZstdCodec``, as Hadoop's ``ZStandardCodec`` needs the native libhadoop the harness lacks).
"""

from __future__ import annotations

import io
import json
import os
import struct
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import happybase
import pytest
from real_hbase import all_wal_entries, cluster, create_table, thrift2_client, unique, write_workload

from walship.replicate import WalStore
from walship.thrift.hbase2 import hbase2 as T
from walship.wal import Cell, CellType, Tag, WalKey, WalReader, WalWriter
from walship.wal.dump import to_string_binary
from walship.wal.valuecodecs import ALGORITHMS
from walship_testing.harness import HBaseProcess
from walship_testing.harness.process import java_command

pytestmark = pytest.mark.integration

ON = "hbase.regionserver.wal.enablecompression"
TAGS = "hbase.regionserver.wal.tags.enablecompression"
VALUES = "hbase.regionserver.wal.value.enablecompression"
TYPE = "hbase.regionserver.wal.value.compression.type"
#: setting -> (HBase settings, tag compression, value codec)
SETTINGS: dict[str, tuple[dict[str, str], bool, str | None]] = {
    "dictionaries": ({ON: "true", TAGS: "false"}, False, None),
    "tags+gz": ({ON: "true", VALUES: "true", TYPE: "gz"}, True, "gz"),  # tag compression is HBase's default
    "snappy": ({ON: "true", TAGS: "false", VALUES: "true", TYPE: "snappy"}, False, "snappy"),
    "tags+lz4": ({ON: "true", TAGS: "true", VALUES: "true", TYPE: "lz4"}, True, "lz4"),
    "tags+zstd": ({ON: "true", VALUES: "true", TYPE: "zstd"}, True, "zstd"),
}
TTL_MS = 3_600_000


class _Process(HBaseProcess):
    """A cluster with ``site`` first on its classpath: ``Compression.Algorithm`` reads its codec
    classes (``hbase.io.compress.zstd.codec``) from an hbase-site.xml, not the cluster's conf."""

    site: Path | None = None

    def command(self) -> list[str]:
        cmd = super().command()
        if self.site is not None:
            at = cmd.index("-cp") + 1
            cmd[at] = f"{self.site}{os.pathsep}{cmd[at]}"
        return cmd


def _site(folder: Path, **props: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    body = "".join(f"<property><name>{k}</name><value>{v}</value></property>" for k, v in props.items())
    (folder / "hbase-site.xml").write_text(f"<configuration>{body}</configuration>")
    return folder


@pytest.fixture(scope="module", params=list(SETTINGS))
def compressed_hbase(
    request: pytest.FixtureRequest, zk_server: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[HBaseProcess, str]]:
    name: str = request.param
    conf, _, _ = SETTINGS[name]
    base = tmp_path_factory.mktemp(f"hbase-{name.replace('+', '-')}")
    hb = _Process("C", base / "C", zk=zk_server.hosts, znode_parent=f"/hbase-{unique('c')}", regionservers=1, conf=conf)
    if name == "tags+zstd":
        hb.site = _site(
            base / "site", **{"hbase.io.compress.zstd.codec": "org.apache.hadoop.hbase.io.compress.zstd.ZstdCodec"}
        )
    hb.start()
    yield hb, name
    hb.stop()


def _cells(entries: list[Any], table: bytes) -> list[tuple[Any, ...]]:
    return [
        (c.row, c.family, c.qualifier, c.timestamp, int(c.type), c.value)
        for e in entries
        if e.key.table == table and not e.is_meta
        for c in e.cells
    ]


def test_hbase_compressed_wals_decode_to_the_cells_written(compressed_hbase: tuple[HBaseProcess, str]) -> None:
    hb, name = compressed_hbase
    _, tag_compression, codec = SETTINGS[name]
    table = unique("cw")
    create_table(hb, table, splits=[b"m"])
    expected = write_workload(hb, table)
    # a put with a TTL: HBase writes the TTL as a tag (type 8) of each of its cells
    c2 = thrift2_client(hb)
    ttl = {b"_ttl": struct.pack(">q", TTL_MS)}
    c2.put(
        table.encode(), T.TPut(row=b"ttl", columnValues=[T.TColumnValue(b"r", b"t", b"tagged", 1000)], attributes=ttl)
    )
    c2.close()
    expected.append((b"ttl", b"r", b"t", 1000, CellType.Put, b"tagged"))
    # more qualifiers than the QUALIFIER dictionary holds (127): HBase's own evictions, then
    # the same qualifiers again in another order, some still in the dictionary, some evicted
    conn = happybase.Connection(*hb.thrift)
    wide = conn.table(table)
    for row, order in ((b"wide1", range(300)), (b"wide2", range(299, -1, -7)), (b"wide3", range(0, 300, 3))):
        wide.put(row, {b"r:q%03d" % i: b"%d" % i for i in order}, timestamp=1100)
        expected += [(row, b"r", b"q%03d" % i, 1100, CellType.Put, b"%d" % i) for i in order]
    conn.close()
    hb.call("roll")  # the WALs so far closed, with a trailer; the new ones open
    hb.call("flush", table=table)

    source = cluster(hb, table)
    by_decoder = {d: all_wal_entries(source, d) for d in ("c", "python")}
    assert by_decoder["c"] == by_decoder["python"]
    entries = by_decoder["c"]
    assert sorted(_cells(entries, table.encode())) == sorted(expected)
    tagged = [c for e in entries for c in e.cells if c.row == b"ttl" and e.key.table == table.encode()]
    assert [c.tags for c in tagged] == [(Tag(8, struct.pack(">q", TTL_MS)),)]
    assert all(e.key.scopes == {b"r": 1} for e in entries if e.key.table == table.encode() and not e.is_meta)

    # every WAL says the setting, and reads from each of its entries as from its start
    store = WalStore(hb.wal_root)
    checked = 0
    for path, _ in store.wal_files():
        if path.rsplit("/", 1)[-1].startswith("."):
            continue
        with store.fs.open(path, "rb") as f:
            data = f.read()
        head = WalReader(io.BytesIO(data), path).header
        assert head is not None and head.has_compression and head.has_tag_compression == tag_compression
        assert head.has_value_compression == (codec is not None)
        if codec is not None:
            assert ALGORITHMS[head.value_compression_algorithm] == codec
        for decoder in ("c", "python"):
            whole = list(WalReader(io.BytesIO(data), path, decoder=decoder).entries())
            reader = WalReader(io.BytesIO(data), path, decoder=decoder)
            for k in range(len(whole) - 1, -1, -max(1, len(whole) // 7)):  # backwards: rebuilt each time
                assert list(reader.entries(whole[k].offset)) == whole[k:]
                assert list(WalReader(io.BytesIO(data), path, decoder=decoder).entries(whole[k].offset)) == whole[k:]
        checked += 1
    assert checked >= 2


# -- HBase reads the compressed WALs walship writes ---------------------------------------------------


def _pretty_print(path: Path) -> tuple[list[dict[str, Any]], list[int]]:
    """HBase's WALPrettyPrinter (``hbase wal -j -p``) on a file: its entries and the reader's
    position after each."""
    cmd = java_command("256m")
    cmd[-1] = "org.apache.hadoop.hbase.wal.WALPrettyPrinter"
    proc = subprocess.run(
        [*cmd, "-j", "-p", f"file://{path}"], capture_output=True, text=True, timeout=300, check=False
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    entries, positions = [], []
    for line in proc.stdout.splitlines():
        if line.startswith(("{", ",{")):
            entries.append(json.JSONDecoder().raw_decode(line.lstrip(","))[0])  # the last ends the array
        elif line.startswith("position: "):
            positions.append(int(line.split()[1]))
    return entries, positions


@pytest.mark.parametrize(("codec", "tags"), [(None, False), ("gz", True), ("snappy", False), ("lz4", True)])
def test_hbase_reads_the_compressed_wals_walship_writes(tmp_path: Path, codec: str | None, tags: bool) -> None:
    big = bytes(range(256)) * 1200  # more than one Hadoop block of snappy and lz4
    written: list[tuple[WalKey, list[Cell]]] = []
    for i in range(40):
        cells = [
            Cell(
                b"row-%d" % (i % 9), b"f%d" % (i % 3), b"q%d" % (j * i % 7), 100 + i, CellType.Put, b"v-%d-%d" % (i, j)
            )
            for j in range(3)
        ]
        cells.append(Cell(b"\x00bin\xff", b"f0", b"", 100 + i, CellType.DeleteFamily, b"", (Tag(8, b"%08d" % i),)))
        if i % 10 == 0:
            cells.append(Cell(b"big", b"f1", b"v", 1, CellType.Put, big))
        written.append((WalKey(b"%032x" % (i % 4), b"ns:t%d" % (i % 2), i + 1, 1000 + i, scopes={b"f0": 1}), cells))
    path = tmp_path / "walship-written.1700000000000"
    with open(path, "wb") as f, WalWriter(f, compression=True, tag_compression=tags, value_compression=codec) as w:
        w.append_many(written)
    with open(path, "rb") as f:
        ours = list(WalReader(f, str(path)).entries())
    hbase, positions = _pretty_print(path)
    assert positions == [e.end_offset for e in ours]  # the same entry boundaries
    assert len(hbase) == len(written)
    for got, (key, cells) in zip(hbase, written, strict=True):
        assert got["sequence"] == str(key.sequence_id) and got["region"] == key.encoded_region_name.decode()
        actions = [
            (a["row"], a["family"], a["qualifier"], int(a["timestamp"]), a["type"], a["value"], a.get("tag", []))
            for a in got["actions"]
        ]
        assert actions == [
            (
                to_string_binary(c.row),
                to_string_binary(c.family),
                to_string_binary(c.qualifier),
                c.timestamp,
                CellType(c.type).name,
                to_string_binary(c.value),
                [f"{t.type}:{to_string_binary(t.value)}" for t in c.tags],
            )
            for c in cells
        ]
