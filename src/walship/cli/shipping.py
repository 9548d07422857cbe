"""``walship ship``, ``tail``, ``replay`` and ``clean``: move WAL edits to a peer, and tidy archived WALs."""

from __future__ import annotations

import argparse
import json
import logging
import sys

from walship import defaults
from walship.cli.argtypes import between, duration, iso_time, positive_int, seconds
from walship.cli.common import source
from walship.cli.meterbar import meter, polled
from walship.errors import WalshipError
from walship.meter import NO_METER

__all__ = ["register"]

log = logging.getLogger(__name__)


_PEERS_HELP = "a peer or subscription; several, comma-separated, share one read of each WAL"


def peer_list(text: str) -> list[str]:
    """``1,2,subs``: peer ids, in order, each once (:func:`walship.replicate.peerplan.split_peer_ids`);
    here at least one."""
    from walship.replicate.peerplan import split_peer_ids

    try:
        ids = split_peer_ids(text)
    except WalshipError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    if not ids:
        raise argparse.ArgumentTypeError(f"expected peer ids separated by commas, got {text!r}")
    return ids


def cmd_ship(args: argparse.Namespace) -> int:
    from walship.replicate.shipper import Shipper

    with (
        source(args) as (client, layout, walstore),
        Shipper(
            client,
            layout,
            walstore,
            batch_bytes=args.batch_bytes,
            batch_entries=args.batch_entries,
            lock_timeout=args.lock_wait,
            source_thrift2=args.source_thrift2,
            parallel=args.parallel,
            buffer_quota=args.buffer_quota,
        ) as shipper,
        meter(f"shipping to peer(s) {','.join(args.peer)}") as shown,
    ):
        if shown is not NO_METER:  # the backlog, measured only when it is shown
            backlog = shipper.planner.pending(",".join(args.peer), args.queue)
            shown.start(sum(p.backlog_bytes for p in backlog), "bytes")
        with polled(shown, shipper.bytes_read):
            summaries = shipper.ship_peers(args.peer, args.queue, args.max_batches)
    failed = any(s.status == "error" for s in summaries)
    if len(summaries) == 1:
        out = summaries[0].to_json()
    else:
        out = {"status": "error" if failed else "ok", "peers": [s.to_json() for s in summaries]}
    out["wal_reads"] = shipper.read_stats.to_json()
    print(json.dumps(out))
    return 1 if failed else 0


def cmd_tail(args: argparse.Namespace) -> int:
    from walship.replicate.tailer import Tailer

    with source(args) as (client, layout, walstore):
        summary = Tailer(
            client,
            layout,
            walstore,
            args.peer,
            duration=args.duration,
            idle_sleep=args.idle_sleep,
            source_thrift2=args.source_thrift2,
            gather=args.gather,
        ).run()
    print(json.dumps(summary.to_json()))
    return 1 if summary.status == "error" else 0


def cmd_replay(args: argparse.Namespace) -> int:
    from walship.replicate.replay import replay

    with source(args) as (client, layout, walstore), meter(f"replaying into peer {args.peer}") as shown:
        report = replay(
            client, layout, walstore, args.peer, args.start, args.end, allow_gaps=args.allow_gaps, meter=shown
        )
    for warning in report.warnings:
        print(f"walship: warning: {warning}", file=sys.stderr)
    print(json.dumps(report.to_json()))
    return 0


