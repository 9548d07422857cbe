"""What the Thrift1 and Thrift2 sinks share: the peer's servers from its configuration, the
streams a batch's calls go over (:class:`~walship.sinks.streams.PeerStreams`, the sink's
``streams``), the checks of the configuration and the endpoints the registry reports. Each sink
names its service, its configuration key, how to open a connection and what counts as the
server's refusal."""

from __future__ import annotations

import logging
from typing import Any, ClassVar

from walship.errors import ConfigError, InvalidPeerConfigError
from walship.peer import PeerConfig
from walship.sinks.base import SinkContext
from walship.sinks.streams import PeerStreams
from walship.thrift.conn import ThriftOptions, connections_of
from walship.thrift.pool import ServerPool

__all__ = ["PooledSink"]

log = logging.getLogger(__name__)


class PooledSink:
    """The construction of a sink that calls one of a peer's Thrift servers.

    :param retries: rounds over all servers before giving up.
    """

    #: ``Thrift`` or ``Thrift2``: what the servers are, in messages and thread names.
    service: ClassVar[str]
    #: The peer configuration key listing the servers.
    servers_key: ClassVar[str]
    #: The server's own exceptions: a call raising one is not retried.
    refusals: ClassVar[tuple[type[BaseException], ...]]

    @staticmethod
    def servers_of(peer: PeerConfig) -> list[tuple[str, int]]:
        """The peer's servers from its configuration (empty when not set)."""
        raise NotImplementedError

    @staticmethod
    def opener(host: str, port: int, options: ThriftOptions, *, timeout_ms: int) -> Any:
        """An open connection with ``close()``."""
        raise NotImplementedError

    def __init__(
        self,
        peer: PeerConfig,
        context: SinkContext,
        *,
        timeout_ms: int = 30_000,
        retries: int = 6,
        backoff: float = 0.2,
    ) -> None:
        self.peer = peer
        self.options = ThriftOptions.of(peer)
        self.options.identity(f"peer {peer.peer_id}")  # SASL without a login: fail now, naming the key
        servers = self.servers_of(peer)
        if not servers:
            raise ConfigError(
                f"peer {peer.peer_id} has no {self.service} servers: set its {self.servers_key}=host:port[,host:port...] "
                "configuration"
            )
        options, opener, refusals, service = self.options, self.opener, self.refusals, self.service

        def new_pool(first: int) -> ServerPool:
            return ServerPool(
                peer.peer_id,
                servers,
                options,
                lambda host, port: opener(host, port, options, timeout_ms=timeout_ms),
                refusals,
                service=service,
                retries=retries,
                backoff=backoff,
                first=first,
            )

        self.streams = PeerStreams(
            new_pool,
            servers=len(servers),
            connections=connections_of(peer, len(servers)),
            name=f"walship-{service.lower()}-{peer.peer_id}",
        )
        self.configure(context)

    def configure(self, context: SinkContext) -> None:
        """What a sink sets up beyond its connections (nothing here)."""

    @classmethod
    def validate_config(cls, peer: PeerConfig) -> None:
        """:raises InvalidPeerConfigError: the servers' key is missing, empty or not
        ``host:port[,...]``, or a transport, protocol, TLS or connections setting is out of its
        allowed values (or names a CA file that does not exist)."""
        if not cls.servers_of(peer):
            raise InvalidPeerConfigError(
                f"peer {peer.peer_id}: {cls.servers_key} must name the peer's {cls.service} servers "
                "(host:port[,host:port...])"
            )
        ThriftOptions.of(peer)
        connections_of(peer, len(cls.servers_of(peer)))

    @classmethod
    def endpoints(cls, peer: PeerConfig) -> list[tuple[str, int]]:
        """The peer's servers (its ``servers_key``)."""
        return cls.servers_of(peer)

    def close(self) -> None:
        self.streams.close()
