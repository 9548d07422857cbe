"""walship's Kerberos identity: one principal (and, for long runs, its keytab) for every client.

A process logs in once (:func:`login`); ZooKeeper (kazoo's SASL GSSAPI), HBase's master RPC,
the Thrift servers (SASL GSSAPI, SPNEGO over HTTP) and WebHDFS (SPNEGO) then authenticate
as that principal through MIT Kerberos, which reads the credentials from the process's
environment:

* with a keytab, ``KRB5_CLIENT_KTNAME`` names it and ``KRB5CCNAME`` a ticket cache of this
  process's own (a private file: pyarrow's ``hdfs://`` client, a JVM, reads it too). MIT
  Kerberos gets a ticket from the keytab when the cache has none, and a new one once the
  ticket is past half its life, whenever a client opens a connection; :class:`TicketKeeper`
  asks for one on that schedule too, so a run that opens no connection for a while still
  holds a valid ticket;
* without one, the ticket cache the user already has (``kinit``; ``KRB5CCNAME`` or the
  default) must hold a valid ticket for the principal.

The identity comes from ``--principal`` / ``--keytab`` or ``WALSHIP_PRINCIPAL`` /
``WALSHIP_KEYTAB``; Kerberos is on when a principal is given. A keytab's bytes are never
read here, only its path checked, and never logged.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import shutil
import tempfile
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from walship.errors import ConfigError, KerberosLoginError, KeytabError

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
    "server_name",
]

log = logging.getLogger(__name__)

ENV_PRINCIPAL = "WALSHIP_PRINCIPAL"
ENV_KEYTAB = "WALSHIP_KEYTAB"

_lock = threading.Lock()
_active: KerberosIdentity | None = None
_private_dirs: list[str] = []


@dataclass(frozen=True)
class KerberosIdentity:
    """Who walship is: ``principal`` (``walship@EXAMPLE.COM``, ``walship/host@REALM``) and
    the path of its ``keytab`` (``None``: the ticket cache's ticket)."""

    principal: str
    keytab: str | None = None

    def describe(self) -> str:
        """``principal walship@R (keytab /etc/walship.keytab)`` for messages."""
        source = f"keytab {self.keytab}" if self.keytab else "the ticket cache"
        return f"principal {self.principal} ({source})"

    @property
    def short_name(self) -> str:
        """The principal's first component, as servers map it (``walship/h@R`` -> ``walship``)."""
        return self.principal.split("@", 1)[0].split("/", 1)[0]


def identity_from(
    principal: str | None = None, keytab: str | None = None, *, environ: Mapping[str, str] | None = None
) -> KerberosIdentity | None:
    """The identity given as flags, else in ``WALSHIP_PRINCIPAL`` / ``WALSHIP_KEYTAB``;
    ``None`` when no principal is given (no Kerberos).

    :raises ConfigError: a keytab without a principal.
    :raises KeytabError: the keytab is missing, not a file, or unreadable (names it and the
        principal).
    """
    env = os.environ if environ is None else environ
    principal = principal or env.get(ENV_PRINCIPAL) or None
    keytab = keytab or env.get(ENV_KEYTAB) or None
    if principal is None:
        if keytab is not None:
            raise ConfigError(f"--keytab / {ENV_KEYTAB} {keytab} needs --principal / {ENV_PRINCIPAL}: whose key is it?")
        return None
    principal = principal.strip()
    if not principal or any(c.isspace() for c in principal) or principal.count("@") > 1:
        raise ConfigError(f"--principal / {ENV_PRINCIPAL} {principal!r}: not a Kerberos principal (name[/host]@REALM)")
    if keytab is not None:
        _check_keytab(keytab, principal)
    return KerberosIdentity(principal, keytab)


def _check_keytab(keytab: str, principal: str) -> None:
    if not os.path.exists(keytab):
        raise KeytabError(f"keytab {keytab} for principal {principal}: no such file")
    if not os.path.isfile(keytab):
        raise KeytabError(f"keytab {keytab} for principal {principal}: not a file")
    try:
        with open(keytab, "rb") as f:
            version = f.read(2)
    except OSError as exc:
        raise KeytabError(f"keytab {keytab} for principal {principal}: cannot be read ({exc.strerror})") from None
    if version not in (b"\x05\x01", b"\x05\x02"):
        raise KeytabError(f"keytab {keytab} for principal {principal}: not a keytab (no keytab header at byte 0)")


def _private_ccache() -> str:
    """A ticket cache file no other process or user shares, removed when this process exits."""
    directory = tempfile.mkdtemp(prefix="walship-krb5-")
    _private_dirs.append(directory)
    if len(_private_dirs) == 1:
        atexit.register(_remove_private_dirs)
    return f"FILE:{os.path.join(directory, 'ccache')}"


def _remove_private_dirs() -> None:
    for directory in _private_dirs:
        shutil.rmtree(directory, ignore_errors=True)


def login(identity: KerberosIdentity) -> KerberosIdentity:
    """Make ``identity`` this process's (and its children's) Kerberos identity, and check
    that the KDC gives it a ticket now.

    :raises KerberosLoginError: the KDC does not know the principal, the keytab holds no key
        for it, or (no keytab) the ticket cache holds no valid ticket for it; the message names
        the principal and the KDC's answer; the process's identity and environment are as
        they were.
    """
    global _active
    with _lock:
        before = {name: os.environ.get(name) for name in ("KRB5_CLIENT_KTNAME", "KRB5CCNAME")}
        if identity.keytab is not None:
            os.environ["KRB5_CLIENT_KTNAME"] = identity.keytab
            if _active is None or _active.keytab is None or _active.principal != identity.principal:
                os.environ["KRB5CCNAME"] = _private_ccache()  # a cache of this principal's own
        try:
            check_ticket(identity)
        except KerberosLoginError:
            for name, value in before.items():  # as it was: the process's identity is unchanged
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value
            raise
        _active = identity
        log.info("logged in to Kerberos as %s", identity.describe())
        return identity


def logout() -> None:
    """Forget the identity (tests; a process logs in once)."""
    global _active
    with _lock:
        _active = None


def active() -> KerberosIdentity | None:
    """The identity this process logged in with; else the one ``WALSHIP_PRINCIPAL`` /
    ``WALSHIP_KEYTAB`` name, logged in now (a Spark executor, the triggerer: processes given
    no flags read the environment, as for ``WALSHIP_ZK_AUTH``); else ``None`` (no Kerberos).

    :raises KeytabError, KerberosLoginError: the environment names an identity that cannot log in.
    """
    if _active is not None:
        return _active
    identity = identity_from()
    if identity is None:
        return None
    with _lock:
        if _active is not None:
            return _active
    return login(identity)


def check_ticket(identity: KerberosIdentity) -> int:
    """Get (from the keytab) or find (in the ticket cache) a ticket for the principal; its
    remaining lifetime in seconds.

    :raises KerberosLoginError: none (see :func:`login`).
    """
    import gssapi  # the GSSAPI bindings load libkrb5: only where Kerberos is used

    try:
        name = gssapi.Name(identity.principal, gssapi.NameType.kerberos_principal)
        creds = gssapi.Credentials(name=name, usage="initiate")
        lifetime = creds.lifetime
    except gssapi.raw.misc.GSSError as exc:
        raise KerberosLoginError(
            f"Kerberos login of {identity.describe()} failed: {_gss_reason(exc, identity)}"
        ) from None
    if lifetime is not None and lifetime <= 0:
        raise KerberosLoginError(
            f"Kerberos login of {identity.describe()} failed: the ticket has expired (give --keytab, or run kinit)"
        )
    return int(lifetime or 0)


def _gss_reason(exc: Exception, identity: KerberosIdentity) -> str:
    """The Kerberos library's own words, with a hint for the usual ones."""
    minor = " ".join(str(exc).split())
    lower = minor.lower()
    if "not found in kerberos database" in lower:
        return f"the KDC does not know the principal ({_tail(minor)})"
    missing = "can't find client principal" in lower or "no key table entry" in lower
    if identity.keytab is not None and missing:
        return f"the keytab holds no key for the principal ({_tail(minor)})"
    if missing or "no credentials cache" in lower or "no kerberos credentials" in lower:
        return f"no ticket for it in the ticket cache and no keytab: give --keytab, or run kinit ({_tail(minor)})"
    if "expired" in lower:
        return f"the ticket has expired and there is no keytab: give --keytab, or run kinit ({_tail(minor)})"
    if "cannot contact any kdc" in lower or "cannot find kdc" in lower:
        return f"no KDC answers for the realm ({_tail(minor)})"
    return _tail(minor) or type(exc).__name__


def _tail(message: str) -> str:
    """GSSAPI's message without its ``Major (N): ..., Minor (M):`` framing."""
    marker = "Minor ("
    if marker in message:
        rest = message.split(marker, 1)[1]
        return rest.split("):", 1)[-1].strip() if "):" in rest else rest.strip()
    return message.strip()


def server_name(pattern: str, host: str) -> tuple[str, str]:
    """A server's principal as HBase names it (``hbase/_HOST@REALM``, ``HTTP/_HOST``,
    ``zookeeper``) for a server on ``host``: ``(service, host)``, as GSSAPI's host-based
    names take it (``_HOST`` and a missing host are ``host``; the realm is the host's).

    :raises ConfigError: not ``service[/host][@REALM]``.
    """
    text = pattern.strip()
    service_host = text.split("@", 1)[0]
    service, _, named = service_host.partition("/")
    if not service or any(c.isspace() for c in text):
        raise ConfigError(
            f"server principal {pattern!r}: expected service[/host][@REALM], e.g. hbase/_HOST@EXAMPLE.COM"
        )
    return service, host if named in ("", "_HOST") else named


class TicketKeeper:
    """Gets a new ticket from the keytab before the one held expires, for a run that outlives
    a ticket (a tail run, the metrics server, a Spark ship task): a daemon thread asks again
    at half the remaining lifetime. Without a keytab it warns, once, as expiry nears.
    """

    def __init__(self, identity: KerberosIdentity, *, floor: float = 5.0) -> None:
        self.identity = identity
        self.floor = floor
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        #: how many times a ticket was asked for (tests, logs)
        self.renewals = 0

    def start(self) -> TicketKeeper:
        self._thread = threading.Thread(target=self._run, name="walship-kerberos", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> TicketKeeper:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _run(self) -> None:
        warned = False
        lifetime = self._check()
        while not self._stop.wait(max(self.floor, lifetime / 2)):
            lifetime = self._check()
            if self.identity.keytab is None and lifetime < 300 and not warned:
                log.warning(
                    "the ticket of %s expires in %d s; no keytab to get another", self.identity.principal, lifetime
                )
                warned = True

    def _check(self) -> int:
        try:
            lifetime = check_ticket(self.identity)
        except KerberosLoginError as exc:
            log.error("%s", exc)
            return 0
        self.renewals += 1
        log.debug("ticket of %s valid for %d s more", self.identity.principal, lifetime)
        return lifetime


@contextlib.contextmanager
def kept_fresh() -> Iterator[KerberosIdentity | None]:
    """The block runs logged in as :func:`active`'s identity (flags, or the environment on a
    Spark executor), a :class:`TicketKeeper` getting new tickets from its keytab while it
    runs; nothing without Kerberos.

    :raises KeytabError, KerberosLoginError: the identity cannot log in.
    """
    identity = active()
    if identity is None or identity.keytab is None:
        yield identity
        return
    with TicketKeeper(identity):
        yield identity
