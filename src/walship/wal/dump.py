"""Render WAL entries as HBase's WALPrettyPrinter does: text, or one JSON object a line."""

from __future__ import annotations

from typing import Any

from walship.wal.model import Cell, CellType, WalEntry

__all__ = ["entry_to_json", "entry_to_text", "to_string_binary"]

# Bytes.toStringBinary: printable ASCII other than the backslash stays; the rest is \xNN.
_BINARY_TABLE = tuple(chr(b) if 0x20 <= b <= 0x7E and b != 0x5C else f"\\x{b:02X}" for b in range(256))


def to_string_binary(data: bytes) -> str:
    """Render bytes as ``Bytes.toStringBinary``: ``b"a\\x00"`` -> ``"a\\x00"`` with upper-case hex."""
    return "".join(map(_BINARY_TABLE.__getitem__, data))


def _cell_json(cell: Cell) -> dict[str, Any]:
    return {
        "row": to_string_binary(cell.row),
        "family": to_string_binary(cell.family),
        "qualifier": to_string_binary(cell.qualifier),
        "timestamp": cell.timestamp,
        "type": CellType(cell.type).name,
        "value": to_string_binary(cell.value),
        "tags": [{"type": t.type, "value": to_string_binary(t.value)} for t in cell.tags],
    }


def entry_to_json(entry: WalEntry) -> dict[str, Any]:
    """The JSON object ``walship wal dump --json`` prints for one entry."""
    key = entry.key
    return {
        "offset": entry.offset,
        "end_offset": entry.end_offset,
        "table": to_string_binary(key.table),
        "region": to_string_binary(key.encoded_region_name),
        "sequence_id": key.sequence_id,
        "write_time": key.write_time,
        "cluster_ids": [str(c) for c in key.cluster_ids],
        "scopes": {to_string_binary(f): s for f, s in key.scopes.items()},
        "cells": [_cell_json(c) for c in entry.cells],
    }


def entry_to_text(entry: WalEntry) -> str:
    """A WALPrettyPrinter-style text block for one entry."""
    key = entry.key
    lines = [
        f"Sequence={key.sequence_id}, table={to_string_binary(key.table)}, "
        f"region={to_string_binary(key.encoded_region_name)}, at write timestamp={key.write_time}, "
        f"offset={entry.offset}, end_offset={entry.end_offset}"
    ]
    if key.cluster_ids:
        lines.append("cluster_ids=" + ",".join(str(c) for c in key.cluster_ids))
    if key.scopes:
        lines.append("scopes=" + ",".join(f"{to_string_binary(f)}:{s}" for f, s in key.scopes.items()))
    for cell in entry.cells:
        lines.append(
            f"    row={to_string_binary(cell.row)}, "
            f"column={to_string_binary(cell.family)}:{to_string_binary(cell.qualifier)}, "
            f"timestamp={cell.timestamp}, type={CellType(cell.type).name}"
        )
        lines.append(f"    value: {to_string_binary(cell.value)}")
        for tag in cell.tags:
            lines.append(f"    tag: type={tag.type}, value={to_string_binary(tag.value)}")
    return "\n".join(lines)
