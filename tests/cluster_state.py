"""How a test runs a peer command against a cluster that is down: a command that changes peers
takes ``--offline`` when no master is registered at the cluster's parent (a test's bare
ZooKeeper), and goes through the master otherwise (a minicluster's or HBase's)."""

from __future__ import annotations

from collections.abc import Sequence

from walship.zk import ZnodeLayout, zk_client
from walship.zk.master import read_master

#: The subcommands that change peers (``--offline`` is theirs).
CHANGES_PEERS = {("peer", c) for c in ("add", "set", "adopt", "enable", "disable", "remove")} | {
    ("subscription", c) for c in ("add", "remove", "enable", "disable")
}


def changes_peers(argv: Sequence[str]) -> bool:
    return any((argv[i], argv[i + 1]) in CHANGES_PEERS for i in range(len(argv) - 1))


def offline(argv: Sequence[str]) -> list[str]:
    """``argv`` with ``--offline`` after it when it changes peers (for a cluster known to be down)."""
    return [*argv, "--offline"] if changes_peers(argv) and "--offline" not in argv else list(argv)


def as_the_cluster_is(zk_hosts: str, parent: str, argv: Sequence[str]) -> list[str]:
    """``argv`` with ``--offline`` when it changes peers and no master is registered at ``parent``."""
    if not changes_peers(argv) or "--offline" in argv:
        return list(argv)
    with zk_client(zk_hosts) as client:
        running = read_master(client, ZnodeLayout(parent)) is not None
    return list(argv) if running else offline(argv)
