"""The one sink interface: what a sink is given (filtered entries, its context) and returns.

A sink takes batches of filtered WAL entries for one peer and applies them; the shipper moves
a queue's position only after :meth:`Sink.apply` returned, so a sink that returns has made its
batch durable (applied, or written as dead letters). A peer's ``walship.sink.protocol``
(default ``thrift1``) names its sink; sinks of other packages register under the entry-point
group ``walship.sinks``::

    [project.entry-points."walship.sinks"]
    mysink = "mypackage.sink:MySink"

A sink factory is called as ``factory(peer, context)`` and may have a ``validate_config(peer)``
class method, called before a peer is written, that raises
:class:`~walship.errors.InvalidPeerConfigError` for settings it cannot use, and an
``endpoints(peer)`` class method listing the ``(host, port)`` servers it writes to (status
probes them). :mod:`walship.sinks.registry` picks a peer's sink.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple, Protocol

from walship.peer import PeerConfig, parse_host_ports
from walship.wal.model import Cell, WalEntry

__all__ = [
    "DEADLETTER_DIR_KEY",
    "DEFAULT_PROTOCOL",
    "ENTRY_POINT_GROUP",
    "INCOMPATIBLE_KEY",
    "INCOMPATIBLE_MODES",
    "SINK_PROTOCOL_KEY",
    "SINK_THRIFT2_KEY",
    "SINK_THRIFT_KEY",
    "ApplyStats",
    "FilteredEntry",
    "Sink",
    "SinkContext",
    "thrift2_servers",
    "thrift_servers",
]

log = logging.getLogger(__name__)

#: Peer configuration key: which sink applies the peer's edits.
SINK_PROTOCOL_KEY = "walship.sink.protocol"
DEFAULT_PROTOCOL = "thrift1"
#: Peer configuration key: what a sink does with an edit it cannot express.
INCOMPATIBLE_KEY = "walship.incompatible"
INCOMPATIBLE_MODES = ("fail", "skip", "deadletter")
#: Peer configuration key: where dead letters go, any fsspec URL (default: under the WAL root).
DEADLETTER_DIR_KEY = "walship.deadletter.dir"
ENTRY_POINT_GROUP = "walship.sinks"


class FilteredEntry(NamedTuple):
    """What is left of a WAL entry for a peer, and the cluster ids to ship it with (a named
    tuple: one is made for every entry shipped)."""

    entry: WalEntry
    cells: tuple[Cell, ...]
    cluster_ids: tuple[uuid.UUID, ...]


#: The peer configuration keys naming the peer's Thrift1 and Thrift2 servers, for the sinks
#: that use them and for whatever else reaches the peer's cluster (scope, verify, copy).
SINK_THRIFT_KEY = "walship.sink.thrift"
SINK_THRIFT2_KEY = "walship.sink.thrift2"


def thrift_servers(peer: PeerConfig) -> list[tuple[str, int]]:
    """The peer's Thrift servers from ``walship.sink.thrift`` (empty when not set)."""
    spec = peer.configuration.get(SINK_THRIFT_KEY)
    return parse_host_ports(spec, f"{SINK_THRIFT_KEY} of peer {peer.peer_id}") if spec else []


def thrift2_servers(peer: PeerConfig) -> list[tuple[str, int]]:
    """The peer's Thrift2 servers from ``walship.sink.thrift2`` (empty when not set)."""
    spec = peer.configuration.get(SINK_THRIFT2_KEY)
    return parse_host_ports(spec, f"{SINK_THRIFT2_KEY} of peer {peer.peer_id}") if spec else []


@dataclass
class ApplyStats:
    """What applying one batch did."""

    cells: int = 0
    calls: int = 0
    incompatible_skipped: int = 0
    deadlettered: int = 0
    tags_dropped: int = 0
    retries: int = 0
    #: entries of the batch the sink had nothing to do for (a subscription's entries before
    #: its start time, or whose every event its filter hook dropped; on a Thrift1 peer, entries
    #: whose every cell was skipped or dead-lettered): they do not count as shipped
    passed_over: int = 0
    #: the last time the sink slept before retrying: (seconds, why)
    last_backoff: tuple[float, str] | None = None
    #: seconds the batch waited for the peer's bandwidth budget before it was applied
    #: (:mod:`walship.replicate.throttle`)
    throttled_s: float = 0.0


@dataclass(frozen=True)
class SinkContext:
    """What a sink may need besides its peer.

    :param wal_root: the source's WAL root (default home of dead letters).
    :param replaying: applying dead letters again: the sink must apply every cell exactly or
        fail; it must not skip nor dead-letter.
    """

    wal_root: str
    replaying: bool = False


class Sink(Protocol):
    """Applies batches for one peer."""

    def apply(self, entries: Sequence[FilteredEntry], wal: str) -> ApplyStats:
        """Apply ``entries`` (from ``wal``, in WAL order); return only once they are durable.

        :raises SinkError: the batch was not (wholly) applied; it will be shipped again.
        """
        ...

    def close(self) -> None: ...
