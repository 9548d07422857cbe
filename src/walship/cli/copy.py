"""``walship copy``: a first copy of the rows a new peer selects, from the source's Thrift2
server (the global ``--source-thrift2``) into the peer's ``walship.sink.thrift2`` servers,
read with a raw scan: every version and every delete marker, each with its own type and
timestamp, so the peer hides what the source hides (see :mod:`walship.copy`). It reads no
WAL (no ``--wal-root`` needed). Runs in this process; ``spark_jobs/copy_rows.py`` runs the
same splits as Spark tasks.

The runbook: add the peer (its queues start with the current WALs), copy up to the moment it
was added (``--until``), ship, then ``walship verify`` shows 0 bad rows.
"""

from __future__ import annotations

import argparse
import json
import logging

from walship.cli.meterbar import meter
from walship.copy import copy, copy_job, until_ms
from walship.errors import ConfigError

__all__ = ["register"]

log = logging.getLogger(__name__)


def cmd_copy(args: argparse.Namespace) -> int:
    job = copy_job(
        zk=args.zk,
        znode_parent=args.znode_parent,
        zk_auth=args.zk_auth,
        source_thrift2=args.source_thrift2 or "",
        peer_id=args.peer,
        tables=args.table or (),
        until_ms=until_ms(args.until),
    )
    with meter(f"copying into peer {args.peer}", quiet=args.json) as shown:
        result = copy(job, meter=shown)
    print(json.dumps(result.to_json(), sort_keys=True) if args.json else result.summary())
    return 0


def _until(text: str) -> str:
    try:
        until_ms(text)  # checked when parsed: a bad time is refused in one line
    except ConfigError as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix("--until: ")) from None
    return text


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "copy",
        help="copy the rows a new peer selects from the source into it (every version and delete marker, raw)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--peer", required=True, metavar="ID", help="the replication peer to fill")
    p.add_argument(
        "--table", action="append", metavar="T", help="a table to copy (repeatable; default: all the peer replicates)"
    )
    p.add_argument(
        "--until",
        type=_until,
        metavar="ISO",
        help="copy put cells with timestamps < this (default: all; delete markers: all)",
    )
    p.add_argument("--json", action="store_true", help="print what was copied as JSON")
    p.set_defaults(func=cmd_copy)
