"""``walship switchover`` on real HBase 2.6 (two clusters of the harness, walship shipping both
ways): writes on A up to the fence, a switchover, writes on B shipped back, a failback, writes
on A: both clusters equal at the end, every write A accepted on B, every write the fence
refused reported to its client and nowhere. A failure injected at each step leaves a record
that a rollback undoes (before the switch) or that the step resumes from (after it)."""

from __future__ import annotations

import dataclasses
import json
import threading
from typing import Any

import happybase
import pytest
from real_hbase import BACKENDS, add_managed_peer, create_table, hbase_peers, remove_peer, unique
from replication_helpers import Cluster, contents, ship

from walship.cli import main
from walship.errors import MasterUnavailableError, SwitchoverError, SwitchoverStateError
from walship.replicate.source import SourceSite
from walship.rpc.master import MasterAdmin
from walship.rpc.peers import MasterPeers
from walship.rpc.tables import MasterTables
from walship.switchover import ROLLBACK, STEPS, Switchover, SwitchoverRequest, open_sides
from walship.zk import ReplicationPeers, ZnodeLayout, zk_client
from walship_testing.harness import HBaseProcess

pytestmark = pytest.mark.integration


#: refused writes after which a writer stops
REFUSALS = 3


def run_cli(capsys: pytest.CaptureFixture[str], source: Cluster, *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    try:
        code = main([*source.cli_flags(), "switchover", *argv])
    except SystemExit as exc:
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def read_only(c: Cluster, table: str | None = None) -> bool:
    with zk_client(c.zk_hosts) as client, MasterAdmin(client, ZnodeLayout(c.parent)) as admin:
        return MasterTables(admin).is_read_only(table or c.table_name.decode())


def enabled(c: Cluster) -> bool:
    with zk_client(c.zk_hosts) as client, MasterAdmin(client, ZnodeLayout(c.parent)) as admin:
        return MasterTables(admin).table_enabled(c.table_name.decode())


def switch_of(c: Cluster, peer_id: str) -> bool:
    with zk_client(c.zk_hosts) as client:
        return ReplicationPeers(client, ZnodeLayout(c.parent)).get(peer_id).enabled


def put(c: Cluster, prefix: bytes, n: int) -> None:
    with c.conn().table(c.table_name).batch() as batch:
        for i in range(n):
            batch.put(prefix + b"%03d" % i, {b"r:q": prefix + b"%d" % i})


class Writer:
    """A client writing rows ``<prefix>00000...`` to one cluster while the switchover runs, one put a
    row: each either acknowledged or refused (raised to this client), none in between. After
    :data:`REFUSALS` refusals it stops, as a client that moves to the other cluster."""

    def __init__(self, cluster: Cluster, prefix: bytes) -> None:
        self.cluster = cluster
        self.prefix = prefix
        self.acked: list[bytes] = []
        self.refused: dict[bytes, str] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._write, name="writer")

    def _write(self) -> None:
        conn = happybase.Connection(*self.cluster.mc.thrift)
        table = conn.table(self.cluster.table_name)
        i = 0
        while not self._stop.is_set() and len(self.refused) < REFUSALS:
            row = self.prefix + b"%05d" % i
            i += 1
            try:
                table.put(row, {b"r:q": row})
            except Exception as exc:  # the fence's refusal, as this client sees it
                self.refused[row] = f"{type(exc).__name__}: {exc}"
                conn.close()
                conn = happybase.Connection(*self.cluster.mc.thrift)
                table = conn.table(self.cluster.table_name)
                self._stop.wait(0.05)
            else:
                self.acked.append(row)
        conn.close()

    def wait_refused(self) -> None:
        """Until the writer stopped at the fence."""
        self._thread.join(timeout=60)
        assert len(self.refused) >= REFUSALS, (len(self.acked), self.refused)

    def __enter__(self) -> Writer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=60)


