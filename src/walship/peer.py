"""The replication peer as HBase 2.x defines it (ReplicationPeerConfig), and its parsers: no I/O.

:class:`PeerConfig` is a peer's whole configuration: cluster key, table-cfs, namespaces and
their exclude lists, replicate-all, bandwidth, serial, and the configuration map where
walship's own settings travel (the sink's, see :mod:`walship.sinks`), which HBase keeps and
ignores. The parsers read what operators type (HBase's table-cfs format, namespaces, cluster
keys, ``host:port`` lists) and name the flag or key in their errors. Stored in ZooKeeper by
:class:`walship.zk.peers.ReplicationPeers`; encoded to HBase's protobuf by
:meth:`PeerConfig.to_proto`.

Managed peers: a peer added by walship carries ``walship.managed=true`` (see
:mod:`walship.zk.peers`); :meth:`PeerConfig.check_ownership` refuses one HBase would ship too.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from walship.errors import DoubleShippingError, InvalidPeerConfigError
from walship.protos import HBase_pb2, Replication_pb2

__all__ = [
    "MANAGED_KEY",
    "MAX_PEER_ID",
    "SUBSCRIPTION_KEY",
    "PeerConfig",
    "TableCfs",
    "check_update",
    "format_table_cfs",
    "parse_cluster_key",
    "parse_host_ports",
    "parse_namespaces",
    "parse_table_cfs",
    "read_table_cfs",
    "table_cfs_json",
    "validate_peer_id",
]

log = logging.getLogger(__name__)

#: Peer configuration key marking a walship-managed peer (``true``).
MANAGED_KEY = "walship.managed"
#: Peer configuration key marking a SEP subscription (``true``), see :mod:`walship.sep`.
SUBSCRIPTION_KEY = "walship.subscription"

_PEER_ID_RE = re.compile(r"^[A-Za-z0-9_.]+$")
_CLUSTER_KEY_RE = re.compile(r"^([^:,\s/]+(?:,[^:,\s/]+)*):(\d{1,5}):(/[^\s]*)$")
_HOST_PORT_RE = re.compile(r"^([A-Za-z0-9_.-]+):(\d{1,5})$")
_TABLE_PART_RE = re.compile(r"^[A-Za-z0-9_.-]+$")
#: HBase's namespace names (``TableName.isLegalNamespaceName``): letters, digits and ``_``.
_NAMESPACE_RE = re.compile(r"^[A-Za-z0-9_]+$")
#: The longest peer id walship takes (a znode name and part of every recovered queue id).
MAX_PEER_ID = 128


def _quoted(text: str, limit: int = 60) -> str:
    """``text`` as quoted in a message, cut to about ``limit`` characters."""
    return repr(text) if len(text) <= limit else f"{text[:limit]!r}... ({len(text):,} characters)"


#: table name (``t`` or ``ns:t``, as TableName.getNameAsString) -> families, or None for all
TableCfs = Mapping[str, tuple[str, ...] | None]


def validate_peer_id(peer_id: str) -> str:
    """HBase refuses ``-`` in peer ids (it separates recovered queue ids); walship also keeps
    them to characters that are safe in a znode name and a file name."""
    if not peer_id:
        raise InvalidPeerConfigError("invalid peer id '': must not be empty")
    if len(peer_id) > MAX_PEER_ID:
        raise InvalidPeerConfigError(f"invalid peer id {_quoted(peer_id)}: longer than {MAX_PEER_ID} characters")
    if "-" in peer_id:
        raise InvalidPeerConfigError(f"invalid peer id {_quoted(peer_id)}: must not contain '-' (HBASE-11394)")
    if not _PEER_ID_RE.match(peer_id) or peer_id in (".", ".."):
        raise InvalidPeerConfigError(f"invalid peer id {_quoted(peer_id)}: use letters, digits, '_' and '.'")
    return peer_id


def parse_cluster_key(key: str) -> tuple[list[str], int, str]:
    """Split ``host[,host...]:port:/parent`` into hosts, port and znode parent."""
    m = _CLUSTER_KEY_RE.match(key.strip())
    if not m:
        raise InvalidPeerConfigError(f"invalid cluster key {_quoted(key)}: expected host[,host...]:port:/znode-parent")
    port = int(m.group(2))
    if not 0 < port < 65536:
        raise InvalidPeerConfigError(f"invalid cluster key {_quoted(key)}: port {port} out of range")
    parent = m.group(3)
    parts = parent.split("/")[1:]
    if parent != "/" and (":" in parent or any(p in ("", ".", "..") for p in parts)):
        raise InvalidPeerConfigError(
            f"invalid cluster key {_quoted(key)}: znode parent {_quoted(parent)} is not an absolute znode path"
        )
    return m.group(1).split(","), port, parent


def parse_host_ports(spec: str, what: str) -> list[tuple[str, int]]:
    """``host:port[,host:port...]``; the error names ``what`` (a flag or configuration key)."""
    out: list[tuple[str, int]] = []
    for part in spec.split(","):
        m = _HOST_PORT_RE.match(part.strip())
        if not m or not 0 < int(m.group(2)) < 65536:
            raise InvalidPeerConfigError(f"invalid {what} {_quoted(spec)}: expected host:port[,host:port...]")
        out.append((m.group(1), int(m.group(2))))
    return out


def _table_name(text: str, spec: str) -> str:
    """Canonical table name: ``t`` in the default namespace, ``ns:t`` otherwise."""
    ns, sep, qualifier = text.partition(":")
    if not sep:
        ns, qualifier = "default", text
    if not _TABLE_PART_RE.match(ns) or not _TABLE_PART_RE.match(qualifier):
        raise InvalidPeerConfigError(f"invalid table {_quoted(text)} in table-cfs {_quoted(spec)}")
    return qualifier if ns == "default" else f"{ns}:{qualifier}"


def parse_table_cfs(spec: str) -> dict[str, tuple[str, ...] | None]:
    """Parse a table-cfs spec: tables separated by ``;``, each ``table[:cf1,cf2]``.

    The table is written as HBase's ReplicationPeerConfigUtil writes it, ``ns.table`` (one
    dot splits off the namespace), or as ``ns:table:cf1,cf2`` with TableName's own colon. A
    table with no families replicates all of them. Unlike HBase, which logs and drops a
    malformed part, an invalid part is an error naming it.
    """
    out: dict[str, tuple[str, ...] | None] = {}
    for raw in spec.split(";"):
        part = raw.strip()
        if not part:
            continue
        pieces = part.split(":")
        if len(pieces) == 3:
            table, cfs = f"{pieces[0].strip()}:{pieces[1].strip()}", pieces[2]
        elif len(pieces) == 2:
            table, cfs = pieces[0].strip(), pieces[1]
        elif len(pieces) == 1:
            table, cfs = pieces[0].strip(), None
        else:
            raise InvalidPeerConfigError(f"invalid table-cfs part {_quoted(part)} in {_quoted(spec)}: too many ':'")
        if ":" not in table and table.count(".") == 1:
            ns, qualifier = table.split(".")
            table = f"{ns}:{qualifier}"
        name = _table_name(table, spec)
        families: tuple[str, ...] | None = None
        if cfs is not None:
            fams = tuple(f.strip() for f in cfs.split(","))
            if not all(fams):
                raise InvalidPeerConfigError(
                    f"invalid table-cfs part {_quoted(part)} in {_quoted(spec)}: an empty family name "
                    "(name the families, or leave out the ':' to replicate every family)"
                )
            for fam in fams:
                # HBase's ColumnFamilyDescriptorBuilder.isLegalColumnFamilyName
                if fam.startswith(".") or any(ch in fam for ch in ":\\/") or not fam.isprintable():
                    raise InvalidPeerConfigError(f"invalid family {_quoted(fam)} in table-cfs {_quoted(spec)}")
            families = fams or None
        if name in out:
            raise InvalidPeerConfigError(f"table {name!r} appears twice in table-cfs {_quoted(spec)}")
        out[name] = families
    if not out:
        raise InvalidPeerConfigError(f"table-cfs {_quoted(spec)} names no table")
    return out


def parse_namespaces(spec: str, what: str = "namespaces") -> frozenset[str]:
    """``ns1,ns2``: HBase namespace names (letters, digits, ``_``), none empty.

    :raises InvalidPeerConfigError: an empty or invalid name, or none at all; ``what`` names the
        flag or field.
    """
    names = [n.strip() for n in spec.split(",")]
    for name in names:
        if not name or not _NAMESPACE_RE.match(name):
            raise InvalidPeerConfigError(
                f"invalid {what} {_quoted(spec)}: {_quoted(name)} is not a namespace name (letters, digits, '_')"
            )
    return frozenset(names)


def format_table_cfs(table_cfs: TableCfs) -> str:
    """Format as HBase's ``ReplicationPeerConfigUtil.convert(TableCF[])``: ``ns.t:cf1,cf2;t2``."""
    parts = []
    for table, fams in table_cfs.items():
        ns, sep, qualifier = table.partition(":")
        name = f"{ns}.{qualifier}" if sep else f"default.{table}"
        parts.append(f"{name}:{','.join(fams)}" if fams else name)
    return ";".join(parts)


