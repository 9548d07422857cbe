"""``walship peer add --print-hbase-shell``: the HBase shell command that adds a walship peer to
a running HBase without restarting its region servers. The printed command is read back
(its Ruby literals as Python's) and carried out field by field through HBase's own Admin on
real HBase, then ``walship peer adopt``: WALs are queued for the peer at once, and shipped."""

from __future__ import annotations

import ast
import re
from typing import Any

import pytest
from real_hbase import layout, remove_peer, table_on_both, wait_queues_hold_current_wals
from replication_helpers import contents, ship

from walship.cli import main
from walship.hbaseshell import add_peer_command, ruby_string
from walship.peer import PeerConfig
from walship.zk import ReplicationPeers, zk_client
from walship_testing.harness import HBaseProcess

pytestmark = pytest.mark.integration


def parse_add_peer(command: str) -> tuple[str, dict[str, Any]]:
    """``add_peer 'ID', KEY => value, ...``: the id and the arguments (Ruby's single-quoted
    strings, arrays and hashes read as Python literals)."""
    match = re.fullmatch(r"add_peer ('(?:[^'\\]|\\.)*'), (.*)", command)
    assert match, command
    args = re.sub(r"(?<![\w'])([A-Z_]+) =>", r"'\1' =>", match.group(2)).replace(" => ", ": ")
    args = re.sub(r": (true|false)\b", lambda m: f": {m.group(1).title()}", args)
    return ast.literal_eval(match.group(1)), ast.literal_eval("{" + args + "}")


def test_the_command_quotes_and_lists_every_field() -> None:
    assert ruby_string("it's a \\ path #{x}") == "'it\\'s a \\\\ path #{x}'"
    peer = PeerConfig(
        "7",
        "zk1,zk2:2181:/hbase",
        table_cfs={"t": ("r", "a"), "ns:x": None},
        configuration={"walship.managed": "true", "odd": "it's"},
    )
    peer_id, args = parse_add_peer(add_peer_command(peer))
    assert peer_id == "7"
    assert args == {
        "CLUSTER_KEY": "zk1,zk2:2181:/hbase",
        "STATE": "DISABLED",
        "TABLE_CFS": {"ns:x": [], "t": ["a", "r"]},
        "CONFIG": {"odd": "it's", "walship.managed": "true"},
    }
    _, args = parse_add_peer(add_peer_command(PeerConfig("8", "h:2181:/b", namespaces=frozenset({"n2", "n1"}))))
    assert args["NAMESPACES"] == ["n1", "n2"] and "TABLE_CFS" not in args and "SERIAL" not in args
    _, args = parse_add_peer(add_peer_command(PeerConfig("9", "h:2181:/b", serial=True)))
    assert args["SERIAL"] is True


def test_the_printed_command_adds_a_peer_to_a_running_hbase(
    real_hbase: tuple[HBaseProcess, HBaseProcess], capsys: pytest.CaptureFixture[str]
) -> None:
    a, b = table_on_both(*real_hbase, "shell")
    hb = a.mc
    assert isinstance(hb, HBaseProcess)
    flags = ["--zk", a.zk_hosts, "--znode-parent", a.parent]
    table = a.table_name.decode()
    sink = [f"{k}={v}" for k, v in b.sink_config("thrift2").items()]
    capsys.readouterr()
    code = main([*flags, "peer", "add", "5", "--cluster-key", b.cluster_key, "--table-cfs", f"{table}:r",
                 *(x for kv in sink for x in ("--config", kv)), "--print-hbase-shell"])  # fmt: skip
    out = capsys.readouterr()
    assert code == 0 and "walship peer adopt 5" in out.err
    with zk_client(a.zk_hosts) as client:
        assert not ReplicationPeers(client, layout(a)).exists("5")  # nothing written: only printed
    peer_id, args = parse_add_peer(out.out.strip())
    assert args["STATE"] == "DISABLED" and args["CONFIG"]["walship.managed"] == "true"
    hb.call(
        "add_peer",
        peer=peer_id,
        cluster_key=args["CLUSTER_KEY"],
        state=args["STATE"],
        configuration=args["CONFIG"],
        table_cfs=args["TABLE_CFS"],
    )
    try:
        assert main([*flags, "peer", "adopt", "5"]) == 0
        wait_queues_hold_current_wals(a, "5")  # no restart: the region servers queue WALs at once
        a.table().put(b"shell-row", {b"r:q": b"v", b"l:q": b"local"})
        summary = ship(a, "5")
        assert summary.status == "ok", summary.to_json()
        on_b = contents(b)
        assert on_b == contents(a, b"r") and list(on_b) == [b"shell-row"]  # family l stayed home
    finally:
        remove_peer(a, "5")
