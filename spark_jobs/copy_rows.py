"""spark-submit entry point: copy the rows a new peer selects into it, one Spark task per
source region (see ``walship copy``).

    spark-submit spark_jobs/copy_rows.py --job '{"zk": "h:2181", "znode_parent": "/hbase",
        "wal_root": "hdfs://nn/hbase", "source_thrift2": "h:9090", "peer_id": "2", ...}'
    spark-submit spark_jobs/copy_rows.py --zk H:P --wal-root /data/hbase --source-thrift2 H:P --peer 2

The job description is :class:`walship.verify.VerifyJob` as JSON (``end_ms``: copy cells with
earlier timestamps); what was copied goes to stdout as JSON.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="copy_rows.py", description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--job", help="the job description, JSON (the other flags are then not used)")
    p.add_argument("--zk")
    p.add_argument("--znode-parent", default="/hbase")
    p.add_argument("--wal-root")
    p.add_argument("--source-thrift2")
    p.add_argument("--peer")
    p.add_argument("--table", action="append", help="a table to copy (repeatable; default: all the peer replicates)")
    p.add_argument("--until", help="copy cells with timestamps < this ISO time (default: all)")
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    from walship.copy import CopyResult, copy_job, until_ms
    from walship.spark.copy import copy_with_spark
    from walship.spark.entry import run_spark_job
    from walship.verify import VerifyJob

    args = parse_args(argv)

    def make_job() -> VerifyJob | str:
        if args.job:
            return VerifyJob.from_json(args.job)
        if not (args.zk and args.wal_root and args.source_thrift2 and args.peer):
            return "give --job, or --zk, --wal-root, --source-thrift2 and --peer"
        return copy_job(
            zk=args.zk,
            znode_parent=args.znode_parent,
            wal_root=args.wal_root,
            source_thrift2=args.source_thrift2,
            peer_id=args.peer,
            tables=args.table or (),
            until_ms=until_ms(args.until),
        )

    def report(result: CopyResult) -> int:
        print(json.dumps(result.to_json(), sort_keys=True))
        return 0

    return run_spark_job(
        "copy_rows.py", make_job, lambda job: f"walship-copy-peer-{job.peer_id}", copy_with_spark, report
    )


if __name__ == "__main__":
    sys.exit(main())