@pytest.mark.parametrize("backend", BACKENDS)
def test_switchover_and_failback_lose_nothing(
    both_ways: tuple[Cluster, Cluster, str], capsys: pytest.CaptureFixture[str]
) -> None:
    a, b, peer = both_ways
    table = a.table_name.decode()
    put(a, b"before", 50)
    with Writer(a, b"wa") as writer:
        for step in ("preflight", "fence"):
            code, out, err = run_cli(capsys, a, "--peer", peer, "--tables", table, "--step", step)
            assert code == 0, err
        writer.wait_refused()  # the writers see the fence; the rest resumes after the fence
        code, out, err = run_cli(capsys, a, "--peer", peer, "--json")
    assert code == 0, err
    record = json.loads(out.splitlines()[-1])
    assert record["state"] == "done" and all(record["steps"][s]["state"] == "done" for s in STEPS), record
    assert record["steps"]["fence"]["changed"] == [f"table {table}: READONLY false -> true"]
    assert record["steps"]["unfence"]["changed"] == [
        f"table {table}: READONLY true -> false",
        f"peer {peer} on peer {peer}'s cluster ({b.cluster_key}): walship's switch off -> on",
    ]
    # the writer saw the fence: its refused writes failed at its client and are on neither side
    assert writer.acked and writer.refused, (len(writer.acked), writer.refused)
    assert all("read only" in m.lower() or "readonly" in m.lower() for m in writer.refused.values()), writer.refused
    on_b = contents(b)
    assert set(writer.acked) <= set(on_b) and not set(writer.refused) & set(on_b)
    assert not set(writer.refused) & set(contents(a))
    assert contents(a) == on_b
    assert not read_only(a) and switch_of(b, peer)  # A unfenced; B's peer back on
    with zk_client(b.zk_hosts) as client, MasterAdmin(client, ZnodeLayout(b.parent)) as admin:
        assert not admin.is_peer_enabled(peer)  # HBase's peer-state: walship, not HBase, ships it

    # the writers on B: walship ships B's WALs back to A; nothing loops back to B
    put(b, b"onb", 30)
    assert ship(b, peer).status == "ok"
    assert ship(a, peer).status == "ok"
    assert contents(a) == contents(b)

    # failback: the same command from B, with the peer back
    with Writer(b, b"wb") as writer:
        for step in ("preflight", "fence"):
            code, out, err = run_cli(capsys, b, "--peer", peer, "--step", step)
            assert code == 0, err
        writer.wait_refused()
        code, out, err = run_cli(capsys, b, "--peer", peer, "--json")
    assert code == 0, err
    back = json.loads(out.splitlines()[-1])
    assert back["state"] == "done" and back["tables"] == [table]
    assert back["reverse_peer"] == {"added": False, "switch_before": True}  # A's peer to B, kept
    assert set(writer.acked) <= set(contents(a)) and not set(writer.refused) & set(contents(a))
    assert not read_only(b) and switch_of(a, peer)
    put(a, b"home", 20)
    assert ship(a, peer).status == "ok"
    assert ship(b, peer).status == "ok"
    final = contents(a)
    assert final == contents(b)
    assert {r[:4] for r in final} >= {b"befo", b"onb0", b"home"}


def steps(site: SourceSite, request: SwitchoverRequest, *names: str, pump: Cluster | None = None) -> Switchover:
    """Run these steps; with ``pump``, its queues of the peer shipped while the drain waits."""
    with open_sides(site, request.peer_id) as sides:
        run = Switchover(sides, request, pump=(lambda: ship(pump, request.peer_id)) if pump is not None else None)
        for name in names:
            run.run(name)
        return run


def site_of(c: Cluster) -> SourceSite:
    return SourceSite(c.zk_hosts, c.parent, str(c.mc.wal_root))


def last(c: Cluster, peer: str) -> dict[str, Any]:
    from walship.switchover import SwitchoverStore

    with zk_client(c.zk_hosts) as client:
        found = SwitchoverStore(client, ZnodeLayout(c.parent)).get(peer)
    assert found is not None
    return found.to_json()


