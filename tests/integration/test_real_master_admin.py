"""Every peer command through HBase's master, on real HBase 2.6: after each one HBase's own
Admin (the harness's ``list_peers``) reads the same configuration and state; a change made
in HBase's shell after walship's keeps both; ``--offline`` is refused while a master runs;
HBase's exceptions are one line naming their class and the peer; ``adopt`` of a peer HBase
ships, under a steady write load, stops HBase's source for it before walship ships the rest."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from real_hbase import layout, table_on_both, unique, wait_queues_hold_current_wals
from replication_helpers import Cluster, contents, ship
from waiting import wait_until

from walship.cli import main
from walship.zk import ReplicationPeers, zk_client
from walship_testing.harness import HBaseProcess

pytestmark = pytest.mark.integration


def hbase_peer(hb: HBaseProcess, peer_id: str) -> dict[str, Any] | None:
    """The peer as HBase's Admin lists it, or None."""
    peers = [p for p in hb.call("list_peers") if p["peer"] == peer_id]
    return peers[0] if peers else None


def run(capsys: pytest.CaptureFixture[str], source: Cluster, *argv: str) -> tuple[int, str, list[str]]:
    capsys.readouterr()
    try:
        code = main(["--zk", source.zk_hosts, "--znode-parent", source.parent, *argv])
    except SystemExit as exc:
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err.splitlines()


def cfs(seen: dict[str, Any] | None) -> dict[str, list[str]]:
    assert seen is not None
    return {t: sorted(f) for t, f in seen["table_cfs"].items()}


def switch(source: Cluster, peer_id: str) -> bool:
    with zk_client(source.zk_hosts) as client:
        return ReplicationPeers(client, layout(source)).get(peer_id).enabled


def test_peer_commands_change_what_hbases_admin_reads(
    real_hbase: tuple[HBaseProcess, HBaseProcess], capsys: pytest.CaptureFixture[str]
) -> None:
    a, b = table_on_both(*real_hbase, "adm")
    hb = a.mc
    assert isinstance(hb, HBaseProcess)
    table = a.table_name.decode()
    peer = unique("p")
    sink = [x for k, v in b.sink_config("thrift2").items() for x in ("--config", f"{k}={v}")]
    code, _, err = run(capsys, a, "peer", "add", peer, "--cluster-key", b.cluster_key, "--table-cfs", f"{table}:r",
                         *sink)  # fmt: skip
    assert code == 0, err
    try:
        seen = hbase_peer(hb, peer)
        assert seen is not None and seen["state"] == "DISABLED", seen  # HBase never ships a managed peer
        assert seen["configuration"]["walship.managed"] == "true" and seen["cluster_key"] == b.cluster_key
        assert seen["table_cfs"] == {table: ["r"]} and seen["replicate_all"] is False
        assert switch(a, peer)  # walship's own switch: ENABLED
        wait_queues_hold_current_wals(a, peer)  # no restart: HBase's region servers queue WALs for it

        # walship's set, then the shell's set_peer_bandwidth: both kept
        assert run(capsys, a, "peer", "set", peer, "--table-cfs", f"{table}:r,l")[0] == 0
        hb.call("update_peer", peer=peer, bandwidth=123456)
        seen = hbase_peer(hb, peer)
        assert seen is not None and seen["bandwidth"] == 123456 and cfs(seen) == {table: ["l", "r"]}
        code, _, err = run(capsys, a, "peer", "set", peer, "--bandwidth", "2000000", "--json")
        assert code == 0, err
        seen = hbase_peer(hb, peer)
        assert seen is not None and seen["bandwidth"] == 2000000 and cfs(seen) == {table: ["l", "r"]}
        assert seen["configuration"]["walship.managed"] == "true" and seen["state"] == "DISABLED"

        # HBase's master merges the old configuration into the new one: a removal is refused, not lost
        code, _, err = run(capsys, a, "peer", "set", peer, "--remove-config", "walship.sink.thrift2")
        assert code == 1 and len(err) == 1 and "cannot be removed on a running cluster" in err[0], err
        assert "walship.sink.thrift2" in ((hbase_peer(hb, peer) or {}).get("configuration") or {})

        # a managed peer's disable is walship's switch: HBase's state stays DISABLED
        assert run(capsys, a, "peer", "disable", peer)[0] == 0
        assert not switch(a, peer) and (hbase_peer(hb, peer) or {}).get("state") == "DISABLED"
        assert run(capsys, a, "peer", "enable", peer)[0] == 0
        assert switch(a, peer)

        # HBase's exception: one line naming its class and the peer; nothing changed
        before = hbase_peer(hb, peer)
        code, _, err = run(capsys, a, "peer", "add", peer, "--cluster-key", b.cluster_key, *sink)
        assert code == 1 and len(err) == 1 and "Traceback" not in err[0], err
        assert "DoNotRetryIOException" in err[0] and f"peer {peer}" in err[0] and "already exists" in err[0]
        assert hbase_peer(hb, peer) == before

        # --offline is for a cluster that is down: refused, naming the registered master
        code, _, err = run(capsys, a, "peer", "set", peer, "--bandwidth", "1", "--offline")
        assert code == 1 and len(err) == 1, err
        assert f"{a.parent}/master" in err[0] and "is registered" in err[0]
        assert (hbase_peer(hb, peer) or {}).get("bandwidth") == 2000000
    finally:
        code, _, err = run(capsys, a, "peer", "remove", peer)
    assert code == 0, err
    assert hbase_peer(hb, peer) is None
    with zk_client(a.zk_hosts) as client:
        assert client.exists(layout(a).walship_peer(peer)) is None  # walship's switch went too
    code, _out, err = run(capsys, a, "peer", "remove", peer)
    assert code == 1 and len(err) == 1 and f"peer {peer} does not exist" in err[0], err


