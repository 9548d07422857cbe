"""A peer that has only Thrift1 servers (``walship.sink.thrift``): its tables' families
(versions and TTL; Thrift1 has no scope), read only, over happybase. A module of its own, so
that only a process that reads a Thrift1 peer's tables loads happybase and Thrift1's IDL."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from walship.errors import ScopeError, ScopeUnavailableError
from walship.scope.model import FamilySettings, TableInfo, compared_ttl
from walship.sinks.base import SINK_THRIFT_KEY
from walship.thrift.conn import ThriftOptions, ThriftSession
from walship.thrift.conn1 import THRIFT1_REFUSALS, open_connection

__all__ = ["Thrift1Reader"]


class Thrift1Reader(ThriftSession):
    """A peer's Thrift1 servers (the first that answers): its tables' families, read only.

    :raises ScopeUnavailableError: no server answered.
    """

    access = "thrift1"
    service = "Thrift"
    opener = staticmethod(open_connection)
    refusals = THRIFT1_REFUSALS
    refused = ScopeError
    unavailable = ScopeUnavailableError

    def __init__(
        self, peer_id: str, servers: Sequence[tuple[str, int]], options: ThriftOptions, *, timeout_ms: int = 30_000
    ) -> None:
        super().__init__(servers, label=f"peer {peer_id}", hint=SINK_THRIFT_KEY, options=options, timeout_ms=timeout_ms)

    @staticmethod
    def _families_of(name: str) -> Callable[[Any], dict[bytes, dict[str, Any]]]:
        return lambda conn: dict(conn.table(name).families())

    def tables(self, wanted: Iterable[str]) -> dict[str, TableInfo]:
        names: list[Any] = self.call("list its tables", lambda c: c.tables())
        present = {n.decode(errors="replace") if isinstance(n, bytes) else str(n) for n in names}
        out: dict[str, TableInfo] = {}
        for name in sorted(set(wanted) & present):
            families = self.call(f"read the families of table {name}", self._families_of(name))
            out[name] = TableInfo(
                name,
                {
                    bytes(f): FamilySettings(
                        bytes(f), int(d.get("max_versions") or 1), compared_ttl(d.get("time_to_live"))
                    )
                    for f, d in families.items()
                },
            )
        return out
