"""The ``_cs.id`` mutation attribute: the clusters that have consumed an edit.

HBase's ``Mutation.setClusterIds`` encoding: an int32 count, then each UUID's most and least
significant 64 bits, big-endian.
"""

from __future__ import annotations

import functools
import struct
import uuid
from collections.abc import Sequence

from walship.errors import BadRequestError

__all__ = ["CLUSTER_ID_ATTRIBUTE", "decode_cluster_ids", "encode_cluster_ids"]

CLUSTER_ID_ATTRIBUTE = b"_cs.id"


def encode_cluster_ids(ids: Sequence[uuid.UUID]) -> bytes:
    return struct.pack(">i", len(ids)) + b"".join(u.int.to_bytes(16, "big") for u in ids)


@functools.lru_cache(maxsize=256)
def decode_cluster_ids(data: bytes) -> tuple[uuid.UUID, ...]:
    """The UUIDs, decoded once for each distinct value (every mutation of a batch carries the
    same few).

    :raises BadRequestError: not a count followed by that many UUIDs."""
    if len(data) < 4:
        raise BadRequestError(f"attribute _cs.id: {len(data)} bytes, expected a 4-byte count")
    (count,) = struct.unpack_from(">i", data)
    if count < 0 or len(data) != 4 + 16 * count:
        raise BadRequestError(f"attribute _cs.id: count {count} does not match its {len(data)} bytes")
    return tuple(uuid.UUID(bytes=data[4 + 16 * i : 20 + 16 * i]) for i in range(count))
