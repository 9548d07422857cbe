"""Table administration on the minicluster's store: HBase's ``Admin`` rules for tables and
their column families, and the checks every read and write makes first.

Functions on a :class:`~walship_testing.minicluster.store.Store`. :class:`MiniCluster
<walship_testing.minicluster.cluster.MiniCluster>` holds its lock around them and keeps region
placement in step: it assigns a new table's region, forgets a deleted table's.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from walship.errors import BadRequestError, NoSuchFamilyError, TableDisabledError, TableExistsError, TableNotFoundError
from walship_testing.minicluster.meta import encoded_name
from walship_testing.minicluster.schema import check_family, check_table_name
from walship_testing.minicluster.store import Family, Region, Store

__all__ = [
    "add_family",
    "check_new_table",
    "check_scope",
    "create_table",
    "deletable_regions",
    "enabled_families",
    "modify_family",
    "set_enabled",
    "set_scope",
    "table_families",
]


def check_new_table(table: bytes, families: Sequence[Family]) -> None:
    """A table HBase would create: a legal name, at least one family, each valid, none twice.

    :raises BadRequestError: naming the table, or the family and the setting.
    """
    check_table_name(table)
    if not families:
        raise BadRequestError(f"table {table!r}: at least one column family is needed")
    names = [check_family(f).name for f in families]
    if len(set(names)) != len(names):
        raise BadRequestError(f"table {table!r}: a column family is named twice")


def create_table(
    store: Store,
    table: bytes,
    families: Sequence[Family],
    descriptor: dict[str, object] | None,
    split_keys: Sequence[bytes] = (),
) -> list[Region]:
    """Create a table (checked with :func:`check_new_table`) of one region, or of one more
    than ``split_keys``, all with the same region id, as HBase's ``createTable(desc,
    splitKeys)``; returns the regions in key order.

    :raises TableExistsError: the table exists already.
    :raises BadRequestError: an empty split key, or one given twice (HBase's ``checkSplitKeys``).
    """
    keys = sorted(split_keys)
    for prev, key in zip([None, *keys], keys, strict=False):
        if not key:
            raise BadRequestError(f"table {table!r}: empty split key must not be passed in the split keys")
        if key == prev:
            raise BadRequestError(f"table {table!r}: all split keys must be unique, found duplicate {key!r}")
    if store.table_enabled(table) is not None:
        raise TableExistsError(f"table {table.decode(errors='replace')} exists already")
    region_id = int(time.time() * 1000)
    bounds = zip([b"", *keys], [*keys, b""], strict=True)
    regions = [Region(encoded_name(table, start, region_id), table, start, end, region_id, 0) for start, end in bounds]
    store.create_table(table, families, regions)
    if descriptor:
        store.set_table_descriptor(table, descriptor)
    return regions


def table_families(store: Store, table: bytes) -> dict[bytes, Family]:
    """The table's families.

    :raises TableNotFoundError: no such table.
    """
    if store.table_enabled(table) is None:
        raise TableNotFoundError(f"table {table.decode(errors='replace')} does not exist")
    return store.families(table)


def enabled_families(store: Store, table: bytes) -> dict[bytes, Family]:
    """The families of a table that must be enabled (to be read or written).

    :raises TableNotFoundError: no such table.
    :raises TableDisabledError: the table is disabled.
    """
    families = table_families(store, table)
    if not store.table_enabled(table):
        raise TableDisabledError(f"table {table.decode(errors='replace')} is disabled")
    return families


def set_enabled(store: Store, table: bytes, enabled: bool, *, strict: bool) -> None:
    """Enable or disable a table; ``strict``: refuse to enable an enabled table or to disable
    a disabled one (:class:`BadRequestError`)."""
    table_families(store, table)
    if strict and store.table_enabled(table) == enabled:
        state = "enabled" if enabled else "disabled"
        raise BadRequestError(f"table {table.decode(errors='replace')} is already {state}")
    store.set_enabled(table, enabled)


def deletable_regions(store: Store, table: bytes) -> list[Region]:
    """The regions of a table that may be deleted.

    :raises TableDisabledError: the table is enabled: it must be disabled first.
    """
    table_families(store, table)
    if store.table_enabled(table):
        raise TableDisabledError(f"table {table.decode(errors='replace')} must be disabled before deleting it")
    return store.regions(table)


def check_scope(scope: int) -> None:
    """A replication scope HBase accepts: 0 (local) or 1 (global)."""
    if scope not in (0, 1):
        raise BadRequestError(f"replication scope must be 0 or 1, got {scope}")


def set_scope(store: Store, table: bytes, family: bytes, scope: int) -> None:
    """Set the replication scope (checked with :func:`check_scope`) of one family."""
    families = table_families(store, table)
    if family not in families:
        raise NoSuchFamilyError(f"table {table!r} has no column family {family!r}")
    store.set_scope(table, family, scope)


def add_family(store: Store, table: bytes, family: Family) -> None:
    """Add a family (checked with :func:`~walship_testing.minicluster.schema.check_family`).

    :raises BadRequestError: the family exists already.
    """
    if family.name in table_families(store, table):
        raise BadRequestError(f"table {table!r} has a column family {family.name!r} already")
    store.add_family(table, family)


def modify_family(store: Store, table: bytes, family: Family) -> None:
    """Replace a family's descriptor (checked with :func:`~walship_testing.minicluster.schema.check_family`).

    :raises NoSuchFamilyError: the table has no such family.
    """
    if family.name not in table_families(store, table):
        raise NoSuchFamilyError(f"table {table!r} has no column family {family.name!r}")
    store.modify_family(table, family)
