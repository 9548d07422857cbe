"""``walship peer add|set|adopt|enable|disable|remove|list|show`` and ``walship queues``: peers and queues in ZooKeeper."""

from __future__ import annotations

import argparse
import json
import logging
import sys
from typing import Any

from walship.cli.argtypes import bandwidth, boolean
from walship.cli.common import add_list_show, add_offline_flag, parse_config_pairs, peers_admin, print_fields, state
from walship.cli.peerset import bytes_per_s, cmd_peer_set
from walship.peer import MANAGED_KEY, PeerConfig, format_table_cfs, parse_namespaces, parse_table_cfs
from walship.replicate.peercheck import validate_peer
from walship.replicate.serialstart import read_barriers, start_serial
from walship.sep.config import CHANGELOG_URL_KEY, LISTENER_KEY
from walship.sinks.base import DEFAULT_PROTOCOL, SINK_PROTOCOL_KEY, SINK_THRIFT2_KEY, SINK_THRIFT_KEY
from walship.zk import ReplicationPeers, ReplicationQueues

__all__ = ["register"]

log = logging.getLogger(__name__)


def cmd_peer_add(args: argparse.Namespace) -> int:
    namespaces = parse_namespaces(args.namespaces, "--namespaces") if args.namespaces is not None else None
    config = PeerConfig(
        peer_id=args.peer_id,
        cluster_key=args.cluster_key,
        enabled=not args.disabled,
        table_cfs=parse_table_cfs(args.table_cfs) if args.table_cfs is not None else None,
        namespaces=namespaces or None,
        configuration={**parse_config_pairs(args.config), MANAGED_KEY: "true"},
        bandwidth=args.bandwidth,
        serial=args.serial,
    )
    validate_peer(config)
    # offline, a serial peer starts at each region's current open (a running master sets it itself):
    # hbase:meta is read before anything is written
    barriers = (
        read_barriers(config.peer_id, args.source_thrift2)
        if config.serial and args.offline and not args.print_hbase_shell
        else []
    )
    if args.print_hbase_shell:
        from walship.hbaseshell import add_peer_command

        print(add_peer_command(config))
        # the command carries no bandwidth: walship sets it once it manages the peer
        later = ["--bandwidth", str(config.bandwidth)] if config.bandwidth else []
        then_set = f" && walship peer set {config.peer_id} {' '.join(later)}" if later else ""
        print(
            f"# paste it into the HBase shell of the source cluster, then run: walship peer adopt {config.peer_id}"
            f"{then_set}"
            f"{'' if config.enabled else f' && walship peer disable {config.peer_id}'}\n"
            "# (HBase's region servers queue WALs for the peer at once; walship ships it once adopted)",
            file=sys.stderr,
        )
        return 0
    with state(args) as (client, layout), peers_admin(args, client, layout) as peers:
        peers.add(config)
        if config.serial and peers.starts_serial:
            start_serial(client, layout, config, barriers)
    extra = ("; serial" if config.serial else "") + (
        f"; bandwidth {bytes_per_s(config.bandwidth)}" if config.bandwidth else ""
    )
    print(
        f"added peer {config.peer_id} ({'ENABLED' if config.enabled else 'DISABLED'}, managed by walship; "
        f"HBase peer-state DISABLED) -> {config.cluster_key}{extra}"
    )
    return 0


def cmd_peer_adopt(args: argparse.Namespace) -> int:
    with state(args) as (client, layout), peers_admin(args, client, layout) as peers:
        peer = peers.adopt(args.peer_id)
    print(
        f"adopted peer {peer.peer_id}: managed by walship ({'ENABLED' if peer.enabled else 'DISABLED'}), "
        "HBase peer-state DISABLED (HBase keeps its queues and WALs, walship ships it)"
    )
    return 0


def cmd_peer_state(args: argparse.Namespace) -> int:
    with state(args) as (client, layout), peers_admin(args, client, layout) as peers:
        if args.peer_command == "enable":
            peers.enable(args.peer_id)
        elif args.peer_command == "disable":
            peers.disable(args.peer_id)
        else:
            peers.remove(args.peer_id)
    print(f"{args.peer_command}d peer {args.peer_id}")
    return 0


