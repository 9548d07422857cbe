"""The Params of a new peer (the ``walship_add_peer`` DAG's trigger form) made into its
:class:`~walship.peer.PeerConfig`, as ``walship peer add`` makes one from its flags, and how a
peer that exists already differs from it. No I/O: every task of the DAG makes the same peer
from the same Params.

Every error is an :class:`~airflow.sdk.exceptions.AirflowFailException` (a retry would find
the same) naming the Param, e.g. ``walship_add_peer: Param cluster_key: invalid cluster key
'zk:2181': expected host[,host...]:port:/znode-parent``.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from airflow.sdk.exceptions import AirflowFailException

if TYPE_CHECKING:
    from walship.peer import PeerConfig

__all__ = ["PROTOCOLS", "differences", "different", "fail", "flag", "number", "peer_config", "text"]

log = logging.getLogger(__name__)

#: The sink protocols a peer is onboarded with (``hbase``: straight into the peer's region
#: servers, real HBase only).
PROTOCOLS = ("thrift1", "thrift2", "hbase")
#: Configuration keys the Params set themselves (not through ``configuration``).
_OWN_KEYS = {
    "walship.managed": "(always true here)",
    "walship.sink.protocol": "protocol",
    "walship.sink.thrift": "sink_thrift",
    "walship.sink.thrift2": "sink_thrift2",
}
#: The fields of a peer compared with what the Params ask for (not its state).
_COMPARED = (
    "cluster_key",
    "replicate_all",
    "table_cfs",
    "namespaces",
    "exclude_table_cfs",
    "exclude_namespaces",
    "bandwidth",
    "serial",
)


def fail(message: str) -> AirflowFailException:
    """The DAG's failure (not retried), ``message`` naming what is wrong."""
    return AirflowFailException(f"walship_add_peer: {message}")


def text(params: Mapping[str, Any], name: str) -> str:
    """A string Param, stripped (``""`` when unset)."""
    value = params.get(name)
    return "" if value is None else str(value).strip()


def number(params: Mapping[str, Any], name: str, default: int) -> int:
    """A whole number Param >= 0 (``default`` when unset)."""
    value = params.get(name)
    if value is None or value == "":
        return default
    if isinstance(value, bool) or not isinstance(value, int | str) or not str(value).strip().lstrip("-").isdigit():
        raise fail(f"Param {name}: expected a whole number, got {value!r}")
    number = int(value)
    if number < 0:
        raise fail(f"Param {name}: must be >= 0, got {number}")
    return number


def flag(params: Mapping[str, Any], name: str, default: bool) -> bool:
    """A true/false Param (``default`` when unset)."""
    value = params.get(name, default)
    if value is None:
        return default
    if isinstance(value, bool):
        return value
    word = str(value).strip().lower()
    if word in ("true", "1", "yes"):
        return True
    if word in ("false", "0", "no", ""):
        return False
    raise fail(f"Param {name}: expected true or false, got {value!r}")


