"""``walship verify``: compare a peer with the source row by row, and repair what differs.

Reads the source over its Thrift2 server (the global ``--source-thrift2``), the peer over its
``walship.sink.thrift2`` servers, the peer's queues from ZooKeeper and the source's WALs
(``--zk``, ``--znode-parent``, ``--wal-root``) for the rows still in flight. Runs in this
process; ``spark_jobs/verify.py`` runs the same splits as Spark tasks.
"""

from __future__ import annotations

import argparse
import json
import logging
import math

from walship.cli.argtypes import count, iso_time
from walship.cli.meterbar import meter
from walship.errors import VerifyError
from walship.files import check_url
from walship.verify import VerifyJob, verify
from walship.verify.model import LATEST

__all__ = ["register"]

log = logging.getLogger(__name__)


def _time_ms(flag: str, text: str | None, default: int) -> int:
    if text is None:
        return default
    try:
        value = iso_time(text)
    except argparse.ArgumentTypeError as exc:
        raise VerifyError(f"{flag}: {exc} (expected e.g. 2024-05-01T12:00:00Z)") from None
    return math.floor(value.timestamp() * 1000)


def _versions(text: str | None) -> int | None:
    if text is None:
        return None
    try:
        return count(text, 1)
    except argparse.ArgumentTypeError as exc:
        raise VerifyError(f"--versions: {exc}") from None


def _sleep(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise VerifyError(f"--recompare-sleep: not a number of seconds: {text!r}") from None
    if not value >= 0 or math.isinf(value):
        raise VerifyError(f"--recompare-sleep must be a number of seconds >= 0, got {text}")
    return value


def job_from_args(args: argparse.Namespace) -> VerifyJob:
    """The verify job the flags describe (checked before anything is read)."""
    families = tuple(f.strip() for f in args.families.split(",")) if args.families is not None else ()
    if args.families is not None and not all(families):
        raise VerifyError(f"--families: an empty family name in {args.families!r}")
    if not args.wal_root:
        raise VerifyError("no WAL root: give --wal-root (before the subcommand) or set WALSHIP_WAL_ROOT")
    return VerifyJob(
        zk=args.zk,
        znode_parent=args.znode_parent,
        wal_root=args.wal_root,
        zk_auth=args.zk_auth,
        source_thrift2=args.source_thrift2 or "",
        peer_id=args.peer,
        tables=tuple(args.table or ()),
        families=families,
        start_ms=_time_ms("--start-time", args.start_time, 0),
        end_ms=_time_ms("--end-time", args.end_time, LATEST),
        row_prefixes=tuple(args.row_prefix or ()),
        versions=_versions(args.versions),
        recompare_sleep=_sleep(args.recompare_sleep),
        repair=args.repair,
    )


def cmd_verify(args: argparse.Namespace) -> int:
    if args.report is not None:
        check_url(args.report, "--report")  # before any comparing: a report nowhere is refused now
    job = job_from_args(args)
    with meter(f"verifying peer {args.peer}", quiet=args.json) as shown:
        result = verify(job, report=args.report, meter=shown)
    if args.json:
        print(json.dumps(result.to_json(), sort_keys=True))
    else:
        print(result.summary())
    return 0 if result.ok else 1


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "verify",
        help="compare a peer with the source row by row (HBase's VerifyReplication); --repair fixes the peer",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--peer", required=True, metavar="ID", help="the replication peer to verify")
    p.add_argument(
        "--table", action="append", metavar="T", help="a table to verify (repeatable; default: all the peer replicates)"
    )
    p.add_argument("--families", metavar="F1,F2", help="only these families (each must be replicated to the peer)")
    p.add_argument("--start-time", metavar="ISO", help="compare cells with timestamps >= this (default: all)")
    p.add_argument("--end-time", metavar="ISO", help="compare cells with timestamps < this (default: all)")
    p.add_argument(
        "--row-prefix", action="append", metavar="P", help="only rows starting with P (repeatable; \\xNN escapes)"
    )
    p.add_argument("--versions", metavar="N", help="versions compared per column (default: the family's VERSIONS)")
    p.add_argument(
        "--recompare-sleep",
        default="2",
        metavar="S",
        help="seconds before rows found different are read again (default %(default)s)",
    )
    p.add_argument("--repair", action="store_true", help="make each bad row of the peer equal to the source's")
    p.add_argument("--report", metavar="DIR", help="write every bad row with its difference here (a path or URL)")
    p.add_argument("--json", action="store_true", help="print the counters and bad rows as JSON")
    p.set_defaults(func=cmd_verify)
