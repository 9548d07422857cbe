"""Connecting to ZooKeeper with kazoo, with connection errors turned into walship's."""

from __future__ import annotations

import contextlib
import logging
import re
from collections.abc import Iterator

from kazoo.client import KazooClient
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.retry import KazooRetry

from walship.errors import ConfigError, ZkUnavailableError

__all__ = ["DEFAULT_ZK", "connect", "validate_hosts", "zk_client"]

log = logging.getLogger(__name__)

DEFAULT_ZK = "127.0.0.1:2181"
_HOSTS_RE = re.compile(r"^[A-Za-z0-9_.\-\[\]:]+:\d{1,5}(,[A-Za-z0-9_.\-\[\]:]+:\d{1,5})*(/[^\s]*)?$")


def validate_hosts(hosts: str) -> str:
    """``HOST:PORT[,HOST:PORT...]`` (with an optional chroot), as kazoo takes it."""
    if not _HOSTS_RE.match(hosts):
        raise ConfigError(f"invalid --zk {hosts!r}: expected HOST:PORT[,HOST:PORT...]")
    return hosts


def connect(hosts: str, *, timeout: float = 10.0, session_timeout: float = 10.0) -> KazooClient:
    """Start a kazoo client, failing fast when no server answers.

    :raises ZkUnavailableError: no connection within ``timeout`` seconds.
    """
    validate_hosts(hosts)
    client = KazooClient(
        hosts=hosts,
        timeout=session_timeout,
        connection_retry=KazooRetry(max_tries=3, delay=0.2, max_delay=2),
        command_retry=KazooRetry(max_tries=5, delay=0.1, max_delay=2),
    )
    try:
        client.start(timeout=timeout)
    except KazooTimeoutError as exc:
        client.close()
        raise ZkUnavailableError(f"ZooKeeper at {hosts} did not answer within {timeout:g} s") from exc
    return client


@contextlib.contextmanager
def zk_client(hosts: str, *, timeout: float = 10.0) -> Iterator[KazooClient]:
    """A connected client, stopped and closed on exit."""
    client = connect(hosts, timeout=timeout)
    try:
        yield client
    finally:
        client.stop()
        client.close()
