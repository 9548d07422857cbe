"""``walship scope audit|enforce`` against real miniclusters: the source's and the peers'
descriptors over their Thrift2 (and Thrift1) servers, the peers in a real ZooKeeper."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from replication_helpers import Cluster, make_cluster, ship

from walship.cli import main
from walship.peer import PeerConfig
from walship.replicate.batcher.filters import EntryFilter
from walship.scope import FamilySettings, TableInfo, audit_peer
from walship.thrift.conn import open_thrift2
from walship.thrift.hbase2 import hbase2, table_name
from walship.wal.model import Cell, CellType, WalEntry, WalKey
from walship.zk import ReplicationPeers, ZnodeLayout, zk_client
from walship.zk.localserver import free_port
from walship_testing.minicluster.process import MiniClusterProcess

pytestmark = pytest.mark.integration

Factory = Callable[..., MiniClusterProcess]
DAY = 86_400


def create(cluster: Cluster, name: str, families: dict[str, dict[str, Any]]) -> None:
    """Create a table over the cluster's Thrift2 server: family -> descriptor fields."""
    columns = [hbase2.TColumnFamilyDescriptor(name=f.encode(), **settings) for f, settings in families.items()]
    with open_thrift2(*cluster.mc.thrift2) as conn:
        conn.client.createTable(hbase2.TTableDescriptor(tableName=table_name(name), columns=columns), [])


def families(cluster: Cluster, name: str) -> dict[bytes, Any]:
    """The table's family descriptors (over Thrift2), by name."""
    with open_thrift2(*cluster.mc.thrift2) as conn:
        desc = conn.client.getTableDescriptor(table_name(name))
    return {bytes(c.name): c for c in desc.columns}


def exists(cluster: Cluster, name: str) -> bool:
    with open_thrift2(*cluster.mc.thrift2) as conn:
        return bool(conn.client.tableExists(table_name(name)))


def add(source: Cluster, target: Cluster, peer_id: str, *, protocol: str = "thrift2", **fields: Any) -> None:
    configuration = fields.pop("configuration", None)
    if configuration is None:
        configuration = target.sink_config(protocol)
    with zk_client(source.zk_hosts) as client:
        ReplicationPeers(client, ZnodeLayout(source.parent)).add(
            PeerConfig(peer_id, target.cluster_key, configuration=configuration, **fields)
        )


def cli(
    capsys: pytest.CaptureFixture[str], source: Cluster, *argv: str, thrift2: str | None = None
) -> tuple[int, str, str]:
    g = ["--zk", source.zk_hosts, "--znode-parent", source.parent]
    g += ["--source-thrift2", thrift2 if thrift2 is not None else source.thrift2_address()]
    code = main([*g, *argv])
    out, err = capsys.readouterr()
    return code, out, err


def audit_json(capsys: pytest.CaptureFixture[str], source: Cluster, *argv: str) -> tuple[int, dict[str, Any]]:
    code, out, err = cli(capsys, source, "scope", "audit", "--json", *argv)
    assert err == "", err
    return code, json.loads(out)


def found(doc: dict[str, Any]) -> set[tuple[str, str | None, str | None, str]]:
    """(code, table, family, severity) of every finding of the document."""
    return {(f["code"], f["table"], f["family"], f["severity"]) for p in doc["peers"] for f in p["findings"]}


@pytest.fixture
def pair(minicluster_factory: Factory, zk_hosts: str) -> tuple[Cluster, Cluster]:
    """Source A and peer B, both with table t (r scope 1, l scope 0 on A; 5 versions each); no peers."""
    return make_cluster(minicluster_factory, zk_hosts, "A"), make_cluster(minicluster_factory, zk_hosts, "B")


