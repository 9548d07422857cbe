"""``walship minicluster start|set-scope|roll|abort-rs|move|split|merge|info``: an embedded
HBase-compatible cluster."""

from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

from walship.cli.argtypes import nonneg_int, port, positive_int, seconds
from walship.errors import BadRequestError
from walship.thrift import PROTOCOLS, TRANSPORTS
from walship.verify.model import to_bytes_binary
from walship.wal.valuecodecs import SUPPORTED as VALUE_CODECS
from walship.zk.client import validate_hosts

if TYPE_CHECKING:
    from walship_testing.minicluster.admin import AdminClient

__all__ = ["register"]

log = logging.getLogger(__name__)


def cmd_minicluster_start(args: argparse.Namespace) -> int:
    from walship_testing.minicluster.regionserver import WalSettings
    from walship_testing.minicluster.runner import run_minicluster

    validate_hosts(args.zk)
    return run_minicluster(
        name=args.name,
        data_dir=Path(args.data_dir),
        zk=args.zk,
        znode_parent=args.znode_parent,
        thrift_port=args.thrift_port,
        admin_port=args.admin_port,
        thrift2_port=args.thrift2_port,
        regionservers=args.regionservers,
        wal_roll_size=args.wal_roll_size,
        roll_order=args.roll_order,
        master_port=args.master_port,
        queue_claims=args.queue_claims,
        claim_delay=args.claim_delay,
        wal=WalSettings(
            groups=args.wal_groups,
            checksums=args.wal_checksums,
            compression=args.wal_compression,
            tag_compression=args.wal_tag_compression,
            value_compression=args.wal_value_compression,
        ),
        thrift_transport=args.thrift_transport,
        thrift_protocol=args.thrift_protocol,
        thrift_ssl_cert=Path(args.thrift_ssl_cert) if args.thrift_ssl_cert else None,
        thrift_ssl_key=Path(args.thrift_ssl_key) if args.thrift_ssl_key else None,
    )


def cmd_minicluster_admin(args: argparse.Namespace) -> int:
    from walship_testing.minicluster.admin import AdminClient

    if getattr(args, "server", None) is not None and not args.server.strip():
        raise BadRequestError("minicluster: the server name is empty (leave it out to roll every server)")
    client = AdminClient(args.admin)
    if args.mc_command == "set-scope":
        result = client.set_scope(args.table, args.family, args.scope)
    elif args.mc_command == "roll":
        result = client.roll(args.server)
    elif args.mc_command == "abort-rs":
        result = client.abort_rs(args.server)
    elif args.mc_command in ("move", "split", "merge"):
        result = _region_command(client, args)
    else:
        result = client.info()
        if not args.json:
            print(f"cluster {result['name']} ({result['cluster_id']}) on {result['zk']}{result['znode_parent']}")
            endpoints = result.get("endpoints") or {}
            if endpoints:
                print("  " + "  ".join(f"{k}={v or '-'}" for k, v in endpoints.items()))
            for rs in result["regionservers"]:
                state = "live" if rs["alive"] else "dead"
                print(f"  {rs['name']}  {state}  wal={rs['wal']}  regions={len(rs['regions'])}")
            for t in result["tables"]:
                fams = ", ".join(
                    f"{f}(scope={v['scope']}, versions={v['max_versions']})" for f, v in t["families"].items()
                )
                print(f"  table {t['name']} {'enabled' if t['enabled'] else 'disabled'}: {fams}")
            print(f"  WALs: {sum(len(v) for v in result['wals'].values())}, oldWALs: {len(result['old_wals'])}")
            return 0
    print(json.dumps(result))
    return 0


def _nonempty(flag: str, value: str | None) -> str | None:
    if value is not None and not value.strip():
        raise BadRequestError(f"minicluster: {flag} is empty")
    return value


