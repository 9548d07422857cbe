"""Helpers shared by the ``walship`` subcommands: argument types, input files, ZooKeeper state."""

from __future__ import annotations

import argparse
import contextlib
import logging
from collections.abc import Callable, Iterator, Sequence
from typing import Any, BinaryIO

from kazoo.client import KazooClient

import walship.security as security
from walship.cli.argtypes import shorten
from walship.errors import ConfigError
from walship.replicate.source import SourceSite
from walship.replicate.walstore import WalStore
from walship.rpc.peers import PeerAdmin, peer_admin
from walship.zk import ZnodeLayout

__all__ = [
    "Handler",
    "add_list_show",
    "add_offline_flag",
    "kerberos_login",
    "open_input",
    "parse_config_pairs",
    "peers_admin",
    "print_fields",
    "site",
    "source",
    "state",
]

log = logging.getLogger(__name__)

Handler = Callable[[argparse.Namespace], int]


@contextlib.contextmanager
def open_input(path: str) -> Iterator[BinaryIO]:
    """Open a local path, or a URL through fsspec (``hdfs://``, ``webhdfs://``, ``file://``,
    ...), up to what a reader sees (on HDFS a WAL being written lists less).

    :raises WalRootError: the URL's file system cannot be opened.
    :raises FileNotFoundError: no such file.
    """
    if "://" in path:
        folder, _, _ = path.rpartition("/")
        store = WalStore(folder)
        with store.open(store.location(store.fs._strip_protocol(path), archived=False)) as f:
            yield f
    else:
        with open(path, "rb") as f:
            yield f


def site(args: argparse.Namespace) -> SourceSite:
    """The source cluster the global flags name (``--zk``, ``--znode-parent``, ``--wal-root``,
    ``--zk-auth``, ``--zk-timeout``)."""
    return SourceSite(args.zk, args.znode_parent, args.wal_root, args.zk_auth, args.zk_timeout)


@contextlib.contextmanager
def state(args: argparse.Namespace) -> Iterator[tuple[KazooClient, ZnodeLayout]]:
    with site(args).state() as (client, layout):
        yield client, layout


def add_offline_flag(parser: argparse.ArgumentParser) -> None:
    """``--offline`` of a command that changes peers."""
    parser.add_argument(
        "--offline",
        action="store_true",
        help="the cluster is down: write HBase's peer znodes directly (refused while a master is registered; "
        "without it the change goes through the active master, as HBase's Admin makes it)",
    )


@contextlib.contextmanager
def peers_admin(args: argparse.Namespace, client: KazooClient, layout: ZnodeLayout) -> Iterator[PeerAdmin]:
    """What changes peers for this command: the active master, or HBase's znodes with ``--offline``."""
    peers = peer_admin(client, layout, offline=bool(getattr(args, "offline", False)))
    try:
        yield peers
    finally:
        peers.close()


@contextlib.contextmanager
def source(args: argparse.Namespace) -> Iterator[tuple[KazooClient, ZnodeLayout, WalStore]]:
    """The source cluster's state and WALs: ``--zk``, ``--znode-parent`` and ``--wal-root``."""
    if not args.wal_root:
        raise ConfigError("no WAL root: give --wal-root (before the subcommand) or set WALSHIP_WAL_ROOT")
    with site(args).connected() as (client, layout, walstore):
        yield client, layout, walstore


def parse_config_pairs(pairs: Sequence[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"invalid --config {shorten(pair)}: expected key=value")
        out[key.strip()] = value.strip()
    return out


@contextlib.contextmanager
def kerberos_login(principal: str | None, keytab: str | None) -> Iterator[None]:
    """Log in as ``--principal`` / ``--keytab`` (or ``WALSHIP_PRINCIPAL`` / ``WALSHIP_KEYTAB``)
    for the command, when one is given, and keep the ticket fresh while it runs.

    :raises KeytabError: the keytab is missing or unreadable.
    :raises KerberosLoginError: the KDC gives the principal no ticket.
    """
    identity = security.identity_from(principal, keytab)
    if identity is not None:
        security.login(identity)
    with security.kept_fresh():
        yield


def add_list_show(
    group: argparse._SubParsersAction[argparse.ArgumentParser],
    noun: str,
    key: str,
    list_command: Handler,
    show_command: Handler,
) -> None:
    """A command group's ``list [--json]`` and ``show KEY [--json]`` (``walship peer``,
    ``walship subscription``)."""
    listing = group.add_parser("list", help=f"list {noun}s")
    listing.add_argument("--json", action="store_true")
    listing.set_defaults(func=list_command)
    show = group.add_parser("show", help=f"show one {noun}")
    show.add_argument(key)
    show.add_argument("--json", action="store_true")
    show.set_defaults(func=show_command)


def print_fields(info: dict[str, Any], width: int, text: Callable[[Any], str]) -> None:
    """``show``'s lines: each field, padded to ``width``, and its value as ``text`` writes it
    (``-`` for none)."""
    for name, value in info.items():
        print(f"{name:<{width}} {text(value) if value is not None else '-'}")
