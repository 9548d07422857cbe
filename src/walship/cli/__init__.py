"""The ``walship`` command.

Global flags come before the subcommand (``walship --zk H:P peer list``); each subcommand
is one function taking the parsed arguments and returning the exit code. The subcommands
live in one module per group, each adding its parsers through ``register(sub)``.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import sys
from collections.abc import Sequence

from walship import __version__, defaults
from walship.cli import (
    changelog,
    deadletter,
    minicluster,
    peers,
    scope,
    shipping,
    status,
    subscriptions,
    verify,
    wal,
    zookeeper,
)
from walship.cli.common import Handler
from walship.errors import WalshipError
from walship.zk import DEFAULT_PARENT, DEFAULT_ZK
from walship.zk.client import KAZOO_ERRORS, translate

__all__ = ["main"]

log = logging.getLogger(__name__)


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
    parser.add_argument(
        "--source-thrift2",
        default=os.environ.get("WALSHIP_SOURCE_THRIFT2"),
        metavar="HOST:PORT",
        help="the source's Thrift2 server, for its table descriptors (`walship scope`; env WALSHIP_SOURCE_THRIFT2)",
    )
    parser.add_argument("--zk-timeout", type=float, default=10.0, help=argparse.SUPPRESS)
    parser.add_argument(
        "--zk-auth",
        default=None,
        metavar="SCHEME:CREDENTIAL",
        help="ZooKeeper authentication, as zkCli's addauth (e.g. digest:user:password; env WALSHIP_ZK_AUTH)",
    )
    parser.add_argument(
        "--zk-session-timeout",
        type=float,
        default=None,
        metavar="SECONDS",
        help="ZooKeeper session timeout: a killed shipper's queue locks are free again after about this long "
        f"(env WALSHIP_ZK_SESSION_TIMEOUT; default {defaults.ZK_SESSION_TIMEOUT:g})",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for group in (
        wal,
        peers,
        subscriptions,
        changelog,
        shipping,
        status,
        deadletter,
        minicluster,
        zookeeper,
        scope,
        verify,
    ):
        group.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    func: Handler = args.func
    if args.zk_session_timeout is not None:
        if not 1.0 <= args.zk_session_timeout <= 600.0:
            parser.error(f"--zk-session-timeout must be between 1 and 600 seconds, got {args.zk_session_timeout:g}")
        os.environ["WALSHIP_ZK_SESSION_TIMEOUT"] = str(args.zk_session_timeout)
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
    except KAZOO_ERRORS as exc:
        print(f"walship: {translate(exc, f'walship {args.command}')}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