@pytest.mark.parametrize("backend", ["real"])
def test_a_failure_before_the_switch_is_rolled_back(
    both_ways: tuple[Cluster, Cluster, str],
) -> None:
    a, b, peer = both_ways
    table = a.table_name.decode()
    other = unique("sw2")
    for c in (a, b):  # a second table the peer replicates
        create_table(c.mc, other, r={"scope": 1, "versions": 5})  # type: ignore[arg-type]
    with zk_client(a.zk_hosts) as client, MasterAdmin(client, ZnodeLayout(a.parent)) as admin:
        MasterPeers(client, ZnodeLayout(a.parent), admin).modify(
            peer, lambda p: dataclasses.replace(p, table_cfs={table: None, other: None})
        )
    site = site_of(a)
    request = SwitchoverRequest(peer, tables=(table,), source_thrift2=a.thrift2_address(), drain_timeout=1.0)

    # preflight: the peer switched off; named, and nothing changed
    with zk_client(a.zk_hosts) as client:
        ReplicationPeers(client, ZnodeLayout(a.parent)).set_switch(peer, False)
        with pytest.raises(SwitchoverError, match=rf"preflight: 1 problem\(s\) .*: peer {peer} is disabled"):
            steps(site, request, "preflight")
        assert not read_only(a) and not last(a, peer)["fenced"]
        ReplicationPeers(client, ZnodeLayout(a.parent)).set_switch(peer, True)

    # drain: nothing ships the peer meanwhile, so the cut is not reached
    put(a, b"d", 5)
    steps(site, request, "preflight", "fence")
    assert read_only(a)
    with pytest.raises(SwitchoverError, match=rf"drain: peer {peer} not drained after .*behind the cut"):
        steps(site, request, "drain")
    assert last(a, peer)["state"] == "failed" and last(a, peer)["steps"]["drain"]["state"] == "failed"
    with pytest.raises(SwitchoverStateError, match="verify: step drain .* has not run"):
        steps(site, request, "verify")
    steps(site, request, ROLLBACK)
    assert not read_only(a) and last(a, peer)["state"] == "rolled-back"
    assert last(a, peer)["steps"][ROLLBACK]["changed"] == [f"table {table}: READONLY true -> false"]

    # verify: a row on B that A never had
    ship(a, peer)
    b.table().put(b"stray", {b"r:q": b"x"})
    with pytest.raises(SwitchoverError, match=r"verify: 1 bad row\(s\) .*stray"):
        steps(site, request, "preflight", "fence", "drain", "verify", pump=a)
    steps(site, request, ROLLBACK)
    assert not read_only(a)
    b.table().delete(b"stray")

    # reverse: the peer back's id taken on B, after the preflight, by a peer to elsewhere
    hb_b = b.mc
    assert isinstance(hb_b, HBaseProcess)
    steps(site, request, "preflight", "fence", "drain", "verify", pump=a)
    elsewhere = f"{a.zk_hosts.partition('/')[0]}:/elsewhere"
    hb_b.call("add_peer", peer=peer, cluster_key=elsewhere, state="DISABLED", configuration={}, table_cfs={})
    with pytest.raises(SwitchoverError, match=f"reverse: peer {peer} of .* exists, shipped by HBase itself"):
        steps(site, request, "reverse")
    steps(site, request, ROLLBACK)
    assert hbase_peers(b)[peer]["cluster_key"] == elsewhere  # not this switchover's: kept
    assert not read_only(a)
    hb_b.call("remove_peer", peer=peer)

    # switch: someone lifted the fence after the reverse step
    steps(site, request, "preflight", "fence", "drain", "verify", "reverse", pump=a)
    assert peer in hbase_peers(b) and not switch_of(b, peer)
    with zk_client(a.zk_hosts) as client, MasterAdmin(client, ZnodeLayout(a.parent)) as admin:
        MasterTables(admin).set_read_only(table, False)
    with pytest.raises(SwitchoverError, match=f"switch: table {table} of the source takes writes again"):
        steps(site, request, "switch")
    steps(site, request, ROLLBACK)
    assert peer not in hbase_peers(b)  # the peer back this switchover added: removed
    assert last(a, peer)["steps"][ROLLBACK]["changed"] == [
        f"peer {peer} removed from peer {peer}'s cluster ({b.cluster_key})"
    ]

    # fence: the master goes away after the first of two tables (a fault the harness cannot make)
    two = SwitchoverRequest(peer, tables=(table, other), source_thrift2=a.thrift2_address())
    with open_sides(site, peer) as sides:
        sides.source.tables = _FailsOn(sides.source.admin, other)
        run = Switchover(sides, two)
        run.run("preflight")
        with pytest.raises(SwitchoverError, match=f"fence: .*table {other}.*does not answer"):
            run.run("fence")
    assert read_only(a, table) and not read_only(a, other)
    assert last(a, peer)["steps"]["fence"]["changed"] == [f"table {table}: READONLY false -> true"]
    steps(site, two, ROLLBACK)
    assert not read_only(a, table) and not read_only(a, other)