@pytest.fixture
def policy(pair: tuple[Cluster, Cluster]) -> tuple[Cluster, Cluster]:
    """One case of each finding: peer 1 (Thrift2) selects t:r,zz; sel0; gone; half; vers; ttl; nosuch."""
    a, b = pair
    create(a, "sel0", {"f": {"scope": 0, "maxVersions": 3}})
    create(a, "gone", {"f": {"scope": 1, "maxVersions": 2, "timeToLive": DAY}, "g": {"scope": 0}})
    create(a, "half", {"f": {"scope": 1}, "g": {"scope": 1}})
    create(a, "vers", {"f": {"scope": 1, "maxVersions": 5}})
    create(a, "ttl", {"f": {"scope": 1, "timeToLive": 7 * DAY}})
    create(a, "local", {"f": {"scope": 1}})
    create(b, "sel0", {"f": {"maxVersions": 3}})
    create(b, "half", {"f": {}})
    create(b, "vers", {"f": {"maxVersions": 2}})
    create(b, "ttl", {"f": {"timeToLive": 3600}})
    create(b, "local", {"f": {}})
    add(a, b, "1", table_cfs={"t": ("r", "zz"), "sel0": None, "gone": None, "half": None, "vers": None,
                              "ttl": None, "nosuch": None})  # fmt: skip
    return a, b


# -- audit -------------------------------------------------------------------------------------


def test_a_policy_that_holds_audits_clean(pair: tuple[Cluster, Cluster], capsys: pytest.CaptureFixture[str]) -> None:
    a, b = pair
    add(a, b, "1", table_cfs={"t": ("r",)})
    code, doc = audit_json(capsys, a)
    assert code == 0
    assert set(doc) == {"peers", "data_loss"} and doc["data_loss"] is False
    (peer,) = doc["peers"]
    assert {"peer_id", "tables", "findings"} <= set(peer) and peer["peer_id"] == "1"
    assert peer["peer_access"] == "thrift2" and peer["peer_servers"] == b.thrift2_address()
    assert peer["findings"] == []
    forever = 2**31 - 1
    assert peer["tables"] == [
        {"table": "t", "family": "l", "scope": 0, "selected": False, "on_peer": True,
         "source": {"max_versions": 5, "ttl": forever}, "peer": {"max_versions": 5, "ttl": forever}},
        {"table": "t", "family": "r", "scope": 1, "selected": True, "on_peer": True,
         "source": {"max_versions": 5, "ttl": forever}, "peer": {"max_versions": 5, "ttl": forever}},
    ]  # fmt: skip
    code, out, err = cli(capsys, a, "scope", "audit")
    assert code == 0 and err == ""
    assert f"peer 1: selects table-cfs t:r\n  its tables: read over thrift2 {b.thrift2_address()}" in out
    assert "no findings" in out and "no finding would lose data (0 warning(s))" in out
    assert any(line.split()[:5] == ["t", "r", "1", "yes", "yes"] for line in out.splitlines())


def test_each_finding_with_its_severity(policy: tuple[Cluster, Cluster], capsys: pytest.CaptureFixture[str]) -> None:
    a, _ = policy
    code, doc = audit_json(capsys, a)
    assert code == 1 and doc["data_loss"] is True
    assert found(doc) == {
        ("selected-scope-0", "sel0", "f", "data_loss"),
        ("selected-scope-0", "gone", "g", "data_loss"),
        ("table-missing-on-peer", "gone", None, "data_loss"),
        ("family-missing-on-peer", "half", "g", "data_loss"),
        ("peer-fewer-versions", "vers", "f", "data_loss"),
        ("peer-ttl-shorter", "ttl", "f", "data_loss"),
        ("scoped-not-selected", "local", "f", "warning"),
        ("selected-missing-on-source", "nosuch", None, "warning"),
        ("selected-missing-on-source", "t", "zz", "warning"),
    }
    rows = {(r["table"], r["family"]): r for r in doc["peers"][0]["tables"]}
    assert rows["gone", "f"]["on_peer"] is False and rows["gone", "f"]["peer"] is None
    assert rows["gone", "f"]["source"] == {"max_versions": 2, "ttl": DAY}
    assert rows["vers", "f"]["peer"]["max_versions"] == 2 and rows["vers", "f"]["source"]["max_versions"] == 5
    assert rows["ttl", "f"]["peer"]["ttl"] == 3600 and rows["ttl", "f"]["source"]["ttl"] == 7 * DAY
    assert rows["local", "f"]["selected"] is False and rows["local", "f"]["on_peer"] is True
    messages = {f["code"]: f["message"] for f in doc["peers"][0]["findings"]}
    assert "keeps 2 versions of vers:f, the source 5" in messages["peer-fewer-versions"]
    assert "for 3600s, the source for 604800s" in messages["peer-ttl-shorter"]
    assert "table gone does not exist on peer 1" in messages["table-missing-on-peer"]

    code, out, err = cli(capsys, a, "scope", "audit")
    assert code == 1 and err == ""
    assert "DATA LOSS half:g: table half on peer 1 has no family g" in out
    assert "WARNING local:f: local:f has REPLICATION_SCOPE 1 but peer 1 does not select it" in out
    assert "6 finding(s) would lose data" in out


