"""How an RPC connection says who it is: the preamble's authentication byte, the user in the
``ConnectionHeader`` and, for SASL methods, the exchange between the preamble and the header.

HBase's client (``RpcConnection``) picks one ``AuthMethod`` a connection: SIMPLE sends the
user's name in the ``ConnectionHeader`` and nothing else; KERBEROS (SASL GSSAPI) and DIGEST
(SASL DIGEST-MD5, delegation tokens) run a SASL exchange first (the server takes the user from
SASL; KERBEROS names the same principal in the header, DIGEST none), and with
``hbase.rpc.protection`` above ``authentication`` every byte after it travels wrapped.
:class:`Authentication` is that seam: a SASL mechanism is one more class
(:class:`walship.rpc.sasl.KerberosAuth`), returning a :class:`Channel` that wraps and unwraps;
the connection does not change. :func:`default_auth` picks KERBEROS when the process logged in
to Kerberos, else SIMPLE.

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
from collections.abc import Mapping
from typing import Protocol

from walship.protos import RPC_pb2
from walship.rpc.wire import AUTH_SIMPLE

__all__ = [
    "DEFAULT_PROTECTION",
    "ENV_PROTECTION",
    "ENV_SERVER_PRINCIPAL",
    "Authentication",
    "Channel",
    "SimpleAuth",
    "current_user",
    "default_auth",
]

log = logging.getLogger(__name__)


class Channel(Protocol):
    """Where a connection's frames go once authenticated: the socket itself, or a SASL
    channel that wraps what it sends and unwraps what it reads."""

    def sendall(self, data: bytes, /) -> None: ...

    def recv(self, count: int, /) -> bytes: ...


class Authentication(Protocol):
    """One authentication method of HBase's RPC (:class:`SimpleAuth`;
    :class:`walship.rpc.sasl.KerberosAuth`)."""

    #: the method's name as HBase's ``AuthMethod`` spells it (SIMPLE, KERBEROS, DIGEST)
    name: str
    #: the byte the preamble carries for it
    auth_byte: int

    def user_info(self) -> RPC_pb2.UserInformation | None:
        """The ``ConnectionHeader``'s user: SIMPLE names it; KERBEROS names the principal SASL
        authenticated (HBase's ``getUserInfo`` of each provider); ``None`` leaves it out."""
        ...

    def negotiate(self, sock: socket.socket, server: str) -> Channel:
        """Run the method's exchange after the preamble; the channel calls go over from here."""
        ...


#: The master's principal (``hbase/_HOST[@REALM]``; HBase's ``hbase.master.kerberos.principal``).
ENV_SERVER_PRINCIPAL = "WALSHIP_HBASE_PRINCIPAL"
#: The protection levels walship accepts (``privacy``, ``integrity``, ``authentication`` or
#: SASL's names, comma-separated; HBase's ``hbase.rpc.protection``).
ENV_PROTECTION = "WALSHIP_RPC_PROTECTION"
#: All three: the master's ``hbase.rpc.protection`` decides.
DEFAULT_PROTECTION = "privacy,integrity,authentication"


def default_auth(environ: Mapping[str, str] | None = None) -> Authentication:
    """How walship's connections to a master authenticate: KERBEROS as the identity the process
    logged in with (:func:`walship.security.active`), to the principal in
    ``WALSHIP_HBASE_PRINCIPAL`` (default ``hbase/_HOST``) with the levels in
    ``WALSHIP_RPC_PROTECTION`` (default all three); SIMPLE as the current user without one.

    :raises ConfigError: ``WALSHIP_RPC_PROTECTION`` or ``WALSHIP_HBASE_PRINCIPAL`` does not parse.
    """
    from walship.rpc.sasl import DEFAULT_SERVER_PRINCIPAL, KerberosAuth
    from walship.security import active, server_name
    from walship.security.sasl import parse_qop

    identity = active()
    if identity is None:
        return SimpleAuth()
    env = os.environ if environ is None else environ
    pattern = (env.get(ENV_SERVER_PRINCIPAL) or DEFAULT_SERVER_PRINCIPAL).strip()
    server_name(pattern, "_HOST")  # its form checked here, not on the first connection
    qops = parse_qop(env.get(ENV_PROTECTION) or DEFAULT_PROTECTION, ENV_PROTECTION)
    return KerberosAuth(identity, pattern, qops)


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