def _sink(p: PeerConfig) -> str:
    """The peer's sink and where it writes, e.g. ``thrift2 b1:9091,b2:9091``."""
    protocol = p.configuration.get(SINK_PROTOCOL_KEY) or DEFAULT_PROTOCOL
    if protocol == "sep":  # a subscription: its listener
        return f"sep {p.configuration.get(LISTENER_KEY, '-')}"
    if protocol == "changelog":  # a subscription: its Parquet change log
        return f"changelog {p.configuration.get(CHANGELOG_URL_KEY, '-')}"
    servers = {"thrift1": SINK_THRIFT_KEY, "thrift2": SINK_THRIFT2_KEY}.get(protocol)
    return f"{protocol} {p.configuration.get(servers, '-') if servers else ''}".strip()


def _peer_line(p: PeerConfig) -> str:
    cfs = format_table_cfs(p.table_cfs) if p.table_cfs else ""
    namespaces = ";".join(sorted(p.namespaces)) if p.namespaces else ""
    return (
        f"{p.peer_id:<8} {'ENABLED' if p.enabled else 'DISABLED':<9} "
        f"{'ENABLED' if p.hbase_state_enabled else 'DISABLED':<11} {'yes' if p.managed else 'no':<8} {p.cluster_key:<32} "
        f"{str(p.replicate_all).lower():<13} {namespaces or '-':<12} {cfs or '-':<24} "
        f"{str(p.serial).lower():<6} {p.bandwidth or '-'!s:<10} {_sink(p)}"
    )


def cmd_peer_list(args: argparse.Namespace) -> int:
    with state(args) as (client, layout):
        peers = ReplicationPeers(client, layout).list()
    if args.json:
        print(json.dumps([p.to_json() for p in peers], indent=None))
        return 0
    print(
        f"{'PEER_ID':<8} {'STATE':<9} {'HBASE_STATE':<11} {'MANAGED':<8} {'CLUSTER_KEY':<32} {'REPLICATE_ALL':<13} {'NAMESPACES':<12} {'TABLE_CFS':<24} "
        f"{'SERIAL':<6} {'BANDWIDTH':<10} SINK"
    )
    for p in peers:
        print(_peer_line(p))
    print(f"{len(peers)} peer(s)")
    return 0


def cmd_peer_show(args: argparse.Namespace) -> int:
    with state(args) as (client, layout):
        peer = ReplicationPeers(client, layout).get(args.peer_id)
    if args.json:
        print(json.dumps(peer.to_json()))
        return 0
    print_fields(peer.to_json(), 20, _peer_value)
    return 0


def _peer_value(value: Any) -> str:
    if isinstance(value, dict):
        return ", ".join(f"{k}={v}" for k, v in value.items()) or "-"
    return str(value)


