"""``walship changelog compact``: merge a day's small files of a Parquet change log.

A change log (``walship subscription add NAME --parquet URL``) holds one file per shipped
batch and partition; compaction merges each ``table=*/date=D`` partition into one file,
idempotently (see :mod:`walship.sep.compaction`).
"""

from __future__ import annotations

import argparse
import json
import logging

__all__ = ["register"]

log = logging.getLogger(__name__)


def cmd_changelog_compact(args: argparse.Namespace) -> int:
    from walship.sep.compaction import compact, parse_date  # pyarrow: only when compacting

    date = parse_date(args.date)
    results = compact(args.url, date)
    if args.json:
        print(json.dumps({"url": args.url, "date": date, "partitions": [r.to_json() for r in results]}))
        return 0
    if not results:
        print(f"no partition of date {date} in {args.url}")
    for r in results:
        where = f"table={r.table} date={r.date}"
        left = f"; removed {len(r.leftovers_removed)} left by an interrupted run" if r.leftovers_removed else ""
        if r.action == "merged":
            print(
                f"{where}: merged {len(r.inputs)} files into {r.output} ({r.rows} rows, "
                f"{r.duplicates_dropped} duplicates dropped){left}"
            )
        else:
            print(f"{where}: {r.action}, one file ({r.rows} rows){left}")
    return 0


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    changelog = sub.add_parser("changelog", help="Parquet change logs of subscriptions (subscription add --parquet)")
    cl_sub = changelog.add_subparsers(dest="changelog_command", required=True, metavar="CHANGELOG_COMMAND")
    cp = cl_sub.add_parser(
        "compact",
        help="merge each table's files of one day into one file (idempotent; overlapping batches kept once)",
    )
    cp.add_argument("url", metavar="URL", help="the change log's URL, as the subscription has it")
    cp.add_argument("--date", required=True, metavar="YYYY-MM-DD", help="the day (the partition date=, UTC)")
    cp.add_argument("--json", action="store_true")
    cp.set_defaults(func=cmd_changelog_compact)
