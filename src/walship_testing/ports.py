"""Ports a test can stop a server on and start it again on later.

A port the kernel hands out for ``bind(0)`` lies in its ephemeral range, the one every
outgoing connection on the machine takes its local port from: once a server on such a port
stops, any client connecting anywhere may take the port, and the server cannot come back on
it. :func:`steady_port` picks a free port below that range, where only an explicit bind goes.
"""

from __future__ import annotations

import logging
import random
import socket
from pathlib import Path

__all__ = ["steady_port"]

log = logging.getLogger(__name__)

_RANGE_FILE = Path("/proc/sys/net/ipv4/ip_local_port_range")
_LOWEST = 10_000
_TRIES = 200


def _ephemeral_low() -> int:
    """The lowest port of the kernel's ephemeral range (Linux's default when it is not told)."""
    try:
        return int(_RANGE_FILE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32_768


def steady_port(host: str = "127.0.0.1") -> int:
    """A TCP port nobody listens on right now, outside the ephemeral range.

    :raises OSError: no free port found below the ephemeral range.
    """
    high = _ephemeral_low()
    rng = random.Random()
    for _ in range(_TRIES):
        port = rng.randrange(_LOWEST, high) if high > _LOWEST else rng.randrange(1024, 65_536)
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind((host, port))
            except OSError:
                continue
        log.debug("steady port %d on %s", port, host)
        return port
    raise OSError(f"no free port on {host} between {_LOWEST} and {high} in {_TRIES} tries")
