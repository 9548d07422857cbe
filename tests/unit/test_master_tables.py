"""Table names as walship's Admin sends them to HBase's master, and a minicluster table's
descriptor as its master answers it and as a ModifyTable's schema changes it."""

from __future__ import annotations

import pytest

from walship.errors import MasterCallError, MasterError, MiniClusterError, TableNotFoundError
from walship.protos import HBase_pb2
from walship.rpc.tables import table_name
from walship_testing.minicluster.readonly import is_read_only
from walship_testing.minicluster.store import Family
from walship_testing.minicluster.tableschema import modified_descriptor, proto_table_name, table_bytes, table_schema


@pytest.mark.parametrize(
    ("table", "namespace", "qualifier"),
    [("t", b"default", b"t"), ("ns:t", b"ns", b"t"), ("default:t", b"default", b"t")],
)
def test_a_table_is_named_with_its_namespace(table: str, namespace: bytes, qualifier: bytes) -> None:
    assert table_name(table) == HBase_pb2.TableName(namespace=namespace, qualifier=qualifier)


@pytest.mark.parametrize("table", ["", "ns:", ":t", "a:b:c"])
def test_a_name_that_is_not_namespace_and_qualifier_is_refused_naming_it(table: str) -> None:
    with pytest.raises(ValueError, match="'table' must be \\[namespace:\\]qualifier, got"):
        table_name(table)


def test_an_unknown_table_is_a_master_error_and_the_miniclusters() -> None:
    assert issubclass(TableNotFoundError, MasterError) and issubclass(TableNotFoundError, MiniClusterError)


@pytest.mark.parametrize(("value", "expected"), [("true", True), ("TRUE", True), ("True", True), ("false", False),
                                                 ("yes", False), (" true", False), (None, False)])  # fmt: skip
def test_readonly_is_read_as_javas_boolean_value_of(value: str | None, expected: bool) -> None:
    attributes = {} if value is None else {"READONLY": value}
    assert is_read_only({"attributes": attributes}) is expected


def test_names_go_to_the_master_and_back() -> None:
    for name in (b"t", b"ns:t"):
        assert table_bytes(proto_table_name(name)) == name
    assert proto_table_name(b"t").namespace == b"default"


FAMILIES = [Family(b"f", 3, 1, {}), Family(b"g", 1, 0, {"blockSize": 8192})]


def _values(schema: HBase_pb2.TableSchema) -> dict[bytes, bytes]:
    return {a.first: a.second for a in schema.attributes}


def test_the_schema_holds_the_tables_values_and_each_familys() -> None:
    schema = table_schema(b"ns:t", FAMILIES, {"attributes": {"READONLY": "true", "OWNER": "me"}, "durability": 2})
    assert schema.table_name == HBase_pb2.TableName(namespace=b"ns", qualifier=b"t")
    values = _values(schema)
    assert values[b"READONLY"] == b"true" and values[b"OWNER"] == b"me" and values[b"IS_META"] == b"false"
    assert values[b"DURABILITY"] == b"ASYNC_WAL"
    assert [f.name for f in schema.column_families] == [b"f", b"g"]
    f, g = ({a.first: a.second for a in c.attributes} for c in schema.column_families)
    assert (f[b"VERSIONS"], f[b"REPLICATION_SCOPE"], g[b"VERSIONS"], g[b"BLOCKSIZE"]) == (b"3", b"1", b"1", b"8192")


def test_a_modify_replaces_the_tables_values_and_keeps_its_families() -> None:
    descriptor: dict[str, object] = {"attributes": {"READONLY": "true", "OWNER": "me"}}
    schema = table_schema(b"t", FAMILIES, descriptor)
    kept = [a for a in schema.attributes if a.first != b"READONLY"]
    del schema.attributes[:]
    schema.attributes.extend(kept)
    changed = modified_descriptor(b"t", FAMILIES, descriptor, schema)
    assert not is_read_only(changed) and changed["attributes"]["OWNER"] == "me"  # type: ignore[index]
    assert _values(table_schema(b"t", FAMILIES, changed)) == _values(schema)


def test_a_modify_that_changes_a_family_is_refused_naming_it() -> None:
    schema = table_schema(b"t", FAMILIES, {})
    del schema.column_families[1]
    with pytest.raises(MasterCallError, match=r"table t: .*not its column families \(asked to change g\)") as error:
        modified_descriptor(b"t", FAMILIES, {}, schema)
    assert error.value.exception_class == "org.apache.hadoop.hbase.DoNotRetryIOException"
