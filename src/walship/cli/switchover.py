"""``walship switchover``: the writers' cluster moved to a peer's and back, step by step, without
Airflow (the ``walship_switchover`` DAG runs the same steps as tasks)."""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
from collections.abc import Callable, Iterator

from walship.cli.argtypes import seconds
from walship.cli.common import site
from walship.errors import SwitchoverError, SwitchoverStateError

__all__ = ["register"]

log = logging.getLogger(__name__)


@contextlib.contextmanager
def _pump(args: argparse.Namespace) -> Iterator[Callable[[], None] | None]:
    """A shipping pass of the peer's queues, run while the drain waits (none with ``--no-ship``)."""
    if args.no_ship:
        yield None
        return
    from walship.replicate.shipper import Shipper

    with site(args).connected() as (client, layout, walstore), Shipper(
        client, layout, walstore, source_thrift2=args.source_thrift2, lock_timeout=1.0
    ) as shipper:  # fmt: skip

        def ship() -> None:
            for summary in shipper.ship_peers([args.peer]):
                if summary.status == "error":
                    log.warning("switchover: shipping peer %s: %s", args.peer, summary.to_json().get("error"))

        yield ship


def cmd_switchover(args: argparse.Namespace) -> int:
    from walship.switchover import STEPS, Switchover, SwitchoverRequest, open_sides, split_tables

    if not args.wal_root:
        raise SwitchoverError(
            "switchover: no WAL root: give --wal-root (before the subcommand) or set WALSHIP_WAL_ROOT"
        )
    request = SwitchoverRequest(
        peer_id=args.peer,
        tables=split_tables(args.tables or ()),
        fence=args.fence,
        reverse=not args.no_reverse,
        reverse_peer_id=args.reverse_peer or "",
        source_thrift2=args.source_thrift2 or "",
        drain_timeout=args.drain_timeout,
    )

    def say(line: str) -> None:
        if not args.json:
            print(line, flush=True)

    with open_sides(site(args), args.peer) as sides, _pump(args) as pump:
        run = Switchover(sides, request, say=say, pump=pump)
        if args.dry_run:
            for line in run.dry_run():
                say(line)
            if args.json:
                print(json.dumps({"peer_id": args.peer, "dry_run": True, "steps": run.dry_run()}))
            return 0
        found = run.record()
        if args.rollback:
            if found is None or found.finished:
                raise SwitchoverStateError(f"rollback: no unfinished switchover to peer {args.peer} to roll back")
            run.run("rollback")
        else:
            if found is not None and not found.finished and found.changed_anything:
                say(f"resuming switchover {found.run_id} of {', '.join(found.tables)} (state {found.state})")
            steps = STEPS if args.step is None else (args.step,)
            for step in steps:
                run.run(step)
        record = run.record()
    if args.json and record is not None:
        print(json.dumps(record.to_json()))
    return 0


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from walship.switchover.record import FENCE_MODES, STEPS

    p = sub.add_parser(
        "switchover",
        help="move the writers of tables to a peer's cluster: fence, drain, verify, reverse, switch, unfence",
        description="Move the writers of the tables from this cluster to peer ID's cluster, losing nothing: "
        "preflight, fence the tables here (READONLY, or disabled), drain the peer's queues, verify, add the "
        "peer back to this cluster on the peer's cluster (switched off), report the switch, then unfence and "
        "switch the peer back on so that walship ships the writes back. Run again, it resumes where it "
        "stopped; before the switch, --rollback undoes it. Fail back with the same command on the peer's "
        "cluster and the peer back.",
    )
    p.add_argument("--peer", required=True, metavar="ID", help="the peer whose cluster takes the writers")
    p.add_argument(
        "--tables",
        nargs="+",
        metavar="TABLE",
        help="the tables to move (comma- or space-separated; default: those the peer's table-cfs names)",
    )
    p.add_argument("--dry-run", action="store_true", help="run the preflight and print what each step would change")
    p.add_argument(
        "--fence",
        choices=FENCE_MODES,
        default="read_only",
        help="how this cluster's tables stop taking writes: READONLY descriptors, or disabled (default %(default)s)",
    )
    p.add_argument(
        "--no-reverse",
        action="store_true",
        help="no peer back to this cluster: its tables stay fenced after the switch (a migration)",
    )
    p.add_argument("--reverse-peer", metavar="ID", help="the id of the peer back to this cluster (default: --peer)")
    p.add_argument(
        "--drain-timeout",
        type=seconds,
        default=3600.0,
        metavar="SECONDS",
        help="fail the drain after this long (default %(default)g)",
    )
    p.add_argument(
        "--no-ship",
        action="store_true",
        help="do not ship the peer's queues while draining (the shop's own shipping runs meanwhile)",
    )
    p.add_argument("--step", choices=STEPS, help="run only this step (the steps before it must have run)")
    p.add_argument("--rollback", action="store_true", help="undo an unfinished switchover (before its switch)")
    p.add_argument("--json", action="store_true", help="print the switchover's record at the end, as JSON")
    p.set_defaults(func=cmd_switchover)