def test_warnings_alone_exit_0(pair: tuple[Cluster, Cluster], capsys: pytest.CaptureFixture[str]) -> None:
    a, b = pair
    create(a, "local", {"f": {"scope": 1}})
    add(a, b, "2", table_cfs={"t": ("r",), "nosuch": None})
    code, doc = audit_json(capsys, a, "--peer", "2")
    assert code == 0 and doc["data_loss"] is False
    assert found(doc) == {
        ("scoped-not-selected", "local", "f", "warning"),
        ("selected-missing-on-source", "nosuch", None, "warning"),
    }


def test_namespaces_and_exclude_lists_select_as_the_shipper_does(
    pair: tuple[Cluster, Cluster], capsys: pytest.CaptureFixture[str]
) -> None:
    a, b = pair
    create(a, "ns1:u", {"f": {"scope": 1}, "g": {"scope": 1}})
    create(b, "ns1:u", {"f": {}, "g": {}})
    add(a, b, "1", namespaces=frozenset({"ns1"}))
    add(a, b, "2", exclude_table_cfs={"t": ("l",), "ns1:u": ("g",), "gone": None})
    add(a, b, "3", exclude_namespaces=frozenset({"ns1", "default"}))
    _, doc = audit_json(capsys, a)
    selected = {p["peer_id"]: {(r["table"], r["family"]) for r in p["tables"] if r["selected"]} for p in doc["peers"]}
    assert selected == {"1": {("ns1:u", "f"), ("ns1:u", "g")}, "2": {("t", "r"), ("ns1:u", "f")}, "3": set()}
    assert found(doc) == {
        ("scoped-not-selected", "t", "r", "warning"),  # peer 1 takes ns1 only; peer 3 takes nothing
        ("scoped-not-selected", "ns1:u", "g", "warning"),  # peers 2 and 3
        ("scoped-not-selected", "ns1:u", "f", "warning"),  # peer 3
        ("excluded-missing-on-source", "gone", None, "warning"),
    }


@pytest.mark.parametrize(
    "fields",
    [
        {},
        {"table_cfs": {"t": ("r",), "ns1:u": None, "v": ("x", "y")}},
        {"namespaces": frozenset({"ns1"}), "table_cfs": {"v": ("y",)}},
        {"exclude_table_cfs": {"t": None, "ns1:u": ("g",)}},
        {"exclude_namespaces": frozenset({"default"}), "exclude_table_cfs": {"ns1:u": ("f",)}},
    ],
)
def test_selected_means_what_the_shipper_ships(fields: dict[str, Any]) -> None:
    """For every family: selected and scope 1 in the audit <=> the shipper's filter keeps its cells."""
    peer = PeerConfig("1", "zk:2181:/hbase", **fields)
    source = {
        name: TableInfo(name, {f: FamilySettings(f, 1, scope=s) for f, s in fams.items()})
        for name, fams in {"t": {b"r": 1, b"l": 0}, "ns1:u": {b"f": 1, b"g": 1}, "v": {b"x": 1, b"y": 0}}.items()
    }
    audit = audit_peer(peer, source, None)
    # one row per family of every source table: an empty audit would prove nothing
    assert sorted((r.table, r.family) for r in audit.rows) == sorted(
        (name, f) for name, info in source.items() for f in info.families
    )
    entry_filter = EntryFilter(peer, uuid.uuid4(), uuid.uuid4())
    for row in audit.rows:
        scopes = {f: s.scope or 0 for f, s in source[row.table].families.items() if s.scope}
        key = WalKey(b"region", row.table.encode(), 1, 1, scopes=scopes)
        cell = Cell(b"row", row.family, b"q", 1, int(CellType.Put), b"v")
        shipped = entry_filter.apply(WalEntry(key, (cell,), 0, 1)) is not None
        assert shipped == (row.selected and row.scope == 1), (row, fields)


