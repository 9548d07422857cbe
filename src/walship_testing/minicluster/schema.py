"""Table and column family rules the minicluster shares between its Thrift services.

Names follow HBase's ``TableName`` and ``ColumnFamilyDescriptorBuilder`` checks. A family's
descriptor (``Family.descriptor``) holds everything besides its versions and scope, under
the keys of :data:`FAMILY_DEFAULTS`: enumerations by their HBase names (``"ROW"``,
``"NONE"``), attributes and configuration as text (attribute bytes as latin-1). Thrift1
fills only some of them; a missing key means HBase's default.
"""

from __future__ import annotations

from collections.abc import Mapping

from walship.errors import BadRequestError
from walship_testing.minicluster.store import Family

__all__ = [
    "DEFAULT_MAX_VERSIONS",
    "FAMILY_DEFAULTS",
    "HBASE_FOREVER",
    "check_family",
    "check_table_name",
    "family_setting",
]

#: HBase's ``HConstants.FOREVER``: a time to live of "never expires" (seconds).
HBASE_FOREVER = 2**31 - 1
#: The defaults of HBase 2.x's ``ColumnFamilyDescriptorBuilder`` (beside max versions 1 and
#: scope 0, which :class:`Family` holds itself).
FAMILY_DEFAULTS: Mapping[str, object] = {
    "blockSize": 64 * 1024,
    "bloomFilterType": "ROW",
    "compression": "NONE",
    "dfsReplication": 0,
    "dataBlockEncoding": "NONE",
    "keepDeletedCells": "FALSE",
    "minVersions": 0,
    "timeToLive": HBASE_FOREVER,
    "blockCacheEnabled": True,
    "cacheBloomsOnWrite": False,
    "cacheDataOnWrite": False,
    "cacheIndexesOnWrite": False,
    "compressTags": True,
    "evictBlocksOnClose": False,
    "inMemory": False,
    "attributes": {},
    "configuration": {},
}
#: HBase's default number of versions a family keeps (``ColumnFamilyDescriptorBuilder``).
DEFAULT_MAX_VERSIONS = 1

_TABLE_PART = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-")


def check_table_name(name: bytes) -> bytes:
    """``[ns:]qualifier`` with HBase's characters; :class:`BadRequestError` otherwise."""
    parts = name.split(b":")
    if len(parts) > 2 or not all(parts) or any(set(p) - _TABLE_PART for p in parts) or parts[-1].startswith(b"."):
        raise BadRequestError(f"invalid table name {name!r}")
    if name.startswith(b"hbase:"):
        raise BadRequestError(f"table {name!r}: the hbase namespace is reserved")
    return name


def family_setting(family: Family, key: str) -> object:
    """One descriptor setting of ``family``: its own value, else HBase's default."""
    value = family.descriptor.get(key)
    return FAMILY_DEFAULTS[key] if value is None else value


def check_family(family: Family) -> Family:
    """A family HBase would create: a legal name, versions >= 1 (and >= its min versions),
    scope 0 or 1.

    :raises BadRequestError: naming the family and the setting.
    """
    name = family.name
    if not name or b":" in name or name.startswith(b"."):
        raise BadRequestError(f"invalid column family name {name!r}")
    if family.max_versions < 1:
        raise BadRequestError(f"family {name!r}: maxVersions must be >= 1, got {family.max_versions}")
    if family.scope not in (0, 1):
        raise BadRequestError(f"family {name!r}: replication scope must be 0 or 1, got {family.scope}")
    min_versions = family.descriptor.get("minVersions")
    if isinstance(min_versions, int) and not 0 <= min_versions <= family.max_versions:
        raise BadRequestError(
            f"family {name!r}: minVersions must be between 0 and maxVersions ({family.max_versions}), "
            f"got {min_versions}"
        )
    return family
