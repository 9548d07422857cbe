"""HBase write-ahead logs: the model, a reader, a writer and file names."""

from __future__ import annotations

from walship.wal.model import METAFAMILY, Cell, CellType, ScopeType, Tag, WalEntry, WalKey
from walship.wal.names import WalName, build_wal_name, is_wal_name, parse_wal_name
from walship.wal.reader import WalReader, read_wal
from walship.wal.writer import WalWriter

__all__ = [
    "METAFAMILY",
    "Cell",
    "CellType",
    "ScopeType",
    "Tag",
    "WalEntry",
    "WalKey",
    "WalName",
    "WalReader",
    "WalWriter",
    "build_wal_name",
    "is_wal_name",
    "parse_wal_name",
    "read_wal",
]