def test_a_peer_with_only_thrift1_is_read_over_thrift1(
    pair: tuple[Cluster, Cluster], capsys: pytest.CaptureFixture[str]
) -> None:
    a, b = pair
    create(a, "gone", {"f": {"scope": 1}})
    create(a, "vers", {"f": {"scope": 1, "maxVersions": 4, "timeToLive": DAY}})
    conn = b.conn()
    conn.create_table("vers", {"f": {"max_versions": 2, "time_to_live": 60}})
    conn.close()
    add(a, b, "1", protocol="thrift1")
    code, doc = audit_json(capsys, a)
    assert code == 1
    (peer,) = doc["peers"]
    assert peer["peer_access"] == "thrift1" and peer["peer_servers"] == b.thrift_address()
    rows = {(r["table"], r["family"]): r for r in peer["tables"]}
    assert rows["vers", "f"]["peer"] == {"max_versions": 2, "ttl": 60}
    assert rows["t", "r"]["peer"] == {"max_versions": 5, "ttl": 2**31 - 1}  # no TTL on Thrift1: forever
    assert found(doc) == {
        ("selected-scope-0", "t", "l", "data_loss"),  # replicate-all selects every family
        ("table-missing-on-peer", "gone", None, "data_loss"),
        ("peer-fewer-versions", "vers", "f", "data_loss"),
        ("peer-ttl-shorter", "vers", "f", "data_loss"),
    }


def test_a_peer_without_thrift_servers_is_not_checked(
    pair: tuple[Cluster, Cluster], capsys: pytest.CaptureFixture[str]
) -> None:
    a, b = pair
    add(a, b, "1", table_cfs={"t": ("r",)}, configuration={"walship.sink.protocol": "custom"})
    code, doc = audit_json(capsys, a)
    assert code == 0
    (peer,) = doc["peers"]
    assert peer["peer_access"] is None and all(r["on_peer"] is None and r["peer"] is None for r in peer["tables"])
    assert found(doc) == {("peer-not-checked", None, None, "warning")}
    code, _, err = cli(capsys, a, "scope", "enforce", "--peer", "1", "--create-missing")
    assert code == 1 and "peer 1 has no Thrift servers in its configuration (walship.sink.thrift2)" in err


# -- enforce -----------------------------------------------------------------------------------


def test_enforce_sets_the_scope_keeping_every_other_setting(
    pair: tuple[Cluster, Cluster], capsys: pytest.CaptureFixture[str]
) -> None:
    a, b = pair
    settings = {"maxVersions": 4, "timeToLive": 9 * DAY, "blockSize": 32768, "inMemory": True,
                "configuration": {"k": "v"}, "attributes": {b"a": b"1", b"REPLICATION_SCOPE": b"0"}, "minVersions": 1}  # fmt: skip
    create(a, "sel0", {"f": {"scope": 0, **settings}, "x": {"scope": 0}})
    create(b, "sel0", {"f": {"maxVersions": 4, "timeToLive": 9 * DAY}})
    add(a, b, "1", table_cfs={"t": ("r",), "sel0": ("f",)})
    before = families(a, "sel0")

    code, out, err = cli(capsys, a, "scope", "enforce", "--peer", "1", "--dry-run")
    assert (code, err) == (0, "")
    assert out.splitlines() == [
        "would set REPLICATION_SCOPE 1 on sel0:f (source)",
        "dry run: 1 change(s) for peer 1; nothing was changed",
    ]
    assert families(a, "sel0") == before

    code, out, err = cli(capsys, a, "scope", "enforce", "--peer", "1")
    assert (code, err) == (0, "")
    assert out.splitlines() == ["set REPLICATION_SCOPE 1 on sel0:f (source)", "1 change(s) made for peer 1"]
    after = families(a, "sel0")
    assert after[b"f"].scope == 1 and after[b"x"].scope == 0  # x is not selected: left alone
    before[b"f"].scope = 1
    before[b"f"].attributes[b"REPLICATION_SCOPE"] = b"1"  # HBase lists every setting among the attributes too
    # every other setting as it was; the descriptor sent sets every field, so HBase now lists
    # the ones left at their defaults among the attributes too
    assert before[b"f"].attributes.items() <= after[b"f"].attributes.items()
    after[b"f"].attributes = before[b"f"].attributes
    assert after == before

    code, out, _ = cli(capsys, a, "scope", "enforce", "--peer", "1")
    assert code == 0
    assert out.splitlines() == ["nothing to change for peer 1: every family it selects has REPLICATION_SCOPE 1"]
    code, doc = audit_json(capsys, a)
    assert code == 0 and found(doc) == set()

    # and the family now ships
    conn = a.conn()
    conn.table("sel0").put(b"row1", {b"f:q": b"v1"})
    conn.close()
    ship(a)
    peer = b.conn()
    assert peer.table("sel0").row(b"row1") == {b"f:q": b"v1"}
    peer.close()


