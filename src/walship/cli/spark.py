"""``walship spark``: what running walship's Spark jobs on a shop's cluster takes.

``walship spark pack`` builds the packed environment YARN containers run the ship, verify and
copy jobs in (see :mod:`walship.spark.pack`): put it where every node reads it (HDFS, say) and
name it in the Spark connection's extra ``archive``; the Airflow hook sends it with
``--archives <archive>#walship-env`` and runs the jobs under ``./walship-env/bin/python``.
"""

from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path

from walship.spark.pack import pack

__all__ = ["register"]

log = logging.getLogger(__name__)


def cmd_pack(args: argparse.Namespace) -> int:
    packed = pack(
        Path(args.output),
        wheel=Path(args.wheel) if args.wheel else None,
        requirements=args.requirement or (),
        constraints=Path(args.constraint) if args.constraint else None,
    )
    print(json.dumps(packed.to_json(), sort_keys=True) if args.json else packed.summary())
    return 0


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    group = sub.add_parser(
        "spark",
        help="what walship's Spark jobs need on a shop's cluster (the packed environment for YARN)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    spark_sub = group.add_subparsers(dest="spark_command", required=True, metavar="SUBCOMMAND")
    p = spark_sub.add_parser(
        "pack",
        help="pack walship and its dependencies into a .tar.gz for spark-submit --archives",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--output", "-o", default="walship-env.tar.gz", metavar="PATH", help="the archive to write")
    p.add_argument(
        "--wheel", metavar="PATH", help="walship's wheel to install (default: this installation's source, or the index)"
    )
    p.add_argument(
        "--requirement", action="append", metavar="SPEC", help="another package to install (repeatable: sink plugins)"
    )
    p.add_argument("--constraint", metavar="FILE", help="pip constraints for the installation (pinned versions)")
    p.add_argument("--json", action="store_true", help="print what was packed as JSON")
    p.set_defaults(func=cmd_pack)
