"""Znode encodings checked against bytes built from HBase's field numbers."""

from __future__ import annotations

import re
import struct

import pytest

from walship.errors import InvalidPeerConfigError, InvalidQueueIdError, ZkDataError
from walship.peer import PeerConfig, format_table_cfs, parse_cluster_key, parse_table_cfs, validate_peer_id
from walship.zk.cluster import MASTER, REGION_SERVERS, WALSHIP, who_claims
from walship.zk.encoding import (
    add_zk_metadata,
    decode_cluster_id,
    decode_peer,
    decode_peer_state,
    decode_position,
    decode_server_version,
    encode_cluster_id,
    encode_peer,
    encode_peer_state,
    encode_position,
    encode_server_info,
    strip_zk_metadata,
)
from walship.zk.queues import QueueId


def ld(tag: int, payload: bytes) -> bytes:
    """A length-delimited protobuf field (payload < 128 bytes)."""
    assert len(payload) < 128
    return bytes([tag, len(payload)]) + payload


def test_peer_state_bytes() -> None:
    assert encode_peer_state(True) == bytes.fromhex("504255460800")
    assert encode_peer_state(False) == bytes.fromhex("504255460801")
    assert decode_peer_state(bytes.fromhex("504255460800"), "/p") is True
    assert decode_peer_state(bytes.fromhex("504255460801"), "/p") is False
    with pytest.raises(ZkDataError, match="/hbase/replication/peers/1/peer-state"):
        decode_peer_state(b"ENABLED", "/hbase/replication/peers/1/peer-state")


def test_position_bytes() -> None:
    assert encode_position(254) == bytes.fromhex("5042554608FE01")
    assert encode_position(0) == bytes.fromhex("504255460800")
    assert decode_position(bytes.fromhex("5042554608FE01"), "/w") == 254
    assert decode_position(b"", "/w") == 0
    assert decode_position(struct.pack(">q", 77), "/w") == 77  # legacy raw long
    with pytest.raises(ZkDataError, match="/rs/x/1/w: not a WAL position"):
        decode_position(b"12", "/rs/x/1/w")
    with pytest.raises(ZkDataError, match="does not parse"):
        decode_position(b"PBUF\x08", "/w")
    with pytest.raises(ValueError, match=">= 0"):
        encode_position(-1)


def test_cluster_id_bytes() -> None:
    cid = "7f3c0b7e-1f52-4b8e-9c55-2f8a3d1e6b90"
    assert encode_cluster_id(cid) == b"PBUF" + ld(0x0A, cid.encode())
    assert decode_cluster_id(b"PBUF" + ld(0x0A, cid.encode()), "/hbase/hbaseid") == cid
    with pytest.raises(ZkDataError, match="/hbase/hbaseid"):
        decode_cluster_id(cid.encode(), "/hbase/hbaseid")


def test_peer_bytes_match_hbase_field_numbers() -> None:
    config = PeerConfig(
        "1",
        "zk1,zk2:2181:/hbase",
        table_cfs={"ns:t": ("f",)},
        configuration={"a": "b"},
    )
    table = ld(0x0A, ld(0x0A, b"ns") + ld(0x12, b"t")) + ld(0x12, b"f")
    expected = (
        b"PBUF"
        + ld(0x0A, b"zk1,zk2:2181:/hbase")  # 1 clusterkey
        + ld(0x22, ld(0x0A, b"a") + ld(0x12, b"b"))  # 4 configuration
        + ld(0x2A, table)  # 5 table_cfs
        + bytes([0x38, 0x00])  # 7 bandwidth
        + bytes([0x40, 0x00])  # 8 replicate_all
        + bytes([0x58, 0x00])  # 11 serial
    )
    assert encode_peer(config) == expected
    back = PeerConfig.from_proto("1", decode_peer(expected, "/p"), enabled=True)
    assert back == config


def test_legacy_peer_data_is_a_cluster_key() -> None:
    pb = decode_peer(b"zk:2181:/hbase", "/p")
    assert pb.clusterkey == "zk:2181:/hbase"
    with pytest.raises(ZkDataError, match="/p: ReplicationPeer does not parse"):
        decode_peer(b"PBUF\xff\xff", "/p")