def test_enforce_creates_what_the_peer_lacks(
    policy: tuple[Cluster, Cluster], capsys: pytest.CaptureFixture[str]
) -> None:
    a, b = policy
    # a table-cfs naming what the source lacks: refused, nothing changed
    code, out, err = cli(capsys, a, "scope", "enforce", "--peer", "1", "--create-missing")
    assert code == 1 and out == ""
    assert "peer 1's table-cfs names table nosuch, which the source cluster does not have" in err
    assert "family t:zz" in err and "nothing was changed" in err
    assert families(a, "sel0")[b"f"].scope == 0 and not exists(b, "gone")

    assert main(["--zk", a.zk_hosts, "--znode-parent", a.parent, "peer", "set", "1",
                 "--table-cfs", "t:r;sel0;gone;half;vers;ttl"]) == 0  # fmt: skip
    capsys.readouterr()

    code, out, err = cli(capsys, a, "scope", "enforce", "--peer", "1")
    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert lines[:3] == [
        "set REPLICATION_SCOPE 1 on gone:g (source)",
        "set REPLICATION_SCOPE 1 on sel0:f (source)",
        "left as is: table gone does not exist on peer 1: edits of its selected families (f, g) cannot be applied "
        "there (walship scope enforce --peer 1 --create-missing creates it)",
    ]
    assert any(line.startswith("left as is: table half on peer 1 has no family g") for line in lines)
    assert any("keeps 2 versions of vers:f" in line and "alter the family on the peer" in line for line in lines)
    assert lines[-1] == "2 change(s) made for peer 1" and not exists(b, "gone")

    code, out, err = cli(capsys, a, "scope", "enforce", "--peer", "1", "--create-missing", "--dry-run")
    assert (code, err) == (0, "")
    assert out.splitlines()[:2] == [
        "would create table gone on peer 1 (families f, g)",
        "would add family half:g on peer 1",
    ]
    assert not exists(b, "gone") and set(families(b, "half")) == {b"f"}

    code, out, err = cli(capsys, a, "scope", "enforce", "--peer", "1", "--create-missing")
    assert (code, err) == (0, "")
    assert out.splitlines()[:2] == ["created table gone on peer 1 (families f, g)", "added family half:g on peer 1"]
    assert out.splitlines()[-1] == "2 change(s) made for peer 1"
    source_gone, peer_gone = families(a, "gone"), families(b, "gone")
    assert set(peer_gone) == {b"f", b"g"}
    for fam in (b"f", b"g"):
        for field in ("maxVersions", "timeToLive", "blockSize", "compressionType", "bloomnFilterType"):
            assert getattr(peer_gone[fam], field) == getattr(source_gone[fam], field), (fam, field)
    assert families(b, "half")[b"g"].maxVersions == families(a, "half")[b"g"].maxVersions

    code, out, _ = cli(capsys, a, "scope", "enforce", "--peer", "1", "--create-missing")
    assert code == 0 and "nothing to change for peer 1" in out and "change(s) made" not in out
    code, doc = audit_json(capsys, a)
    assert code == 1  # what enforce leaves to the operator: versions and TTL on the peer
    assert {c for c, *_ in found(doc)} == {"peer-fewer-versions", "peer-ttl-shorter", "scoped-not-selected"}


def test_creating_on_a_thrift1_peer_needs_thrift2(
    pair: tuple[Cluster, Cluster], capsys: pytest.CaptureFixture[str]
) -> None:
    a, b = pair
    create(a, "gone", {"f": {"scope": 0}})
    add(a, b, "1", protocol="thrift1", table_cfs={"t": ("r",), "gone": None})
    code, out, err = cli(capsys, a, "scope", "enforce", "--peer", "1", "--create-missing")
    assert code == 1 and out == ""
    assert "peer 1 has no Thrift2 servers (walship.sink.thrift2), only Thrift1" in err
    assert "create table gone on peer 1" in err and "nothing was changed" in err
    assert families(a, "gone")[b"f"].scope == 0
    code, out, _ = cli(capsys, a, "scope", "enforce", "--peer", "1")  # scopes need no peer change
    assert code == 0 and out.splitlines()[0] == "set REPLICATION_SCOPE 1 on gone:f (source)"