def peer_config(params: Mapping[str, Any]) -> PeerConfig:
    """The peer the Params describe: walship-managed, DISABLED (walship's switch), checked as
    ``walship peer add`` checks one. The same Params always give the same peer.

    Params: ``peer_id``, ``cluster_key``, ``protocol`` (``thrift1``, ``thrift2`` or ``hbase``),
    ``sink_thrift2`` (always: the copy and the verify use the peer's Thrift2 servers),
    ``sink_thrift`` (with ``protocol`` thrift1), ``table_cfs`` (HBase's ``ns.t:cf1,cf2;t2``),
    ``namespaces`` (``a,b``; neither: every table), ``serial``, ``bandwidth`` (bytes a second,
    0: unlimited) and ``configuration`` (more ``walship.*`` entries, e.g. the Thrift transport).

    :raises AirflowFailException: a Param is missing or malformed; the message names it.
    """
    from walship.errors import InvalidPeerConfigError
    from walship.peer import (
        MANAGED_KEY,
        PeerConfig,
        parse_cluster_key,
        parse_host_ports,
        parse_namespaces,
        parse_table_cfs,
        validate_peer_id,
    )
    from walship.replicate.peercheck import validate_peer
    from walship.sinks.base import SINK_PROTOCOL_KEY, SINK_THRIFT2_KEY, SINK_THRIFT_KEY

    def checked(name: str, parse: Any, *args: Any) -> Any:
        try:
            return parse(*args)
        except InvalidPeerConfigError as exc:
            raise fail(f"Param {name}: {exc}") from None

    peer_id = text(params, "peer_id")
    checked("peer_id", validate_peer_id, peer_id)
    cluster_key = text(params, "cluster_key")
    if not cluster_key:
        raise fail("Param cluster_key: required: the peer cluster's ZooKeeper, host[,host...]:port:/znode-parent")
    checked("cluster_key", parse_cluster_key, cluster_key)
    protocol = text(params, "protocol") or "thrift2"
    if protocol not in PROTOCOLS:
        raise fail(f"Param protocol: must be one of {', '.join(PROTOCOLS)}, got {protocol!r}")
    sink: dict[str, str] = {SINK_PROTOCOL_KEY: protocol}
    thrift2 = text(params, "sink_thrift2")
    if not thrift2:
        raise fail(
            "Param sink_thrift2: required: the peer's Thrift2 server(s), host:port[,...] (the copy writes and the "
            "verify reads the peer over Thrift2, whichever protocol ships it)"
        )
    checked("sink_thrift2", parse_host_ports, thrift2, SINK_THRIFT2_KEY)
    sink[SINK_THRIFT2_KEY] = thrift2
    thrift1 = text(params, "sink_thrift")
    if thrift1:
        checked("sink_thrift", parse_host_ports, thrift1, SINK_THRIFT_KEY)
        sink[SINK_THRIFT_KEY] = thrift1
    elif protocol == "thrift1":
        raise fail("Param sink_thrift: required with protocol thrift1: the peer's Thrift1 server(s), host:port[,...]")
    table_cfs_text = text(params, "table_cfs")
    table_cfs = checked("table_cfs", parse_table_cfs, table_cfs_text) if table_cfs_text else None
    namespaces_text = text(params, "namespaces")
    namespaces = checked("namespaces", parse_namespaces, namespaces_text, "namespaces") if namespaces_text else None
    extra = params.get("configuration") or {}
    if not isinstance(extra, Mapping):
        raise fail(f"Param configuration: expected an object of configuration entries, got {extra!r}")
    for key in extra:
        if str(key).strip() in _OWN_KEYS:
            raise fail(f"Param configuration: {key} is set by the Param {_OWN_KEYS[str(key).strip()]}, not here")
    configuration = {**{str(k).strip(): str(v) for k, v in extra.items()}, **sink, MANAGED_KEY: "true"}
    try:
        config = PeerConfig(
            peer_id=peer_id,
            cluster_key=cluster_key,
            enabled=False,
            table_cfs=table_cfs,
            namespaces=namespaces,
            configuration=configuration,
            bandwidth=number(params, "bandwidth", 0),
            serial=flag(params, "serial", False),
        )
        validate_peer(config)
    except InvalidPeerConfigError as exc:
        raise fail(f"Param configuration: {exc}") from None
    return config


def _shown(name: str, value: Any) -> str:
    from walship.peer import format_table_cfs

    if value is None or value == {} or value == frozenset():
        return "-"
    if name.endswith("table_cfs"):
        return repr(format_table_cfs(value))
    if name.endswith("namespaces"):
        return repr(",".join(sorted(value)))
    return repr(value)


def _normal(name: str, value: Any) -> Any:
    """A field as compared: families as sets (HBase keeps them in the order given), empty
    lists as unset."""
    if name.endswith("table_cfs"):
        return {t: frozenset(f) if f else None for t, f in value.items()} if value else None
    if name.endswith("namespaces"):
        return frozenset(value) if value else None
    return value


def differences(existing: PeerConfig, wanted: PeerConfig) -> list[str]:
    """How the peer ``existing`` differs from the one the Params ask for (its state aside),
    one line per field or configuration entry; empty when it is the same peer."""
    out = []
    for name in _COMPARED:
        have, want = getattr(existing, name), getattr(wanted, name)
        if _normal(name, have) != _normal(name, want):
            out.append(f"{name} is {_shown(name, have)}, the Params ask for {_shown(name, want)}")
    for key in sorted(set(existing.configuration) | set(wanted.configuration)):
        have_value, want_value = existing.configuration.get(key), wanted.configuration.get(key)
        if have_value != want_value:
            out.append(
                f"configuration {key} is {'unset' if have_value is None else repr(have_value)}, the Params ask for "
                f"{'it unset' if want_value is None else repr(want_value)}"
            )
    return out


def different(peer_id: str, lines: list[str]) -> AirflowFailException:
    """The failure of a run whose peer id names a peer with another configuration."""
    return fail(
        f"peer {peer_id} exists with another configuration: {'; '.join(lines)}. Trigger the DAG with another "
        f"peer_id, or change the peer itself (walship peer set {peer_id} ...) and run again"
    )
