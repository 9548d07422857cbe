"""A minicluster table as HBase 2.6's master describes it over its RPC, and what a
``ModifyTable`` changes of it.

HBase's ``ProtobufUtil.toTableSchema`` gives a ``TableSchema``: the table's name, its values
(``TableDescriptor.getValues()``: READONLY, DURABILITY, the ``IS_META`` and store file tracker
values the master gives every table, ...) as ``BytesBytesPair`` attributes, and each column
family (by name) with its own values (``VERSIONS``, ``REPLICATION_SCOPE``, ``BLOCKSIZE``, ...)
and configuration. They are the values HBase's Thrift2 server answers in a descriptor's
``attributes`` too, so both are built from the same conversion
(:func:`~walship_testing.minicluster.thrift2_convert.table_descriptor_to_thrift`). HBase keeps
values in hash maps, in no order a client relies on; here they are sorted by key.

A ``ModifyTable`` replaces the table's own values with the schema's (a value left out is
removed). The values the master gives every table stay in the minicluster's answers whatever
the schema holds (HBase 2.6 keeps ``IS_META`` but drops its store file tracker value when a
schema leaves it out; walship's Admin always sends it back). Its column families must be the
table's as they are: the minicluster's master changes no family through it (the Thrift
servers' ``modifyColumnFamily`` and ``addColumnFamily`` do), and says so rather than leaving a
change undone.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from walship.errors import MasterCallError
from walship.protos import HBase_pb2
from walship.thrift.hbase2 import hbase2
from walship_testing.minicluster.peerchecks import DNRIOE
from walship_testing.minicluster.store import Family
from walship_testing.minicluster.thrift2_convert import family_to_thrift, table_descriptor_to_thrift

__all__ = [
    "DURABILITY",
    "modified_descriptor",
    "proto_table_name",
    "table_bytes",
    "table_schema",
]

#: The table value ``TableDescriptorBuilder.setDurability`` sets (the Durability's name), kept
#: as the minicluster's descriptor's ``durability`` (Thrift2's ``TDurability``, whose names are
#: HBase's).
DURABILITY = b"DURABILITY"

FamilyValues = dict[bytes, tuple[dict[bytes, bytes], dict[str, str]]]


def proto_table_name(name: bytes) -> HBase_pb2.TableName:
    """A table's name as HBase's ``ProtobufUtil.toProtoTableName`` gives it (the namespace
    always set, ``default`` for a table in none)."""
    ns, sep, qualifier = name.rpartition(b":")
    return HBase_pb2.TableName(namespace=ns if sep else b"default", qualifier=qualifier)


def table_bytes(name: HBase_pb2.TableName) -> bytes:
    """A ``TableName`` as the minicluster names tables (and HBase's ``getNameAsString``):
    ``qualifier`` in the default namespace, ``namespace:qualifier`` otherwise."""
    ns = name.namespace
    return name.qualifier if ns in (b"", b"default") else ns + b":" + name.qualifier


def _family_values(families: Iterable[Family]) -> FamilyValues:
    """Each family's values and configuration, as HBase's ``ColumnFamilyDescriptor`` holds them."""
    columns = [family_to_thrift(f) for f in families]
    return {c.name: (dict(c.attributes or {}), dict(c.configuration or {})) for c in columns}


def table_schema(name: bytes, families: Iterable[Family], descriptor: Mapping[str, object]) -> HBase_pb2.TableSchema:
    """``ProtobufUtil.toTableSchema`` of the table (families in name order, as HBase keeps them)."""
    described = table_descriptor_to_thrift(name, families, descriptor)
    schema = HBase_pb2.TableSchema(table_name=proto_table_name(name))
    values = dict(described.attributes or {})
    durability = descriptor.get("durability")
    if isinstance(durability, int) and durability in hbase2.TDurability._VALUES_TO_NAMES:
        values[DURABILITY] = hbase2.TDurability._VALUES_TO_NAMES[durability].encode()
    for key, value in sorted(values.items()):
        schema.attributes.add(first=key, second=value)
    for column in described.columns:
        family = schema.column_families.add(name=column.name)
        for key, value in sorted((column.attributes or {}).items()):
            family.attributes.add(first=key, second=value)
        for conf_key, conf_value in sorted((column.configuration or {}).items()):
            family.configuration.add(name=conf_key, value=conf_value)
    return schema


def modified_descriptor(
    name: bytes,
    families: Iterable[Family],
    descriptor: Mapping[str, object],
    schema: HBase_pb2.TableSchema,
) -> dict[str, object]:
    """The table's descriptor once ``schema`` replaced its values (its ``configuration``
    entries become values too, as ``ProtobufUtil.toTableDescriptor`` makes them).

    :raises MasterCallError: HBase's ``DoNotRetryIOException``: the schema's column families
        are not the table's as they are, or its ``DURABILITY`` is not a Durability.
    """
    asked: FamilyValues = {
        f.name: ({a.first: a.second for a in f.attributes}, {c.name: c.value for c in f.configuration})
        for f in schema.column_families
    }
    current = _family_values(families)
    changed = sorted(set(asked) ^ set(current) | {f for f in set(asked) & set(current) if asked[f] != current[f]})
    if changed:
        shown = ", ".join(f.decode(errors="replace") for f in changed)
        raise MasterCallError(
            DNRIOE,
            f"table {name.decode(errors='replace')}: the minicluster's master changes a table's own values "
            f"only, not its column families (asked to change {shown}): use modifyColumnFamily or "
            f"addColumnFamily of its Thrift servers",
            do_not_retry=True,
        )
    values = {a.first: a.second for a in schema.attributes}
    values.update({c.name.encode(): c.value.encode() for c in schema.configuration})
    out = {k: v for k, v in descriptor.items() if k not in ("attributes", "durability")}
    durability = values.pop(DURABILITY, None)
    if durability is not None:
        found = hbase2.TDurability._NAMES_TO_VALUES.get(durability.decode(errors="replace"))
        if found is None:
            raise MasterCallError(
                DNRIOE, f"table {name.decode(errors='replace')}: no Durability {durability!r}", do_not_retry=True
            )
        out["durability"] = int(found)
    if values:
        out["attributes"] = {k.decode("latin-1"): v.decode("latin-1") for k, v in values.items()}
    return out
