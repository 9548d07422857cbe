"""Security: walship's Kerberos identity, shared by every client (see :mod:`walship.security.kerberos`)."""

from walship.security.kerberos import (
    ENV_KEYTAB,
    ENV_PRINCIPAL,
    KerberosIdentity,
    TicketKeeper,
    active,
    check_ticket,
    identity_from,
    kept_fresh,
    login,
    logout,
    server_name,
)
from walship.security.sasl import parse_qop, sasl_client, spnego_auth

__all__ = [
    "ENV_KEYTAB",
    "ENV_PRINCIPAL",
    "KerberosIdentity",
    "TicketKeeper",
    "active",
    "check_ticket",
    "identity_from",
    "kept_fresh",
    "login",
    "logout",
    "parse_qop",
    "sasl_client",
    "server_name",
    "spnego_auth",
]
