"""Table and family descriptors of a cluster, read and written over its Thrift servers.

* :class:`Thrift2Admin`: a THBaseService server (the source's ``--source-thrift2``, a peer's
  ``walship.sink.thrift2``): list and read table descriptors, modify, add and create.
* :class:`~walship.scope.thrift1.Thrift1Reader`: a peer that has only Thrift1 servers (``walship.sink.thrift``):
  reads its tables' families (versions and TTL; Thrift1 has no scope), changes nothing.
* :func:`peer_tables_reader`: which of the two a peer's configuration offers.

Every error becomes a :class:`~walship.errors.ScopeError` naming the cluster, the server and
what was asked; a server that does not answer, a
:class:`~walship.errors.ScopeUnavailableError`.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Protocol

from walship.errors import ConfigError, InvalidPeerConfigError, ScopeError, ScopeUnavailableError
from walship.peer import PeerConfig, parse_host_ports
from walship.scope.model import FamilySettings, TableInfo, compared_ttl, family_text
from walship.sinks.base import SINK_THRIFT2_KEY, thrift2_servers, thrift_servers
from walship.thrift.conn import THRIFT2_REFUSALS, ThriftOptions, ThriftSession, open_thrift2
from walship.thrift.hbase2 import table_name, table_name_text

__all__ = [
    "PeerTablesReader",
    "Thrift2Admin",
    "family_settings",
    "open_source",
    "peer_tables_reader",
]

#: HBase's default VERSIONS of a family (``ColumnFamilyDescriptorBuilder``).
_DEFAULT_MAX_VERSIONS = 1


def family_settings(desc: Any) -> FamilySettings:
    """The compared settings of a ``TColumnFamilyDescriptor`` (HBase's defaults for unset fields)."""
    return FamilySettings(
        name=bytes(desc.name),
        max_versions=desc.maxVersions if desc.maxVersions is not None else _DEFAULT_MAX_VERSIONS,
        ttl=compared_ttl(desc.timeToLive),
        scope=desc.scope if desc.scope is not None else 0,
    )


def _table_info(desc: Any) -> TableInfo:
    families = {bytes(c.name): family_settings(c) for c in desc.columns or []}
    return TableInfo(table_name_text(desc.tableName), families, desc)


class PeerTablesReader(Protocol):
    """What the audit needs of a peer: its tables and their families."""

    #: ``thrift2`` or ``thrift1``
    access: str
    #: the server answering, ``host:port``
    server: str

    def tables(self, wanted: Iterable[str]) -> dict[str, TableInfo]:
        """The tables of ``wanted`` that exist on the cluster (others are left out)."""
        ...

    def close(self) -> None: ...


class Thrift2Admin(ThriftSession):
    """A cluster's THBaseService server: the first of ``servers`` that answers.

    :param label: who the servers are, for messages (e.g. ``the source cluster``).
    :param hint: where they are configured, for messages (e.g. ``--source-thrift2``).
    :raises ScopeUnavailableError: no server answered.
    """

    access = "thrift2"
    service = "Thrift2"
    opener = staticmethod(open_thrift2)
    refusals = THRIFT2_REFUSALS
    refused = ScopeError
    unavailable = ScopeUnavailableError

    def all_tables(self) -> dict[str, TableInfo]:
        """Every user table (no system tables), by name."""
        descs = self.call("list the table descriptors", lambda c: c.getTableDescriptorsByPattern(".*", False))
        out = {}
        for desc in descs or []:
            info = _table_info(desc)
            if not info.name.startswith("hbase:"):
                out[info.name] = info
        return dict(sorted(out.items()))

    def tables(self, wanted: Iterable[str]) -> dict[str, TableInfo]:
        wanted = set(wanted)
        return {name: info for name, info in self.all_tables().items() if name in wanted}

    def table(self, name: str) -> TableInfo:
        """:raises ScopeError: no such table (the server's words)."""
        desc = self.call(f"read the descriptor of table {name}", lambda c: c.getTableDescriptor(table_name(name)))
        return _table_info(desc)

    def exists(self, name: str) -> bool:
        return bool(self.call(f"check whether table {name} exists", lambda c: c.tableExists(table_name(name))))

    def modify_family(self, table: str, desc: Any) -> None:
        what = f"modify family {table}:{family_text(desc.name)}"
        self.call(what, lambda c: c.modifyColumnFamily(table_name(table), desc))

    def add_family(self, table: str, desc: Any) -> None:
        what = f"add family {table}:{family_text(desc.name)}"
        self.call(what, lambda c: c.addColumnFamily(table_name(table), desc))

    def create_table(self, desc: Any) -> None:
        what = f"create table {table_name_text(desc.tableName)}"
        self.call(what, lambda c: c.createTable(desc, []))


def peer_tables_reader(peer: PeerConfig, *, timeout_ms: int = 30_000) -> PeerTablesReader | None:
    """A reader of the peer's tables: over Thrift2 when it has ``walship.sink.thrift2``, else
    over Thrift1 (``walship.sink.thrift``), else ``None``.

    :raises InvalidPeerConfigError: a malformed server list or transport setting.
    :raises ScopeUnavailableError: none of the peer's servers answered.
    """
    options = ThriftOptions.of(peer)
    servers2 = thrift2_servers(peer)
    if servers2:
        return Thrift2Admin(
            servers2,
            label=f"peer {peer.peer_id}",
            hint=f"its {SINK_THRIFT2_KEY}",
            options=options,
            timeout_ms=timeout_ms,
        )
    servers1 = thrift_servers(peer)
    if servers1:
        from walship.scope.thrift1 import Thrift1Reader  # happybase only where Thrift1 is spoken

        return Thrift1Reader(peer.peer_id, servers1, options, timeout_ms=timeout_ms)
    return None


def open_source(spec: str | None, *, name: str, how: str, timeout_ms: int = 30_000) -> Thrift2Admin:
    """The source cluster's Thrift2 server(s), ``host:port[,host:port...]`` (buffered, binary;
    SASL or HTTP as :meth:`~walship.thrift.conn.ThriftOptions.for_source` says).

    :param name: where ``spec`` comes from, for messages (``--source-thrift2``, a
        connection's extra).
    :param how: how to give it, for the message when it is missing.
    :raises ConfigError: no ``spec``, or a malformed one.
    :raises ScopeUnavailableError: no server answered.
    """
    if not spec or not spec.strip():
        raise ConfigError(f"no Thrift2 server of the source cluster: {how}")
    try:
        servers = parse_host_ports(spec.strip(), name)
    except InvalidPeerConfigError as exc:
        raise ConfigError(str(exc)) from None
    return Thrift2Admin(
        servers, label="the source cluster", hint=name, options=ThriftOptions.for_source(), timeout_ms=timeout_ms
    )