@pytest.mark.parametrize("bad", ["", "a-b", "x/y", "..", "a b"])
def test_peer_id_validation(bad: str) -> None:
    with pytest.raises(InvalidPeerConfigError, match="invalid peer id"):
        validate_peer_id(bad)


@pytest.mark.parametrize(
    ("key", "hosts", "port", "parent"),
    [
        ("zk1,zk2,zk3:2181:/hbase", ["zk1", "zk2", "zk3"], 2181, "/hbase"),
        ("127.0.0.1:2182:/b/c", ["127.0.0.1"], 2182, "/b/c"),
    ],
)
def test_cluster_key(key: str, hosts: list[str], port: int, parent: str) -> None:
    assert parse_cluster_key(key) == (hosts, port, parent)


@pytest.mark.parametrize("bad", ["zk:2181", "zk:2181:hbase", ":2181:/hbase", "zk:port:/hbase", "zk:99999:/h"])
def test_bad_cluster_key(bad: str) -> None:
    with pytest.raises(InvalidPeerConfigError, match="invalid cluster key"):
        parse_cluster_key(bad)


def test_table_cfs_spec() -> None:
    assert parse_table_cfs("t1:f1,f2;ns.t2;ns:t3:a") == {"t1": ("f1", "f2"), "ns:t2": None, "ns:t3": ("a",)}
    assert parse_table_cfs(" t1 ; default.t4:x ") == {"t1": None, "t4": ("x",)}
    assert format_table_cfs({"t1": ("f1", "f2"), "ns:t2": None}) == "default.t1:f1,f2;ns.t2"
    assert parse_table_cfs(format_table_cfs({"t1": ("f1", "f2"), "ns:t2": None})) == {"t1": ("f1", "f2"), "ns:t2": None}
    for bad in ["", ";", "a:b:c:d", "t1;t1", "bad name:f"]:
        with pytest.raises(InvalidPeerConfigError):
            parse_table_cfs(bad)


def test_peer_config_rules() -> None:
    assert PeerConfig("1", "zk:2181:/h").replicate_all is True
    assert PeerConfig("1", "zk:2181:/h", namespaces=frozenset({"ns"})).replicate_all is False
    with pytest.raises(InvalidPeerConfigError, match="replicate_all"):
        PeerConfig("1", "zk:2181:/h", table_cfs={"t": None}, replicate_all=True)
    with pytest.raises(InvalidPeerConfigError, match="exclude"):
        PeerConfig("1", "zk:2181:/h", table_cfs={"t": None}, exclude_namespaces=frozenset({"x"}))
    with pytest.raises(InvalidPeerConfigError, match="empty configuration key"):
        PeerConfig("7", "zk:2181:/h", configuration={" ": "x"})


def test_sink_settings_are_checked_by_the_sinks() -> None:
    """Sink settings leave the ZooKeeper layer: the sink registry checks them."""
    from walship.sinks.base import thrift_servers
    from walship.sinks.registry import validate_sink_config

    with pytest.raises(InvalidPeerConfigError, match="walship.sink.thrift of peer 7"):
        validate_sink_config(PeerConfig("7", "zk:2181:/h", configuration={"walship.sink.thrift": "nohostport"}))
    with pytest.raises(InvalidPeerConfigError, match="walship.incompatible must be one of fail, skip, deadletter"):
        validate_sink_config(PeerConfig("7", "zk:2181:/h", configuration={"walship.incompatible": "drop"}))
    with pytest.raises(InvalidPeerConfigError, match="no sink 'kafka'"):
        validate_sink_config(PeerConfig("7", "zk:2181:/h", configuration={"walship.sink.protocol": "kafka"}))
    ok = PeerConfig("7", "zk:2181:/h", configuration={"walship.sink.thrift": "a:9090,b.example:9091"})
    validate_sink_config(ok)
    assert thrift_servers(ok) == [("a", 9090), ("b.example", 9091)]


