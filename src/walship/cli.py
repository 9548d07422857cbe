"""The ``walship`` command.

Global flags come before the subcommand (``walship --zk H:P peer list``); each subcommand
is one function taking the parsed arguments and returning the exit code.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import logging
import os
import sys
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import IO, Any, BinaryIO

from kazoo.client import KazooClient

from walship import __version__
from walship.errors import ConfigError, WalshipError
from walship.replicate.walstore import WalStore
from walship.servername import ServerName
from walship.wal import Cell, CellType, Tag, WalKey, WalReader, WalWriter, build_wal_name
from walship.wal.dump import entry_to_json, entry_to_text
from walship.zk import (
    DEFAULT_PARENT,
    DEFAULT_ZK,
    PeerConfig,
    ReplicationPeers,
    ReplicationQueues,
    ZnodeLayout,
    format_table_cfs,
    parse_table_cfs,
    zk_client,
)
from walship.zk.client import validate_hosts
from walship.zk.peers import SINK_THRIFT_KEY

__all__ = ["main"]

log = logging.getLogger(__name__)

Handler = Callable[[argparse.Namespace], int]


@contextlib.contextmanager
def open_input(path: str) -> Iterator[BinaryIO]:
    """Open a local path, or a URL through fsspec (``hdfs://``, ``file://``, ...)."""
    if "://" in path:
        import fsspec

        with fsspec.open(path, "rb") as f:
            yield f
    else:
        with open(path, "rb") as f:
            yield f


def _nonneg_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {value}")
    return value


def _positive_int(text: str) -> int:
    value = _nonneg_int(text)
    if value == 0:
        raise argparse.ArgumentTypeError("must be > 0")
    return value


# -- walship wal ... ------------------------------------------------------------------------


def cmd_wal_dump(args: argparse.Namespace) -> int:
    out: IO[str] = sys.stdout
    count = 0
    try:
        with open_input(args.path) as f:
            reader = WalReader(f, args.path)
            for entry in reader.entries(args.start_offset):
                if args.json:
                    out.write(json.dumps(entry_to_json(entry)))
                else:
                    out.write(entry_to_text(entry))
                out.write("\n")
                count += 1
    except FileNotFoundError:
        print(f"walship: {args.path}: no such file", file=sys.stderr)
        return 1
    except WalshipError as exc:
        out.flush()
        print(f"walship: {exc}", file=sys.stderr)
        return 1
    out.flush()
    if reader.incomplete_tail:
        print(
            f"walship: {args.path}: {count} entries; stopped at an incomplete entry at byte offset "
            f"{reader.stop_offset} (the WAL may still be written)",
            file=sys.stderr,
        )
    else:
        state = "closed (trailer present)" if reader.has_trailer else "no trailer"
        print(
            f"walship: {args.path}: {count} entries; read to the end at byte offset {reader.stop_offset}, {state}",
            file=sys.stderr,
        )
    return 0


def sample_entries(
    count: int, *, table: bytes = b"demo", now_ms: int | None = None
) -> Iterator[tuple[WalKey, list[Cell]]]:
    """Entries of every cell type, for ``walship wal sample`` and tests of the tools."""
    now = now_ms if now_ms is not None else int(time.time() * 1000)
    region = uuid.uuid5(uuid.NAMESPACE_OID, table.decode()).hex.encode()
    kinds = [CellType.Put, CellType.Put, CellType.DeleteColumn, CellType.Delete, CellType.DeleteFamily]
    for i in range(count):
        row = b"row-%06d" % i
        kind = kinds[i % len(kinds)]
        ts = now + i
        cells = [Cell(row, b"r", b"q", ts, kind, b"value-%d" % i if kind is CellType.Put else b"")]
        if kind is CellType.Put:
            cells.append(Cell(row, b"l", b"local", ts, CellType.Put, b"\x00\xff binary", (Tag(1, b"ttl"),)))
        key = WalKey(region, table, i + 1, ts, scopes={b"r": 1})
        yield key, cells


def cmd_wal_sample(args: argparse.Namespace) -> int:
    server = ServerName("localhost", 16020, 1)
    path = args.path or build_wal_name(server, int(time.time() * 1000))
    with open(path, "wb") as f, WalWriter(f) as writer:
        writer.append_many(sample_entries(args.entries))
    print(path)
    return 0


# -- ZooKeeper: peers and queues ----------------------------------------------------------------


@contextlib.contextmanager
def _state(args: argparse.Namespace) -> Iterator[tuple[KazooClient, ZnodeLayout]]:
    layout = ZnodeLayout(args.znode_parent)
    with zk_client(validate_hosts(args.zk), timeout=args.zk_timeout) as client:
        yield client, layout


@contextlib.contextmanager
def _source(args: argparse.Namespace) -> Iterator[tuple[KazooClient, ZnodeLayout, WalStore]]:
    """The source cluster's state and WALs: ``--zk``, ``--znode-parent`` and ``--wal-root``."""
    if not args.wal_root:
        raise ConfigError("no WAL root: give --wal-root (before the subcommand) or set WALSHIP_WAL_ROOT")
    walstore = WalStore(args.wal_root)
    with _state(args) as (client, layout):
        yield client, layout, walstore


def _parse_config_pairs(pairs: Sequence[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"invalid --config {pair!r}: expected key=value")
        out[key.strip()] = value.strip()
    return out


def cmd_peer_add(args: argparse.Namespace) -> int:
    namespaces = frozenset(n.strip() for n in args.namespaces.split(",") if n.strip()) if args.namespaces else None
    config = PeerConfig(
        peer_id=args.peer_id,
        cluster_key=args.cluster_key,
        enabled=not args.disabled,
        table_cfs=parse_table_cfs(args.table_cfs) if args.table_cfs else None,
        namespaces=namespaces or None,
        configuration=_parse_config_pairs(args.config),
    )
    with _state(args) as (client, layout):
        ReplicationPeers(client, layout).add(config)
    print(f"added peer {config.peer_id} ({'ENABLED' if config.enabled else 'DISABLED'}) -> {config.cluster_key}")
    return 0


def cmd_peer_state(args: argparse.Namespace) -> int:
    with _state(args) as (client, layout):
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
        f"{p.peer_id:<8} {'ENABLED' if p.enabled else 'DISABLED':<9} {p.cluster_key:<32} "
        f"{str(p.replicate_all).lower():<13} {namespaces or '-':<12} {cfs or '-':<24} {p.configuration.get(SINK_THRIFT_KEY, '-')}"
    )


def cmd_peer_list(args: argparse.Namespace) -> int:
    with _state(args) as (client, layout):
        peers = ReplicationPeers(client, layout).list()
    if args.json:
        print(json.dumps([p.to_json() for p in peers], indent=None))
        return 0
    print(
        f"{'PEER_ID':<8} {'STATE':<9} {'CLUSTER_KEY':<32} {'REPLICATE_ALL':<13} {'NAMESPACES':<12} {'TABLE_CFS':<24} SINK"
    )
    for p in peers:
        print(_peer_line(p))
    print(f"{len(peers)} peer(s)")
    return 0


def cmd_peer_show(args: argparse.Namespace) -> int:
    with _state(args) as (client, layout):
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
    with _state(args) as (client, layout):
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


# -- shipping ------------------------------------------------------------------------------------


def cmd_ship(args: argparse.Namespace) -> int:
    from walship.replicate.shipper import Shipper

    with _source(args) as (client, layout, walstore):
        shipper = Shipper(
            client,
            layout,
            walstore,
            batch_bytes=args.batch_bytes,
            batch_entries=args.batch_entries,
            lock_timeout=args.lock_wait,
        )
        summary = shipper.ship_peer(args.peer, args.queue, args.max_batches)
    print(json.dumps(summary.to_json()))
    return 1 if summary.status == "error" else 0


def cmd_tail(args: argparse.Namespace) -> int:
    from walship.replicate.tailer import Tailer

    with _source(args) as (client, layout, walstore):
        summary = Tailer(client, layout, walstore, args.peer, duration=args.duration, idle_sleep=args.idle_sleep).run()
    print(json.dumps(summary.to_json()))
    return 1 if summary.status == "error" else 0


def _iso_time(text: str) -> datetime.datetime:
    try:
        value = datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an ISO time: {text!r}") from None
    return value if value.tzinfo else value.replace(tzinfo=datetime.UTC)


def cmd_replay(args: argparse.Namespace) -> int:
    from walship.replicate.replay import replay

    with _source(args) as (client, layout, walstore):
        report = replay(client, layout, walstore, args.peer, args.start, args.end, allow_gaps=args.allow_gaps)
    print(json.dumps(report.to_json()))
    return 0


def cmd_clean(args: argparse.Namespace) -> int:
    from walship.replicate.cleaner import clean

    with _source(args) as (client, layout, walstore):
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


# -- minicluster ---------------------------------------------------------------------------------


def cmd_minicluster_start(args: argparse.Namespace) -> int:
    from walship.minicluster.runner import run_minicluster

    validate_hosts(args.zk)
    return run_minicluster(
        name=args.name,
        data_dir=Path(args.data_dir),
        zk=args.zk,
        znode_parent=args.znode_parent,
        thrift_port=args.thrift_port,
        admin_port=args.admin_port,
        regionservers=args.regionservers,
        wal_roll_size=args.wal_roll_size,
    )


def cmd_minicluster_admin(args: argparse.Namespace) -> int:
    from walship.minicluster.admin import AdminClient

    client = AdminClient(args.admin)
    if args.mc_command == "set-scope":
        result = client.set_scope(args.table, args.family, args.scope)
    elif args.mc_command == "roll":
        result = client.roll(args.server)
    elif args.mc_command == "abort-rs":
        result = client.abort_rs(args.server)
    else:
        result = client.info()
        if not args.json:
            print(f"cluster {result['name']} ({result['cluster_id']}) on {result['zk']}{result['znode_parent']}")
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


# -- local ZooKeeper -----------------------------------------------------------------------------


def cmd_zookeeper(args: argparse.Namespace) -> int:
    from walship.zk.localserver import LocalZooKeeper

    server = LocalZooKeeper(Path(args.data_dir), args.port, host=args.host)
    if args.zk_command == "start":
        server.start()
        print(json.dumps({"ready": True, "zk": server.hosts, "pid_file": str(server.pid_file)}))
        return 0
    if args.zk_command == "status":
        running = server.is_running()
        print(f"{server.hosts}: {'running' if running else 'not answering'}")
        return 0 if running else 1
    stopped = server.stop()
    print(f"{'stopped' if stopped else 'no server to stop'} ({server.data_dir})")
    return 0


# -- parser -----------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="walship", description="HBase replication, shipped by walship.")
    parser.add_argument("--version", action="version", version=f"walship {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="log at debug level")
    parser.add_argument(
        "--zk",
        default=os.environ.get("WALSHIP_ZK", DEFAULT_ZK),
        help="ZooKeeper of the source cluster, HOST:PORT[,HOST:PORT...] (env WALSHIP_ZK; default %(default)s)",
    )
    parser.add_argument(
        "--znode-parent",
        default=os.environ.get("WALSHIP_ZNODE_PARENT", DEFAULT_PARENT),
        help="the cluster's zookeeper.znode.parent (env WALSHIP_ZNODE_PARENT; default %(default)s)",
    )
    parser.add_argument(
        "--wal-root",
        default=os.environ.get("WALSHIP_WAL_ROOT"),
        help="the source's WAL root holding WALs/ and oldWALs/: a path or URL (env WALSHIP_WAL_ROOT)",
    )
    parser.add_argument("--zk-timeout", type=float, default=10.0, help=argparse.SUPPRESS)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    wal = sub.add_parser("wal", help="read and write HBase WAL files")
    wal_sub = wal.add_subparsers(dest="wal_command", required=True, metavar="WAL_COMMAND")
    dump = wal_sub.add_parser("dump", help="print the entries of a WAL, like HBase's WALPrettyPrinter")
    dump.add_argument("path", help="WAL file: a local path or an fsspec URL")
    dump.add_argument("--start-offset", type=_nonneg_int, default=None, help="byte offset of an entry to start at")
    dump.add_argument("--json", action="store_true", help="one JSON object per entry, one per line")
    dump.set_defaults(func=cmd_wal_dump)

    sample = wal_sub.add_parser("sample", help="write a small WAL with every cell type")
    sample.add_argument("path", nargs="?", help="file to write (default: an HBase-style name here)")
    sample.add_argument("--entries", type=_nonneg_int, default=10)
    sample.set_defaults(func=cmd_wal_sample)

    peer = sub.add_parser("peer", help="add, change, list and remove replication peers")
    peer_sub = peer.add_subparsers(dest="peer_command", required=True, metavar="PEER_COMMAND")
    add = peer_sub.add_parser("add", help="add a peer (enabled unless --disabled)")
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
    for name, text in (("enable", "enable a peer"), ("disable", "disable a peer"), ("remove", "remove a peer")):
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

    ship = sub.add_parser("ship", help="one pass over a peer's queues, without Airflow; JSON summary on stdout")
    ship.add_argument("--peer", required=True, metavar="PEER_ID")
    ship.add_argument("--queue", metavar="QUEUE_ID", help="only this queue (an id, server/id, or a glob)")
    ship.add_argument("--max-batches", type=_positive_int, help="stop each queue after N batches")
    ship.add_argument("--batch-bytes", type=_positive_int, default=64 * 1024 * 1024)
    ship.add_argument("--batch-entries", type=_positive_int, default=25_000)
    ship.add_argument(
        "--lock-wait",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="wait this long for a queue another shipper holds (default: skip it and say so)",
    )
    ship.set_defaults(func=cmd_ship)

    tail = sub.add_parser("tail", help="follow a peer's queues and ship new entries at once, for a while")
    tail.add_argument("--peer", required=True, metavar="PEER_ID")
    tail.add_argument("--duration", type=float, default=600.0, metavar="SECONDS", help="then stop (default 600)")
    tail.add_argument("--idle-sleep", type=float, default=0.1, metavar="SECONDS", help=argparse.SUPPRESS)
    tail.set_defaults(func=cmd_tail)

    rp = sub.add_parser("replay", help="ship every edit written in a time window, from all WALs still present")
    rp.add_argument("--peer", required=True, metavar="PEER_ID")
    rp.add_argument("--from", dest="start", required=True, type=_iso_time, metavar="ISO_TIME")
    rp.add_argument("--to", dest="end", required=True, type=_iso_time, metavar="ISO_TIME")
    rp.add_argument("--allow-gaps", action="store_true", help="replay what is there when WALs of the window are gone")
    rp.set_defaults(func=cmd_replay)

    cl = sub.add_parser("clean", help="delete archived WALs older than the TTL that no queue references")
    cl.add_argument("--ttl", type=float, default=600.0, metavar="SECONDS", help="minimum age (default 600)")
    cl.add_argument("--dry-run", action="store_true", help="report, delete nothing")
    cl.add_argument("--json", action="store_true")
    cl.add_argument(
        "--disabled-peer-limit",
        type=_positive_int,
        default=10 * 1024**3,
        metavar="BYTES",
        help="warn when a disabled peer holds more archived bytes than this",
    )
    cl.set_defaults(func=cmd_clean)

    mc = sub.add_parser("minicluster", help="an embedded HBase-compatible cluster")
    mc_sub = mc.add_subparsers(dest="mc_command", required=True, metavar="MC_COMMAND")
    start = mc_sub.add_parser("start", help="run a cluster in the foreground (SIGTERM stops it cleanly)")
    start.add_argument("--name", required=True)
    start.add_argument("--data-dir", required=True)
    start.add_argument("--zk", default=argparse.SUPPRESS, help="ZooKeeper HOST:PORT (or the global --zk)")
    start.add_argument("--znode-parent", default=argparse.SUPPRESS, help="znode parent (or the global flag)")
    start.add_argument("--thrift-port", type=_nonneg_int, required=True, help="0 picks a free port")
    start.add_argument("--admin-port", type=_nonneg_int, required=True, help="0 picks a free port")
    start.add_argument("--regionservers", type=_positive_int, default=3)
    start.add_argument("--wal-roll-size", type=_positive_int, default=64 * 1024 * 1024, metavar="BYTES")
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
    info = mc_sub.add_parser("info", help="servers, regions, WALs, tables and scopes")
    info.add_argument("--admin", required=True, help=admin_help)
    info.add_argument("--json", action="store_true")
    info.set_defaults(func=cmd_minicluster_admin)

    zk = sub.add_parser("zookeeper", help="a local ZooKeeper server for the demo and tests")
    zk_sub = zk.add_subparsers(dest="zk_command", required=True, metavar="ZK_COMMAND")
    for name, text in (
        ("start", "start it in the background"),
        ("stop", "stop it by its pid"),
        ("status", "say whether it answers"),
    ):
        z = zk_sub.add_parser(name, help=text)
        z.add_argument("--data-dir", required=True)
        z.add_argument("--port", type=int, default=2181)
        z.add_argument("--host", default="127.0.0.1")
        z.set_defaults(func=cmd_zookeeper)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    func: Handler = args.func
    try:
        return func(args)
    except BrokenPipeError:
        # a reader such as `head` went away; nothing is lost, stop quietly
        with contextlib.suppress(OSError):
            sys.stdout = open(os.devnull, "w")  # noqa: SIM115
        return 0
    except WalshipError as exc:
        print(f"walship: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
