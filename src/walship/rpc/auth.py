"""How an RPC connection says who it is: the preamble's authentication byte, the user in the
``ConnectionHeader`` and, for SASL methods, the exchange between the preamble and the header.

HBase's client (``RpcConnection``) picks one ``AuthMethod`` a connection: SIMPLE sends the
user's name in the ``ConnectionHeader`` and nothing else; KERBEROS (SASL GSSAPI) and DIGEST
(SASL DIGEST-MD5, delegation tokens) run a SASL exchange first and name no user (the server
takes it from SASL), and with ``hbase.rpc.protection`` above ``authentication`` every byte
after it travels wrapped. :class:`Authentication` is that seam: a SASL mechanism is one more
class here, returning a :class:`Channel` that wraps and unwraps; the connection does not change.

Example::

    auth = SimpleAuth("hbase")
    sock.sendall(preamble(auth.auth_byte))
    channel = auth.negotiate(sock, "m1.example.com:16000")
"""

from __future__ import annotations

import getpass
import logging
import os
import socket
from typing import Protocol

from walship.protos import RPC_pb2
from walship.rpc.wire import AUTH_SIMPLE

__all__ = ["Authentication", "Channel", "SimpleAuth", "current_user"]

log = logging.getLogger(__name__)


class Channel(Protocol):
    """Where a connection's frames go once authenticated: the socket itself, or a SASL
    channel that wraps what it sends and unwraps what it reads."""

    def sendall(self, data: bytes, /) -> None: ...

    def recv(self, count: int, /) -> bytes: ...


class Authentication(Protocol):
    """One authentication method of HBase's RPC."""

    #: the method's name as HBase's ``AuthMethod`` spells it (SIMPLE, KERBEROS, DIGEST)
    name: str
    #: the byte the preamble carries for it
    auth_byte: int

    def user_info(self) -> RPC_pb2.UserInformation | None:
        """The ``ConnectionHeader``'s user: SIMPLE names it, SASL methods leave it out."""
        ...

    def negotiate(self, sock: socket.socket, server: str) -> Channel:
        """Run the method's exchange after the preamble; the channel calls go over from here."""
        ...


def current_user() -> str:
    """The user a SIMPLE connection names: ``HADOOP_USER_NAME`` if set (as Hadoop's
    ``UserGroupInformation`` takes it), else the process's login name."""
    return os.environ.get("HADOOP_USER_NAME") or getpass.getuser()


class SimpleAuth:
    """SIMPLE: the server trusts the user named in the ``ConnectionHeader``."""

    name = "SIMPLE"
    auth_byte = AUTH_SIMPLE

    def __init__(self, user: str | None = None) -> None:
        self.user = user or current_user()

    def user_info(self) -> RPC_pb2.UserInformation:
        return RPC_pb2.UserInformation(effective_user=self.user)

    def negotiate(self, sock: socket.socket, server: str) -> Channel:
        return sock

    def __repr__(self) -> str:
        return f"SimpleAuth(user={self.user!r})"