def cmd_clean(args: argparse.Namespace) -> int:
    from walship.replicate.cleaner import clean

    with source(args) as (client, layout, walstore):
        report = clean(
            client,
            layout,
            walstore,
            ttl=args.ttl,
            dry_run=args.dry_run,
            disabled_peer_limit=args.disabled_peer_limit,
        )
    if args.json:
        print(json.dumps(report.to_json()))
    else:
        verb = "would delete" if args.dry_run else "deleted"
        print(
            f"{verb} {report.deleted.files} files ({report.deleted.bytes:,} bytes); kept "
            f"{report.kept_referenced.files} referenced ({report.kept_referenced.bytes:,} bytes), "
            f"{report.kept_young.files} younger than {args.ttl:g} s ({report.kept_young.bytes:,} bytes)"
        )
        for path in report.not_wal:
            print(f"not a WAL, left alone: {path}")
        for warning in report.warnings:
            print(f"warning: {warning}")
    return 0


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    ship = sub.add_parser("ship", help="one pass over a peer's queues, without Airflow; JSON summary on stdout")
    ship.add_argument("--peer", required=True, type=peer_list, metavar="PEER_ID[,PEER_ID...]", help=_PEERS_HELP)
    ship.add_argument("--queue", metavar="QUEUE_ID", help="only this queue (an id, server/id, or a glob)")
    ship.add_argument("--max-batches", type=positive_int, help="stop each queue after N batches")
    ship.add_argument("--batch-bytes", type=positive_int, default=defaults.BATCH_BYTES)
    ship.add_argument("--batch-entries", type=positive_int, default=defaults.BATCH_ENTRIES)
    ship.add_argument(
        "--lock-wait",
        type=seconds,
        default=defaults.LOCK_WAIT,
        metavar="SECONDS",
        help="wait this long for a queue another shipper holds (default: skip it and say so)",
    )
    ship.add_argument(
        "--parallel",
        type=between(1, defaults.MAX_PARALLEL_GROUPS),
        default=defaults.PARALLEL_GROUPS,
        metavar="N",
        help="ship the queues of up to N servers at once, a thread each, each group holding up to two "
        "batches in memory (default %(default)s; 1: one after another)",
    )
    ship.add_argument(
        "--buffer-quota",
        type=positive_int,
        default=defaults.TOTAL_BUFFER_QUOTA,
        metavar="BYTES",
        help="memory the batches applied in the background may hold at once, as HBase's "
        "replication.total.buffer.quota; a batch beyond it is applied before reading on (default %(default)s)",
    )
    ship.set_defaults(func=cmd_ship)

    tail = sub.add_parser("tail", help="follow a peer's queues and ship new entries at once, for a while")
    tail.add_argument("--peer", required=True, type=peer_list, metavar="PEER_ID[,PEER_ID...]", help=_PEERS_HELP)
    tail.add_argument(
        "--duration",
        type=duration,
        default=defaults.TAIL_DURATION,
        metavar="SECONDS",
        help="then stop (default %(default)g)",
    )
    tail.add_argument(
        "--gather",
        type=seconds,
        default=defaults.TAIL_GATHER,
        metavar="SECONDS",
        help=f"after a pass that read fewer than {defaults.TAIL_GATHER_ENTRIES:,} entries, let new edits gather "
        "this long: fewer, fuller passes, less CPU, at most this much more lag (0: pass again at once; "
        "default %(default)g)",
    )
    tail.add_argument("--idle-sleep", type=seconds, default=None, metavar="SECONDS", help=argparse.SUPPRESS)
    tail.set_defaults(func=cmd_tail)

    rp = sub.add_parser("replay", help="ship every edit written in a time window, from all WALs still present")
    rp.add_argument("--peer", required=True, metavar="PEER_ID")
    rp.add_argument("--from", dest="start", required=True, type=iso_time, metavar="ISO_TIME")
    rp.add_argument("--to", dest="end", required=True, type=iso_time, metavar="ISO_TIME")
    rp.add_argument("--allow-gaps", action="store_true", help="replay what is there when WALs of the window are gone")
    rp.set_defaults(func=cmd_replay)

    cl = sub.add_parser("clean", help="delete archived WALs older than the TTL that no queue references")
    cl.add_argument(
        "--ttl", type=seconds, default=defaults.CLEAN_TTL, metavar="SECONDS", help="minimum age (default %(default)g)"
    )
    cl.add_argument("--dry-run", action="store_true", help="report, delete nothing")
    cl.add_argument("--json", action="store_true")
    cl.add_argument(
        "--disabled-peer-limit",
        type=positive_int,
        default=10 * 1024**3,
        metavar="BYTES",
        help="warn when a disabled peer holds more archived bytes than this",
    )
    cl.set_defaults(func=cmd_clean)
