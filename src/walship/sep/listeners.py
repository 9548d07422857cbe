"""Listeners, and where they are found.

A listener is any object with one method, ``process_events(events)``, called with a list of
:class:`~walship.sep.events.SepEvent`; it returns once it has done what it does with them
(raising makes the whole batch be delivered again later, so it should be idempotent). A
subscription names its listener in one of two ways:

* a name registered under the entry-point group ``walship.listeners``::

      [project.entry-points."walship.listeners"]
      indexer = "mypackage.indexer:Indexer"

* ``module:Class``, imported from the shipping process's ``sys.path``.

Either way the class is constructed with no arguments, once per ship (or tail) run. With
``walship.sep.threads`` above 1 the one instance is called from several threads at a time
(each row always from the same one), so it must be thread-safe.

A subscription's filter hook ``walship.sep.filter`` is ``module:callable``, called with each
event before delivery; a falsy result drops the event.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from walship.entrypoints import entry_point, installed
from walship.errors import ConfigError
from walship.sep.events import SepEvent

__all__ = ["LISTENER_GROUP", "EventFilter", "Listener", "listener_names", "load_filter", "load_listener"]

#: Entry-point group naming listener classes.
LISTENER_GROUP = "walship.listeners"

EventFilter = Callable[[SepEvent], object]


class Listener(Protocol):
    """Receives a subscription's events."""

    def process_events(self, events: Sequence[SepEvent]) -> None:
        """Handle ``events`` (in WAL order per row); raise to have them delivered again."""
        ...


def listener_names() -> list[str]:
    """The listeners registered under :data:`LISTENER_GROUP`."""
    return sorted({ep.name for ep in installed(LISTENER_GROUP)})


def _import(target: str, what: str) -> Any:
    module, sep, attr = target.partition(":")
    if not sep or not module.strip() or not attr.strip():
        raise ConfigError(f"{what} {target!r}: expected module:name")
    try:
        obj = importlib.import_module(module.strip())
        for part in attr.strip().split("."):
            obj = getattr(obj, part)
    except Exception as exc:  # any import-time error of user code: name it, never crash
        raise ConfigError(f"{what} {target!r} cannot be loaded: {type(exc).__name__}: {exc}") from None
    return obj


def load_listener(spec: str) -> Callable[[], Listener]:
    """The listener class ``spec`` names: an entry point of :data:`LISTENER_GROUP`, or
    ``module:Class``.

    :raises ConfigError: no such listener, it does not import, or it has no ``process_events``.
    """
    spec = spec.strip()
    if not spec:
        raise ConfigError("listener '': expected a name of the walship.listeners entry points or module:Class")
    if ":" in spec:
        factory = _import(spec, "listener")
    else:
        found = entry_point(LISTENER_GROUP, spec)
        if found is None:
            names = ", ".join(listener_names()) or "none registered"
            raise ConfigError(
                f"no listener {spec!r}: give module:Class or a name of the {LISTENER_GROUP} entry points ({names})"
            )
        try:
            factory = found.load()
        except Exception as exc:
            raise ConfigError(f"listener {spec!r} (entry point {found.value}) cannot be loaded: {exc}") from None
    if not callable(factory) or not callable(getattr(factory, "process_events", None)):
        raise ConfigError(f"listener {spec!r} is not a class with a process_events(events) method")
    loaded: Callable[[], Listener] = factory
    return loaded


def load_filter(spec: str) -> EventFilter:
    """The filter hook ``module:callable``.

    :raises ConfigError: it does not import or is not callable.
    """
    hook = _import(spec.strip(), "filter")
    if not callable(hook):
        raise ConfigError(f"filter {spec!r} is not callable")
    loaded: EventFilter = hook
    return loaded
