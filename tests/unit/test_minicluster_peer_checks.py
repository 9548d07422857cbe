"""The pure parts of the minicluster master's HBase checks: cluster keys as
``ZKConfig.transformClusterKey`` reads them, the replicate-all rules, ``needToReplicate`` and
``VersionInfoUtil.hasMinimumVersion``."""

from __future__ import annotations

import pytest

from walship.errors import MasterCallError
from walship.peer import PeerConfig
from walship.protos import HBase_pb2, Replication_pb2
from walship_testing.minicluster.masterservice import has_minimum_version
from walship_testing.minicluster.peerchecks import check_peer_config
from walship_testing.minicluster.serialpeers import need_to_replicate


def not_own(key: str) -> bool:
    return False


@pytest.mark.parametrize("key", ["zk:2181:/hbase", "a,b:2181:/x/y", "a:2181,b:2182:2181:/hbase"])
def test_cluster_keys_hbase_takes(key: str) -> None:
    check_peer_config(Replication_pb2.ReplicationPeer(clusterkey=key, replicate_all=True), not_own)


@pytest.mark.parametrize(
    ("key", "exception_class", "message", "cause"),
    [
        ("zk:2181", "org.apache.hadoop.hbase.DoNotRetryIOException", "Invalid cluster key: zk:2181",
         "java.io.IOException: Cluster key passed zk:2181 is invalid, the format should be:"
         "hbase.zookeeper.quorum:hbase.zookeeper.property.clientPort:zookeeper.znode.parent"),
        ("zk:2181:/", "org.apache.hadoop.hbase.DoNotRetryIOException", "Invalid cluster key: zk:2181:/", None),
        ("zk:2181:/hbase/", "org.apache.hadoop.hbase.DoNotRetryIOException", "Invalid cluster key: zk:2181:/hbase/",
         None),
        ("zk:port:/hbase", "java.io.IOException", 'java.lang.NumberFormatException: For input string: "port"',
         'java.lang.NumberFormatException: For input string: "port"'),
    ],
)  # fmt: skip
def test_cluster_keys_hbase_refuses(key: str, exception_class: str, message: str, cause: str | None) -> None:
    with pytest.raises(MasterCallError) as caught:
        check_peer_config(Replication_pb2.ReplicationPeer(clusterkey=key), not_own)
    assert (caught.value.exception_class, caught.value.message) == (exception_class, message)
    if cause is not None:
        assert caught.value.stack_trace.splitlines()[1] == f"Caused by: {cause}"


def test_a_message_without_replicate_all_replicates_all_tables_as_hbase_reads_it() -> None:
    pb = PeerConfig("1", "zk:2181:/hbase", table_cfs={"t": None}).to_proto()
    check_peer_config(pb, not_own)
    pb.ClearField("replicate_all")
    with pytest.raises(MasterCallError, match="Need clean namespaces or table-cfs config firstly"):
        check_peer_config(pb, not_own)


def test_exclude_lists_conflicting_with_exclude_namespaces_are_refused() -> None:
    pb = PeerConfig("1", "zk:2181:/hbase", exclude_table_cfs={"ns:t": None}).to_proto()
    pb.exclude_namespaces.append(b"ns")
    with pytest.raises(MasterCallError) as caught:
        check_peer_config(pb, not_own)
    assert caught.value.message == "Table-cfs ns:t is conflict with namespaces ns in peer config"


@pytest.mark.parametrize(
    ("peer", "table", "takes"),
    [
        (PeerConfig("1", "zk:2181:/h"), b"t", True),
        (PeerConfig("1", "zk:2181:/h", exclude_namespaces=frozenset({"ns"})), b"ns:t", False),
        (PeerConfig("1", "zk:2181:/h", exclude_table_cfs={"t": None}), b"t", False),
        (PeerConfig("1", "zk:2181:/h", exclude_table_cfs={"t": ("f",)}), b"t", True),  # some families still go
        (PeerConfig("1", "zk:2181:/h", table_cfs={"t": ("f",)}), b"t", True),
        (PeerConfig("1", "zk:2181:/h", table_cfs={"t": None}), b"u", False),
        (PeerConfig("1", "zk:2181:/h", namespaces=frozenset({"ns"})), b"ns:u", True),
        (PeerConfig("1", "zk:2181:/h", namespaces=frozenset({"ns"})), b"u", False),
    ],
)
def test_need_to_replicate_is_hbases(peer: PeerConfig, table: bytes, takes: bool) -> None:
    assert need_to_replicate(peer, table) is takes


def _version(text: str, major: int | None = None, minor: int | None = None) -> HBase_pb2.VersionInfo:
    info = HBase_pb2.VersionInfo(version=text, url="", revision="", user="", date="", src_checksum="")
    if major is not None and minor is not None:
        info.version_major, info.version_minor = major, minor
    return info


@pytest.mark.parametrize(
    ("info", "modern"),
    [
        (None, False),
        (_version("2.6.1"), True),
        (_version("2.0.0-alpha"), True),
        (_version("1.4.14"), False),
        (_version("3.0.0"), True),
        (_version("x.y"), False),
        (_version("1.0", 2, 1), True),  # the numbers win over the text
    ],
)
def test_a_client_has_procedure_support_from_hbase_2_0(info: HBase_pb2.VersionInfo | None, modern: bool) -> None:
    assert has_minimum_version(info, 2, 0) is modern
