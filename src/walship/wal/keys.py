"""A WAL entry's key from the raw twin of HBase's ``WALKey`` message, and the parts of it both
decoders (and the compressed reader) build the same way: origin cluster ids, replication
scopes and extended attributes. Nested messages are parsed once per distinct bytes (caches),
as every edit of a region carries the same ones."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from google.protobuf.message import DecodeError

from walship.protos import HBase_pb2, WAL_pb2
from walship.wal.model import EMPTY_SCOPES, WalKey

__all__ = ["attribute", "cluster_ids_of", "cluster_uuid", "key_from_raw", "scopes_from_raw"]

_tuple_new = tuple.__new__
#: Distinct nested messages kept parsed at most (each cache starts over when full).
_CACHE_MAX = 4096
_SCOPES_CACHE: dict[Any, Mapping[bytes, int]] = {}
_UUID_CACHE: dict[bytes, uuid.UUID] = {}


def cluster_ids_of(pb: WAL_pb2.WALKeyRaw) -> tuple[uuid.UUID, ...]:
    """The clusters an edit has been through, oldest first (a 0.94-era key's single origin id
    read as ``WALKeyImpl`` does)."""
    cids = pb.cluster_ids
    if cids:
        return tuple(map(cluster_uuid, cids))
    if pb.cluster_id:
        return (cluster_uuid(pb.cluster_id),)
    return ()


def key_from_raw(pb: WAL_pb2.WALKeyRaw) -> WalKey:
    """Build a :class:`WalKey` from the raw twin of ``WALKey``; nested messages come from
    caches keyed by their bytes (parsed once each, with their real types and checks)."""
    scopes = pb.scopes
    attrs = pb.extended_attributes
    return _tuple_new(
        WalKey,
        (
            pb.encoded_region_name,
            pb.table_name,
            pb.log_sequence_number,
            pb.write_time,
            cluster_ids_of(pb),
            scopes_from_raw(scopes) if scopes else EMPTY_SCOPES,
            pb.nonceGroup,
            pb.nonce,
            pb.orig_sequence_number,
            tuple(attribute(a) for a in attrs) if attrs else (),
        ),
    )


def cluster_uuid(raw: bytes) -> uuid.UUID:
    """A serialized ``UUID`` message (two signed 64-bit halves) as a :class:`uuid.UUID`."""
    found = _UUID_CACHE.get(raw)
    if found is None:
        u = HBase_pb2.UUID.FromString(raw)
        found = uuid.UUID(int=(u.most_sig_bits << 64) | u.least_sig_bits)
        if len(_UUID_CACHE) >= _CACHE_MAX:
            _UUID_CACHE.clear()
        _UUID_CACHE[raw] = found
    return found


def attribute(raw: bytes) -> tuple[str, bytes]:
    """A serialized extended attribute as (name, value).

    :raises DecodeError: a name that is not UTF-8.
    """
    a = WAL_pb2.Attribute.FromString(raw)
    key: str | bytes = a.key
    if isinstance(key, bytes):  # protobuf hands a proto2 string that is not UTF-8 back as bytes
        raise DecodeError(f"extended attribute name {key!r} is not UTF-8")
    return key, a.value


def scopes_from_raw(scopes: Any) -> Mapping[bytes, int]:
    """The scopes of a key as a shared read-only mapping, cached by their bytes: every edit
    of a region carries the same scopes, and building a dict per entry was the largest single
    cost of decoding a key."""
    sig: Any = scopes[0] if len(scopes) == 1 else tuple(scopes)
    found = _SCOPES_CACHE.get(sig)
    if found is None:
        parsed = [WAL_pb2.FamilyScope.FromString(raw) for raw in scopes]
        if len(_SCOPES_CACHE) >= _CACHE_MAX:
            _SCOPES_CACHE.clear()
        found = _SCOPES_CACHE[sig] = MappingProxyType({s.family: s.scope_type for s in parsed})
    return found