def _region_command(client: AdminClient, args: argparse.Namespace) -> dict[str, Any]:
    """``move``, ``split`` or ``merge``: what happened, as the cluster tells it."""
    table = _nonempty("--table", args.table) or ""
    if args.mc_command == "move":
        return client.move(table, _nonempty("--region", args.region) or "", _nonempty("--to", args.to))
    if args.mc_command == "split":
        row = to_bytes_binary(args.row)
        if not row:
            raise BadRequestError("minicluster split: --row is empty (a split row is a key inside the region)")
        return client.split_region(table, row, _nonempty("--region", args.region))
    names = [n.strip() for n in args.regions.split(",")]
    if len(names) < 2 or not all(names):
        raise BadRequestError(
            f"minicluster merge: --regions takes two encoded region names or more, got {args.regions!r}"
        )
    return client.merge(table, names)


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    mc = sub.add_parser("minicluster", help="an embedded HBase-compatible cluster")
    mc_sub = mc.add_subparsers(dest="mc_command", required=True, metavar="MC_COMMAND")
    start = mc_sub.add_parser("start", help="run a cluster in the foreground (SIGTERM stops it cleanly)")
    start.add_argument("--name", required=True)
    start.add_argument("--data-dir", required=True)
    start.add_argument("--zk", default=argparse.SUPPRESS, help="ZooKeeper HOST:PORT (or the global --zk)")
    start.add_argument("--znode-parent", default=argparse.SUPPRESS, help="znode parent (or the global flag)")
    start.add_argument("--thrift-port", type=port, required=True, help="0 picks a free port")
    start.add_argument("--admin-port", type=port, required=True, help="0 picks a free port")
    start.add_argument(
        "--thrift2-port",
        type=port,
        default=None,
        help="also serve Thrift2 (THBaseService) on this port, with the Thrift port's transport, protocol "
        "and TLS options; 0 picks a free port (default: no Thrift2 server)",
    )
    start.add_argument(
        "--master-port",
        type=port,
        default=0,
        help="serve the master's RPC (HBase's MasterService: the replication peer calls) on this port and "
        "register it in <parent>/master; 0 picks a free port (the default)",
    )
    start.add_argument("--regionservers", type=positive_int, default=3)
    start.add_argument("--wal-roll-size", type=positive_int, default=64 * 1024 * 1024, metavar="BYTES")
    start.add_argument(
        "--roll-order",
        choices=("default", "hbase"),
        default="default",
        help="hbase: enqueue the new WAL, keep appending to the old one for a moment, then its trailer; "
        "archive at the next roll (HBase's own order)",
    )
    start.add_argument(
        "--wal-groups",
        type=nonneg_int,
        default=0,
        metavar="N",
        help="multiwal (hbase.wal.provider=multiwal): N WAL groups per region server, regions given "
        "regiongroup-<n> round robin as HBase's bounded grouping strategy does (default 0: one WAL per server)",
    )
    start.add_argument(
        "--wal-checksums",
        action="store_true",
        help="write Hadoop's checksum file .<name>.crc beside each closed WAL, as a Hadoop local file system does",
    )
    start.add_argument(
        "--wal-compression",
        action="store_true",
        help="compressed WALs (hbase.regionserver.wal.enablecompression): LRU dictionaries as HBase writes them",
    )
    start.add_argument(
        "--wal-tag-compression",
        action="store_true",
        help="with --wal-compression, tags compressed too (hbase.regionserver.wal.tags.enablecompression)",
    )
    start.add_argument(
        "--wal-value-compression",
        choices=VALUE_CODECS,
        default=None,
        metavar="TYPE",
        help="with --wal-compression, values compressed with TYPE "
        f"(hbase.regionserver.wal.value.compression.type: {', '.join(VALUE_CODECS)})",
    )
    start.add_argument(
        "--thrift-transport",
        choices=TRANSPORTS,
        default=None,
        help="accept only this Thrift transport, as HBase's -f (default: both)",
    )
    start.add_argument(
        "--thrift-protocol",
        choices=PROTOCOLS,
        default=None,
        help="accept only this Thrift protocol, as HBase's -c (default: both)",
    )
    start.add_argument(
        "--thrift-ssl-cert", metavar="PEM", help="serve TLS on the Thrift port with this certificate (may hold the key)"
    )
    start.add_argument("--thrift-ssl-key", metavar="PEM", help="the private key of --thrift-ssl-cert")
    start.add_argument(
        "--queue-claims",
        choices=("master", "walship"),
        default="master",
        help="who claims a crashed region server's replication queues: master (HBase 2.5+'s "
        "ServerCrashProcedure; the region servers announce HBase 2.6.1) or walship (default: master)",
    )
    start.add_argument(
        "--claim-delay",
        type=seconds,
        default=0.0,
        metavar="SECONDS",
        help="the master claims this long after a crash (HBase's replication.sleep.before.failover; default 0)",
    )
    start.set_defaults(func=cmd_minicluster_start)
    admin_help = "the cluster's admin endpoint HOST:PORT"
    scope = mc_sub.add_parser("set-scope", help="set a family's REPLICATION_SCOPE (0 or 1)")
    scope.add_argument("--admin", required=True, help=admin_help)
    scope.add_argument("table")
    scope.add_argument("family")
    scope.add_argument("scope", type=int, choices=[0, 1])
    scope.set_defaults(func=cmd_minicluster_admin)
    roll = mc_sub.add_parser("roll", help="roll WALs now")
    roll.add_argument("--admin", required=True, help=admin_help)
    roll.add_argument("server", nargs="?")
    roll.set_defaults(func=cmd_minicluster_admin)
    abort = mc_sub.add_parser("abort-rs", help="crash one region server")
    abort.add_argument("--admin", required=True, help=admin_help)
    abort.add_argument("server")
    abort.set_defaults(func=cmd_minicluster_admin)
    move = mc_sub.add_parser(
        "move", help="move a region to another region server (closed there, opened here, as HBase does)"
    )
    move.add_argument("--admin", required=True, help=admin_help)
    move.add_argument("--table", required=True)
    move.add_argument("--region", required=True, metavar="ENCODED", help="the region's encoded name")
    move.add_argument("--to", metavar="SERVER", help="a region server name (default: another live server)")
    move.set_defaults(func=cmd_minicluster_admin)
    split = mc_sub.add_parser("split", help="split a region in two at a row")
    split.add_argument("--admin", required=True, help=admin_help)
    split.add_argument("--table", required=True)
    split.add_argument("--row", required=True, help="the split row, the daughters' boundary (\\xNN escapes)")
    split.add_argument("--region", metavar="ENCODED", help="the region to split (default: the one holding --row)")
    split.set_defaults(func=cmd_minicluster_admin)
    merge = mc_sub.add_parser("merge", help="merge adjacent regions into one")
    merge.add_argument("--admin", required=True, help=admin_help)
    merge.add_argument("--table", required=True)
    merge.add_argument("--regions", required=True, metavar="ENC1,ENC2", help="the regions' encoded names")
    merge.set_defaults(func=cmd_minicluster_admin)
    info = mc_sub.add_parser("info", help="servers, regions, WALs, tables and scopes")
    info.add_argument("--admin", required=True, help=admin_help)
    info.add_argument("--json", action="store_true")
    info.set_defaults(func=cmd_minicluster_admin)
