"""Thrift2 (``THBaseService``) structs to the minicluster's terms and back, as HBase 2.x's
``ThriftUtilities`` converts them (``getFromThrift``, ``putFromThrift``, ``deleteFromThrift``,
``scanFromThrift``, the descriptor conversions).

Bad input raises :class:`BadRequestError` naming the row, family or setting; the handler
answers it with ``TIOError``.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from walship.clusterids import CLUSTER_ID_ATTRIBUTE, decode_cluster_ids
from walship.errors import BadRequestError, ConfigError, HandlerFailureError
from walship.thrift.hbase2 import hbase2
from walship.wal import Cell, CellType
from walship_testing.minicluster.cluster import LATEST_TIMESTAMP
from walship_testing.minicluster.filters import Filter, parse_filter
from walship_testing.minicluster.schema import DEFAULT_MAX_VERSIONS, FAMILY_DEFAULTS, HBASE_FOREVER, family_setting
from walship_testing.minicluster.store import Family, VisibleCell

__all__ = [
    "RAW_ATTRIBUTE",
    "ReadSpec",
    "ScanSpec",
    "cluster_ids",
    "delete_cells",
    "family_from_thrift",
    "family_to_thrift",
    "get_spec",
    "put_cells",
    "result",
    "scan_spec",
    "table_bytes",
    "table_descriptor_to_thrift",
    "table_matches",
    "text_map",
    "thrift_table_name",
]

Columns = dict[bytes, set[bytes] | None]
#: HBase's ``Scan.RAW_ATTR``: a scan with this attribute true is raw
RAW_ATTRIBUTE = b"_raw_"

#: descriptor key -> the Thrift2 enum its value (an HBase name) belongs to
_ENUM_SETTINGS: Mapping[str, Any] = {
    "bloomFilterType": hbase2.TBloomFilterType,
    "compression": hbase2.TCompressionAlgorithm,
    "dataBlockEncoding": hbase2.TDataBlockEncoding,
    "keepDeletedCells": hbase2.TKeepDeletedCells,
}
#: TColumnFamilyDescriptor field -> descriptor key, for the fields that are kept as they come
_PLAIN_SETTINGS: Mapping[str, str] = {
    "blockSize": "blockSize",
    "dfsReplication": "dfsReplication",
    "minVersions": "minVersions",
    "timeToLive": "timeToLive",
    "blockCacheEnabled": "blockCacheEnabled",
    "cacheBloomsOnWrite": "cacheBloomsOnWrite",
    "cacheDataOnWrite": "cacheDataOnWrite",
    "cacheIndexesOnWrite": "cacheIndexesOnWrite",
    "compressTags": "compressTags",
    "evictBlocksOnClose": "evictBlocksOnClose",
    "inMemory": "inMemory",
}
#: The keys of HBase's ``ColumnFamilyDescriptor.getValues()`` for each setting.
_HBASE_KEYS: Mapping[str, bytes] = {
    "blockSize": b"BLOCKSIZE",
    "bloomFilterType": b"BLOOMFILTER",
    "compression": b"COMPRESSION",
    "dfsReplication": b"DFS_REPLICATION",
    "dataBlockEncoding": b"DATA_BLOCK_ENCODING",
    "keepDeletedCells": b"KEEP_DELETED_CELLS",
    "minVersions": b"MIN_VERSIONS",
    "timeToLive": b"TTL",
    "blockCacheEnabled": b"BLOCKCACHE",
    "cacheBloomsOnWrite": b"CACHE_BLOOMS_ON_WRITE",
    "cacheDataOnWrite": b"CACHE_DATA_ON_WRITE",
    "cacheIndexesOnWrite": b"CACHE_INDEX_ON_WRITE",
    "compressTags": b"COMPRESS_TAGS",
    "evictBlocksOnClose": b"EVICT_BLOCKS_ON_CLOSE",
    "inMemory": b"IN_MEMORY",
}
#: The values every family of HBase 2.6 holds, set or not (its builder's defaults).
_ALWAYS_VALUES = frozenset(
    {b"BLOCKSIZE", b"BLOOMFILTER", b"COMPRESSION", b"DATA_BLOCK_ENCODING", b"KEEP_DELETED_CELLS"}
    | {b"MIN_VERSIONS", b"TTL", b"BLOCKCACHE", b"IN_MEMORY"}
)
#: The values HBase 2.6's master gives every table it creates.
_TABLE_VALUES: Mapping[bytes, bytes] = {b"IS_META": b"false", b"hbase.store.file-tracker.impl": b"DEFAULT"}
#: TColumnFamilyDescriptor field -> descriptor key, for the enumerations
_ENUM_FIELDS: Mapping[str, str] = {
    "bloomnFilterType": "bloomFilterType",  # sic: HBase's IDL spells it so
    "compressionType": "compression",
    "dataBlockEncoding": "dataBlockEncoding",
    "keepDeletedCells": "keepDeletedCells",
}
_MIN_BLOCK_SIZE, _MAX_BLOCK_SIZE = 1024, 16 * 1024 * 1024


# -- names ---------------------------------------------------------------------------------------


def table_bytes(tname: Any) -> bytes:
    """A ``TTableName`` as the minicluster names tables: ``qualifier`` in the default
    namespace, ``ns:qualifier`` otherwise."""
    if tname is None or not tname.qualifier:
        raise BadRequestError("TTableName: the qualifier is required")
    ns: bytes = tname.ns or b""
    qualifier: bytes = tname.qualifier
    return qualifier if ns in (b"", b"default") else ns + b":" + qualifier


def thrift_table_name(name: bytes) -> Any:
    """A table's ``TTableName`` as HBase's ``tableNameFromHBase`` gives it (``ns`` always set)."""
    ns, sep, qualifier = name.rpartition(b":")
    return hbase2.TTableName(ns=ns if sep else b"default", qualifier=qualifier)


def table_matches(pattern: re.Pattern[str], name: bytes) -> bool:
    """HBase's ``filterTablesByRegex``: the whole name matches, or, in the default namespace,
    ``default:name`` does."""
    text = name.decode(errors="replace")
    return bool(pattern.fullmatch(text)) or (b":" not in name and bool(pattern.fullmatch("default:" + text)))


# -- reads ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ReadSpec:
    """What a ``TGet`` or ``TScan`` reads: columns, versions, time range ``[min_ts, max_ts)``, filter."""

    columns: Columns | None
    versions: int
    min_ts: int | None
    max_ts: int | None
    row_filter: Filter | None


@dataclass(frozen=True)
class ScanSpec:
    """What a ``TScan`` reads: its rows, order, limits, and whether it is raw (every put
    version and the delete markers, none masked)."""

    start: bytes
    stop: bytes
    reverse: bool
    limit: int | None
    batch: int | None
    read: ReadSpec
    raw: bool = False


def _columns(tcolumns: Sequence[Any] | None) -> Columns | None:
    """As ``Get.addFamily``/``addColumn`` build their family map: a family alone reads the
    whole family; a column after it narrows it to that column again (HBase's own quirk)."""
    if not tcolumns:
        return None
    out: Columns = {}
    for col in tcolumns:
        if not col.family:
            raise BadRequestError("TColumn: the family is required")
        if col.qualifier is None:
            out[col.family] = None
        else:
            quals = out.get(col.family)
            if quals is None:
                out[col.family] = {col.qualifier}
            else:
                quals.add(col.qualifier)
    return out


def _time_range(trange: Any) -> tuple[int | None, int | None]:
    if trange is None or trange.minStamp is None or trange.maxStamp is None:
        return None, None
    lo, hi = trange.minStamp, trange.maxStamp
    if lo < 0 or hi < 0:
        raise BadRequestError(f"TTimeRange: timestamps cannot be negative, got [{lo}, {hi})")
    if hi < lo:
        raise HandlerFailureError(f"TTimeRange: maxStamp {hi} is smaller than minStamp {lo}")  # HBase: TimeRange's
    return lo, hi


def _versions(value: int | None, default: int) -> int:
    if value is None:
        return default
    if value < 1:
        raise BadRequestError(f"maxVersions must be >= 1, got {value}")
    return value


def _filter(raw: bytes | None) -> Filter | None:
    """The parsed filter string; one that does not parse fails HBase 2.6's handler inside
    (its ParseFilter throws an IllegalArgumentException)."""
    try:
        return parse_filter(raw.decode("latin-1")) if raw else None
    except ConfigError as exc:
        raise HandlerFailureError(str(exc)) from None


def get_spec(tget: Any) -> ReadSpec:
    """``getFromThrift``: a timestamp reads exactly that version, else the time range."""
    if not tget.row:
        raise BadRequestError("TGet: the row key must not be empty")
    if tget.timestamp is not None:
        if tget.timestamp < 0:
            raise BadRequestError(f"TGet of row {tget.row!r}: timestamp cannot be negative, got {tget.timestamp}")
        min_ts, max_ts = tget.timestamp, tget.timestamp + 1
    else:
        min_ts, max_ts = _time_range(tget.timeRange)
    return ReadSpec(_columns(tget.columns), _versions(tget.maxVersions, 1), min_ts, max_ts, _filter(tget.filterString))


def _raw(attributes: Mapping[bytes, bytes] | None) -> bool:
    """HBase's ``Scan.isRaw``: the ``_raw_`` attribute read by ``Bytes.toBoolean`` (one byte,
    true unless 0; ``scanFromThrift`` copies a ``TScan``'s attributes onto the ``Scan``)."""
    value = (attributes or {}).get(RAW_ATTRIBUTE)
    if value is None:
        return False
    if len(value) != 1:
        raise BadRequestError(
            f"TScan attribute {RAW_ATTRIBUTE.decode()}: a boolean is one byte (0: false), got {len(value)} byte(s)"
        )
    return value != b"\x00"


def scan_spec(tscan: Any) -> ScanSpec:
    """``scanFromThrift``: start inclusive, stop exclusive (reversed: from start down to
    stop); ``limit`` rows at most when > 0; ``batchSize`` cells per result at most; raw when
    its ``_raw_`` attribute says so."""
    min_ts, max_ts = _time_range(tscan.timeRange)
    if tscan.batchSize is not None and tscan.batchSize < 0:
        raise BadRequestError(f"TScan.batchSize must be >= 0, got {tscan.batchSize}")
    read = ReadSpec(
        _columns(tscan.columns), _versions(tscan.maxVersions, 1), min_ts, max_ts, _filter(tscan.filterString)
    )
    return ScanSpec(
        start=tscan.startRow or b"",
        stop=tscan.stopRow or b"",
        reverse=bool(tscan.reversed),
        limit=tscan.limit if tscan.limit is not None and tscan.limit > 0 else None,
        batch=tscan.batchSize or None,
        read=read,
        raw=_raw(tscan.attributes),
    )


def result(row: bytes, cells: Sequence[VisibleCell], *, partial: bool = False) -> Any:
    """``resultFromHBase``: every cell with its type (a raw scan's delete markers too); an
    empty result has no row."""
    values = [
        hbase2.TColumnValue(family=c.family, qualifier=c.qualifier, value=c.value, timestamp=c.timestamp, type=c.type)
        for c in cells
    ]
    return hbase2.TResult(row=row if cells else None, columnValues=values, stale=False, partial=partial)


# -- writes --------------------------------------------------------------------------------------


def cluster_ids(attributes: Mapping[bytes, bytes] | None) -> tuple[uuid.UUID, ...]:
    """The clusters named by a mutation's ``_cs.id`` attribute (none without it)."""
    if attributes and CLUSTER_ID_ATTRIBUTE in attributes:
        return decode_cluster_ids(attributes[CLUSTER_ID_ATTRIBUTE])
    return ()


def _timestamp(ts: int | None, default: int, what: str) -> int:
    if ts is None:
        return default
    if ts < 0:
        raise BadRequestError(f"{what}: timestamp cannot be negative, got {ts}")
    return ts


def put_cells(tput: Any) -> list[Cell]:
    """``putFromThrift``: a column's own timestamp, else the put's, else now (resolved by
    the cluster); the cells in family order, as HBase's family map keeps them."""
    row = tput.row
    if not row:
        raise HandlerFailureError("TPut: the row key must not be empty")  # HBase: Put's constructor
    ts = _timestamp(tput.timestamp, LATEST_TIMESTAMP, f"TPut of row {row!r}")
    if not tput.columnValues:
        raise HandlerFailureError(f"TPut of row {row!r}: no columns to insert")  # HBase: IllegalArgumentException
    cells = []
    for cv in tput.columnValues:
        if not cv.family:
            raise BadRequestError(f"TPut of row {row!r}: a TColumnValue without a family")
        cell_ts = ts if cv.timestamp is None else cv.timestamp
        if cell_ts < 0:  # the message is made only for a bad cell: this runs for every cell
            raise BadRequestError(
                f"TPut of row {row!r}, family {cv.family!r}: timestamp cannot be negative, got {cell_ts}"
            )
        cells.append(Cell(row, cv.family, cv.qualifier or b"", cell_ts, CellType.Put, cv.value or b""))
    if len(cells) > 1:
        cells.sort(key=_family)  # stable: a family's cells keep their order
    return cells


def _family(cell: Cell) -> bytes:
    return cell.family


def delete_cells(tdelete: Any, families: Iterable[bytes]) -> list[Cell]:
    """``deleteFromThrift`` and ``HRegion.prepareDelete``: no columns deletes the whole row
    (a ``DeleteFamily`` per family of the table) at the delete's timestamp; with columns, each
    by ``deleteType`` at the column's own timestamp, else LATEST (resolved by the cluster): the
    delete's timestamp is not used then, as HBase 2.6's ``deleteFromThrift`` builds the
    ``Delete`` without it."""
    row = tdelete.row
    if not row:
        raise BadRequestError("TDelete: the row key must not be empty")
    base = _timestamp(tdelete.timestamp, LATEST_TIMESTAMP, f"TDelete of row {row!r}")
    if not tdelete.columns:
        return [Cell(row, f, b"", base, CellType.DeleteFamily) for f in sorted(families)]
    kind = tdelete.deleteType
    types = hbase2.TDeleteType
    if kind not in types._VALUES_TO_NAMES:
        raise BadRequestError(f"TDelete of row {row!r}: unknown deleteType {kind!r}")
    cells = []
    for col in tdelete.columns:
        if not col.family:
            raise BadRequestError(f"TDelete of row {row!r}: a TColumn without a family")
        what = f"TDelete of row {row!r}, family {col.family!r}"
        ts = _timestamp(col.timestamp, LATEST_TIMESTAMP, what)
        qualifier = col.qualifier or b""
        if kind == types.DELETE_COLUMN:
            cells.append(Cell(row, col.family, qualifier, ts, CellType.Delete))
        elif kind == types.DELETE_COLUMNS:
            cells.append(Cell(row, col.family, qualifier, ts, CellType.DeleteColumn))
        elif kind == types.DELETE_FAMILY:
            cells.append(Cell(row, col.family, b"", ts, CellType.DeleteFamily))
        else:
            if col.timestamp is None:  # HBase 2.6's deleteFromThrift fails on the missing value
                raise HandlerFailureError(
                    f"{what}: a timestamp is required for TDelete with deleteType DELETE_FAMILY_VERSION"
                )
            cells.append(Cell(row, col.family, b"", ts, CellType.DeleteFamilyVersion))
    return sorted(cells, key=lambda c: c.family)


# -- descriptors ---------------------------------------------------------------------------------


def text_map(raw: Mapping[bytes, bytes] | None) -> dict[str, str]:
    """A Thrift ``map<binary, binary>`` as JSON-friendly text (latin-1 keeps every byte)."""
    return {k.decode("latin-1"): v.decode("latin-1") for k, v in (raw or {}).items()}


def _binary_map(stored: object) -> dict[bytes, bytes]:
    if not isinstance(stored, dict):
        return {}
    return {str(k).encode("latin-1"): str(v).encode("latin-1") for k, v in stored.items()}


def _enum_name(enum: Any, value: int, what: str) -> str:
    name = enum._VALUES_TO_NAMES.get(value)
    if name is None:
        raise BadRequestError(f"{what}: unknown value {value!r}")
    return str(name)


def family_from_thrift(desc: Any) -> Family:
    """``columnFamilyDescriptorFromThrift``: HBase's builder defaults, then every field the
    descriptor sets; checked as HBase's ``TableDescriptorChecker`` would."""
    if desc is None or not desc.name:
        raise BadRequestError("TColumnFamilyDescriptor: the name is required")
    name = desc.name
    if desc.maxVersions is not None and desc.maxVersions < 1:  # HBase: its builder's IllegalArgumentException
        raise HandlerFailureError(f"family {name!r}: maxVersions must be >= 1, got {desc.maxVersions}")
    settings: dict[str, object] = {}
    for field, key in _PLAIN_SETTINGS.items():
        value = getattr(desc, field)
        if value is not None:
            settings[key] = value
    for field, key in _ENUM_FIELDS.items():
        value = getattr(desc, field)
        if value is not None:
            settings[key] = _enum_name(_ENUM_SETTINGS[key], value, f"family {name!r}: {field}")
    if desc.attributes:
        settings["attributes"] = text_map(desc.attributes)
    if desc.configuration:
        settings["configuration"] = dict(desc.configuration)
    ttl = settings.get("timeToLive")
    if isinstance(ttl, int) and ttl <= 0:
        raise BadRequestError(f"family {name!r}: timeToLive must be positive, got {ttl}")
    size = settings.get("blockSize")
    if isinstance(size, int) and not _MIN_BLOCK_SIZE <= size <= _MAX_BLOCK_SIZE:
        raise BadRequestError(f"family {name!r}: blockSize must be between 1K and 16MB, got {size}")
    max_versions = desc.maxVersions if desc.maxVersions is not None else DEFAULT_MAX_VERSIONS
    min_versions = settings.get("minVersions")
    if isinstance(min_versions, int) and min_versions < 0:
        raise BadRequestError(f"family {name!r}: minVersions must be >= 0, got {min_versions}")
    return Family(name, max_versions, desc.scope if desc.scope is not None else 0, settings)


def _enum_value(enum: Any, name: object, default: object) -> int:
    """A stored HBase name as its Thrift2 value (a name Thrift2 lacks: HBase's default)."""
    values = enum._NAMES_TO_VALUES
    found = values.get(str(name).upper())
    return int(found if found is not None else values[str(default)])


def _hbase_value(value: object) -> bytes:
    return (str(value).lower() if isinstance(value, bool) else str(value)).encode()


def _family_values(family: Family, fields: Mapping[str, object]) -> dict[bytes, bytes]:
    """The family's ``getValues()`` as HBase 2.6 answers them in a descriptor's attributes:
    the builder's defaults (:data:`_ALWAYS_VALUES`), every other setting the family was given,
    and its own attributes."""
    values = {b"VERSIONS": _hbase_value(family.max_versions), b"REPLICATION_SCOPE": _hbase_value(family.scope)}
    values[b"INDEX_BLOCK_ENCODING"] = b"NONE"
    for field, key in {**_PLAIN_SETTINGS, **_ENUM_FIELDS}.items():
        hbase_key = _HBASE_KEYS[key]
        if hbase_key in _ALWAYS_VALUES or family.descriptor.get(key) is not None:
            value = fields[field]
            named = _ENUM_SETTINGS[key]._VALUES_TO_NAMES[value] if key in _ENUM_SETTINGS else value
            values[hbase_key] = _hbase_value(named)
    return {**_binary_map(family_setting(family, "attributes")), **values}


def family_to_thrift(family: Family) -> Any:
    """``columnFamilyDescriptorFromHBase``: every field set, HBase's defaults where the family
    has none (a Thrift1 time to live <= 0 reads as FOREVER, as HBase's Thrift1 stores it), the
    descriptor's values as its attributes, a configuration only when it has one."""
    fields: dict[str, object] = {}
    for field, key in _PLAIN_SETTINGS.items():
        fields[field] = family_setting(family, key)
    for field, key in _ENUM_FIELDS.items():
        fields[field] = _enum_value(_ENUM_SETTINGS[key], family_setting(family, key), FAMILY_DEFAULTS[key])
    ttl = fields["timeToLive"]
    if not isinstance(ttl, int) or ttl <= 0:
        fields["timeToLive"] = HBASE_FOREVER
    configuration = family_setting(family, "configuration")
    return hbase2.TColumnFamilyDescriptor(
        name=family.name,
        attributes=_family_values(family, fields),
        configuration={str(k): str(v) for k, v in configuration.items()}
        if isinstance(configuration, dict) and configuration
        else None,
        maxVersions=family.max_versions,
        scope=family.scope,
        **fields,
    )


def table_descriptor_to_thrift(name: bytes, families: Iterable[Family], descriptor: Mapping[str, object]) -> Any:
    """``tableDescriptorFromHBase``: the table's values as its attributes (those HBase's master
    sets on every table it creates, then the table's own)."""
    durability = descriptor.get("durability")
    return hbase2.TTableDescriptor(
        tableName=thrift_table_name(name),
        columns=[family_to_thrift(f) for f in families],
        attributes={**_TABLE_VALUES, **_binary_map(descriptor.get("attributes"))},
        durability=durability if isinstance(durability, int) else hbase2.TDurability.USE_DEFAULT,
    )