@pytest.mark.parametrize("bad", ["0", "65", "four", "2.5", "-1"])
def test_a_sink_s_connections_are_a_whole_number_from_1_to_64(bad: str) -> None:
    from walship.replicate.peercheck import validate_peer
    from walship.thrift.conn import connections_of

    servers = {"walship.sink.protocol": "thrift2", "walship.sink.thrift2": "b:9091"}
    with pytest.raises(InvalidPeerConfigError, match=f"peer 7: walship.sink.thrift.connections must be a whole number from 1 to 64, got '{bad}'"):  # fmt: skip
        validate_peer(PeerConfig("7", "zk:2181:/h", configuration={**servers, "walship.sink.thrift.connections": bad}))
    assert connections_of(PeerConfig("7", "zk:2181:/h", configuration=servers), 3) == 3  # one a server
    one = PeerConfig("7", "zk:2181:/h", configuration={**servers, "walship.sink.thrift.connections": " 1"})
    validate_peer(one)
    assert connections_of(one, 3) == 1


@pytest.mark.parametrize(
    ("text", "peer", "dead"),
    [
        ("2", "2", ()),
        (
            "2-ip-10-46-221-101.ec2.internal,52170,1364333181125",
            "2",
            ("ip-10-46-221-101.ec2.internal,52170,1364333181125",),
        ),
        (
            "2-ip-10-46-221-101.ec2.internal,52170,1364333181125-ip-10-46-221-102.ec2.internal,52170,1364333181126",
            "2",
            ("ip-10-46-221-101.ec2.internal,52170,1364333181125", "ip-10-46-221-102.ec2.internal,52170,1364333181126"),
        ),
        ("peer_1-a,1,2-b-c,3,4-d,5,6", "peer_1", ("a,1,2", "b-c,3,4", "d,5,6")),
    ],
)
def test_queue_id_parser(text: str, peer: str, dead: tuple[str, ...]) -> None:
    qid = QueueId.parse(text)
    assert (qid.peer_id, qid.dead_servers, qid.recovered) == (peer, dead, bool(dead))
    assert str(qid) == text


@pytest.mark.parametrize("bad", ["", "-a,1,2", "1-notaserver", "1-a,1,2-b,c"])
def test_queue_id_parser_refuses(bad: str) -> None:
    with pytest.raises(InvalidQueueIdError):
        QueueId.parse(bad)


def test_claimed_from_chains() -> None:
    q = QueueId.parse("1").claimed_from("a-1,1,1").claimed_from("b,2,2")
    assert str(q) == "1-a-1,1,1-b,2,2"
    assert QueueId.parse(str(q)) == q


#: The metadata header HBase 2.6's master put before a peer-state it wrote (RecoverableZooKeeper:
#: 0xFF, a 4-byte length, "master:41207" and an 8-byte salt), as read from a real cluster's znode.
HBASE_HEADER = b"\xff\x00\x00\x00\x14master:41207\xf3\xfa\x94\xf5\xad\x01E5"


def test_hbase_servers_metadata_header_is_taken_off_every_znode() -> None:
    path = "/hbase/replication/peers/1/peer-state"
    assert decode_peer_state(HBASE_HEADER + encode_peer_state(False), path) is False
    assert decode_peer_state(HBASE_HEADER + encode_peer_state(True), path) is True
    assert decode_position(HBASE_HEADER + encode_position(254), path) == 254
    assert decode_cluster_id(HBASE_HEADER + encode_cluster_id("c0ffee"), path) == "c0ffee"
    peer = PeerConfig("1", "zk1:2181:/hbase-b", configuration={"walship.managed": "true"})
    assert decode_peer(HBASE_HEADER + encode_peer(peer), path).clusterkey == "zk1:2181:/hbase-b"
    assert strip_zk_metadata(b"PBUF\x08\x00", path) == b"PBUF\x08\x00"  # no header: as it is
    assert strip_zk_metadata(b"", path) == b""


@pytest.mark.parametrize("bad", [b"\xff\x00\x00", b"\xff\x00\x00\x00\x30short", b"\xff\xff\xff\xff\xffPBUF"])
def test_a_metadata_header_longer_than_its_data_is_refused_naming_the_znode(bad: bytes) -> None:
    with pytest.raises(ZkDataError, match="/hbase/replication/peers/1"):
        decode_peer_state(bad, "/hbase/replication/peers/1")


