"""The names in a replication queue: a queue id (a peer id, or for a queue claimed from dead
servers ``<peerId>-<dead>[-<dead>...]``, parsed as HBase's ``ReplicationQueueInfo`` does), a
WAL's position in a queue, and a queue with its WALs."""

from __future__ import annotations

from dataclasses import dataclass, field

from walship.errors import ConfigError, InvalidQueueIdError
from walship.servername import ServerName

__all__ = ["QueueId", "QueueInfo", "WalPosition"]


@dataclass(frozen=True, order=True)
class QueueId:
    """A queue id: the peer, and for a recovered queue the chain of dead servers it came from."""

    peer_id: str
    dead_servers: tuple[str, ...] = ()

    @property
    def recovered(self) -> bool:
        return bool(self.dead_servers)

    def claimed_from(self, dead_server: str) -> QueueId:
        """The id this queue gets when claimed from ``dead_server``."""
        return QueueId(self.peer_id, (*self.dead_servers, dead_server))

    def __str__(self) -> str:
        return "-".join((self.peer_id, *self.dead_servers))

    @classmethod
    def parse(cls, text: str) -> QueueId:
        """Parse a queue id as HBase's ``ReplicationQueueInfo`` does.

        The peer id ends at the first ``-``. Server names may contain ``-`` (host names), so
        a ``-`` separates two dead servers only once two commas of the current name are seen.
        Unlike HBase, which logs and drops a malformed server name, this raises.

        :raises InvalidQueueIdError: an empty peer id or a malformed dead server name.
        """
        peer_id, sep, rest = text.partition("-")
        if not peer_id:
            raise InvalidQueueIdError(f"invalid queue id {text!r}: empty peer id")
        if not sep:
            return cls(peer_id)
        servers: list[str] = []
        commas = 0
        start = 0
        for i, ch in enumerate(rest):
            if ch == ",":
                commas += 1
            elif ch == "-" and commas >= 2:
                servers.append(rest[start:i])
                start = i + 1
                commas = 0
        servers.append(rest[start:])
        for server in servers:
            try:
                ServerName.parse(server)
            except ConfigError:
                raise InvalidQueueIdError(f"invalid queue id {text!r}: {server!r} is not a server name") from None
        return cls(peer_id, tuple(servers))


@dataclass(frozen=True)
class WalPosition:
    """A WAL in a queue: its name, the position shipped up to, the znode version; read from
    ZooKeeper, also when its znode was created (``ctime``: the WAL enqueued, or its queue
    claimed) and last written (``mtime``: ``ctime`` until a position is set), epoch ms on
    ZooKeeper's clock (``None`` for one a shipper made itself; never compared)."""

    name: str
    position: int
    version: int
    ctime: int | None = field(default=None, compare=False)
    mtime: int | None = field(default=None, compare=False)


@dataclass(frozen=True)
class QueueInfo:
    """One queue of one server: its id and its WALs, oldest first."""

    server: str
    queue_id: QueueId
    wals: tuple[WalPosition, ...]

    @property
    def peer_id(self) -> str:
        return self.queue_id.peer_id

    @property
    def recovered(self) -> bool:
        return self.queue_id.recovered
