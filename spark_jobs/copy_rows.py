"""spark-submit entry point: copy the rows a new peer selects into it, one Spark task per
source region (see ``walship copy``).

    spark-submit spark_jobs/copy_rows.py --job '{"zk": "h:2181", "znode_parent": "/hbase",
        "source_thrift2": "h:9090", "peer_id": "2", ...}'
    spark-submit spark_jobs/copy_rows.py --zk H:P --source-thrift2 H:P --peer 2

The job description is :class:`walship.verify.VerifyJob` as JSON (``end_ms``: copy cells with
earlier timestamps; every delete marker is copied); a copy reads no WAL (``wal_root`` and
``--wal-root`` are not needed); what was copied goes to stdout as JSON.
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
    p.add_argument("--wal-root", help="not read (a copy reads no WAL); accepted as verify.py accepts it")
    p.add_argument("--source-thrift2")
    p.add_argument("--peer")
    p.add_argument("--table", action="append", help="a table to copy (repeatable; default: all the peer replicates)")
    p.add_argument("--until", help="copy cells with timestamps < this ISO time (default: all)")
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    from walship.copy import CopyResult, copy_job, until_ms
    from walship.errors import WalshipError
    from walship.spark.copy import copy_with_spark
    from walship.spark.entry import JOB_ERRORS, bad_job, failed, setup_logging, spark_session
    from walship.verify import VerifyJob

    args = parse_args(argv)

    def report(result: CopyResult) -> int:
        print(json.dumps(result.to_json(), sort_keys=True))
        return 0

    setup_logging()
    try:
        if args.job:
            job = VerifyJob.from_json(args.job)
        elif not (args.zk and args.source_thrift2 and args.peer):
            return bad_job("copy_rows.py", "give --job, or --zk, --source-thrift2 and --peer")
        else:
            job = copy_job(
                zk=args.zk,
                znode_parent=args.znode_parent,
                source_thrift2=args.source_thrift2,
                peer_id=args.peer,
                tables=args.table or (),
                until_ms=until_ms(args.until),
            )
    except JOB_ERRORS as exc:
        return bad_job("copy_rows.py", exc)
    try:
        with spark_session(f"walship-copy-peer-{job.peer_id}") as spark:
            result = copy_with_spark(spark, job)
    except WalshipError as exc:
        return failed("copy_rows.py", exc)
    return report(result)


if __name__ == "__main__":
    sys.exit(main())
