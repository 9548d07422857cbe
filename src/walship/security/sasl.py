"""SASL GSSAPI (pure-sasl over MIT Kerberos) and SPNEGO (requests-gssapi) for walship's
clients of HBase's master and Thrift servers and of WebHDFS, as the logged-in principal
(:mod:`walship.security.kerberos`).

Protection levels: SASL's quality of protection, ``auth`` (authentication only),
``auth-int`` (each frame signed) and ``auth-conf`` (each frame encrypted), which HBase's
``hbase.rpc.protection`` calls ``authentication``, ``integrity`` and ``privacy`` and its
Thrift servers' ``hbase.thrift.security.qop`` calls by SASL's names.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from walship.errors import ConfigError, SaslAuthError
from walship.security.kerberos import KerberosIdentity, server_name

__all__ = ["QOPS", "RPC_PROTECTION", "gss_words", "parse_qop", "sasl_client", "spnego_auth"]

log = logging.getLogger(__name__)

#: SASL's protection levels, weakest first.
QOPS = ("auth", "auth-int", "auth-conf")
#: ``hbase.rpc.protection``'s names for them.
RPC_PROTECTION = {"authentication": "auth", "integrity": "auth-int", "privacy": "auth-conf"}


def parse_qop(value: str, what: str) -> tuple[str, ...]:
    """The levels a client accepts, strongest first, from a comma-separated list of SASL's or
    HBase's names (``auth-conf,auth``; ``privacy``).

    :raises ConfigError: an unknown name (names ``what``, the key or flag).
    """
    out: list[str] = []
    for part in value.split(","):
        name = part.strip().lower()
        qop = RPC_PROTECTION.get(name, name)
        if qop not in QOPS:
            raise ConfigError(
                f"{what} {value!r}: {part.strip()!r} is not a protection level "
                f"({', '.join(QOPS)}, or HBase's {', '.join(RPC_PROTECTION)})"
            )
        if qop not in out:
            out.append(qop)
    if not out:
        raise ConfigError(f"{what} is empty: give one of {', '.join(QOPS)}")
    return tuple(sorted(out, key=QOPS.index, reverse=True))


def sasl_client(identity: KerberosIdentity, principal_pattern: str, host: str, qops: Sequence[str] = QOPS) -> Any:
    """A SASL GSSAPI client (``puresasl.client.SASLClient``) of ``identity`` for the server on
    ``host`` whose principal is ``principal_pattern`` (``hbase/_HOST@REALM``), accepting
    ``qops`` (the server chooses among them).

    :raises SaslAuthError: the GSSAPI mechanism cannot start (no Kerberos library).
    """
    from puresasl import QOP
    from puresasl.client import SASLClient

    service, server_host = server_name(principal_pattern, host)
    try:
        return SASLClient(
            server_host,
            service=service,
            mechanism="GSSAPI",
            qops=[q.encode() for q in qops if q.encode() in QOP.all] or [b"auth"],
            principal=identity.principal,
        )
    except Exception as exc:  # pure-sasl raises plain Exceptions (and pykerberos its GSSError)
        raise SaslAuthError(
            f"SASL GSSAPI as {identity.principal} to {service}/{server_host} cannot start: {gss_words(exc)}"
        ) from None


def gss_words(exc: BaseException) -> str:
    """An error of pykerberos (``GSSError((major, code), (minor, code))``) or pure-sasl as one
    line: the Kerberos library's most specific words (the minor status, else the major)."""
    args: tuple[Any, ...] = tuple(getattr(exc, "args", ()))
    if len(args) == 2 and all(isinstance(a, tuple) and a for a in args):
        major, minor = str(args[0][0]), str(args[1][0])
        words = minor if minor.strip() and "unknown error" not in minor.lower() else major
    else:
        words = str(exc)
    return " ".join(words.split()) or type(exc).__name__


def spnego_auth(identity: KerberosIdentity, principal_pattern: str, host: str, *, mutual: bool = True) -> Any:
    """``requests``' auth for a server on ``host`` answering SPNEGO (HTTP Negotiate) as
    ``principal_pattern`` (``HTTP/_HOST@REALM``), as ``identity``; with ``mutual``, a server's
    answering token is checked when it sends one (WebHDFS's NameNode redirects reads to a
    DataNode that answers as no one: there, ``mutual=False``)."""
    import gssapi
    from requests_gssapi import DISABLED, OPTIONAL, HTTPSPNEGOAuth

    service, server_host = server_name(principal_pattern, host)
    target = gssapi.Name(f"{service}@{server_host}", gssapi.NameType.hostbased_service)
    creds = gssapi.Credentials(
        name=gssapi.Name(identity.principal, gssapi.NameType.kerberos_principal), usage="initiate"
    )
    return HTTPSPNEGOAuth(creds=creds, target_name=target, mutual_authentication=OPTIONAL if mutual else DISABLED)


class _NoTracebacks(logging.Filter):
    """requests-gssapi logs a failed GSSAPI step with its traceback (``log.exception``): walship
    raises the failure as one line, so the log record keeps only its message."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.exc_info = None
        record.exc_text = None
        return True


logging.getLogger("requests_gssapi.gssapi_").addFilter(_NoTracebacks())
