"""Everything a peer's configuration must satisfy before walship writes it (``peer add``,
``peer set``, ``subscription add``): every ``walship.*`` key known and set, each with its own
rule, and the sink's own checks (:func:`walship.sinks.registry.validate_sink_config`). A peer that
passes can be shipped; one that does not is refused in one line and nothing is written.

Keys outside ``walship.*`` are HBase's or other tools' and are left alone; a third-party sink
keeps its own keys under ``walship.sink.<its protocol>.``.
"""

from __future__ import annotations

import logging

from walship.errors import ConfigError, InvalidPeerConfigError
from walship.files import check_url
from walship.peer import MANAGED_KEY, SUBSCRIPTION_KEY, PeerConfig
from walship.replicate.peerplan import CLOSE_GRACE_KEY, close_grace
from walship.sep.config import (
    CHANGELOG_URL_KEY,
    FILTER_KEY,
    LISTENER_KEY,
    PAYLOAD_COLUMN_KEY,
    START_TIME_KEY,
    THREADS_KEY,
)
from walship.sinks.base import (
    DEADLETTER_DIR_KEY,
    DEFAULT_PROTOCOL,
    INCOMPATIBLE_KEY,
    SINK_PROTOCOL_KEY,
    SINK_THRIFT2_KEY,
    SINK_THRIFT_KEY,
)
from walship.sinks.registry import validate_sink_config
from walship.thrift.conn import (
    THRIFT_CONNECTIONS_KEY,
    THRIFT_HTTP_KEY,
    THRIFT_PRINCIPAL_KEY,
    THRIFT_PROTOCOL_KEY,
    THRIFT_QOP_KEY,
    THRIFT_SPNEGO_PRINCIPAL_KEY,
    THRIFT_SSL_CA_KEY,
    THRIFT_SSL_KEY,
    THRIFT_SSL_VERIFY_KEY,
    THRIFT_TRANSPORT_KEY,
)

__all__ = ["KNOWN_KEYS", "validate_peer"]

log = logging.getLogger(__name__)

#: Every ``walship.*`` configuration key walship reads.
KNOWN_KEYS = frozenset(
    {
        MANAGED_KEY,
        SUBSCRIPTION_KEY,
        SINK_PROTOCOL_KEY,
        SINK_THRIFT_KEY,
        SINK_THRIFT2_KEY,
        THRIFT_TRANSPORT_KEY,
        THRIFT_PROTOCOL_KEY,
        THRIFT_SSL_KEY,
        THRIFT_SSL_CA_KEY,
        THRIFT_SSL_VERIFY_KEY,
        THRIFT_CONNECTIONS_KEY,
        THRIFT_QOP_KEY,
        THRIFT_PRINCIPAL_KEY,
        THRIFT_HTTP_KEY,
        THRIFT_SPNEGO_PRINCIPAL_KEY,
        INCOMPATIBLE_KEY,
        DEADLETTER_DIR_KEY,
        CLOSE_GRACE_KEY,
        LISTENER_KEY,
        THREADS_KEY,
        START_TIME_KEY,
        PAYLOAD_COLUMN_KEY,
        FILTER_KEY,
        CHANGELOG_URL_KEY,
    }
)


def validate_peer(peer: PeerConfig) -> None:
    """Refuse a peer configuration walship could not ship.

    :raises InvalidPeerConfigError: an unknown or empty ``walship.*`` key, a value its key's
        rule refuses (the close grace, the dead-letter URL, the sink's settings), or a sink
        without its servers; the message names the peer and the key.
    """
    protocol = peer.configuration.get(SINK_PROTOCOL_KEY) or DEFAULT_PROTOCOL
    own = f"walship.sink.{protocol}."
    for key, value in sorted(peer.configuration.items()):
        if not key.startswith("walship."):
            continue
        if key not in KNOWN_KEYS and not key.startswith(own):
            shown = key if len(key) <= 80 else f"{key[:80]}... ({len(key):,} characters)"
            raise InvalidPeerConfigError(
                f"peer {peer.peer_id}: unknown configuration key {shown!r} (walship reads walship."
                f"{{{', '.join(sorted(key.removeprefix('walship.') for key in KNOWN_KEYS))}}}, and a sink's own "
                f"keys under {own}*)"
            )
        if not value.strip():
            raise InvalidPeerConfigError(f"peer {peer.peer_id}: {key} is empty (remove the key, or give it a value)")
    try:
        close_grace(peer)
        if DEADLETTER_DIR_KEY in peer.configuration:
            check_url(peer.configuration[DEADLETTER_DIR_KEY], f"peer {peer.peer_id}: {DEADLETTER_DIR_KEY}")
    except InvalidPeerConfigError:
        raise
    except ConfigError as exc:
        raise InvalidPeerConfigError(str(exc)) from None
    validate_sink_config(peer)
