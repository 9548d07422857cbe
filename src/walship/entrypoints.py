"""The entry points installed packages register walship's plugins under (sinks, listeners),
read once a process: reading them scans every installed distribution's metadata, milliseconds
in an Airflow environment, and a shipper opens a sink for each queue it ships. A name not found
reads them again, once, so a package installed after the process started is still found."""

from __future__ import annotations

import functools
from importlib.metadata import EntryPoint, entry_points

__all__ = ["entry_point", "installed"]


@functools.cache
def _read(group: str) -> tuple[EntryPoint, ...]:
    return tuple(entry_points(group=group))


def installed(group: str) -> tuple[EntryPoint, ...]:
    """The group's entry points, as read first in this process."""
    return _read(group)


def entry_point(group: str, name: str, *, refresh: bool = True) -> EntryPoint | None:
    """The group's entry point of that name, or ``None``; with ``refresh``, a name not found
    is looked for once more in the entry points read again."""
    found = _named(group, name)
    if found is None and refresh:
        _read.cache_clear()
        found = _named(group, name)
    return found


def _named(group: str, name: str) -> EntryPoint | None:
    return next((ep for ep in _read(group) if ep.name == name), None)
