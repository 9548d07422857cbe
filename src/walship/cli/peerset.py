"""``walship peer set``: change a peer at run time, as HBase's ``set_peer_*`` and
``update_peer_config`` commands do, in one versioned write of its znode; and how a change is
shown (``name: before -> after``)."""

from __future__ import annotations

import argparse
import json
from dataclasses import replace
from typing import Any

from walship.cli.common import parse_config_pairs, peers_admin, state
from walship.errors import ConfigError, InvalidPeerConfigError
from walship.peer import MANAGED_KEY, PeerConfig, format_table_cfs, parse_namespaces, parse_table_cfs
from walship.replicate.peercheck import validate_peer
from walship.replicate.serialstart import follow_serial_change, read_barriers, require_source

__all__ = ["bytes_per_s", "changes", "cmd_peer_set"]


def _set_table_cfs(peer_id: str, flag: str, spec: str) -> dict[str, tuple[str, ...] | None] | None:
    """A table-cfs flag of ``peer set``: ``""`` clears the field."""
    if not spec.strip():
        return None
    try:
        return parse_table_cfs(spec)
    except InvalidPeerConfigError as exc:
        raise InvalidPeerConfigError(f"peer {peer_id}: {flag}: {exc}") from None


def _set_namespaces(peer_id: str, flag: str, spec: str) -> frozenset[str] | None:
    """A namespaces flag of ``peer set``: ``""`` clears the field."""
    if not spec.strip():
        return None
    try:
        return parse_namespaces(spec, flag)
    except InvalidPeerConfigError as exc:
        raise InvalidPeerConfigError(f"peer {peer_id}: {exc}") from None


def _describe(field_name: str, value: Any) -> str:
    if not value:
        return "-" if field_name != "replicate_all" else "false"
    if field_name.endswith("table_cfs"):
        return format_table_cfs(value)
    if field_name.endswith("namespaces"):
        return ",".join(sorted(value))
    return str(value).lower() if isinstance(value, bool) else str(value)


def bytes_per_s(value: int) -> str:
    return f"{value} bytes/s" if value else "unlimited"


def changes(before: PeerConfig, after: PeerConfig) -> list[str]:
    """``name: before -> after`` for every field ``peer set`` changed."""
    lines = []
    for name in ("replicate_all", "table_cfs", "namespaces", "exclude_table_cfs", "exclude_namespaces"):
        old, new = getattr(before, name), getattr(after, name)
        if (old or None) != (new or None):
            lines.append(f"{name}: {_describe(name, old)} -> {_describe(name, new)}")
    if before.serial != after.serial:
        lines.append(f"serial: {str(before.serial).lower()} -> {str(after.serial).lower()}")
    if before.bandwidth != after.bandwidth:
        lines.append(f"bandwidth: {bytes_per_s(before.bandwidth)} -> {bytes_per_s(after.bandwidth)}")
    for key in sorted(set(before.configuration) | set(after.configuration)):
        old_value, new_value = before.configuration.get(key), after.configuration.get(key)
        if old_value != new_value:
            lines.append(
                f"configuration {key}: {'-' if old_value is None else old_value} -> "
                f"{'-' if new_value is None else new_value}"
            )
    return lines


