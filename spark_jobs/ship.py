"""spark-submit entry point: ship peers' queues, one Spark task per queue (per group of
queues over the same WALs when the job names several peers: ``"peer_id": "1,2,subs"``).

    spark-submit spark_jobs/ship.py --job '{"zk": "h:2181", "znode_parent": "/hbase",
        "wal_root": "hdfs://nn/hbase", "peer_id": "1", "job_id": "run-1.g0", ...}'
    spark-submit spark_jobs/ship.py --zk H:P --znode-parent /hbase --wal-root /data/hbase --peer 1

The job description is :class:`walship.spark.ship.ShipJob` as JSON; the summary goes to
walship's znodes under the job id (and to stdout), never to a local file.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from walship import defaults

if TYPE_CHECKING:
    from walship.spark.ship import ShipJob


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="ship.py", description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--job", help="the job description, JSON (the other flags are then not used)")
    p.add_argument("--zk")
    p.add_argument("--znode-parent", default="/hbase")
    p.add_argument("--wal-root")
    p.add_argument("--peer", help="a peer, or several comma-separated (each WAL read once for all)")
    p.add_argument("--queues", default="", help="server/queueId;server/queueId... (empty: all of the peer)")
    p.add_argument("--queue-filter", default=None)
    p.add_argument("--max-batches", type=int, default=None)
    p.add_argument("--batch-bytes", type=int, default=defaults.BATCH_BYTES)
    p.add_argument("--batch-entries", type=int, default=defaults.BATCH_ENTRIES)
    p.add_argument("--lock-wait", type=float, default=defaults.LOCK_WAIT)
    p.add_argument(
        "--linger", type=float, default=0.0, help="go on shipping the queues' new edits this many seconds (0: one pass)"
    )
    p.add_argument("--job-id", default=None, help="record the summary in ZooKeeper under this id")
    p.add_argument("--source-thrift2", default="", help="the source's Thrift2 server(s), for serial peers")
    return p.parse_args(argv)


def job_of(args: argparse.Namespace) -> ShipJob:
    """The job the flags describe: ``--job``'s JSON, or the other flags.

    :raises ConfigError: bad JSON, or neither ``--job`` nor ``--zk``, ``--wal-root`` and ``--peer``.
    """
    from walship.errors import ConfigError
    from walship.spark.ship import ShipJob

    if args.job:
        return ShipJob.from_json(args.job)
    if not (args.zk and args.wal_root and args.peer):
        raise ConfigError("give --job, or --zk, --wal-root and --peer")
    return ShipJob(
        zk=args.zk,
        znode_parent=args.znode_parent,
        wal_root=args.wal_root,
        peer_id=args.peer,
        queues=tuple(q for q in args.queues.split(";") if q),
        queue_filter=args.queue_filter or None,
        max_batches=args.max_batches if args.max_batches and args.max_batches > 0 else None,
        batch_bytes=args.batch_bytes,
        batch_entries=args.batch_entries,
        lock_wait=args.lock_wait,
        linger=args.linger,
        job_id=args.job_id,
        source_thrift2=args.source_thrift2,
    )


def main(argv: Sequence[str] | None = None) -> int:
    started = time.perf_counter()
    from walship.errors import WalshipError
    from walship.replicate.summary import PeerSummary
    from walship.spark.entry import JOB_ERRORS, bad_job, failed, setup_logging, spark_session
    from walship.spark.ship import ship_with_spark

    args = parse_args(argv)

    def report(summaries: list[PeerSummary]) -> int:
        any_failed = any(s.status == "error" for s in summaries)
        if len(summaries) == 1:
            print(json.dumps(summaries[0].to_json()))
        else:
            print(json.dumps({"status": "error" if any_failed else "ok", "peers": [s.to_json() for s in summaries]}))
        return 1 if any_failed else 0

    setup_logging()
    try:
        job = job_of(args)
    except JOB_ERRORS as exc:
        return bad_job("ship.py", exc)
    timings = {"imports": time.perf_counter() - started}
    try:
        t0 = time.perf_counter()
        with spark_session(f"walship-ship-peer-{job.peer_id}") as spark:
            timings["spark_session"] = time.perf_counter() - t0
            summaries = ship_with_spark(spark, job, timings)
    except WalshipError as exc:
        return failed("ship.py", exc)
    # where a job's time went: the driver's imports, Spark's session, the plan (ZooKeeper), the
    # tasks (their Python workers, sessions and shipping), the summary's write
    print("ship.py: timings " + json.dumps({k: round(v, 3) for k, v in timings.items()}), file=sys.stderr)
    return report(summaries)


if __name__ == "__main__":
    sys.exit(main())
