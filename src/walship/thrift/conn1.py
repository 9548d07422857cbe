"""A connection to one of a peer's Thrift1 (``Hbase``) servers: a happybase connection whose
calls can also go out encoded ahead, over the transport, protocol, TLS and authentication (SASL
GSSAPI, HTTP with SPNEGO) the peer's options name (see :mod:`walship.thrift.conn`). Importing
this module loads happybase and Thrift1's IDL, which a Thrift2-only process never needs."""

from __future__ import annotations

from typing import Any

import happybase

from walship.thrift.conn import ThriftOptions, open_transport
from walship.thrift.encoded import EncodingClient
from walship.thrift.hbase1 import Hbase_thrift

__all__ = ["THRIFT1_REFUSALS", "open_connection"]

#: The server's own errors: a refusal of what was asked, not a failure to answer.
THRIFT1_REFUSALS: tuple[type[BaseException], ...] = (Hbase_thrift.IOError, Hbase_thrift.IllegalArgument)


def open_connection(host: str, port: int, options: ThriftOptions | None = None, *, timeout_ms: int = 30_000) -> Any:
    """A :class:`happybase.Connection` to one Thrift1 server, opened, speaking ``options``.

    happybase has no TLS, SASL nor HTTP: the connection's transport and client are
    :func:`~walship.thrift.conn.open_transport`'s and thriftpy2's (``connection.client``,
    ``table()`` and ``close()`` work as for any other).

    :raises TTransportException: the server cannot be reached or the TLS handshake failed.
    :raises SaslAuthError, SecurityMismatchError, InvalidPeerConfigError: see
        :func:`~walship.thrift.conn.open_transport`.
    """
    options = options or ThriftOptions()
    conn = happybase.Connection(
        host, port, timeout=timeout_ms, autoconnect=False, transport=options.transport, protocol=options.protocol
    )
    transport = open_transport(host, port, options, timeout_ms)
    conn.transport = transport
    conn.client = EncodingClient(Hbase_thrift.Hbase, options.protocol, transport)
    return conn
