"""``walship subscription add|list|show|enable|disable|remove``: SEP subscriptions.

A subscription is a walship-managed peer whose sink hands events to a listener, or writes
them into a Parquet change log (see :mod:`walship.sep`); ``walship ship --peer NAME`` and
``walship tail --peer NAME`` run it.
"""

from __future__ import annotations

import argparse
import json
import logging
import time
from typing import Any

from walship.cli.argtypes import iso_time, shorten
from walship.cli.common import add_list_show, add_offline_flag, peers_admin, print_fields, state
from walship.errors import ChangeLogError, ConfigError, InvalidPeerConfigError
from walship.peer import parse_namespaces, parse_table_cfs
from walship.replicate.peercheck import validate_peer
from walship.replicate.serialstart import read_barriers, start_serial
from walship.sep.subscriptions import Subscriptions, describe

__all__ = ["register", "start_time_ms"]

log = logging.getLogger(__name__)


#: The latest start time a subscription takes: the end of year 9999, in epoch milliseconds.
MAX_START_MS = 253_402_300_799_999


def start_time_ms(text: str) -> int:
    """``now``, an ISO time (UTC unless it says otherwise) or epoch milliseconds, up to the
    year 9999.

    :raises ConfigError: none of these, or out of range.
    """
    value = text.strip()
    if value.lower() == "now":
        return int(time.time() * 1000)
    if value.isdigit():
        if len(value) > len(str(MAX_START_MS)) or int(value) > MAX_START_MS:
            raise ConfigError(f"invalid --start-time {shorten(text)}: epoch milliseconds after the year 9999")
        return int(value)
    try:
        return int(iso_time(value).timestamp() * 1000)
    except (argparse.ArgumentTypeError, OverflowError, ValueError):
        raise ConfigError(
            f"invalid --start-time {shorten(text)}: expected now, an ISO time (2026-01-31T12:00:00Z) "
            "or epoch milliseconds"
        ) from None


def _changelog(args: argparse.Namespace) -> str | None:
    """The change log's URL of ``--parquet``, checked; ``None`` for a listener.

    :raises ConfigError: a listener's flag with ``--parquet``, or a URL fsspec cannot resolve.
    """
    if args.parquet is None:
        return None
    from walship.sep.parquetlog import changelog_url, prepare_local_dir  # pyarrow: only for a change log

    for flag, value in (("--threads", args.threads), ("--payload-column", args.payload_column)):
        if value is not None:
            raise ConfigError(
                f"subscription {args.name}: {flag} does not apply to a change log (--parquet); it is a listener's"
            )
    try:
        url = changelog_url(args.parquet)
        prepare_local_dir(url)
    except ChangeLogError as exc:
        raise ConfigError(f"subscription {args.name}: --parquet: {exc}") from None
    return url


def cmd_subscription_add(args: argparse.Namespace) -> int:
    if args.filter is not None and not args.filter.strip():
        raise ConfigError(f"subscription {args.name}: --filter is empty: give MODULE:CALLABLE, or leave it out")
    changelog = _changelog(args)
    start = start_time_ms(args.start_time) if args.start_time is not None else None
    table_cfs = None
    if args.table_cfs:
        try:
            table_cfs = parse_table_cfs(args.table_cfs)
        except InvalidPeerConfigError as exc:
            raise InvalidPeerConfigError(f"subscription {args.name}: --table-cfs: {exc}") from None
    namespaces = None
    if args.namespaces is not None:
        try:
            namespaces = sorted(parse_namespaces(args.namespaces, "--namespaces"))
        except InvalidPeerConfigError as exc:
            raise InvalidPeerConfigError(f"subscription {args.name}: {exc}") from None
    with state(args) as (client, layout), peers_admin(args, client, layout) as peers:
        subs = Subscriptions(client, layout, args.zk, peers)
        peer = subs.config(
            args.name,
            listener=args.listener,
            changelog=changelog,
            threads=args.threads,
            start_time=start,
            payload_column=args.payload_column,
            filter=args.filter,
            table_cfs=table_cfs,
            namespaces=namespaces,
            enabled=not args.disabled,
            serial=args.serial,
        )
        validate_peer(peer)  # the listener, the filter hook and the change log's URL are checked here
        # offline, a serial peer starts from hbase:meta, read before any write (a master sets it itself)
        starts = peer.serial and subs.peers.starts_serial
        barriers = read_barriers(peer.peer_id, args.source_thrift2) if starts else []
        subs.add(peer)
        if starts:
            start_serial(client, layout, peer, barriers)
        added = subs.get(args.name)
    if args.json:
        print(json.dumps(describe(added)))
        return 0
    info = describe(added)
    target = (
        f"Parquet change log {info['parquet']}"
        if info["parquet"]
        else f"listener {info['listener']}, {info['threads']} thread(s)"
    )
    print(
        f"added subscription {added.peer_id} ({info['state']}): {target}, "
        f"start time {info['start_time_iso'] or '-'} -> {added.cluster_key}"
    )
    return 0