def test_an_unmanaged_peer_is_enabled_and_disabled_through_the_master(
    real_hbase: tuple[HBaseProcess, HBaseProcess], capsys: pytest.CaptureFixture[str]
) -> None:
    a, b = table_on_both(*real_hbase, "unm")
    hb = a.mc
    assert isinstance(hb, HBaseProcess)
    peer = unique("u")
    hb.call("add_peer", peer=peer, cluster_key=b.cluster_key, state="DISABLED", table_cfs={a.table_name.decode(): []})
    try:
        assert run(capsys, a, "peer", "enable", peer)[0] == 0
        assert (hbase_peer(hb, peer) or {}).get("state") == "ENABLED"
        assert run(capsys, a, "peer", "disable", peer)[0] == 0
        assert (hbase_peer(hb, peer) or {}).get("state") == "DISABLED"
        code, out, _err = run(capsys, a, "peer", "show", peer, "--json")
        assert code == 0 and '"managed": false' in out, out
    finally:
        hb.call("remove_peer", peer=peer)


def test_adopting_a_peer_hbase_ships_under_load_stops_hbase_first(
    real_hbase: tuple[HBaseProcess, HBaseProcess], capsys: pytest.CaptureFixture[str]
) -> None:
    a, b = table_on_both(*real_hbase, "adopt")
    hb = a.mc
    assert isinstance(hb, HBaseProcess)
    peer = unique("h")
    config = b.sink_config("thrift2")
    hb.call("add_peer", peer=peer, cluster_key=b.cluster_key, state="ENABLED", configuration=config,
            table_cfs={a.table_name.decode(): []})  # fmt: skip
    stop = threading.Event()
    written: list[bytes] = []

    def write() -> None:
        t = a.conn().table(a.table_name)
        i = 0
        while not stop.is_set() and i < 20000:
            row = b"w%06d" % i
            t.put(row, {b"r:q": row})
            written.append(row)
            i += 1

    writer = threading.Thread(target=write, daemon=True)
    try:
        wait_queues_hold_current_wals(a, peer)
        writer.start()
        # HBase's own source ships it meanwhile
        started = time.monotonic()
        wait_until(lambda: len(contents(b, b"r")) > 0, what="HBase's source shipping the peer before adopt")
        hbase_latency = time.monotonic() - started
        code, _out, err = run(capsys, a, "peer", "adopt", peer)
        assert code == 0, err
        seen = hbase_peer(hb, peer)
        assert seen is not None and seen["state"] == "DISABLED" and seen["configuration"]["walship.managed"] == "true"
        assert switch(a, peer)  # walship ships it from here
        # adopt returns once every region server's source stopped: a row written now is not shipped by HBase
        a.table().put(b"after-adopt", {b"r:q": b"x"})
        deadline = time.monotonic() + max(5.0, 3 * hbase_latency)
        while time.monotonic() < deadline:  # a bounded window: what HBase shipped before took hbase_latency
            assert b"after-adopt" not in contents(b, b"r"), "HBase's source still ships the adopted peer"
            time.sleep(0.5)
        stop.set()
        writer.join()
        summary = ship(a, peer)
        assert summary.status == "ok", summary.to_json()
        on_b = contents(b, b"r")
        assert on_b == contents(a, b"r")
        assert b"after-adopt" in on_b and len(on_b) == len(written) + 1
    finally:
        stop.set()
        writer.join(timeout=60)
        run(capsys, a, "peer", "remove", peer)
