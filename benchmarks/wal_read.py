"""WAL decode throughput beside raw reads of the same bytes, measured in one run.

Writes a WAL of realistic entries (16-byte rows, 3 cells of 100-byte values each), then, each
in a fresh child process so that memory is measured per reader:

* ``raw``: read the file into one buffer of the reader's chunk size and touch every byte;
* ``decode``: decode every entry and cell with :class:`walship.wal.WalReader`, with its
  default decoder (the compiled ``walship.wal._walcodec`` when ``make setup`` built it);
* ``decode (python)``: the same with the pure-Python decoder, the fallback (when the default
  is the compiled one; ``--no-python`` skips it);
* the same two decodes of a compressed WAL of the same entries
  (``hbase.regionserver.wal.enablecompression``; ``--value-compression gz`` adds value
  compression), with each decoder's ratio of compressed to plain cells/s.

Prints cells/s and MiB/s of each, the decoders' ratios to the raw read (in cells/s: the same
cells, plain or compressed) and each child's peak RSS. Targets: decode >= 1,500,000 cells/s on
one core, a compressed WAL >= 3,000,000 cells/s with the compiled decoder, both at >= 0.5 of the
raw read's cells/s; a 1 GiB WAL decodes in under 300 MiB RSS (``--size-mib 1024``).

    .venv/bin/python benchmarks/wal_read.py [--size-mib 256] [--dir .bench] [--keep] [--no-python]
        [--value-compression TYPE]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from walship.servername import ServerName
from walship.wal import Cell, CellType, WalKey, WalReader, WalWriter, build_wal_name
from walship.wal.reader import DEFAULT_CHUNK_SIZE, default_decoder

TARGET_CELLS_PER_S = 1_500_000
TARGET_COMPRESSED_CELLS_PER_S = 3_000_000
TARGET_RATIO_TO_RAW = 0.5

CELLS_PER_ENTRY = 3
VALUE_SIZE = 100
ROW_SIZE = 16


def write_wal(
    path: Path,
    size_mib: int,
    *,
    entries_wanted: int = 0,
    compression: bool = False,
    value_compression: str | None = None,
) -> tuple[int, int]:
    """Write entries until the file reaches ``size_mib`` (or holds ``entries_wanted``);
    return (entries, cells)."""
    target = size_mib * 1024 * 1024
    region = b"5f2c1a8e9b7d4c3a2b1e0f9d8c7b6a59"
    qualifiers = [b"c0", b"c1", b"c2"]
    value = bytes(range(VALUE_SIZE))
    entries = 0
    seq = 0
    with open(path, "wb") as f:
        writer = WalWriter(f, compression=compression, value_compression=value_compression)
        while (entries < entries_wanted) if entries_wanted else (writer.offset < target):
            batch = []
            for _ in range(2000):
                seq += 1
                row = b"%016d" % (seq * 7919 % 10**16)
                ts = 1_700_000_000_000 + seq
                cells = [Cell(row, b"f", q, ts, CellType.Put, value) for q in qualifiers]
                batch.append((WalKey(region, b"bench", seq, ts, scopes={b"f": 1}), cells))
            writer.append_many(batch)
            entries += len(batch)
        writer.close()
    return entries, entries * CELLS_PER_ENTRY


def child(mode: str, path: str) -> None:
    """Run one measurement in this process and print it as JSON; ``mode`` is ``raw`` or
    ``decode:<decoder>`` (``decode:default`` for the reader's default)."""
    size = os.path.getsize(path)
    cells = entries = 0
    decoder = None
    t0 = time.perf_counter()
    with open(path, "rb", buffering=0) as f:
        if mode == "raw":
            chunk = bytearray(DEFAULT_CHUNK_SIZE)  # one buffer read into, as the reader does
            while n := f.readinto(chunk):
                cells += chunk.count(b"\x00\x00\x00\x00\x00\x00\x00\x00", 0, n)  # touch every byte
        else:
            name = mode.partition(":")[2]
            reader = WalReader(f, path, decoder=None if name == "default" else name)
            decoder = reader.decoder
            for entry in reader.entries():
                entries += 1
                cells += len(entry.cells)
    elapsed = time.perf_counter() - t0
    rss_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(
        json.dumps(
            {
                "mode": mode,
                "decoder": decoder,
                "seconds": elapsed,
                "bytes": size,
                "cells": cells,
                "entries": entries,
                "rss_mib": rss_mib,
            }
        )
    )


def measure(mode: str, path: Path) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, __file__, "--child", mode, str(path)], check=True, capture_output=True, text=True
    ).stdout
    result: dict[str, Any] = json.loads(out)
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size-mib", type=int, default=256)
    parser.add_argument("--dir", default=".bench")
    parser.add_argument("--keep", action="store_true", help="keep the WAL file")
    parser.add_argument(
        "--no-python", action="store_true", help="skip the pure-Python decoder's run beside the compiled one"
    )
    parser.add_argument(
        "--value-compression", default=None, help="also compress the values of the compressed WAL (gz, snappy, ...)"
    )
    parser.add_argument("--child", nargs=2, metavar=("MODE", "PATH"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child(*args.child)
        return 0

    out_dir = Path(args.dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / build_wal_name(ServerName("bench", 16020, 1), 1_700_000_000_000)
    t0 = time.perf_counter()
    entries, cells = write_wal(path, args.size_mib)
    write_s = time.perf_counter() - t0
    size_mib = path.stat().st_size / 2**20
    print(
        f"wrote {size_mib:.1f} MiB, {entries:,} entries, {cells:,} cells in {write_s:.1f} s "
        f"({cells / write_s:,.0f} cells/s through WalWriter)"
    )
    cpath = out_dir / build_wal_name(ServerName("bench", 16020, 1), 1_700_000_000_001)
    write_wal(cpath, 0, entries_wanted=entries, compression=True, value_compression=args.value_compression)
    print(
        f"wrote the same entries compressed{' with ' + args.value_compression + ' values' if args.value_compression else ''}:"
        f" {cpath.stat().st_size / 2**20:.1f} MiB"
    )
    modes = ["decode:default"]
    if default_decoder() != "python" and not args.no_python:
        modes.append("decode:python")
    try:
        raw = measure("raw", path)
        runs = [measure(mode, path) for mode in modes]
        cruns = [measure(mode, cpath) for mode in modes]
    finally:
        if not args.keep:
            path.unlink()
            cpath.unlink()
    for run in runs + cruns:
        if run["cells"] != cells:
            print(f"FAIL: the {run['decoder']} decoder decoded {run['cells']} cells, wrote {cells}")
            return 1
    raw_mibs = size_mib / raw["seconds"]
    print(
        f"raw read          : {raw_mibs:10,.1f} MiB/s  {cells / raw['seconds']:14,.0f} cells/s"
        f"  peak RSS {raw['rss_mib']:.0f} MiB"
    )
    for run in runs:
        label = f"decode ({run['decoder']})"
        mibs = size_mib / run["seconds"]
        print(
            f"{label:<18}: {mibs:10,.1f} MiB/s  {cells / run['seconds']:14,.0f} cells/s"
            f"  peak RSS {run['rss_mib']:.0f} MiB  ratio to raw {mibs / raw_mibs:.4f}"
        )
    dec = runs[0]
    if len(runs) > 1:
        print(f"{dec['decoder']} decoder / python decoder: {runs[1]['seconds'] / dec['seconds']:.2f}x")
    rate = cells / dec["seconds"]
    print(
        f"target >= {TARGET_CELLS_PER_S:,} cells/s with the {dec['decoder']} decoder: "
        f"{'met' if rate >= TARGET_CELLS_PER_S else 'NOT met'}"
    )
    for plain, comp in zip(runs, cruns, strict=True):
        label = f"compressed ({comp['decoder']})"
        print(
            f"{label:<18}: {cells / comp['seconds']:14,.0f} cells/s  peak RSS {comp['rss_mib']:.0f} MiB"
            f"  compressed / plain: {plain['seconds'] / comp['seconds']:.2f}"
            f"  ratio to raw {raw['seconds'] / comp['seconds']:.4f}"
        )
    crate = cells / cruns[0]["seconds"]
    print(
        f"target >= {TARGET_COMPRESSED_CELLS_PER_S:,} cells/s on a compressed WAL with the {cruns[0]['decoder']} "
        f"decoder: {'met' if crate >= TARGET_COMPRESSED_CELLS_PER_S else 'NOT met'}"
    )
    for what, run in (("plain", dec), ("compressed", cruns[0])):
        ratio = raw["seconds"] / run["seconds"]
        print(
            f"target >= {TARGET_RATIO_TO_RAW} of the raw read's cells/s, {what} WAL, {run['decoder']} decoder: "
            f"{ratio:.3f}, {'met' if ratio >= TARGET_RATIO_TO_RAW else 'NOT met'}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