def _line(info: dict[str, object]) -> str:
    cfs = info["table_cfs"]
    scope = ";".join(sorted(cfs)) if isinstance(cfs, dict) else "-"
    target = f"parquet {info['parquet']}" if info["parquet"] else f"listener {info['listener']}"
    return (
        f"{info['name']!s:<12} {info['state']!s:<9} {info['threads'] or '-'!s:<7} "
        f"{info['start_time_iso'] or '-'!s:<29} {info['payload_column'] or '-'!s:<14} {scope:<16} "
        f"{info['filter'] or '-'!s:<20} {target}"
    )


def cmd_subscription_list(args: argparse.Namespace) -> int:
    with state(args) as (client, layout):
        subs = Subscriptions(client, layout, args.zk).list()
    infos = [describe(p) for p in subs]
    if args.json:
        print(json.dumps(infos))
        return 0
    print(
        f"{'NAME':<12} {'STATE':<9} {'THREADS':<7} {'START_TIME':<29} {'PAYLOAD':<14} {'TABLES':<16} "
        f"{'FILTER':<20} TARGET"
    )
    for info in infos:
        print(_line(info))
    print(f"{len(infos)} subscription(s)")
    return 0


def cmd_subscription_show(args: argparse.Namespace) -> int:
    with state(args) as (client, layout):
        subs = Subscriptions(client, layout, args.zk)
        info = describe(subs.get(args.name))
        info["cluster_id"] = subs.cluster_id(args.name)
    if args.json:
        print(json.dumps(info))
        return 0
    print_fields(info, 16, _subscription_value)
    return 0


def _subscription_value(value: Any) -> str:
    if isinstance(value, dict):
        return ", ".join(f"{k}:{','.join(v) if v else '*'}" for k, v in value.items()) or "-"
    if isinstance(value, list):
        return ",".join(value)
    return str(value)


def cmd_subscription_state(args: argparse.Namespace) -> int:
    action = args.subscription_command
    with state(args) as (client, layout), peers_admin(args, client, layout) as peers:
        subs = Subscriptions(client, layout, args.zk, peers)
        if action == "enable":
            subs.enable(args.name)
        elif action == "disable":
            subs.disable(args.name)
        else:
            subs.remove(args.name)
    if args.json:
        print(json.dumps({"name": args.name, "action": action}))
    else:
        print(f"{action}d subscription {args.name}")
    return 0


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    subscription = sub.add_parser(
        "subscription", help="SEP subscriptions: listeners fed the stream of edits HBase replicates"
    )
    sub_sub = subscription.add_subparsers(dest="subscription_command", required=True, metavar="SUBSCRIPTION_COMMAND")
    add = sub_sub.add_parser(
        "add",
        help="add a subscription (a walship-managed peer whose sink is a listener or a Parquet change log); "
        "enabled unless --disabled",
    )
    add.add_argument("name", help="the subscription's name (its peer id: letters, digits, '_' and '.')")
    target = add.add_mutually_exclusive_group(required=True)
    target.add_argument(
        "--listener",
        metavar="NAME_OR_MODULE:CLASS",
        help="a name of the walship.listeners entry points, or module:Class (constructed with no arguments)",
    )
    target.add_argument(
        "--parquet",
        metavar="URL",
        help="write the events into a Parquet change log at URL (any fsspec URL, or a path), partitioned by table "
        "and date",
    )
    add.add_argument("--table-cfs", help="only these: 'ns.table:cf1,cf2;table2' (HBase's format)")
    add.add_argument("--namespaces", help="only these namespaces: a,b")
    add.add_argument(
        "--start-time",
        metavar="ISO|now",
        help="deliver only edits written at or after this time (now, an ISO time or epoch ms; default: "
        "everything in the WALs queued for it)",
    )
    add.add_argument(
        "--threads", metavar="N", help="listener only: workers rows are hashed over; one row, one worker (default 1)"
    )
    add.add_argument(
        "--payload-column", metavar="FAMILY:QUALIFIER", help="listener only: this column's value is the event's payload"
    )
    add.add_argument("--filter", metavar="MODULE:CALLABLE", help="called with each event; falsy drops it")
    add.add_argument("--disabled", action="store_true", help="add the subscription disabled")
    add.add_argument(
        "--no-serial",
        dest="serial",
        action="store_false",
        help="not a serial peer (by default a subscription is one: each region's edits arrive in write order)",
    )
    add.add_argument("--json", action="store_true")
    add_offline_flag(add)
    add.set_defaults(func=cmd_subscription_add)
    add_list_show(sub_sub, "subscription", "name", cmd_subscription_list, cmd_subscription_show)
    for name, text in (
        ("enable", "enable a subscription (walship's switch)"),
        ("disable", "disable a subscription: nothing is delivered, its WALs are kept"),
        ("remove", "remove a subscription, its queues and its znodes"),
    ):
        p = sub_sub.add_parser(name, help=text)
        p.add_argument("name")
        p.add_argument("--json", action="store_true")
        add_offline_flag(p)
        p.set_defaults(func=cmd_subscription_state)
