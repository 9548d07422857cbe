"""Which sink applies a peer's edits: its ``walship.sink.protocol`` (default ``thrift1``) names
a sink registered at run time (:func:`register_sink`), installed by another package under the
entry-point group ``walship.sinks``, or built in (each imported by a small function below only
when a peer names it: thriftpy2 loads its IDL, the change log pyarrow's Parquet).

    create_sink(peer, context).apply(entries)   # -> walship.sinks.hbase.ThriftSink for thrift1
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from walship.entrypoints import entry_point, installed
from walship.errors import ConfigError, InvalidPeerConfigError, SinkNotFoundError
from walship.peer import PeerConfig
from walship.sinks.base import (
    DEFAULT_PROTOCOL,
    ENTRY_POINT_GROUP,
    INCOMPATIBLE_KEY,
    INCOMPATIBLE_MODES,
    SINK_PROTOCOL_KEY,
    Sink,
    SinkContext,
)

__all__ = [
    "ENTRY_POINT_GROUP",
    "SinkFactory",
    "create_sink",
    "register_sink",
    "sink_endpoints",
    "sink_factory",
    "sink_protocols",
    "validate_sink_config",
]

log = logging.getLogger(__name__)

SinkFactory = Callable[[PeerConfig, SinkContext], Sink]
_registry: dict[str, SinkFactory] = {}


def _thrift1() -> SinkFactory:
    from walship.sinks.hbase import ThriftSink

    return ThriftSink


def _thrift2() -> SinkFactory:
    from walship.sinks.hbase2 import Thrift2Sink

    return Thrift2Sink


def _hbase() -> SinkFactory:
    from walship.sinks.regionservers import RegionServerSink

    return RegionServerSink


def _sep() -> SinkFactory:
    from walship.sinks.sep import SepSink

    return SepSink


def _changelog() -> SinkFactory:
    from walship.sinks.parquet import ChangeLogSink

    return ChangeLogSink


_BUILTIN: dict[str, Callable[[], SinkFactory]] = {
    "thrift1": _thrift1,
    "thrift2": _thrift2,
    "hbase": _hbase,
    "sep": _sep,
    "changelog": _changelog,
}


def register_sink(name: str, factory: SinkFactory) -> None:
    """Register a sink under ``name`` (as an entry point of ``walship.sinks`` would)."""
    if not name or not name.replace("-", "").replace("_", "").isalnum():
        raise ConfigError(f"invalid sink protocol name {name!r}")
    _registry[name] = factory


def sink_protocols() -> list[str]:
    """Every protocol a peer may name."""
    names = set(_BUILTIN) | set(_registry)
    names |= {ep.name for ep in installed(ENTRY_POINT_GROUP)}
    return sorted(names)


def sink_factory(name: str) -> SinkFactory:
    """The factory registered for ``name``: registered at run time, then entry points, then
    the built-in sinks.

    :raises SinkNotFoundError: no sink of that name.
    """
    if name in _registry:
        return _registry[name]
    ep = entry_point(ENTRY_POINT_GROUP, name, refresh=name not in _BUILTIN)
    if ep is not None:
        try:
            factory: SinkFactory = ep.load()
        except Exception as exc:  # a third party's import error: name it, never crash
            raise SinkNotFoundError(f"sink {name!r} (entry point {ep.value}) cannot be loaded: {exc}") from exc
        return factory
    if name in _BUILTIN:
        try:
            return _BUILTIN[name]()
        except ImportError as exc:
            raise SinkNotFoundError(f"sink {name!r} (built in) cannot be loaded: {exc}") from exc
    raise SinkNotFoundError(f"no sink {name!r}: {SINK_PROTOCOL_KEY} must be one of {', '.join(sink_protocols())}")


def _protocol(peer: PeerConfig) -> str:
    return peer.configuration.get(SINK_PROTOCOL_KEY) or DEFAULT_PROTOCOL


def validate_sink_config(peer: PeerConfig) -> None:
    """Check the peer's sink settings before the peer is written.

    :raises InvalidPeerConfigError: an unknown protocol or a setting the sink refuses.
    """
    mode = peer.configuration.get(INCOMPATIBLE_KEY)
    if mode is not None and mode not in INCOMPATIBLE_MODES:
        raise InvalidPeerConfigError(
            f"peer {peer.peer_id}: {INCOMPATIBLE_KEY} must be one of {', '.join(INCOMPATIBLE_MODES)}, got {mode!r}"
        )
    try:
        factory = sink_factory(_protocol(peer))
    except SinkNotFoundError as exc:
        raise InvalidPeerConfigError(f"peer {peer.peer_id}: {exc}") from None
    validate = getattr(factory, "validate_config", None)
    if callable(validate):
        validate(peer)


def sink_endpoints(peer: PeerConfig) -> list[tuple[str, int]]:
    """The servers the peer's sink writes to, as its ``endpoints(peer)`` says (empty for a
    sink that has none or cannot say).

    :raises InvalidPeerConfigError: the peer's sink settings do not parse.
    """
    try:
        factory = sink_factory(_protocol(peer))
    except SinkNotFoundError as exc:
        raise InvalidPeerConfigError(f"peer {peer.peer_id}: {exc}") from None
    endpoints = getattr(factory, "endpoints", None)
    return list(endpoints(peer)) if callable(endpoints) else []


def create_sink(peer: PeerConfig, context: SinkContext) -> Sink:
    """The sink the peer's configuration names, ready to apply batches."""
    sink = sink_factory(_protocol(peer))(peer, context)
    log.debug("peer %s: sink %s", peer.peer_id, type(sink).__name__)
    return sink
