"""``walship copy`` on real HBase 2.6 beside a plain copy pipeline, in one run.

Starts ZooKeeper and the harness's clusters A and B (one region server each, the parallel
collector), table ``bench`` (family ``f``, scope 1, ``--regions`` regions) on both and ``plain`` on B,
and peer 1 of A into B of sink ``--sink`` (``hbase``, the default: B's region servers;
``thrift2``: B's Thrift2 server), added through HBase's Admin, DISABLED for HBase, adopted by
walship. Loads ``--rows`` rows of 3 cells (100-byte values) into A and
flushes them, then times, each round (``--rounds``; medians printed, each round's ratio beside):

* ``copy``: :func:`walship.copy.copy` in process (the plan, A's Thrift2 scanners, the rows
  written into B's ``bench`` as the peer's sink writes, the next page read while one is
  written);
* ``plain``: the baseline, the straightforward pipeline in one process: a Thrift2 scanner of
  A's ``bench`` read in pages of 1,000 rows, each page put into B's ``plain`` with one
  ``putMultiple`` call, one after the other.

* ``spark``: the Spark copy job (``spark_jobs/copy_rows.py``, spark-submit on ``local[2]``: a
  task a region of the table, ``--regions``, two at once), timed by its own plan and tasks and
  with spark-submit's start-up (``--no-spark`` leaves it out).

Every round after the first puts the same cells again (same timestamps), as a repeated copy
does. Targets: copy / plain >= 1.0, the Spark job / plain >= 1.5.

    .venv/bin/python benchmarks/real_copy.py [--rows 200000] [--rounds 3] [--regions 2] [--no-spark]
        [--sink hbase|thrift2]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

from real_peer import (
    FAMILY,
    QUALS,
    ROOT,
    SETTINGS,
    VALUE,
    Step,
    add_managed,
    ratio_line,
    real_pair,
    row_key,
    timed,
)

from walship.copy import copy, copy_job
from walship.jobdesc import JobDescription
from walship.spark.jvm import local_submit_env
from walship.thrift.conn import open_thrift2
from walship.thrift.hbase2 import hbase2
from walship_testing.harness import HBaseProcess

TARGET = 1.0
SPARK_TARGET = 1.5
PAGE = 1000


def prepare(a: HBaseProcess, b: HBaseProcess, rows: int, regions: int, sink: str) -> None:
    splits = [row_key(rows * k // regions).hex() for k in range(1, regions)]
    for hb in (a, b):
        hb.call("create_table", table="bench", families=FAMILY, splits=splits)
    b.call("create_table", table="plain", families=FAMILY)
    add_managed(a, b, "1", "bench", sink)
    with open_thrift2(*a.thrift2) as c:
        for first in range(0, rows, PAGE):
            puts = [
                hbase2.TPut(
                    row=row_key(i),
                    columnValues=[hbase2.TColumnValue(family=b"f", qualifier=q, value=VALUE) for q in QUALS],
                    timestamp=1_000_000,
                )
                for i in range(first, min(rows, first + PAGE))
            ]
            c.client.putMultiple(b"bench", puts)
    a.call("flush", table="bench")


def plain_copy(a: HBaseProcess, b: HBaseProcess) -> int:
    """The baseline pipeline: A's rows, a page at a time, put into B's ``plain``; rows copied."""
    copied = 0
    with open_thrift2(*a.thrift2) as src, open_thrift2(*b.thrift2) as dst:
        scanner = src.client.openScanner(b"bench", hbase2.TScan(caching=PAGE, maxVersions=1))
        try:
            while page := src.client.getScannerRows(scanner, PAGE):
                puts = [
                    hbase2.TPut(
                        row=r.row,
                        columnValues=[
                            hbase2.TColumnValue(
                                family=v.family, qualifier=v.qualifier, value=v.value, timestamp=v.timestamp
                            )
                            for v in r.columnValues
                        ],
                    )
                    for r in page
                ]
                dst.client.putMultiple(b"plain", puts)
                copied += len(page)
        finally:
            src.client.closeScanner(scanner)
    return copied


def spark_copy(job: JobDescription, cwd: Path) -> tuple[int, float]:
    """spark-submit of the copy job on ``local[2]`` (a task a region, two at once), with the
    settings walship's DAGs submit it with: the rows copied and the job's own seconds (its plan
    and tasks, on a Spark session already up; the wall time is the caller's)."""
    bindir = Path(sys.executable).parent
    cmd = [
        str(bindir / "spark-submit"), "--master", "local[2]", "--conf", "spark.ui.enabled=false", *SETTINGS,
        "--conf", "spark.driver.memory=512m", str(ROOT / "spark_jobs" / "copy_rows.py"), "--job", job.to_json(),
    ]  # fmt: skip
    done = subprocess.run(cmd, env=local_submit_env(), cwd=cwd, capture_output=True, text=True, timeout=1800)
    result = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not result:
        raise SystemExit(f"the Spark copy job failed ({done.returncode}):\n{(done.stdout + done.stderr)[-3000:]}")
    return int(result[-1]["rows"]), float(result[-1]["seconds"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--regions", type=int, default=2, help="regions of the table (a Spark task each)")
    parser.add_argument("--no-spark", action="store_true", help="leave out the Spark copy job")
    parser.add_argument(
        "--sink",
        choices=("thrift2", "hbase"),
        default="hbase",
        help="the peer's sink: the copy writes as it does (hbase: into B's region servers; thrift2: B's Thrift2 server)",
    )
    args = parser.parse_args(argv)
    if args.rows < PAGE or args.rounds < 1:
        parser.error(f"--rows must be >= {PAGE} and --rounds >= 1")
    rounds: list[dict[str, Step]] = []
    spark_own: list[float] = []
    with real_pair("parallel", a_servers=1) as (root, a, b):
        prepare(a, b, args.rows, args.regions, args.sink)
        job = copy_job(
            zk=a.zk_hosts,
            znode_parent=a.znode_parent,
            source_thrift2=f"{a.thrift2[0]}:{a.thrift2[1]}",
            peer_id="1",
        )
        for r in range(args.rounds + 1):  # the first round unmeasured: the JVMs warm up
            steps: dict[str, Step] = {}
            names = ["copy", "plain"] if r % 2 == 0 else ["plain", "copy"]
            for name in names + ([] if args.no_spark else ["spark"]):
                with timed(a, b) as step:
                    if name == "spark":
                        done, own = spark_copy(job, root)
                        spark_own.append(own)
                    else:
                        done = copy(job).rows if name == "copy" else plain_copy(a, b)
                if done != args.rows:
                    raise SystemExit(f"FAIL: {name} copied {done} rows of {args.rows}")
                steps[name] = step
            if not r:
                spark_own.clear()
            if r:
                rounds.append(steps)
                c, p = steps["copy"].wall, steps["plain"].wall
                print(f"round {r}: copy {c:.2f} s, plain {p:.2f} s ({p / c:.2f}x)", flush=True)
    ratios = [s["plain"].wall / s["copy"].wall for s in rounds]
    print(f"\n{args.rows:,} rows (3 cells of 100 bytes) a round, {args.rounds} rounds, the peer's sink {args.sink}")
    for name in ("copy", "plain"):
        walls = [s[name].wall for s in rounds]
        own = statistics.median(s[name].own for s in rounds) / args.rows * 1e6
        bcpu = statistics.median(s[name].b for s in rounds) / args.rows * 1e6
        acpu = statistics.median(s[name].a for s in rounds) / args.rows * 1e6
        label = "walship copy" if name == "copy" else "plain pipeline"
        print(
            f"  {label:<15} {args.rows / statistics.median(walls):9,.0f} rows/s  median {statistics.median(walls):6.2f} s"
            f"  CPU a row: this process {own:5.1f} us, A's JVM {acpu:5.1f} us, B's JVM {bcpu:5.1f} us"
        )
    print(ratio_line("copy / plain", ratios, TARGET))
    if not args.no_spark:
        job_rate = statistics.median(args.rows / t for t in spark_own)
        wall_rate = statistics.median(args.rows / s["spark"].wall for s in rounds)
        print(
            f"  Spark copy job  {job_rate:9,.0f} rows/s its plan and tasks ({args.regions} regions, "
            f"local[2]); {wall_rate:,.0f} rows/s with spark-submit's start-up"
        )
        print(
            ratio_line(
                "Spark copy / plain",
                [s["plain"].wall / t for s, t in zip(rounds, spark_own, strict=True)],
                SPARK_TARGET,
            )
        )
        print(ratio_line("  with its start-up", [s["plain"].wall / s["spark"].wall for s in rounds], SPARK_TARGET))
    return 0


if __name__ == "__main__":
    sys.exit(main())
