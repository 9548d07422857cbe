"""Progress on a terminal: ``walship copy``, ``verify`` and ``ship`` run in a pseudo-terminal
draw their progress (what, units done of how many, rate, time left) on it; with stdout piped, or ``--json``, nothing but
their usual output is written."""

from __future__ import annotations

import json
import os
import pty
import re
import subprocess
import sys
from collections.abc import Callable

import pytest
from replication_helpers import Cluster, add_peer, make_cluster

from walship.peer import MANAGED_KEY
from walship_testing.minicluster import AdminClient
from walship_testing.minicluster.process import MiniClusterProcess

pytestmark = pytest.mark.integration

ROWS = 4000


@pytest.fixture
def pair(minicluster_factory: Callable[..., MiniClusterProcess], zk_hosts: str) -> tuple[Cluster, Cluster]:
    a = make_cluster(minicluster_factory, zk_hosts, "A")
    b = make_cluster(minicluster_factory, zk_hosts, "B")
    add_peer(a, b, "2", protocol="thrift2", **{MANAGED_KEY: "true"})
    with a.table().batch(batch_size=500) as batch:
        for i in range(ROWS):
            batch.put(b"row%05d" % i, {b"r:q": b"x" * 100})
    return a, b


def env(a: Cluster) -> dict[str, str]:
    return {
        **os.environ,
        "WALSHIP_ZK": a.zk_hosts,
        "WALSHIP_ZNODE_PARENT": a.parent,
        "WALSHIP_WAL_ROOT": a.mc.wal_root,
        "WALSHIP_SOURCE_THRIFT2": a.thrift2_address(),
        "COLUMNS": "160",
    }


def last_json(shown: str) -> dict[str, object]:
    """The JSON document a command printed last (the terminal's control sequences left out)."""
    plain = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", shown).replace("\r\n", "\n")
    (line,) = [line.strip("\r") for line in plain.split("\n") if line.strip("\r").startswith("{")][-1:]
    doc = json.loads(line)
    assert isinstance(doc, dict)
    return doc


def in_terminal(args: list[str], environ: dict[str, str]) -> tuple[int, str]:
    """Run ``walship ARGS`` with stdout and stderr on a pseudo-terminal; its exit and output."""
    leader, follower = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "walship.cli", *args], stdout=follower, stderr=follower, env=environ, close_fds=True
    )
    os.close(follower)
    out = b""
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # EIO: the terminal's other end is closed
            break
        if not chunk:
            break
        out += chunk
    os.close(leader)
    return proc.wait(timeout=120), out.decode(errors="replace")


def test_copy_draws_progress_on_a_terminal_only(pair: tuple[Cluster, Cluster]) -> None:
    a, _ = pair
    code, shown = in_terminal(["copy", "--peer", "2"], env(a))
    assert code == 0, shown
    assert "copying into peer 2" in shown and " rows" in shown  # the progress line
    assert f"copied {ROWS:,} row(s)" in shown  # and the summary
    piped = subprocess.run([sys.executable, "-m", "walship.cli", "copy", "--peer", "2"], env=env(a),
                           capture_output=True, text=True, timeout=120)  # fmt: skip
    assert piped.returncode == 0 and piped.stderr == "" and piped.stdout.startswith(f"copied {ROWS:,} row(s)")
    code, shown = in_terminal(["copy", "--peer", "2", "--json"], env(a))
    assert code == 0 and "copying into" not in shown
    assert last_json(shown)["rows"] == ROWS
    code, shown = in_terminal(["verify", "--peer", "2", "--recompare-sleep", "0"], env(a))
    assert code == 0, shown
    assert "verifying peer 2" in shown and "of 1 splits" in shown and "OK: no bad rows" in shown


def test_ship_draws_bytes_against_the_backlog(pair: tuple[Cluster, Cluster]) -> None:
    a, _ = pair
    AdminClient(a.mc.admin).roll()
    code, shown = in_terminal(["ship", "--peer", "2", "--batch-entries", "50"], env(a))
    assert code == 0, shown
    assert "shipping to peer(s) 2" in shown and " of " in shown  # bytes done of the backlog
    assert last_json(shown)["status"] == "ok"