class _FailsOn(MasterTables):
    """The source's master, gone for one table's change."""

    def __init__(self, admin: MasterAdmin, table: str) -> None:
        super().__init__(admin)
        self.table = table

    def set_read_only(self, table: str, read_only: bool) -> bool:
        if table == self.table:
            raise MasterUnavailableError(f"table {table}: the master does not answer")
        return super().set_read_only(table, read_only)


@pytest.mark.parametrize("backend", ["real"])
def test_after_the_switch_a_failed_unfence_resumes_and_rollback_is_refused(
    both_ways: tuple[Cluster, Cluster, str], capsys: pytest.CaptureFixture[str]
) -> None:
    a, b, peer = both_ways
    table = a.table_name.decode()
    code, _, err = run_cli(capsys, a, "--peer", peer, "--tables", table, "--fence", "disable", "--step", "preflight")
    assert code == 0, err
    for step in STEPS[1:-1]:
        code, out, err = run_cli(capsys, a, "--peer", peer, "--step", step)
        assert code == 0, err
        if step == "fence":
            assert f"table {table}: disabled" in out and not enabled(a)
        if step == "verify":
            assert "verify: skipped: the source's tables are disabled" in out
    assert "clients may write to" in out
    # B's peer back is gone before the unfence (removed by hand): the step fails, naming it
    remove_peer(b, peer)
    code, _, err = run_cli(capsys, a, "--peer", peer, "--step", "unfence")
    assert code == 1 and "unfence: " in err and peer in err, err
    assert enabled(a) and not read_only(a)  # the first half is done, and recorded
    code, _, err = run_cli(capsys, a, "--peer", peer, "--rollback")
    assert code == 1 and "no rollback after it" in err, err
    # put back, the step resumes and the switchover ends
    add_managed_peer(b, a, peer, "thrift2")
    with zk_client(b.zk_hosts) as client:
        ReplicationPeers(client, ZnodeLayout(b.parent)).set_switch(peer, False)
    code, out, err = run_cli(capsys, a, "--peer", peer, "--step", "unfence", "--json")
    assert code == 0, err
    record = json.loads(out.splitlines()[-1])
    assert record["state"] == "done" and switch_of(b, peer)
    # a dry run of another switchover changes nothing and says what it would do
    code, out, err = run_cli(capsys, a, "--peer", peer, "--dry-run")
    assert code == 0, err
    assert f"fence: table {table}: READONLY false -> true" in out and not read_only(a)
    assert last(a, peer)["run_id"] == record["run_id"]


def test_bad_input_is_named_and_changes_nothing(
    both_ways: tuple[Cluster, Cluster, str], capsys: pytest.CaptureFixture[str]
) -> None:
    a, _, peer = both_ways
    cases = [
        (["--peer", "no/such"], "peer id"),
        (["--peer", "nosuch"], "nosuch"),
        (["--peer", peer, "--fence", "lock"], "--fence: invalid choice: 'lock'"),
        (["--peer", peer, "--drain-timeout", "-1"], "--drain-timeout"),
        (["--peer", peer, "--step", "drain"], "drain: no switchover to peer"),
        (["--peer", peer, "--rollback"], f"rollback: no unfinished switchover to peer {peer}"),
        (["--peer", peer, "--tables", "missing_table"], "table missing_table does not exist on the source cluster"),
        (["--peer", peer, "--step", "drain"], "drain: step fence of switchover cli-"),
    ]
    for argv, named in cases:
        code, _, err = run_cli(capsys, a, *argv)
        assert code == 1 and named in err and "Traceback" not in err, (argv, err)
        assert len(err.strip().splitlines()) == 1, err
    assert not read_only(a)
