"""Where a serial peer starts: its last pushed ids set as HBase sets them when a peer becomes
serial (``AddPeerProcedure`` and ``UpdatePeerConfigProcedure``, ``setLastPushedSequenceId``),
and removed when it stops being serial.

A region that moved, split or merged before the peer was serial has edits of its earlier
opens in WALs the peer's queues never held; without a start, its current edits would wait for
them forever. So each region of a table the peer takes gets its last barrier - 1 as its last
pushed id: what it wrote before its current open counts as shipped, and order is kept from
there on. A table added to a serial peer later gets the same start.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from kazoo.client import KazooClient

from walship.errors import ConfigError
from walship.peer import PeerConfig
from walship.replicate.batcher.filters import table_rule
from walship.serial.barriers import BarrierReader
from walship.zk import ZnodeLayout
from walship.zk.lastpushed import LastPushedIds

__all__ = ["SERIAL_SOURCE_HINT", "Barriers", "follow_serial_change", "read_barriers", "require_source", "start_serial"]

log = logging.getLogger(__name__)

#: How a serial peer's command is told where ``hbase:meta`` is read from.
SERIAL_SOURCE_HINT = "give --source-thrift2 HOST:PORT (before the subcommand) or set WALSHIP_SOURCE_THRIFT2"


def require_source(peer_id: str, source_thrift2: str | None) -> str:
    """The source's Thrift2 server(s) a serial peer needs.

    :raises ConfigError: none given (the message names the peer and the flag).
    """
    if not source_thrift2 or not source_thrift2.strip():
        raise ConfigError(
            f"peer {peer_id} is serial: its start and its order come from hbase:meta's replication "
            f"barriers, read over the source cluster's Thrift2 server; {SERIAL_SOURCE_HINT}"
        )
    return source_thrift2.strip()


Barriers = list[tuple[bytes, str, int]]


def read_barriers(peer_id: str, source_thrift2: str | None) -> Barriers:
    """Every region's table, encoded name and last barrier, from the source's ``hbase:meta``:
    read before a peer becomes serial, so that a failed read writes nothing.

    :raises ConfigError: no source Thrift2 server.
    :raises BarrierReadError: hbase:meta cannot be read.
    """
    address = require_source(peer_id, source_thrift2)
    with BarrierReader(address) as reader:
        return list(reader.last_barriers())


def start_serial(
    client: KazooClient,
    layout: ZnodeLayout,
    peer: PeerConfig,
    barriers: Barriers,
    *,
    tables: Callable[[bytes], bool] | None = None,
) -> int:
    """Set the last pushed id of every region of a table the peer takes (or, with ``tables``,
    of those tables only) to its last barrier - 1, only forward; returns how many regions."""
    ids = {
        encoded: last - 1
        for table, encoded, last in barriers
        if table_rule(peer, table).replicate and (tables is None or tables(table))
    }
    LastPushedIds(client, layout).advance(peer.peer_id, ids)
    log.info("serial peer %s starts at the current open of %d regions", peer.peer_id, len(ids))
    return len(ids)


def follow_serial_change(
    client: KazooClient,
    layout: ZnodeLayout,
    before: PeerConfig,
    after: PeerConfig,
    barriers: Callable[[], Barriers],
) -> int:
    """After ``walship peer set``: a peer made serial starts; one made not serial forgets its
    ids; a serial peer's newly taken tables start. Returns the regions started or forgotten.
    ``barriers`` gives hbase:meta's barriers (read before the change where it can be)."""
    if after.serial and not before.serial:
        return start_serial(client, layout, after, barriers())
    if before.serial and not after.serial:
        return LastPushedIds(client, layout).remove_peer(after.peer_id)
    if after.serial and any(
        getattr(before, f) != getattr(after, f)
        for f in ("table_cfs", "namespaces", "exclude_table_cfs", "exclude_namespaces", "replicate_all")
    ):

        def added(table: bytes) -> bool:
            return not table_rule(before, table).replicate

        return start_serial(client, layout, after, barriers(), tables=added)
    return 0