def test_the_header_walship_writes_is_the_one_hbase_writes() -> None:
    data = encode_cluster_id("c0ffee")
    framed = add_zk_metadata(data, "master:41207")
    assert framed[0] == 0xFF and framed[1:5] == (len("master:41207") + 8).to_bytes(4, "big")
    assert framed[5:16] == b"master:41207"[:11] and framed.endswith(data)
    assert len(framed) == len(HBASE_HEADER) + len(data)  # the same layout as the real one
    assert strip_zk_metadata(framed, "/hbase/hbaseid") == data
    assert add_zk_metadata(b"", "master:1") == b""


def _region_server_info(version: str | None, *, major_minor: tuple[int, int] | None = None) -> bytes:
    """PBUF + RegionServerInfo built by hand from HBase.proto's field numbers (infoPort = 1,
    version_info = 2; VersionInfo: version = 1 ... src_checksum = 6, version_major = 7,
    version_minor = 8), the info port 16030."""
    from hbase_bytes import _bytes, _uint

    body = _uint(1, 16030)
    if version is not None:
        info = _bytes(1, version) + b"".join(_bytes(n, "") for n in range(2, 7))
        if major_minor is not None:
            info += _uint(7, major_minor[0]) + _uint(8, major_minor[1])
        body += _bytes(2, info)
    return b"PBUF" + body


@pytest.mark.parametrize(
    ("data", "version"),
    [
        (b"", None),  # the embedded cluster, and walship's own register_server
        (_region_server_info(None), (0, 0)),  # an HBase older than the version field
        (_region_server_info("2.6.1-hadoop3", major_minor=(2, 6)), (2, 6)),
        (_region_server_info("2.4.18"), (2, 4)),  # no version_major/minor: read from the string
        (add_zk_metadata(_region_server_info("2.5.10", major_minor=(2, 5)), "regionserver:16020"), (2, 5)),
    ],
    ids=["empty", "no-version", "2.6.1", "2.4.18-string-only", "2.5.10-behind-metadata"],
)
def test_a_live_servers_znode_announces_its_version(data: bytes, version: tuple[int, int] | None) -> None:
    assert decode_server_version(data, "/hbase/rs/h,16020,1") == version


def test_walship_announces_a_version_as_hbase_does() -> None:
    assert encode_server_info("2.6.1-hadoop3", 16030) == _region_server_info("2.6.1-hadoop3", major_minor=(2, 6))
    assert encode_server_info(None, 16030) == _region_server_info(None)


@pytest.mark.parametrize(
    ("data", "why"),
    [
        (b"PBUF\x0a", "RegionServerInfo does not parse"),
        (b"\x00\x01garbage", "expected PBUF + RegionServerInfo"),
        (_region_server_info("trunk"), "region server version 'trunk' has no major.minor"),
    ],
    ids=["truncated", "no-magic", "no-major-minor"],
)
def test_a_live_servers_znode_that_is_not_a_region_server_info_is_named(data: bytes, why: str) -> None:
    with pytest.raises(ZkDataError, match=re.escape(why)) as raised:
        decode_server_version(data, "/hbase/rs/h,16020,1")
    assert "/hbase/rs/h,16020,1" in str(raised.value)


@pytest.mark.parametrize(
    ("versions", "claimer"),
    [
        ([], WALSHIP),
        ([None, None], WALSHIP),  # the embedded cluster: no replication source of its own
        ([(2, 4), (0, 0)], REGION_SERVERS),  # they race for the queues; walship claims its own peers'
        ([(2, 5)], MASTER),  # HBASE-26029: the master's ServerCrashProcedure claims
        ([(2, 4), (2, 6)], MASTER),  # an upgrade under way: the master went first
        ([(3, 0), None], MASTER),
    ],
)
def test_who_claims_a_dead_servers_queues(versions: list[tuple[int, int] | None], claimer: str) -> None:
    assert who_claims(versions) == claimer
