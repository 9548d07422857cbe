"""``walship deadletter list|replay``: the edits a sink could not express, kept durably."""

from __future__ import annotations

import argparse
import json
import logging

from walship.cli.common import source
from walship.cli.meterbar import meter

__all__ = ["register"]

log = logging.getLogger(__name__)


def cmd_deadletter_list(args: argparse.Namespace) -> int:
    from walship.replicate.deadletters import list_dead_letters
    from walship.zk import ReplicationPeers

    with source(args) as (client, layout, walstore):
        peer_ids = [args.peer] if args.peer else ReplicationPeers(client, layout).ids()
        letters = list_dead_letters(client, layout, walstore, peer_ids)
    if args.json:
        print(json.dumps(letters))
        return 0
    print(f"{'PEER':<8} {'WAL':<56} {'OFFSET':>10} {'TYPE':<20} {'ROW':<24} REASON")
    for d in letters:
        print(f"{d['peer_id']:<8} {d['wal']:<56} {d['offset']:>10} {d['type']:<20} {d['row']:<24} {d['reason']}")
    print(f"{len(letters)} dead letter(s)")
    return 0


def cmd_deadletter_replay(args: argparse.Namespace) -> int:
    from walship.replicate.deadletters import replay_dead_letters

    with source(args) as (client, layout, walstore), meter(f"replaying dead letters of peer {args.peer}") as shown:
        report = replay_dead_letters(client, layout, walstore, args.peer, meter=shown)
    print(json.dumps(report.to_json()))
    return 0


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    dl = sub.add_parser("deadletter", help="edits a sink could not express: list them, replay them")
    dl_sub = dl.add_subparsers(dest="dl_command", required=True, metavar="DEADLETTER_COMMAND")
    ls = dl_sub.add_parser("list", help="pending dead letters, each with its WAL, offset, row and reason")
    ls.add_argument("--peer", metavar="PEER_ID", help="only this peer's (default: every peer's)")
    ls.add_argument("--json", action="store_true")
    ls.set_defaults(func=cmd_deadletter_list)
    rp = dl_sub.add_parser(
        "replay", help="apply a peer's pending dead letters through its sink, exactly, within the peer's bandwidth"
    )
    rp.add_argument("--peer", required=True, metavar="PEER_ID")
    rp.set_defaults(func=cmd_deadletter_replay)