@dataclass(frozen=True)
class PeerConfig:
    """One replication peer: HBase's ReplicationPeerConfig plus its state.

    With ``table_cfs`` or ``namespaces`` set, only those tables replicate and
    ``replicate_all`` is false; otherwise every user table replicates except the
    ``exclude_*`` ones, as in HBase 2.x.
    """

    peer_id: str
    cluster_key: str
    enabled: bool = True
    table_cfs: TableCfs | None = None
    namespaces: frozenset[str] | None = None
    exclude_table_cfs: TableCfs | None = None
    exclude_namespaces: frozenset[str] | None = None
    replicate_all: bool | None = None
    bandwidth: int = 0
    serial: bool = False
    configuration: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    endpoint_impl: str | None = None
    peer_data: tuple[tuple[bytes, bytes], ...] = ()
    remote_wal_dir: str | None = None
    #: HBase's own peer-state; ``None``: the same as ``enabled`` (a peer HBase ships itself)
    hbase_enabled: bool | None = field(default=None, compare=False)

    @property
    def managed(self) -> bool:
        """walship ships this peer and HBase keeps (but never ships) its queues."""
        return self.configuration.get(MANAGED_KEY, "").strip().lower() == "true"

    @property
    def subscription(self) -> bool:
        """A SEP subscription: a managed peer whose sink is a listener (see :mod:`walship.sep`)."""
        return self.configuration.get(SUBSCRIPTION_KEY, "").strip().lower() == "true"

    @property
    def hbase_state_enabled(self) -> bool:
        return self.enabled if self.hbase_enabled is None else self.hbase_enabled

    def check_ownership(self) -> None:
        """:raises DoubleShippingError: HBase would ship this managed peer too."""
        if self.managed and self.hbase_state_enabled:
            raise DoubleShippingError(
                f"peer {self.peer_id} is managed by walship but its HBase peer-state is ENABLED: HBase's "
                f"replication source ships it too (double shipping). Run disable_peer '{self.peer_id}' in the "
                f"HBase shell; walship's own switch is 'walship peer enable|disable {self.peer_id}'"
            )

    def __post_init__(self) -> None:
        validate_peer_id(self.peer_id)
        parse_cluster_key(self.cluster_key)
        scoped = bool(self.table_cfs) or bool(self.namespaces)
        if self.replicate_all is None:
            object.__setattr__(self, "replicate_all", not scoped)
        if self.replicate_all and scoped:
            raise InvalidPeerConfigError(
                f"peer {self.peer_id}: table-cfs or namespaces need replicate_all false "
                "(HBase: clean them first to replicate all tables)"
            )
        if not self.replicate_all and (self.exclude_table_cfs or self.exclude_namespaces):
            raise InvalidPeerConfigError(f"peer {self.peer_id}: exclude lists apply only when replicating all tables")
        if self.bandwidth < 0:
            raise InvalidPeerConfigError(f"peer {self.peer_id}: bandwidth must be >= 0, got {self.bandwidth}")
        object.__setattr__(self, "configuration", MappingProxyType(dict(self.configuration)))
        for key, value in self.configuration.items():
            if not key.strip():
                raise InvalidPeerConfigError(f"peer {self.peer_id}: empty configuration key (value {value!r})")

    # -- protobuf -------------------------------------------------------------------------

    def to_proto(self) -> Replication_pb2.ReplicationPeer:
        """The message ``ReplicationPeerConfigUtil.convert(ReplicationPeerConfig)`` builds."""
        pb = Replication_pb2.ReplicationPeer(clusterkey=self.cluster_key)
        if self.endpoint_impl:
            pb.replicationEndpointImpl = self.endpoint_impl
        for first, second in self.peer_data:
            pb.data.add(first=first, second=second)
        for name, value in self.configuration.items():
            pb.configuration.add(name=name, value=value)
        _add_table_cfs(pb.table_cfs, self.table_cfs)
        for ns in sorted(self.namespaces or ()):
            pb.namespaces.append(ns.encode())
        pb.bandwidth = self.bandwidth
        pb.replicate_all = bool(self.replicate_all)
        pb.serial = self.serial
        _add_table_cfs(pb.exclude_table_cfs, self.exclude_table_cfs)
        for ns in sorted(self.exclude_namespaces or ()):
            pb.exclude_namespaces.append(ns.encode())
        if self.remote_wal_dir:
            pb.remoteWALDir = self.remote_wal_dir
        return pb

    @classmethod
    def from_proto(
        cls, peer_id: str, pb: Replication_pb2.ReplicationPeer, *, enabled: bool, hbase_enabled: bool | None = None
    ) -> PeerConfig:
        return cls(
            peer_id=peer_id,
            cluster_key=pb.clusterkey,
            enabled=enabled,
            hbase_enabled=hbase_enabled,
            table_cfs=read_table_cfs(pb.table_cfs),
            namespaces=frozenset(ns.decode() for ns in pb.namespaces) or None,
            exclude_table_cfs=read_table_cfs(pb.exclude_table_cfs),
            exclude_namespaces=frozenset(ns.decode() for ns in pb.exclude_namespaces) or None,
            replicate_all=pb.replicate_all if pb.HasField("replicate_all") else None,
            bandwidth=pb.bandwidth,
            serial=pb.serial,
            configuration={p.name: p.value for p in pb.configuration},
            endpoint_impl=pb.replicationEndpointImpl or None,
            peer_data=tuple((p.first, p.second) for p in pb.data),
            remote_wal_dir=pb.remoteWALDir or None,
        )

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready description, as ``walship peer show --json`` prints it."""
        return {
            "peer_id": self.peer_id,
            "cluster_key": self.cluster_key,
            "state": "ENABLED" if self.enabled else "DISABLED",
            "hbase_peer_state": "ENABLED" if self.hbase_state_enabled else "DISABLED",
            "managed": self.managed,
            "subscription": self.subscription,
            "replicate_all": self.replicate_all,
            "table_cfs": table_cfs_json(self.table_cfs),
            "namespaces": sorted(self.namespaces) if self.namespaces else None,
            "exclude_table_cfs": table_cfs_json(self.exclude_table_cfs),
            "exclude_namespaces": sorted(self.exclude_namespaces) if self.exclude_namespaces else None,
            "bandwidth": self.bandwidth,
            "serial": self.serial,
            "configuration": dict(sorted(self.configuration.items())),
        }


def table_cfs_json(table_cfs: TableCfs | None) -> dict[str, list[str] | None] | None:
    if not table_cfs:
        return None
    return {t: list(f) if f else None for t, f in table_cfs.items()}


def _add_table_cfs(target: Any, table_cfs: TableCfs | None) -> None:
    for table, fams in (table_cfs or {}).items():
        ns, sep, qualifier = table.partition(":")
        if not sep:
            ns, qualifier = "default", table
        tcf = target.add()
        tcf.table_name.CopyFrom(HBase_pb2.TableName(namespace=ns.encode(), qualifier=qualifier.encode()))
        for fam in fams or ():
            tcf.families.append(fam.encode())


def read_table_cfs(items: Iterable[Replication_pb2.TableCF]) -> dict[str, tuple[str, ...] | None] | None:
    out: dict[str, tuple[str, ...] | None] = {}
    for tcf in items:
        ns = tcf.table_name.namespace.decode()
        qualifier = tcf.table_name.qualifier.decode()
        name = qualifier if ns in ("", "default") else f"{ns}:{qualifier}"
        out[name] = tuple(f.decode() for f in tcf.families) or None
    return out or None


def check_update(current: PeerConfig, updated: PeerConfig) -> None:
    """What an update of ``current`` may not change: the peer id, its state and
    ``walship.managed`` (``peer adopt`` owns that).

    :raises InvalidPeerConfigError: ``updated`` changes one of them.
    """
    peer_id = current.peer_id
    if updated.peer_id != peer_id or updated.enabled != current.enabled:
        raise InvalidPeerConfigError(f"peer {peer_id}: an update cannot change the peer id or its state")
    if updated.configuration.get(MANAGED_KEY) != current.configuration.get(MANAGED_KEY):
        raise InvalidPeerConfigError(
            f"peer {peer_id}: {MANAGED_KEY} cannot be changed by an update "
            f"('walship peer adopt {peer_id}' makes a peer managed)"
        )
