"""``walship peer add|enable|disable|remove|list|show`` and ``walship queues``: peers and queues in ZooKeeper."""

from __future__ import annotations

import argparse
import json
import logging
from typing import Any

from walship.cli.common import parse_config_pairs, state
from walship.sinks.base import validate_sink_config
from walship.sinks.hbase import SINK_THRIFT_KEY
from walship.zk import PeerConfig, ReplicationPeers, ReplicationQueues, format_table_cfs, parse_table_cfs
from walship.zk.peers import MANAGED_KEY

__all__ = ["register"]

log = logging.getLogger(__name__)


def cmd_peer_add(args: argparse.Namespace) -> int:
    namespaces = frozenset(n.strip() for n in args.namespaces.split(",") if n.strip()) if args.namespaces else None
    config = PeerConfig(
        peer_id=args.peer_id,
        cluster_key=args.cluster_key,
        enabled=not args.disabled,
        table_cfs=parse_table_cfs(args.table_cfs) if args.table_cfs else None,
        namespaces=namespaces or None,
        configuration={**parse_config_pairs(args.config), MANAGED_KEY: "true"},
    )
    validate_sink_config(config)
    with state(args) as (client, layout):
        ReplicationPeers(client, layout).add(config)
    print(
        f"added peer {config.peer_id} ({'ENABLED' if config.enabled else 'DISABLED'}, managed by walship; "
        f"HBase peer-state DISABLED) -> {config.cluster_key}"
    )
    return 0


def cmd_peer_adopt(args: argparse.Namespace) -> int:
    with state(args) as (client, layout):
        peer = ReplicationPeers(client, layout).adopt(args.peer_id)
    print(
        f"adopted peer {peer.peer_id}: managed by walship ({'ENABLED' if peer.enabled else 'DISABLED'}), "
        "HBase peer-state DISABLED (HBase keeps its queues and WALs, walship ships it)"
    )
    return 0


def cmd_peer_state(args: argparse.Namespace) -> int:
    with state(args) as (client, layout):
        peers = ReplicationPeers(client, layout)
        if args.peer_command == "enable":
            peers.enable(args.peer_id)
        elif args.peer_command == "disable":
            peers.disable(args.peer_id)
        else:
            peers.remove(args.peer_id)
    print(f"{args.peer_command}d peer {args.peer_id}")
    return 0


def _peer_line(p: PeerConfig) -> str:
    cfs = format_table_cfs(p.table_cfs) if p.table_cfs else ""
    namespaces = ";".join(sorted(p.namespaces)) if p.namespaces else ""
    return (
        f"{p.peer_id:<8} {'ENABLED' if p.enabled else 'DISABLED':<9} "
        f"{'ENABLED' if p.hbase_state_enabled else 'DISABLED':<11} {'yes' if p.managed else 'no':<8} {p.cluster_key:<32} "
        f"{str(p.replicate_all).lower():<13} {namespaces or '-':<12} {cfs or '-':<24} {p.configuration.get(SINK_THRIFT_KEY, '-')}"
    )


def cmd_peer_list(args: argparse.Namespace) -> int:
    with state(args) as (client, layout):
        peers = ReplicationPeers(client, layout).list()
    if args.json:
        print(json.dumps([p.to_json() for p in peers], indent=None))
        return 0
    print(
        f"{'PEER_ID':<8} {'STATE':<9} {'HBASE_STATE':<11} {'MANAGED':<8} {'CLUSTER_KEY':<32} {'REPLICATE_ALL':<13} {'NAMESPACES':<12} {'TABLE_CFS':<24} SINK"
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
    for key, value in peer.to_json().items():
        if isinstance(value, dict):
            value = ", ".join(f"{k}={v}" for k, v in value.items()) or "-"
        print(f"{key:<20} {value if value is not None else '-'}")
    return 0


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
    add.set_defaults(func=cmd_peer_add)
    adopt = peer_sub.add_parser("adopt", help="make a peer HBase ships a walship-managed one (HBase stops shipping it)")
    adopt.add_argument("peer_id")
    adopt.set_defaults(func=cmd_peer_adopt)
    for name, text in (
        ("enable", "enable a peer (a managed peer: walship's switch)"),
        ("disable", "disable a peer (a managed peer: walship's switch)"),
        ("remove", "remove a peer"),
    ):
        p = peer_sub.add_parser(name, help=text)
        p.add_argument("peer_id")
        p.set_defaults(func=cmd_peer_state)
    plist = peer_sub.add_parser("list", help="list peers")
    plist.add_argument("--json", action="store_true")
    plist.set_defaults(func=cmd_peer_list)
    show = peer_sub.add_parser("show", help="show one peer")
    show.add_argument("peer_id")
    show.add_argument("--json", action="store_true")
    show.set_defaults(func=cmd_peer_show)

    queues = sub.add_parser("queues", help="every replication queue with its WALs and positions")
    queues.add_argument("--peer", metavar="PEER_ID", help="only the queues of this peer")
    queues.add_argument("--json", action="store_true")
    queues.set_defaults(func=cmd_queues)
