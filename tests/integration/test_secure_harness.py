"""The Kerberized real-HBase stack itself (the ``secure_hbase`` fixture): HBase's znodes carry
``sasl:`` ACLs that a client logged in from walship's keytab (SASL GSSAPI, no kinit) passes and
an anonymous client or a principal that is no superuser does not; the harness runs HBase's Admin
on both secure clusters; the ready lines describe the secure services."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import NoAuthError
from real_hbase import unique
from secure_hbase import SecureStack

pytestmark = pytest.mark.integration


@contextmanager
def zk_as(
    stack: SecureStack, monkeypatch: pytest.MonkeyPatch, keytab: Path | None, principal: str | None
) -> Iterator[KazooClient]:
    """A kazoo client of the stack's ZooKeeper, logged in with SASL GSSAPI as ``principal`` from
    ``keytab`` through the process's environment (``KRB5_CLIENT_KTNAME``, a memory ccache), or
    anonymous when ``keytab`` is None."""
    sasl = None
    if keytab is not None:
        for key, value in stack.client_env(keytab).items():
            monkeypatch.setenv(key, value)
        sasl = {"mechanism": "GSSAPI", "service": "zookeeper", "principal": f"{principal}@{stack.realm}"}
    client = KazooClient(stack.zk_hosts, sasl_options=sasl, timeout=15)
    client.start(timeout=30)
    try:
        yield client
    finally:
        client.stop()
        client.close()


@pytest.fixture
def sa_peer(secure_hbase: SecureStack) -> Iterator[str]:
    """A DISABLED peer of SA (to SB) added through HBase's Admin, so SA has replication znodes."""
    peer = unique("sec")
    secure_hbase.sa.call("add_peer", peer=peer, cluster_key=secure_hbase.sb.cluster_key, state="DISABLED")
    yield peer
    secure_hbase.sa.call("remove_peer", peer=peer)


def acl_ids(client: KazooClient, path: str) -> set[str]:
    acls, _ = client.get_acls(path)
    return {f"{acl.id.scheme}:{acl.id.id}" for acl in acls}


def test_walship_reads_hbase_znodes_with_sasl(
    secure_hbase: SecureStack, sa_peer: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    parent = secure_hbase.sa.znode_parent
    with zk_as(secure_hbase, monkeypatch, secure_hbase.walship_keytab, "walship") as zk:
        assert zk.client_state == "CONNECTED"
        peers = zk.get_children(f"{parent}/replication/peers")
        assert sa_peer in peers
        data, _ = zk.get(f"{parent}/replication/peers/{sa_peer}")
        assert secure_hbase.sb.cluster_key.encode() in data
        # HBase's ACL: its own principal (creator) and every superuser, nobody else
        ids = acl_ids(zk, f"{parent}/replication/peers/{sa_peer}")
        assert ids == {"sasl:hbase", "sasl:walship", "sasl:walship-short"}
        assert "world:anyone" not in acl_ids(zk, f"{parent}/replication")
        # the cluster id is readable by anyone, writable by the sasl ids only
        hbaseid, _ = zk.get(f"{parent}/hbaseid")
        assert secure_hbase.sa.cluster_id.encode() in hbaseid
        assert {"sasl:hbase", "sasl:walship"} <= acl_ids(zk, f"{parent}/hbaseid")


def test_anonymous_and_intruder_are_refused(
    secure_hbase: SecureStack, sa_peer: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = f"{secure_hbase.sa.znode_parent}/replication/peers"
    with zk_as(secure_hbase, monkeypatch, None, None) as anonymous:
        with pytest.raises(NoAuthError):
            anonymous.get_children(path)
        with pytest.raises(NoAuthError):
            anonymous.get(f"{path}/{sa_peer}")
    # a principal the KDC knows that is no HBase superuser passes SASL but not the ACL
    with (
        zk_as(secure_hbase, monkeypatch, secure_hbase.intruder_keytab, "intruder") as intruder,
        pytest.raises(NoAuthError),
    ):
        intruder.get_children(path)


def test_harness_runs_admin_on_both_secure_clusters(secure_hbase: SecureStack) -> None:
    for hb in (secure_hbase.sa, secure_hbase.sb):
        assert hb.secure
        assert hb.ready["realm"] == secure_hbase.realm
        assert hb.service_host == secure_hbase.service_host
        assert hb.thrift2_http is not None
        table = unique("sect")
        regions = hb.call("create_table", table=table, families={"r": {"scope": 1}})
        assert len(regions) == 1
        assert regions[0]["server"] in hb.servers()
    assert len(secure_hbase.sa.servers()) == 2
    assert secure_hbase.sa.wal_root.startswith("webhdfs://")
    assert len(secure_hbase.sb.servers()) == 1
