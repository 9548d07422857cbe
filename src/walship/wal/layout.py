"""The layout compiled code reads walship's named tuples by.

A compiled module (``walship.sinks._fastpath``, ``walship.replicate.batcher._batcher``) reads
entries, keys, cells and its own tuples by position, never by attribute name, and publishes the
positions it was built with as ``LAYOUT`` (``"Type.field" -> position``, see ``_tuples.h``).
:func:`load` imports such a module only when every position still matches the tuple's fields,
so that renaming or reordering a field makes walship fall back to its Python code (with a
warning), never read the wrong item.
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Mapping, Sequence
from types import ModuleType

from walship.wal.model import Cell, WalEntry, WalKey

__all__ = ["WAL_TUPLES", "load", "mismatches"]

log = logging.getLogger(__name__)

#: The WAL's named tuples by name, as compiled layouts name them.
WAL_TUPLES: dict[str, Sequence[str]] = {"WalEntry": WalEntry._fields, "WalKey": WalKey._fields, "Cell": Cell._fields}


def mismatches(layout: Mapping[str, int], tuples: Mapping[str, Sequence[str]]) -> list[str]:
    """The fields of ``layout`` (``"Type.field" -> position``) that ``tuples`` (type name ->
    field names) do not hold at that position; empty when the layout matches."""
    bad = []
    for name, at in sorted(layout.items()):
        type_name, _, field = name.partition(".")
        fields = tuples.get(type_name)
        if fields is None or at >= len(fields) or fields[at] != field:
            bad.append(f"{name} at {at}")
    return bad


def load(module: str, tuples: Mapping[str, Sequence[str]]) -> ModuleType | None:
    """The compiled ``module`` when it is built and its ``LAYOUT`` matches ``tuples`` (with
    :data:`WAL_TUPLES`); ``None`` otherwise (the Python code runs instead)."""
    try:
        compiled = importlib.import_module(module)
    except ImportError:  # pragma: no cover - built by pip install; pure Python without a compiler
        log.debug("%s is not built; its Python code runs instead", module)
        return None
    layout = getattr(compiled, "LAYOUT", None)
    bad = ["no LAYOUT"] if not isinstance(layout, dict) else mismatches(layout, {**WAL_TUPLES, **tuples})
    if bad:
        log.warning("%s was built for other tuples (%s); its Python code runs instead", module, ", ".join(bad))
        return None
    return compiled
