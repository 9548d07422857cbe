"""Znode data as HBase 2.x writes it: ``PBUF`` + a protobuf message.

HBase's own servers write every znode through ``RecoverableZooKeeper``, which puts a
metadata header before the data (``ZKMetadata.appendMetaData``: ``0xFF``, a 4-byte
big-endian length, that many bytes of writer id and salt); its readers take it off again
(``removeMetaData``), and so does every decoder here. Data without the header (older
HBase, HBase's tools, walship's own writes) is read as it is, as HBase does.

Every decoder takes the znode path so that malformed data is reported with it.
"""

from __future__ import annotations

import os
import re
import struct

from google.protobuf.message import DecodeError, Message

from walship.errors import ZkDataError
from walship.peer import PeerConfig
from walship.protos import ClusterId_pb2, HBase_pb2, Replication_pb2

__all__ = [
    "PB_MAGIC",
    "add_zk_metadata",
    "decode_cluster_id",
    "decode_peer",
    "decode_peer_state",
    "decode_position",
    "decode_server_version",
    "encode_cluster_id",
    "encode_peer",
    "encode_peer_state",
    "encode_position",
    "encode_server_info",
    "strip_pb_magic",
    "strip_zk_metadata",
]

PB_MAGIC = b"PBUF"
#: The first byte of the metadata header HBase's servers put before znode data.
ZK_METADATA_MAGIC = 0xFF
_ENABLED = Replication_pb2.ReplicationState.ENABLED
_DISABLED = Replication_pb2.ReplicationState.DISABLED


def add_zk_metadata(data: bytes, writer: str) -> bytes:
    """``data`` with the header HBase's servers put before it (``appendMetaData``): ``0xFF``,
    the length of what follows it, ``writer`` (e.g. ``master:16000``) and an 8-byte salt.
    Empty data stays empty, as in HBase."""
    if not data:
        return data
    ident = writer.encode() + os.urandom(8)
    return bytes([ZK_METADATA_MAGIC]) + struct.pack(">i", len(ident)) + ident + data


def strip_zk_metadata(data: bytes, path: str) -> bytes:
    """The data after HBase's ``RecoverableZooKeeper`` metadata header, if it has one.

    :raises ZkDataError: a header whose length runs past the data.
    """
    if not data or data[0] != ZK_METADATA_MAGIC:
        return data
    if len(data) < 5:
        raise ZkDataError(path, f"metadata header cut short (0xFF and {len(data) - 1} of 4 length bytes)")
    (id_length,) = struct.unpack_from(">i", data, 1)
    if id_length < 0 or 5 + id_length > len(data):
        raise ZkDataError(
            path, f"metadata header claims {id_length} bytes of writer id; the data holds {len(data) - 5}"
        )
    return data[5 + id_length :]


def strip_pb_magic(data: bytes, path: str, what: str) -> bytes:
    """The bytes after ``PBUF``; :class:`ZkDataError` if the magic is missing."""
    if not data.startswith(PB_MAGIC):
        raise ZkDataError(path, f"expected PBUF + {what}, got {data[:16]!r}")
    return data[len(PB_MAGIC) :]


def _parse(message: Message, data: bytes, path: str, what: str) -> None:
    data = strip_zk_metadata(data, path)
    try:
        message.ParseFromString(strip_pb_magic(data, path, what))
    except DecodeError as exc:
        raise ZkDataError(path, f"{what} does not parse: {exc}") from exc


# -- cluster id ------------------------------------------------------------------------------


def encode_cluster_id(cluster_id: str) -> bytes:
    return PB_MAGIC + ClusterId_pb2.ClusterId(cluster_id=cluster_id).SerializeToString()


def decode_cluster_id(data: bytes, path: str) -> str:
    msg = ClusterId_pb2.ClusterId()
    _parse(msg, data, path, "ClusterId")
    return msg.cluster_id


# -- peer state --------------------------------------------------------------------------------


def encode_peer_state(enabled: bool) -> bytes:
    """``50 42 55 46 08 00`` for ENABLED, ``... 08 01`` for DISABLED."""
    state = _ENABLED if enabled else _DISABLED
    return PB_MAGIC + Replication_pb2.ReplicationState(state=state).SerializeToString()


