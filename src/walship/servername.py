"""HBase server names: ``host,port,startcode``."""

from __future__ import annotations

import re
from dataclasses import dataclass

from walship.errors import ConfigError

__all__ = ["ServerName"]

_SERVER_RE = re.compile(r"^([^,\s/]+),(\d{1,5}),(\d+)$")


@dataclass(frozen=True, order=True)
class ServerName:
    """A region server's name as HBase writes it: ``host,port,startcode``.

    The start code (the server's start time in ms) tells two runs of one host:port apart.
    """

    host: str
    port: int
    start_code: int

    def __post_init__(self) -> None:
        if not self.host or "," in self.host or "/" in self.host:
            raise ConfigError(f"invalid host in server name: {self.host!r}")
        if not 0 <= self.port <= 65535:
            raise ConfigError(f"invalid port in server name: {self.port}")
        if self.start_code < 0:
            raise ConfigError(f"invalid start code in server name: {self.start_code}")

    @classmethod
    def parse(cls, text: str) -> ServerName:
        """Parse ``host,port,startcode``.

        :raises ConfigError: the text is not a server name.
        """
        m = _SERVER_RE.match(text)
        if not m:
            raise ConfigError(f"not a server name (host,port,startcode): {text!r}")
        return cls(m.group(1), int(m.group(2)), int(m.group(3)))

    def __str__(self) -> str:
        return f"{self.host},{self.port},{self.start_code}"
