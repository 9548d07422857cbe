"""The Thrift sinks' grouping of cells, compiled (``_fastpath.c``): the module when it is built
for walship's tuples (see :mod:`walship.wal.layout`), else ``None`` and the sinks' Python code
runs."""

from __future__ import annotations

from types import ModuleType

from walship.sinks.base import FilteredEntry
from walship.wal import layout

__all__ = ["FASTPATH"]

FASTPATH: ModuleType | None = layout.load("walship.sinks._fastpath", {"FilteredEntry": FilteredEntry._fields})
