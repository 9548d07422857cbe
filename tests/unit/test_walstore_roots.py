"""WAL roots: an ``hdfs://`` root pyarrow's HDFS client cannot open is one line naming the URL
and what it needs; a local root's listed sizes are what a reader sees, with nothing asked."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from walship.replicate.walstore import WalStore


def test_an_hdfs_root_without_libhdfs_is_one_line_naming_the_url_and_what_it_needs(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("HADOOP_HOME", "CLASSPATH")}
    env["ARROW_LIBHDFS_DIR"] = str(tmp_path)  # no libhdfs.so there
    root = "hdfs://127.0.0.1:1/hbase"
    run = subprocess.run(
        [sys.executable, "-m", "walship.cli", "--zk", "127.0.0.1:1", "--wal-root", root, "status"],
        env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert run.returncode == 1 and run.stdout == ""
    (line,) = run.stderr.strip().splitlines()
    assert line.startswith(f"walship: cannot open {root}: Unable to load libhdfs"), line
    assert "libhdfs.so" in line and "CLASSPATH" in line and "webhdfs://" in line


def test_a_local_roots_listed_sizes_are_what_a_reader_sees(tmp_path: Path) -> None:
    wal = tmp_path / "WALs" / "host,1,1" / "host%2C1%2C1.100"
    wal.parent.mkdir(parents=True)
    wal.write_bytes(b"x" * 10)
    store = WalStore(str(tmp_path))
    assert not store.lagging
    (loc,) = store.listing().values()
    assert loc.visible and loc.size == 10 and store.visible(loc) is loc
    wal.write_bytes(b"x" * 25)  # grew: a local file's end is where a reader stops
    with store.open(loc) as f:
        assert len(f.read()) == 25
