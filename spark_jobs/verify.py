"""spark-submit entry point: verify a peer against its source, one Spark task per split.

    spark-submit spark_jobs/verify.py --job '{"zk": "h:2181", "znode_parent": "/hbase",
        "wal_root": "hdfs://nn/hbase", "source_thrift2": "src-thrift:9090", "peer_id": "1", ...}'
    spark-submit spark_jobs/verify.py --zk H:P --wal-root /data/hbase --source-thrift2 H:P --peer 1

The job description is :class:`walship.verify.VerifyJob` as JSON; the summary printed on
stdout is the JSON of ``walship verify --json``. Exit 0 when no row is bad, else 1; 2 on a
bad job description.

With ``--job-id ID`` the driver also records the result in walship's znodes
(``<parent>/replication/walship/verify/<peer>/<ID>``: the same JSON with ``status`` ``ok`` or
``bad_rows``, or ``status`` ``error`` and the error), where the ``walship_verify`` DAG reads
it; the exit status is then 0 whenever a result was recorded, bad rows included (the reader
judges them), and 1 when the verification could not run. ZooKeeper credentials come from
``WALSHIP_ZK_AUTH`` in the environment (driver and executors), never from arguments.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="verify.py", description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--job", help="the job description, JSON (the other flags are then not used)")
    p.add_argument("--zk")
    p.add_argument("--znode-parent", default="/hbase")
    p.add_argument("--wal-root")
    p.add_argument("--source-thrift2")
    p.add_argument("--peer")
    p.add_argument("--repair", action="store_true")
    p.add_argument("--report", default=None, help="write the bad rows (and repairs) here: a path or URL")
    p.add_argument("--job-id", default=None, help="record the result in ZooKeeper under this id (exit 0 once recorded)")
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    from walship.errors import WalshipError
    from walship.spark.entry import JOB_ERRORS, bad_job, failed, setup_logging, spark_session
    from walship.spark.verify import verify_with_spark
    from walship.verify import VerifyJob, VerifyResult

    args = parse_args(argv)

    def report(result: VerifyResult) -> int:
        print(json.dumps(result.to_json(), sort_keys=True))
        return 0 if result.ok or args.job_id else 1

    setup_logging()
    try:
        if args.job:
            job = VerifyJob.from_json(args.job)
        elif not (args.zk and args.wal_root and args.source_thrift2 and args.peer):
            return bad_job("verify.py", "give --job, or --zk, --wal-root, --source-thrift2 and --peer")
        else:
            job = VerifyJob(
                zk=args.zk,
                znode_parent=args.znode_parent,
                wal_root=args.wal_root,
                source_thrift2=args.source_thrift2,
                peer_id=args.peer,
                repair=args.repair,
            )
    except JOB_ERRORS as exc:
        return bad_job("verify.py", exc)
    try:
        with spark_session(f"walship-verify-peer-{job.peer_id}") as spark:
            result = verify_with_spark(spark, job, report=args.report, job_id=args.job_id)
    except WalshipError as exc:
        return failed("verify.py", exc)
    return report(result)


if __name__ == "__main__":
    sys.exit(main())