def cmd_peer_set(args: argparse.Namespace) -> int:
    """Change a peer as HBase's set_peer_tableCFs, set_peer_namespaces, set_peer_exclude_*,
    set_peer_replicate_all, set_peer_bandwidth, set_peer_serial and update_peer_config do:
    one versioned write of its znode."""
    peer_id = args.peer_id
    given = [
        args.table_cfs,
        args.namespaces,
        args.exclude_table_cfs,
        args.exclude_namespaces,
        args.replicate_all,
        args.config or None,
        args.remove_config or None,
        args.bandwidth,
        args.serial,
    ]
    if all(flag is None for flag in given):
        args.set_parser.error(
            "give at least one of --table-cfs, --namespaces, --exclude-table-cfs, --exclude-namespaces, "
            "--replicate-all, --config, --remove-config, --bandwidth, --serial"
        )
    # everything that does not depend on the peer's present state is checked before connecting
    fields: dict[str, Any] = {}
    if args.table_cfs is not None:
        fields["table_cfs"] = _set_table_cfs(peer_id, "--table-cfs", args.table_cfs)
    if args.namespaces is not None:
        fields["namespaces"] = _set_namespaces(peer_id, "--namespaces", args.namespaces)
    if args.exclude_table_cfs is not None:
        fields["exclude_table_cfs"] = _set_table_cfs(peer_id, "--exclude-table-cfs", args.exclude_table_cfs)
    if args.exclude_namespaces is not None:
        fields["exclude_namespaces"] = _set_namespaces(peer_id, "--exclude-namespaces", args.exclude_namespaces)
    if args.bandwidth is not None:
        fields["bandwidth"] = args.bandwidth
    if args.serial is not None:
        fields["serial"] = args.serial
    try:
        pairs = parse_config_pairs(args.config)
    except ConfigError as exc:
        raise ConfigError(f"peer {peer_id}: {exc}") from None
    removed = [key.strip() for key in args.remove_config]
    for key in removed:
        if not key:
            raise ConfigError(f"peer {peer_id}: invalid --remove-config '': expected a configuration key")
        if key in pairs:
            raise ConfigError(f"peer {peer_id}: {key} is both set (--config) and removed (--remove-config)")
    if MANAGED_KEY in pairs or MANAGED_KEY in removed:
        raise InvalidPeerConfigError(
            f"peer {peer_id}: {MANAGED_KEY} cannot be changed by 'peer set' "
            f"('walship peer adopt {peer_id}' makes a peer managed)"
        )
    switched: list[bool] = []

    def change(current: PeerConfig) -> PeerConfig:
        # runs on every attempt of the versioned write, on the peer as it is then
        switched.clear()
        update = dict(fields)
        if pairs or removed:
            configuration = dict(current.configuration)
            for key in removed:
                if key not in configuration:
                    raise ConfigError(f"peer {peer_id}: --remove-config {key}: the peer has no such configuration key")
                del configuration[key]
            update["configuration"] = {**configuration, **pairs}
        if args.replicate_all is not None:
            update["replicate_all"] = args.replicate_all
        elif current.replicate_all and (
            update.get("table_cfs", current.table_cfs) or update.get("namespaces", current.namespaces)
        ):
            # HBase's set_peer_tableCFs on such a peer asks for set_peer_replicate_all false first
            update["replicate_all"] = False
            switched.append(True)
        after = replace(current, **update)
        if after.serial and args.offline:  # a peer made serial, or a serial peer's new tables, start from hbase:meta
            require_source(peer_id, args.source_thrift2)
        return after

    # offline, made serial: hbase:meta is read first, so a failed read writes nothing (a running
    # master starts a serial peer, and a serial peer's new tables, itself)
    read_first = read_barriers(peer_id, args.source_thrift2) if args.serial and args.offline else None
    with state(args) as (client, layout), peers_admin(args, client, layout) as peers:
        before, after = peers.modify(peer_id, change, validate=validate_peer)
        if peers.starts_serial:
            follow_serial_change(
                client,
                layout,
                before,
                after,
                lambda: read_first if read_first is not None else read_barriers(peer_id, args.source_thrift2),
            )
    if args.json:
        print(json.dumps(after.to_json()))
        return 0
    lines = changes(before, after)
    print(f"updated peer {peer_id}" + ("" if lines else ": nothing changed"))
    for line in lines:
        if switched and line.startswith("replicate_all:"):
            line += " (table-cfs or namespaces set: now only those replicate)"
        print(f"  {line}")
    if not after.replicate_all and not after.table_cfs and not after.namespaces:
        print(f"  note: peer {peer_id} replicates no table now (no table-cfs or namespaces, replicate_all false)")
    return 0
