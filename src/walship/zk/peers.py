"""Replication peers, stored as HBase 2.x stores them.

A peer is ``<parent>/replication/peers/<id>`` holding ``PBUF`` + ReplicationPeer, with a
``peer-state`` child holding ``PBUF`` + ReplicationState. walship-specific settings travel in
the peer's configuration map (the sink's settings, see :mod:`walship.sinks`), which HBase
keeps and ignores; this module checks only that keys are not empty.

Managed peers. A peer added by walship carries ``walship.managed=true`` in its configuration
and is written with HBase's peer-state DISABLED: HBase 2.x's replication source then reads
nothing for it, yet still enqueues every new WAL on roll and its log cleaner keeps every queued
WAL. walship keeps its own switch beside it, ``<parent>/replication/walship/peers/<id>/state``
(the same PBUF ReplicationState encoding), and ``enable``/``disable`` flip that switch only.
A managed peer whose HBase peer-state is ENABLED would be shipped twice (by HBase and by
walship): :meth:`PeerConfig.check_ownership` refuses it. Peers written by HBase or by earlier
versions of walship (no ``walship.managed``) keep working on HBase's peer-state; ``adopt``
turns one into a managed peer.

Example::

    peers = ReplicationPeers(client, ZnodeLayout("/hbase"))
    peers.add(PeerConfig("1", "zk1,zk2:2181:/hbase-b", configuration={"walship.sink.thrift": "b:9090"}))
    peers.disable("1")
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

from walship.errors import DoubleShippingError, InvalidPeerConfigError, PeerError, PeerExistsError, PeerNotFoundError
from walship.protos import HBase_pb2, Replication_pb2
from walship.zk.encoding import PB_MAGIC, decode_peer, decode_peer_state, encode_peer_state
from walship.zk.layout import ZnodeLayout
from walship.zk.progress import ProgressStore
from walship.zk.queues import ReplicationQueues

__all__ = [
    "MANAGED_KEY",
    "SUBSCRIPTION_KEY",
    "PeerConfig",
    "ReplicationPeers",
    "format_table_cfs",
    "parse_cluster_key",
    "parse_host_ports",
    "parse_namespaces",
    "parse_table_cfs",
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

    def to_bytes(self) -> bytes:
        return PB_MAGIC + self.to_proto().SerializeToString()

    @classmethod
    def from_proto(
        cls, peer_id: str, pb: Replication_pb2.ReplicationPeer, *, enabled: bool, hbase_enabled: bool | None = None
    ) -> PeerConfig:
        return cls(
            peer_id=peer_id,
            cluster_key=pb.clusterkey,
            enabled=enabled,
            hbase_enabled=hbase_enabled,
            table_cfs=_read_table_cfs(pb.table_cfs),
            namespaces=frozenset(ns.decode() for ns in pb.namespaces) or None,
            exclude_table_cfs=_read_table_cfs(pb.exclude_table_cfs),
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


def _read_table_cfs(items: Iterable[Replication_pb2.TableCF]) -> dict[str, tuple[str, ...] | None] | None:
    out: dict[str, tuple[str, ...] | None] = {}
    for tcf in items:
        ns = tcf.table_name.namespace.decode()
        qualifier = tcf.table_name.qualifier.decode()
        name = qualifier if ns in ("", "default") else f"{ns}:{qualifier}"
        out[name] = tuple(f.decode() for f in tcf.families) or None
    return out or None


class ReplicationPeers:
    """Add, remove, enable, disable, update and list peers.

    Every change is one ZooKeeper write or one multi, so concurrent tools see a peer either
    whole or not at all; updates are versioned compare-and-set writes.
    """

    def __init__(self, client: KazooClient, layout: ZnodeLayout) -> None:
        self.client = client
        self.layout = layout

    def add(self, config: PeerConfig) -> None:
        """Create the peer and its state in one multi.

        :raises PeerExistsError: a peer with that id exists.
        """
        path = self.layout.peer(config.peer_id)
        self.client.ensure_path(self.layout.peers)
        tx = self.client.transaction()
        tx.create(path, config.to_bytes())
        if config.managed:
            # HBase keeps the peer's queues but never ships it; walship's switch says whether we do
            self.client.ensure_path(self.layout.walship_peer(config.peer_id))
            tx.create(self.layout.peer_state(config.peer_id), encode_peer_state(False))
            tx.create(self.layout.walship_peer_state(config.peer_id), encode_peer_state(config.enabled))
        else:
            tx.create(self.layout.peer_state(config.peer_id), encode_peer_state(config.enabled))
        results = tx.commit()
        for result in results:
            if isinstance(result, NodeExistsError):
                raise PeerExistsError(f"peer {config.peer_id} exists already ({path})")
            if isinstance(result, Exception):
                raise result
        log.info("added peer %s -> %s", config.peer_id, config.cluster_key)

    def get(self, peer_id: str) -> PeerConfig:
        """:raises PeerNotFoundError: no such peer."""
        validate_peer_id(peer_id)
        path = self.layout.peer(peer_id)
        try:
            data, _ = self.client.get(path)
        except NoNodeError:
            raise PeerNotFoundError(f"peer {peer_id} does not exist ({path})") from None
        return self._config(peer_id, decode_peer(data, path))

    def _config(self, peer_id: str, pb: Replication_pb2.ReplicationPeer) -> PeerConfig:
        hbase_enabled = self._enabled(peer_id)
        config = PeerConfig.from_proto(peer_id, pb, enabled=hbase_enabled, hbase_enabled=hbase_enabled)
        if not config.managed:
            return config
        return replace(config, enabled=self._walship_enabled(peer_id))

    def _enabled(self, peer_id: str) -> bool:
        path = self.layout.peer_state(peer_id)
        try:
            data, _ = self.client.get(path)
        except NoNodeError:
            return True  # HBase 1.x peers created before peer-state existed are enabled
        return decode_peer_state(data, path)

    def _walship_enabled(self, peer_id: str) -> bool:
        path = self.layout.walship_peer_state(peer_id)
        try:
            data, _ = self.client.get(path)
        except NoNodeError:
            log.warning("managed peer %s has no walship switch (%s): taken as DISABLED", peer_id, path)
            return False
        return decode_peer_state(data, path)

    def ids(self) -> list[str]:
        try:
            return sorted(self.client.get_children(self.layout.peers))
        except NoNodeError:
            return []

    def list(self) -> list[PeerConfig]:
        out = []
        for peer_id in self.ids():
            try:
                out.append(self.get(peer_id))
            except PeerNotFoundError:
                continue  # removed while we listed
        return out

    def exists(self, peer_id: str) -> bool:
        return self.client.exists(self.layout.peer(validate_peer_id(peer_id))) is not None

    def set_enabled(self, peer_id: str, enabled: bool) -> None:
        """Enable or disable a peer: for a managed peer walship's own switch (HBase's
        peer-state stays DISABLED); otherwise the peer-state znode, as HBase's enable_peer
        writes it."""
        peer = self.get(peer_id)
        path = self.layout.walship_peer_state(peer_id) if peer.managed else self.layout.peer_state(peer_id)
        data = encode_peer_state(enabled)
        try:
            self.client.set(path, data)
        except NoNodeError:
            self.client.create(path, data, makepath=True)
        log.info("%s %speer %s", "enabled" if enabled else "disabled", "managed " if peer.managed else "", peer_id)

    def adopt(self, peer_id: str) -> PeerConfig:
        """Turn a peer HBase ships into a walship-managed one, in one multi: ``walship.managed``
        in its configuration, HBase's peer-state DISABLED, walship's switch set to the state
        the peer had (an enabled peer stays enabled, now shipped by walship only).

        :raises PeerError: the peer is managed already, or changed while adopting (retry).
        """
        path = self.layout.peer(validate_peer_id(peer_id))
        try:
            data, stat = self.client.get(path)
        except NoNodeError:
            raise PeerNotFoundError(f"peer {peer_id} does not exist ({path})") from None
        pb = decode_peer(data, path)
        hbase_enabled = self._enabled(peer_id)
        marked = PeerConfig.from_proto(peer_id, pb, enabled=False, hbase_enabled=hbase_enabled)
        if marked.managed and self.client.exists(self.layout.walship_peer_state(peer_id)) is None:
            return self._complete_adoption(marked)
        current = self._config(peer_id, pb)
        if current.managed:
            raise PeerError(f"peer {peer_id} is managed by walship already")
        adopted = replace(current, configuration={**current.configuration, MANAGED_KEY: "true"})
        state_path = self.layout.peer_state(peer_id)
        self.client.ensure_path(self.layout.walship_peer(peer_id))
        tx = self.client.transaction()
        tx.set_data(path, adopted.to_bytes(), version=stat.version)
        if self.client.exists(state_path) is None:
            tx.create(state_path, encode_peer_state(False))
        else:
            tx.set_data(state_path, encode_peer_state(False))
        tx.create(self.layout.walship_peer_state(peer_id), encode_peer_state(current.enabled))
        results = tx.commit()
        failed = [r for r in results if isinstance(r, Exception)]
        if failed:
            raise PeerError(f"peer {peer_id} changed while it was adopted ({type(failed[0]).__name__}); try again")
        log.info("adopted peer %s: managed by walship, HBase peer-state DISABLED", peer_id)
        return self.get(peer_id)

    def _complete_adoption(self, current: PeerConfig) -> PeerConfig:
        """A peer that carries ``walship.managed`` already: one added through HBase's own
        Admin (``add_peer ... STATE => DISABLED, CONFIG => {'walship.managed' => 'true', ...}``),
        which a running HBase 2.x learns through its master, with no restart. Adopting it
        creates walship's switch, ENABLED; the peer znode is left as HBase's master wrote it.

        :raises DoubleShippingError: its HBase peer-state is ENABLED.
        :raises PeerError: walship's switch was created meanwhile: it is managed by walship already.
        """
        current.check_ownership()
        try:
            self.client.create(self.layout.walship_peer_state(current.peer_id), encode_peer_state(True), makepath=True)
        except NodeExistsError:
            raise PeerError(f"peer {current.peer_id} is managed by walship already") from None
        log.info("adopted peer %s (marked managed in HBase's configuration): walship's switch ENABLED", current.peer_id)
        return self.get(current.peer_id)

    def enable(self, peer_id: str) -> None:
        self.set_enabled(peer_id, True)

    def disable(self, peer_id: str) -> None:
        self.set_enabled(peer_id, False)

    def update(
        self, peer_id: str, *, validate: Callable[[PeerConfig], None] | None = None, **changes: Any
    ) -> PeerConfig:
        """Change fields of a peer's configuration with a versioned write (retried on a race).

        ``enabled`` is changed with :meth:`set_enabled`, not here.

        :param validate: called with the merged configuration before each write attempt (see
            :meth:`modify`).
        """
        if "peer_id" in changes or "enabled" in changes:
            raise InvalidPeerConfigError("update cannot change 'peer_id' or 'enabled'")
        return self.modify(peer_id, lambda current: replace(current, **changes), validate=validate)[1]

    def modify(
        self,
        peer_id: str,
        change: Callable[[PeerConfig], PeerConfig],
        *,
        validate: Callable[[PeerConfig], None] | None = None,
    ) -> tuple[PeerConfig, PeerConfig]:
        """Rewrite the peer's znode as ``change`` makes it from the peer read now: one versioned
        write (ZooKeeper set with the version read), retried from a fresh read on a race.

        ``change`` and ``validate`` run on every attempt, inside the loop, so a writer racing
        this one cannot make the write skip them; either may raise to write nothing. What
        ``change`` returns went through PeerConfig's own checks already (its constructor).

        :returns: the peer before and after the write.
        :raises PeerNotFoundError: no such peer.
        :raises InvalidPeerConfigError: ``change`` altered the peer id, its state or
            ``walship.managed`` (``peer adopt`` owns that), or ``validate`` refused the result.
        """
        path = self.layout.peer(validate_peer_id(peer_id))
        while True:
            try:
                data, stat = self.client.get(path)
            except NoNodeError:
                raise PeerNotFoundError(f"peer {peer_id} does not exist ({path})") from None
            current = self._config(peer_id, decode_peer(data, path))
            updated = change(current)
            if updated.peer_id != peer_id or updated.enabled != current.enabled:
                raise InvalidPeerConfigError(f"peer {peer_id}: an update cannot change the peer id or its state")
            if updated.configuration.get(MANAGED_KEY) != current.configuration.get(MANAGED_KEY):
                raise InvalidPeerConfigError(
                    f"peer {peer_id}: {MANAGED_KEY} cannot be changed by an update "
                    f"('walship peer adopt {peer_id}' makes a peer managed)"
                )
            if validate is not None:
                validate(updated)
            try:
                self.client.set(path, updated.to_bytes(), version=stat.version)
            except BadVersionError:
                log.debug("peer %s changed since it was read (version %d); reading it again", peer_id, stat.version)
                continue
            except NoNodeError:
                raise PeerNotFoundError(f"peer {peer_id} does not exist ({path})") from None
            log.info("updated peer %s (znode version %d -> %d)", peer_id, stat.version, stat.version + 1)
            return current, updated

    def remove(self, peer_id: str) -> None:
        """Remove the peer, then every queue of it (as HBase's RemovePeerProcedure does), so
        its WALs stop being held for it."""
        path = self.layout.peer(validate_peer_id(peer_id))
        if self.client.exists(path) is None:
            raise PeerNotFoundError(f"peer {peer_id} does not exist ({path})")
        self.client.delete(path, recursive=True)
        if self.client.exists(self.layout.walship_peer(peer_id)) is not None:
            self.client.delete(self.layout.walship_peer(peer_id), recursive=True)
        removed = ReplicationQueues(self.client, self.layout).remove_peer_queues(peer_id)
        ProgressStore(self.client, self.layout).remove_peer(peer_id)
        log.info("removed peer %s and %d of its queues", peer_id, removed)