# -- bad input ---------------------------------------------------------------------------------


def test_an_unknown_peer_is_a_clear_error(pair: tuple[Cluster, Cluster], capsys: pytest.CaptureFixture[str]) -> None:
    a, _ = pair
    for argv in (["audit", "--peer", "9"], ["enforce", "--peer", "9"]):
        code, out, err = cli(capsys, a, "scope", *argv)
        assert (code, out) == (1, "") and err.startswith("walship: peer 9 does not exist"), err
    code, out, _ = cli(capsys, a, "scope", "audit")
    assert (code, out.strip()) == (0, "no replication peers")


def test_the_source_thrift2_server_is_required_and_must_answer(
    pair: tuple[Cluster, Cluster], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    a, b = pair
    add(a, b, "1", table_cfs={"t": ("r",)})
    monkeypatch.delenv("WALSHIP_SOURCE_THRIFT2", raising=False)
    code = main(["--zk", a.zk_hosts, "--znode-parent", a.parent, "scope", "audit"])
    err = capsys.readouterr().err
    assert code == 1
    assert err.strip() == (
        "walship: no Thrift2 server of the source cluster: give --source-thrift2 HOST:PORT (before the subcommand) "
        "or set WALSHIP_SOURCE_THRIFT2"
    )
    monkeypatch.setenv("WALSHIP_SOURCE_THRIFT2", a.thrift2_address())  # the environment variable works too
    assert main(["--zk", a.zk_hosts, "--znode-parent", a.parent, "scope", "audit"]) == 0
    capsys.readouterr()

    code, _, err = cli(capsys, a, "scope", "audit", thrift2="no-port")
    assert code == 1 and "invalid --source-thrift2 'no-port': expected host:port" in err
    port = free_port()
    code, _, err = cli(capsys, a, "scope", "enforce", "--peer", "1", thrift2=f"127.0.0.1:{port}")
    assert code == 1
    assert err.startswith(f"walship: the source cluster: no Thrift2 server answered (127.0.0.1:{port}, buffered/binary")
    host, tport = a.mc.thrift  # a Thrift1 server is not a Thrift2 server
    code, _, err = cli(capsys, a, "scope", "audit", thrift2=f"{host}:{tport}")
    assert code == 1 and err.startswith(f"walship: the source cluster: {host}:{tport} could not list the table")
    assert "is it a Thrift2 server" in err


def test_an_unreachable_peer_is_a_clear_error(
    pair: tuple[Cluster, Cluster], capsys: pytest.CaptureFixture[str]
) -> None:
    a, _ = pair
    port = free_port()
    add(a, a, "2", configuration={"walship.sink.protocol": "thrift2", "walship.sink.thrift2": f"127.0.0.1:{port}"})
    code, out, err = cli(capsys, a, "scope", "audit", "--peer", "2")
    assert code == 1 and out == ""
    assert err.startswith(f"walship: peer 2: no Thrift2 server answered (127.0.0.1:{port}, buffered/binary; its "
                          "walship.sink.thrift2)")  # fmt: skip


def test_the_command_as_a_process_prints_no_traceback(pair: tuple[Cluster, Cluster]) -> None:
    a, _ = pair
    env = {**os.environ, "WALSHIP_SOURCE_THRIFT2": f"127.0.0.1:{free_port()}"}
    for argv in (["scope", "audit"], ["scope", "enforce", "--peer", "nope"], ["scope", "enforce"]):
        proc = subprocess.run(
            [sys.executable, "-m", "walship.cli", "--zk", a.zk_hosts, "--znode-parent", a.parent, *argv],
            capture_output=True, text=True, timeout=60, env=env, check=False,
        )  # fmt: skip
        assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
        # one line: "walship: ..." for a refusal, "walship scope enforce: ..." for a missing flag
        assert proc.stderr.startswith("walship") and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
