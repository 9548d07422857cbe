"""spark-submit entry point: ship a peer's queues, one Spark task per queue.

    spark-submit spark_jobs/ship.py --zk H:P --znode-parent /hbase --wal-root /data/hbase \
        --peer 1 [--queues server/queue,...] [--max-batches N] --summary /path/summary.json
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import tempfile
from collections.abc import Sequence


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="ship.py", description=__doc__)
    p.add_argument("--zk", required=True)
    p.add_argument("--znode-parent", default="/hbase")
    p.add_argument("--wal-root", required=True)
    p.add_argument("--peer", required=True)
    p.add_argument(
        "--queues",
        default="",
        help="server/queueId;server/queueId... (server names hold commas); empty: all of the peer",
    )
    p.add_argument("--queue-filter", default=None)
    p.add_argument("--max-batches", type=int, default=None)
    p.add_argument("--batch-bytes", type=int, default=64 * 1024 * 1024)
    p.add_argument("--batch-entries", type=int, default=25_000)
    p.add_argument("--lock-wait", type=float, default=0.0)
    p.add_argument("--summary", help="write the JSON summary here (atomically)")
    return p.parse_args(argv)


def write_atomically(path: str, text: str) -> None:
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".summary-")
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def main(argv: Sequence[str] | None = None) -> int:
    from pyspark.sql import SparkSession

    from walship.spark.ship import ShipJob, ship_with_spark

    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    job = ShipJob(
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
    )
    spark = SparkSession.builder.appName(f"walship-ship-peer-{job.peer_id}").getOrCreate()
    try:
        summary = ship_with_spark(spark, job)
    finally:
        spark.stop()
    text = json.dumps(summary.to_json())
    if args.summary:
        write_atomically(args.summary, text)
    print(text)
    return 1 if summary.status == "error" else 0


if __name__ == "__main__":
    sys.exit(main())
