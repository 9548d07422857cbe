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
from typing import NoReturn

from walship import __version__, defaults
from walship.cli import (
    changelog,
    copy,
    deadletter,
    minicluster,
    peers,
    scope,
    shipping,
    spark,
    status,
    subscriptions,
    switchover,
    verify,
    wal,
    zookeeper,
)
from walship.cli.argtypes import clip, duration, seconds
from walship.cli.common import Handler, kerberos_login
from walship.errors import ConfigError, WalshipError
from walship.files import check_url
from walship.zk import DEFAULT_PARENT, DEFAULT_ZK, ZnodeLayout
from walship.zk.client import validate_hosts

__all__ = ["main"]

log = logging.getLogger(__name__)


class _Parser(argparse.ArgumentParser):
    """argparse, but a bad flag is one line (``walship ship: argument --ttl: ...``) and exit 1,
    as every other refusal of the command."""

    def error(self, message: str) -> NoReturn:
        self.exit(1, f"{self.prog}: {message} (see {self.prog} --help)\n")


#: The global flags read from the environment when not given: flag -> variable.
_ENV = {"--zk": "WALSHIP_ZK", "--znode-parent": "WALSHIP_ZNODE_PARENT", "--wal-root": "WALSHIP_WAL_ROOT"}


def _named(flag: str, argv: Sequence[str]) -> str:
    """How an error names a global setting: the flag when given, else its environment variable."""
    given = any(a == flag or a.startswith(flag + "=") for a in argv)
    return flag if given or not os.environ.get(_ENV[flag]) else _ENV[flag]


def check_globals(args: argparse.Namespace, argv: Sequence[str]) -> None:
    """The global settings, checked before any subcommand runs (each error names the flag or
    the environment variable it came from).

    :raises ConfigError: a bad ZooKeeper address, znode parent or WAL root.
    """
    validate_hosts(args.zk, _named("--zk", argv))
    try:
        ZnodeLayout(args.znode_parent)
    except ConfigError as exc:
        raise ConfigError(f"{_named('--znode-parent', argv)}: {exc}") from None
    if args.wal_root is not None:
        name = _named("--wal-root", argv)
        check_url(args.wal_root, name)
        local = args.wal_root.removeprefix("file://") if args.wal_root.startswith("file://") else args.wal_root
        if "://" not in local and not os.path.isdir(local):
            what = "a file" if os.path.exists(local) else "no such folder"
            raise ConfigError(f"{name} {clip(args.wal_root)!r}: {what}; the WAL root holds WALs/ and oldWALs/")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="walship", description="HBase replication, shipped by walship.")
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
    parser.add_argument("--zk-timeout", type=duration, default=10.0, help=argparse.SUPPRESS)
    parser.add_argument(
        "--zk-auth",
        default=None,
        metavar="SCHEME:CREDENTIAL",
        help="ZooKeeper authentication, as zkCli's addauth (e.g. digest:user:password; env WALSHIP_ZK_AUTH)",
    )
    parser.add_argument(
        "--principal",
        default=None,
        metavar="NAME@REALM",
        help="Kerberos: walship's principal, for ZooKeeper, HBase's master, the Thrift servers and WebHDFS "
        "(env WALSHIP_PRINCIPAL; without --keytab, the ticket cache's ticket)",
    )
    parser.add_argument(
        "--keytab",
        default=None,
        metavar="PATH",
        help="Kerberos: the principal's keytab; runs that outlive a ticket get new ones from it (env WALSHIP_KEYTAB)",
    )
    parser.add_argument(
        "--zk-session-timeout",
        type=seconds,
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
        copy,
        switchover,
        spark,
    ):
        group.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    if not args.verbose:  # kazoo's connection warnings: the command's own error says it in one line
        logging.getLogger("kazoo").setLevel(logging.ERROR)
    func: Handler = args.func
    if args.zk_session_timeout is not None:
        if not 1.0 <= args.zk_session_timeout <= 600.0:
            parser.error(f"--zk-session-timeout must be between 1 and 600 seconds, got {args.zk_session_timeout:g}")
        os.environ["WALSHIP_ZK_SESSION_TIMEOUT"] = str(args.zk_session_timeout)
    try:
        check_globals(args, argv)
        with kerberos_login(args.principal, args.keytab):
            return func(args)
    except BrokenPipeError:
        # a reader such as `head` went away; nothing is lost, stop quietly
        with contextlib.suppress(OSError):
            sys.stdout = open(os.devnull, "w")  # noqa: SIM115
        return 0
    except WalshipError as exc:  # ZooKeeper's among them: walship.zk raises them for kazoo's
        print(f"walship: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