def cmd_queues(args: argparse.Namespace) -> int:
    with state(args) as (client, layout):
        queues = ReplicationQueues(client, layout).list_queues(args.peer)
    rows: list[dict[str, Any]] = [
        {
            "server": q.server,
            "queue_id": str(q.queue_id),
            "peer_id": q.peer_id,
            "recovered": q.recovered,
            "dead_servers": list(q.queue_id.dead_servers),
            "wals": [{"name": w.name, "position": w.position} for w in q.wals],
        }
        for q in queues
    ]
    if args.json:
        print(json.dumps(rows))
        return 0
    for row in rows:
        kind = f"recovered from {' <- '.join(row['dead_servers'])}" if row["recovered"] else "normal"
        print(f"{row['server']}  queue {row['queue_id']}  peer {row['peer_id']}  ({kind}), {len(row['wals'])} WAL(s)")
        for w in row["wals"]:
            print(f"    {w['name']}  position {w['position']}")
    print(f"{len(rows)} queue(s)")
    return 0


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    peer = sub.add_parser("peer", help="add, change, list and remove replication peers")
    peer_sub = peer.add_subparsers(dest="peer_command", required=True, metavar="PEER_COMMAND")
    add = peer_sub.add_parser(
        "add", help="add a walship-managed peer (enabled unless --disabled; HBase's peer-state stays DISABLED)"
    )
    add.add_argument("peer_id")
    add.add_argument("--cluster-key", required=True, help="the peer's host[,host...]:port:/znode-parent")
    add.add_argument("--table-cfs", help="replicate only these: 'ns.table:cf1,cf2;table2' (HBase's format)")
    add.add_argument("--namespaces", help="replicate only these namespaces: a,b")
    add.add_argument(
        "--config",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help=f"peer configuration entry, repeatable (e.g. {SINK_THRIFT_KEY}=host:9090)",
    )
    add.add_argument("--disabled", action="store_true", help="add the peer disabled")
    add.add_argument(
        "--bandwidth",
        type=bandwidth,
        default=0,
        metavar="BYTES_PER_S",
        help="ship at most this many bytes a second to the peer, per shipping process (0, the default: unlimited)",
    )
    add.add_argument("--serial", action="store_true", help="a serial peer (HBase's serial replication)")
    add_offline_flag(add)
    add.add_argument(
        "--print-hbase-shell",
        action="store_true",
        help="write nothing: print the HBase shell add_peer command that adds this peer to a running HBase "
        "(then 'walship peer adopt ID'), the way that needs no region server restart",
    )
    add.set_defaults(func=cmd_peer_add)
    pset = peer_sub.add_parser(
        "set",
        help="change a peer's table-cfs, namespaces, exclude lists, replicate_all, bandwidth, serial or configuration "
        "(one versioned znode write; running tailers pick it up at their next rediscovery)",
    )
    pset.add_argument("peer_id")
    pset.add_argument("--table-cfs", help="replicate only these: 'ns.table:cf1,cf2;table2'; '' clears them")
    pset.add_argument("--namespaces", help="replicate only these namespaces: a,b; '' clears them")
    pset.add_argument("--exclude-table-cfs", help="with replicate_all true: all but these; '' clears them")
    pset.add_argument("--exclude-namespaces", help="with replicate_all true: all but these namespaces; '' clears them")
    pset.add_argument(
        "--replicate-all",
        type=boolean,
        metavar="true|false",
        help="replicate every table (true needs no table-cfs or namespaces) or only the named ones",
    )
    pset.add_argument(
        "--config",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="add or change a configuration entry, repeatable",
    )
    pset.add_argument(
        "--remove-config",
        action="append",
        default=[],
        metavar="KEY",
        help="remove a configuration entry, repeatable (--offline only: HBase's master keeps every key on an update)",
    )
    pset.add_argument(
        "--bandwidth",
        type=bandwidth,
        metavar="BYTES_PER_S",
        help="ship at most this many bytes a second to the peer, per shipping process; 0: unlimited",
    )
    pset.add_argument("--serial", type=boolean, metavar="true|false", help="make the peer serial or not")
    pset.add_argument("--json", action="store_true", help="print the new configuration as JSON")
    add_offline_flag(pset)
    pset.set_defaults(func=cmd_peer_set, set_parser=pset)
    adopt = peer_sub.add_parser("adopt", help="make a peer HBase ships a walship-managed one (HBase stops shipping it)")
    adopt.add_argument("peer_id")
    add_offline_flag(adopt)
    adopt.set_defaults(func=cmd_peer_adopt)
    for name, text in (
        ("enable", "enable a peer (a managed peer: walship's switch)"),
        ("disable", "disable a peer (a managed peer: walship's switch)"),
        ("remove", "remove a peer"),
    ):
        p = peer_sub.add_parser(name, help=text)
        p.add_argument("peer_id")
        add_offline_flag(p)
        p.set_defaults(func=cmd_peer_state)
    add_list_show(peer_sub, "peer", "peer_id", cmd_peer_list, cmd_peer_show)

    queues = sub.add_parser("queues", help="every replication queue with its WALs and positions")
    queues.add_argument("--peer", metavar="PEER_ID", help="only the queues of this peer")
    queues.add_argument("--json", action="store_true")
    queues.set_defaults(func=cmd_queues)