def decode_peer_state(data: bytes, path: str) -> bool:
    """True for ENABLED. HBase compares the bytes exactly; so do we, naming what we saw."""
    data = strip_zk_metadata(data, path)
    if data == encode_peer_state(True):
        return True
    if data == encode_peer_state(False):
        return False
    raise ZkDataError(path, f"not a ReplicationState (ENABLED or DISABLED): {data!r}")


# -- queue positions -----------------------------------------------------------------------------


def encode_position(position: int) -> bytes:
    """``PBUF`` + ReplicationHLogPosition, e.g. 254 -> ``50 42 55 46 08 FE 01``."""
    if position < 0:
        raise ValueError(f"a WAL position must be >= 0, got {position}")
    return PB_MAGIC + Replication_pb2.ReplicationHLogPosition(position=position).SerializeToString()


def decode_position(data: bytes, path: str) -> int:
    """A WAL position: empty data is 0; a raw 8-byte long (older HBase) is accepted.

    HBase falls back to 0 on data it cannot parse; walship refuses it, since restarting a
    queue from the beginning silently is a decision for an operator, not a parser.
    """
    data = strip_zk_metadata(data, path)
    if not data:
        return 0
    if data.startswith(PB_MAGIC):
        msg = Replication_pb2.ReplicationHLogPosition()
        _parse(msg, data, path, "ReplicationHLogPosition")
        if msg.position < 0:
            raise ZkDataError(path, f"negative WAL position {msg.position}")
        return msg.position
    if len(data) == 8:
        (value,) = struct.unpack(">q", data)
        if value < 0:
            raise ZkDataError(path, f"negative WAL position {value}")
        return int(value)
    raise ZkDataError(path, f"not a WAL position (PBUF + ReplicationHLogPosition or 8-byte long): {data[:16]!r}")


# -- live region servers ------------------------------------------------------------------------

_VERSION = re.compile(r"(\d+)\.(\d+)")


def encode_server_info(version: str | None, info_port: int = -1) -> bytes:
    """A live region server's znode data as HBase writes it: ``PBUF`` + RegionServerInfo
    (its info port, and the version it runs when ``version`` is given)."""
    info = HBase_pb2.RegionServerInfo(infoPort=info_port)
    if version is not None:
        match = _VERSION.match(version)
        major, minor = (int(match[1]), int(match[2])) if match else (0, 0)
        blank = dict.fromkeys(("url", "revision", "user", "date", "src_checksum"), "")
        info.version_info.CopyFrom(
            HBase_pb2.VersionInfo(version=version, version_major=major, version_minor=minor, **blank)
        )
    return PB_MAGIC + info.SerializeToString()


def decode_server_version(data: bytes, path: str) -> tuple[int, int] | None:
    """The ``(major, minor)`` HBase version a live region server's znode announces: ``(0, 0)``
    for a RegionServerInfo without one (an HBase older than the field), ``None`` for empty data
    (a server with no replication source of its own: the embedded cluster).

    :raises ZkDataError: the data is not PBUF + RegionServerInfo, or its version has no
        ``major.minor``.
    """
    data = strip_zk_metadata(data, path)
    if not data:
        return None
    info = HBase_pb2.RegionServerInfo()
    _parse(info, data, path, "RegionServerInfo")
    if not info.HasField("version_info"):
        return 0, 0
    version = info.version_info
    if version.HasField("version_major"):
        return version.version_major, version.version_minor
    match = _VERSION.match(version.version)
    if match is None:
        raise ZkDataError(path, f"region server version {version.version!r} has no major.minor")
    return int(match[1]), int(match[2])


# -- peers ---------------------------------------------------------------------------------------


def encode_peer(config: PeerConfig) -> bytes:
    """A peer znode's data: ``PBUF`` + ReplicationPeer."""
    return PB_MAGIC + config.to_proto().SerializeToString()


def decode_peer(data: bytes, path: str) -> Replication_pb2.ReplicationPeer:
    """The ReplicationPeer message of a peer znode; legacy data is a bare cluster key."""
    msg = Replication_pb2.ReplicationPeer()
    data = strip_zk_metadata(data, path)
    if data.startswith(PB_MAGIC):
        _parse(msg, data, path, "ReplicationPeer")
        return msg
    if not data:
        raise ZkDataError(path, "empty peer data")
    try:
        msg.clusterkey = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ZkDataError(
            path, f"peer data is neither PBUF + ReplicationPeer nor a cluster key: {data[:16]!r}"
        ) from exc
    return msg
