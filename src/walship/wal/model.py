"""The WAL data model: cells, WAL keys and entries, as HBase 2.x writes them.

A :class:`WalEntry` is one ``WAL.Entry`` of HBase: a :class:`WalKey` (table, region, sequence
id, write time, the clusters that have already consumed the edit, the replication scope of
each family) followed by the edit's cells. Entries carry the byte offsets where they start
and end in their file, so a replication position can resume exactly after any of them.
"""

from __future__ import annotations

import enum
import uuid
from collections.abc import Mapping
from types import MappingProxyType
from typing import NamedTuple

__all__ = [
    "CELL_TYPE_CODES",
    "EMPTY_SCOPES",
    "METAFAMILY",
    "Cell",
    "CellType",
    "ScopeType",
    "Tag",
    "WalEntry",
    "WalKey",
]

#: Family of the marker cells (flush, compaction, region event, bulk load) HBase writes into
#: WALs; an edit whose cells are all in this family is a meta edit, never replicated.
METAFAMILY = b"METAFAMILY"

#: The scopes of an edit with no replicated family.
EMPTY_SCOPES: Mapping[bytes, int] = MappingProxyType({})


class CellType(enum.IntEnum):
    """``KeyValue.Type`` codes of the cells a WAL can hold."""

    Put = 4
    Delete = 8
    DeleteFamilyVersion = 10
    DeleteColumn = 12
    DeleteFamily = 14


#: the codes of :class:`CellType`, as plain ints (a decoder checks each cell's type against them)
CELL_TYPE_CODES = frozenset(t.value for t in CellType)


class ScopeType(enum.IntEnum):
    """Replication scope of a column family (``REPLICATION_SCOPE`` in HBase)."""

    LOCAL = 0
    GLOBAL = 1
    SERIAL = 2


class Tag(NamedTuple):
    """A cell tag: a type byte and its value."""

    type: int
    value: bytes


class Cell(NamedTuple):
    """One cell of an edit: a KeyValue with its type and optional tags.

    ``type`` is a :class:`CellType` code; the reader leaves it a plain ``int`` (it compares
    equal to the :class:`CellType` member) because building enum members per cell is slow.
    """

    row: bytes
    family: bytes
    qualifier: bytes
    timestamp: int
    type: int
    value: bytes = b""
    tags: tuple[Tag, ...] = ()


class WalKey(NamedTuple):
    """The key of a WAL entry (``WALKeyImpl``).

    ``table`` is ``TableName.getName()``: ``b"t1"`` in the default namespace, ``b"ns:t1"``
    otherwise. ``cluster_ids`` lists the clusters that have consumed the edit, in order;
    locally written edits have none. ``scopes`` maps each family whose scope is not LOCAL to
    its scope; families absent from it are LOCAL.
    """

    encoded_region_name: bytes
    table: bytes
    sequence_id: int
    write_time: int
    cluster_ids: tuple[uuid.UUID, ...] = ()
    scopes: Mapping[bytes, int] = EMPTY_SCOPES
    nonce_group: int = 0
    nonce: int = 0
    orig_sequence_id: int = 0
    extended_attributes: tuple[tuple[str, bytes], ...] = ()

    @property
    def namespace(self) -> bytes:
        ns, sep, _ = self.table.partition(b":")
        return ns if sep else b"default"

    @property
    def qualifier(self) -> bytes:
        _, sep, name = self.table.partition(b":")
        return name if sep else self.table


class WalEntry(NamedTuple):
    """One entry of a WAL file: its key, its cells and where it lies in the file.

    ``offset`` is the entry's first byte and ``end_offset`` the byte after its last, which is
    the position a reader resumes from to read the next entry.
    """

    key: WalKey
    cells: tuple[Cell, ...]
    offset: int
    end_offset: int

    @property
    def is_meta(self) -> bool:
        """True when every cell is a METAFAMILY marker (``WALEdit.isMetaEdit``)."""
        return bool(self.cells) and all(c.family == METAFAMILY for c in self.cells)
