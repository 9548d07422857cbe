"""HBase shell commands for an operator to paste: a walship peer added the way a running HBase
takes it without restarting region servers (HBase's own ``add_peer``, its peer-state
DISABLED so that HBase's replication source does not ship it, walship's configuration in its
``CONFIG``), then adopted by walship (``walship peer adopt ID``)."""

from __future__ import annotations

import logging

from walship.peer import PeerConfig

__all__ = ["add_peer_command", "ruby_string"]

log = logging.getLogger(__name__)


def ruby_string(text: str) -> str:
    """A single-quoted Ruby string (no interpolation): only ``\\`` and ``'`` are escaped."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _list(items: list[str]) -> str:
    return "[" + ", ".join(ruby_string(i) for i in items) + "]"


def add_peer_command(peer: PeerConfig) -> str:
    """``add_peer`` for the HBase shell (2.x): the peer's cluster key, STATE DISABLED, its
    table-cfs or namespaces (which make HBase's replicate_all false, as walship's own add
    does), its whole configuration (``walship.managed`` among it) and, for a serial peer,
    ``SERIAL => true``."""
    parts = [f"add_peer {ruby_string(peer.peer_id)}", f"CLUSTER_KEY => {ruby_string(peer.cluster_key)}"]
    parts.append("STATE => 'DISABLED'")
    if peer.table_cfs:
        tables = ", ".join(
            f"{ruby_string(table)} => {_list(sorted(families or ()))}"
            for table, families in sorted(peer.table_cfs.items())
        )
        parts.append(f"TABLE_CFS => {{ {tables} }}")
    if peer.namespaces:
        parts.append(f"NAMESPACES => {_list(sorted(peer.namespaces))}")
    if peer.configuration:
        config = ", ".join(f"{ruby_string(k)} => {ruby_string(v)}" for k, v in sorted(peer.configuration.items()))
        parts.append(f"CONFIG => {{ {config} }}")
    if peer.serial:
        # HBase then starts its regions' last pushed ids and keeps its barriers (it knows it serial)
        parts.append("SERIAL => true")
    return ", ".join(parts)
