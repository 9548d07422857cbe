"""walship's CPU a cell on the shipping path, step by step, with its compiled filter and put rows
(``walship.replicate.batcher._batcher``, ``walship.sinks._fastpath``) beside the same steps in
Python, in one process.

Writes one WAL of ``--cells`` cells (100-byte values, 3 cells a row, scope 1; ``--rows-per-entry``
rows an entry, 1 as a client's single puts write them, 333 as the benchmarks' batches of 1,000
rows land in a real region server's WAL), then each round
reads it and, for each way, times the process's CPU (user + system) of: decoding the entries
(the compiled decoder), the peer's entry filter, the Thrift2 sink's calls (rows of puts) and
their encoding (the compiled putMultiple encoder), with the collector's thresholds as a pass
sets them. Prints each step's median microseconds a cell and the ratio of the two ways' sums.
No server is involved: what the peer does with the calls is ``replicate.py``'s and
``real_peer.py``'s to measure.

    .venv/bin/python benchmarks/ship_cpu.py [--cells 300000] [--rounds 5] [--rows-per-entry 1]
"""

from __future__ import annotations

import argparse
import contextlib
import resource
import statistics
import sys
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

from wal_read import VALUE_SIZE, write_wal

import walship.replicate.batcher.filters as filters
import walship.sinks.hbase2 as hbase2_sink
from walship.peer import PeerConfig
from walship.replicate.interpreter import pass_settings
from walship.sinks.base import ApplyStats
from walship.thrift.encoded import encode_put_multiple
from walship.wal import Cell, CellType, WalKey, WalReader, WalWriter

STEPS = ("decode", "filter", "calls", "encode")


def cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


#: the modules' names for the compiled code they use (None: the Python code)
COMPILED = ((filters, "COMPILED"), (hbase2_sink, "_fastpath"))


@contextlib.contextmanager
def python_only() -> Iterator[None]:
    """The filter and the sink's calls without the compiled module, as where it is not built."""
    saved = [getattr(module, name) for module, name in COMPILED]
    for module, name in COMPILED:
        setattr(module, name, None)
    try:
        yield
    finally:
        for (module, name), value in zip(COMPILED, saved, strict=True):
            setattr(module, name, value)


def write_rows(path: Path, cells: int, rows_per_entry: int) -> None:
    """A WAL of entries of ``rows_per_entry`` rows of 3 cells each (table ``bench``, family ``f``
    scoped 1)."""
    value = bytes(range(VALUE_SIZE))
    with open(path, "wb") as f:
        writer = WalWriter(f)
        batch = []
        row = 0
        for seq in range(1, max(1, cells // (3 * rows_per_entry)) + 1):
            entry = []
            for _ in range(rows_per_entry):
                row += 1
                entry += [
                    Cell(b"%016d" % row, b"f", q, 1_700_000_000_000 + seq, int(CellType.Put), value)
                    for q in (b"c0", b"c1", b"c2")
                ]
            batch.append((WalKey(b"5f2c1a8e9b7d4c3a2b1e0f9d8c7b6a59", b"bench", seq, seq, scopes={b"f": 1}), entry))
        writer.append_many(batch)
        writer.close()


def one_pass(path: Path) -> tuple[dict[str, float], int]:
    """Each step's CPU seconds over the WAL, and its cells."""
    entry_filter = filters.EntryFilter(PeerConfig("1", "127.0.0.1:2181:/hbase-b"), uuid.uuid4(), uuid.uuid4())
    with pass_settings():
        t0 = cpu()
        with open(path, "rb") as f:
            entries = list(WalReader(f, str(path)).entries())
        t1 = cpu()
        kept = [fe for e in entries if (fe := entry_filter.apply(e)) is not None]
        t2 = cpu()
        calls = list(hbase2_sink.Thrift2Sink.calls(kept, ApplyStats(), 1))
        t3 = cpu()
        for call in calls:
            encode_put_multiple("binary", call.table, call.mutations, call.attributes)
        t4 = cpu()
    cells = sum(len(e.cells) for e in entries)
    return dict(zip(STEPS, (t1 - t0, t2 - t1, t3 - t2, t4 - t3), strict=True)), cells


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cells", type=int, default=300_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--rows-per-entry", type=int, default=1, help="rows of 3 cells in each WAL entry")
    args = parser.parse_args(argv)
    if any(getattr(module, name) is None for module, name in COMPILED):
        print(
            "walship's compiled batcher or sinks' rows are not built (pip install -e . with a C compiler)",
            file=sys.stderr,
        )
        return 1
    with tempfile.TemporaryDirectory(prefix="walship-ship-cpu-") as tmp:
        path = Path(tmp) / "bench.wal"
        if args.rows_per_entry == 1:
            write_wal(path, 0, entries_wanted=max(1, args.cells // 3))
        else:
            write_rows(path, args.cells, args.rows_per_entry)
        figures: dict[str, dict[str, list[float]]] = {way: {s: [] for s in STEPS} for way in ("compiled", "python")}
        sums: dict[str, list[float]] = {"compiled": [], "python": []}
        ratios = []
        for r in range(args.rounds):
            order = ("compiled", "python") if r % 2 == 0 else ("python", "compiled")  # alternate who goes first
            this: dict[str, float] = {}
            for way in order:
                with python_only() if way == "python" else contextlib.nullcontext():
                    steps, cells = one_pass(path)
                for step, secs in steps.items():
                    figures[way][step].append(secs / cells * 1e6)
                this[way] = sum(steps.values()) / cells * 1e6
                sums[way].append(this[way])
            ratios.append(this["compiled"] / this["python"])
            print(f"round {r + 1}: compiled {this['compiled']:.3f} us a cell, Python {this['python']:.3f} us")
    print(
        f"{cells:,} cells a round, {args.rows_per_entry} rows an entry, {args.rounds} rounds; medians, us of CPU a cell:"
    )
    print(f"{'':10}" + "".join(f"{s:>9}" for s in STEPS) + f"{'sum':>9}")
    for way in ("compiled", "python"):
        row = "".join(f"{statistics.median(figures[way][s]):9.3f}" for s in STEPS)
        print(f"{way:10}{row}{statistics.median(sums[way]):9.3f}")
    filt = statistics.median(figures["compiled"]["filter"]) / statistics.median(figures["python"]["filter"])
    rows = statistics.median(figures["compiled"]["calls"]) / statistics.median(figures["python"]["calls"])
    print(f"compiled / Python: filter {filt:.2f}, calls {rows:.2f}, the four steps {statistics.median(ratios):.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
