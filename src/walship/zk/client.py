"""Connecting to ZooKeeper with kazoo, and the one place kazoo's errors become walship's.

Every kazoo exception that leaves a walship operation goes through :func:`translate` (or the
:func:`zk_errors` context manager), so a caller sees :class:`~walship.errors.ZkUnavailableError`
for a lost connection or session, :class:`~walship.errors.ZkAuthError` for refused credentials,
and :class:`~walship.errors.ZkError` for anything else, each naming what was being done. The
stores of this package (peers, queues, locks, progress, the cluster's znodes) do it for every
public method (:func:`translated`, :func:`translating`): code outside ``walship.zk`` never
sees a kazoo exception, and never catches one.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import logging
import os
import re
import socket
from collections.abc import Callable, Iterator
from typing import Any, TypeVar, cast

from kazoo.client import KazooClient
from kazoo.exceptions import (
    AuthFailedError,
    ConnectionClosedError,
    ConnectionLoss,
    KazooException,
    NoAuthError,
    OperationTimeoutError,
    SessionExpiredError,
)
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.retry import KazooRetry

from walship.defaults import zk_session_timeout
from walship.errors import ConfigError, ZkAuthError, ZkError, ZkUnavailableError
from walship.zk.handler import PollingHandler

__all__ = [
    "AUTH_FILE_ENV",
    "DEFAULT_ZK",
    "KAZOO_ERRORS",
    "connect",
    "inherit_acls",
    "parse_auth",
    "translate",
    "translated",
    "translating",
    "validate_hosts",
    "zk_call",
    "zk_client",
    "zk_errors",
]

log = logging.getLogger(__name__)

F = TypeVar("F", bound=Callable[..., Any])
T = TypeVar("T", bound=type)

DEFAULT_ZK = "127.0.0.1:2181"
_HOSTS_RE = re.compile(r"^[A-Za-z0-9_.\-\[\]:]+:\d{1,5}(,[A-Za-z0-9_.\-\[\]:]+:\d{1,5})*(/[^\s]*)?$")

#: What kazoo raises: catch these at a boundary and pass them to :func:`translate`.
KAZOO_ERRORS: tuple[type[Exception], ...] = (KazooException, KazooTimeoutError)
_UNAVAILABLE = (
    ConnectionLoss,
    ConnectionClosedError,
    SessionExpiredError,
    OperationTimeoutError,
    KazooTimeoutError,
)


def translate(exc: BaseException, what: str, server: str | None = None) -> ZkError:
    """walship's error for a kazoo error met while doing ``what`` (e.g. a znode path), on the
    ZooKeeper at ``server`` (named in a refusal, when known)."""
    name = type(exc).__name__
    detail = f": {exc}" if str(exc) else ""
    if isinstance(exc, _UNAVAILABLE):
        return ZkUnavailableError(f"{what}: ZooKeeper unavailable ({name}{detail}); nothing was lost, retry later")
    if isinstance(exc, NoAuthError | AuthFailedError):
        from walship.security import active

        who = _refused_who(exc, kerberos=active() is not None)
        at = f" at {server}" if server else ""
        return ZkAuthError(f"{what}: ZooKeeper{at} refused the operation ({name}): {who}")
    return ZkError(f"{what}: ZooKeeper error {name}{detail}")


@contextlib.contextmanager
def zk_errors(what: str) -> Iterator[None]:
    """Raise kazoo's errors from the block as walship's (see :func:`translate`)."""
    try:
        yield
    except KAZOO_ERRORS as exc:
        raise translate(exc, what) from exc


def _shown(value: object) -> str:
    text = value if isinstance(value, str) else repr(value)
    return text if len(text) <= 80 else f"{text[:80]}..."


def _what(label: str, name: str, args: tuple[object, ...], kwargs: dict[str, object]) -> str:
    """``label: name arg, arg`` for a message: the operation and the znode names it was given
    (plain strings: peer ids, servers, queue ids, WAL names), not the objects."""
    named = [_shown(a) for a in args if isinstance(a, str | int)]
    named += [f"{k}={_shown(v)}" for k, v in kwargs.items() if isinstance(v, str | int)]
    action = name.replace("_", " ")
    return f"{label}: {action} {', '.join(named)}".rstrip()


def translating(label: str, fn: F) -> F:
    """``fn`` raising walship's errors for kazoo's (:func:`translate`), the message naming
    ``label``, the function and the names it was given. Generator functions (a ``with`` block's
    context manager among them) are translated while they run too."""
    name = fn.__name__
    if inspect.isgeneratorfunction(fn):

        @functools.wraps(fn)
        def generator(*args: Any, **kwargs: Any) -> Any:
            try:
                return (yield from fn(*args, **kwargs))
            except KAZOO_ERRORS as exc:
                raise translate(
                    exc, _what(label, name, args[1:] if _is_method(fn) else args, kwargs), _server_of(fn, args)
                ) from exc

        return cast(F, generator)

    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except KAZOO_ERRORS as exc:
            raise translate(
                exc, _what(label, name, args[1:] if _is_method(fn) else args, kwargs), _server_of(fn, args)
            ) from exc

    return cast(F, call)


def _refused_who(exc: BaseException, *, kerberos: bool, hint: str = "") -> str:
    """Who ZooKeeper refused, for a message: walship's Kerberos principal, not in a znode's ACL
    (a session that logged in with it), else credentials failed or missing (``hint``: where to
    give them)."""
    if kerberos and isinstance(exc, NoAuthError):
        from walship.security import active

        identity = active()
        if identity is not None:
            return f"Kerberos principal {identity.principal} is not in the znode's ACL (HBase's superuser grants it)"
    return f"authentication failed or missing{hint}"


def _server_of(fn: Callable[..., Any], args: tuple[Any, ...]) -> str | None:
    """The ZooKeeper servers a store method's client talks to (``host:port,...``), if it has one."""
    if not args or not _is_method(fn):
        return None
    client = getattr(args[0], "client", None)
    hosts = getattr(client, "hosts", None)
    if not isinstance(hosts, list | tuple):
        return None
    return ",".join(f"{h}:{p}" for h, p in hosts if isinstance(h, str)) or None


def _is_method(fn: Callable[..., Any]) -> bool:
    params = list(inspect.signature(fn).parameters)
    return bool(params) and params[0] in ("self", "cls")


def zk_call(label: str) -> Callable[[F], F]:
    """A function decorator: :func:`translating` with ``label``."""
    return lambda fn: translating(label, fn)


def translated(label: str) -> Callable[[T], T]:
    """A class decorator: every public method of the class raises walship's errors for kazoo's
    (see :func:`translating`); ``label`` names the store in messages."""

    def wrap(cls: T) -> T:
        for name, member in list(vars(cls).items()):
            if name.startswith("_") or not inspect.isfunction(member):
                continue
            setattr(cls, name, translating(label, member))
        return cls

    return wrap


def validate_hosts(hosts: str, what: str = "--zk") -> str:
    """``HOST:PORT[,HOST:PORT...]`` (with an optional chroot), as kazoo takes it; errors name
    ``what`` (the flag, or the environment variable the value came from)."""
    shown = hosts if len(hosts) <= 60 else f"{hosts[:60]}... ({len(hosts):,} characters)"
    if not _HOSTS_RE.match(hosts):
        raise ConfigError(f"invalid {what} {shown!r}: expected HOST:PORT[,HOST:PORT...]")
    for part in hosts.split("/", 1)[0].split(","):
        port = int(part.rsplit(":", 1)[1]) if ":" in part else 2181
        if not 0 < port < 65536:
            raise ConfigError(f"invalid {what} {shown!r}: port {port} is not a TCP port (1 to 65535)")
    return hosts


#: The variable naming a file that holds ``SCHEME:CREDENTIAL`` (read when ``WALSHIP_ZK_AUTH`` is unset).
AUTH_FILE_ENV = "WALSHIP_ZK_AUTH_FILE"


def _auth_from_file() -> str:
    path = os.environ.get(AUTH_FILE_ENV, "")
    if not path:
        return ""
    try:
        with open(path, encoding="utf-8") as f:
            return f.read().strip()
    except OSError as exc:
        raise ConfigError(f"{AUTH_FILE_ENV} {path}: cannot be read ({exc.strerror or exc})") from None


def parse_auth(text: str | None) -> tuple[str, str] | None:
    """``SCHEME:CREDENTIAL`` (as zkCli's ``addauth digest user:password``; ``sasl:user:password``
    for SASL DIGEST-MD5); ``None`` when empty. Without an argument, ``WALSHIP_ZK_AUTH`` is read,
    else the file ``WALSHIP_ZK_AUTH_FILE`` names (how a job on YARN gets them: a file sent with
    the job, never a value on a command line).

    :raises ConfigError: no scheme or no credential (the credential itself is never echoed), or
        the file cannot be read (names it).
    """
    if text is None:
        text = os.environ.get("WALSHIP_ZK_AUTH", "") or _auth_from_file()
    if not text:
        return None
    scheme, sep, credential = text.partition(":")
    if not sep or not scheme or not credential:
        raise ConfigError("invalid --zk-auth / WALSHIP_ZK_AUTH: expected SCHEME:CREDENTIAL, e.g. digest:user:password")
    return scheme, credential


def connect(
    hosts: str, *, timeout: float = 10.0, session_timeout: float | None = None, auth: str | None = None
) -> KazooClient:
    """Start a kazoo client, failing fast when no server answers.

    :param session_timeout: seconds (default :func:`walship.defaults.zk_session_timeout`);
        ephemeral znodes, queue locks among them, outlive a killed process by about this long.
    :param auth: ``SCHEME:CREDENTIAL`` (default: ``WALSHIP_ZK_AUTH``, when set).
    :raises ZkUnavailableError: no connection within ``timeout`` seconds.
    :raises ZkAuthError: the server refused the credentials.
    """
    validate_hosts(hosts)
    credentials = parse_auth(auth)
    auth_data: list[tuple[str, str]] | None = None
    sasl_options: dict[str, str] | None = None
    if credentials and credentials[0] == "sasl":
        user, sep, password = credentials[1].partition(":")
        if not sep or not user:
            raise ConfigError("invalid --zk-auth / WALSHIP_ZK_AUTH: SASL takes sasl:user:password")
        sasl_options = {"mechanism": "DIGEST-MD5", "username": user, "password": password}
    elif credentials:
        auth_data = [credentials]
    else:
        sasl_options = _kerberos_options()
    client = KazooClient(
        hosts=hosts,
        timeout=session_timeout if session_timeout is not None else zk_session_timeout(),
        # a server still starting drops connections for a moment: keep trying until the timeout
        connection_retry=KazooRetry(max_tries=-1, delay=0.2, max_delay=2, deadline=timeout),
        command_retry=KazooRetry(max_tries=5, delay=0.1, max_delay=2),
        auth_data=auth_data,
        sasl_options=sasl_options,
        handler=PollingHandler(),
    )
    try:
        _start(client, hosts, timeout)
    except KazooTimeoutError as exc:
        client.close()
        if sasl_options:
            who = (
                f"Kerberos principal {sasl_options['principal']}"
                if sasl_options.get("mechanism") == "GSSAPI"
                else "the SASL login (wrong user or password, or the server has no SASL)"
            )
            raise ZkAuthError(f"ZooKeeper at {hosts} did not accept {who} within {timeout:g} s") from exc
        raise ZkUnavailableError(f"ZooKeeper at {hosts} did not answer within {timeout:g} s") from exc
    except AuthFailedError as exc:
        client.close()
        raise ZkAuthError(f"ZooKeeper at {hosts} refused the {_credentials_named(credentials, sasl_options)}") from exc
    if sasl_options and sasl_options.get("mechanism") == "GSSAPI":
        _check_sasl(client, hosts, sasl_options)
    return client


def _kerberos_options() -> dict[str, str] | None:
    """kazoo's SASL GSSAPI as the process's Kerberos principal (``None`` when not logged in):
    the server's principal is ``zookeeper/<host as the connect string names it>``
    (``WALSHIP_ZK_SERVICE`` names another service, as ZooKeeper's ``zookeeper.sasl.client.username``)."""
    from walship.security import active

    identity = active()
    if identity is None:
        return None
    service = os.environ.get("WALSHIP_ZK_SERVICE") or "zookeeper"
    return {"mechanism": "GSSAPI", "service": service, "principal": identity.principal}


def _credentials_named(credentials: tuple[str, str] | None, sasl_options: dict[str, str] | None) -> str:
    if sasl_options and sasl_options.get("mechanism") == "GSSAPI":
        return f"Kerberos principal {sasl_options['principal']} (SASL GSSAPI)"
    return f"{credentials[0] if credentials else ''} credentials"


def _check_sasl(client: KazooClient, hosts: str, sasl_options: dict[str, str]) -> None:
    """kazoo's ``start`` returns before SASL runs: one request now, so a refused principal is
    one line here rather than an error on the first real request.

    :raises ZkAuthError: the server refused the principal (names it and the server).
    """
    try:
        client.exists("/")
    except (AuthFailedError, NoAuthError) as exc:
        client.stop()
        client.close()
        raise ZkAuthError(
            f"ZooKeeper at {hosts} refused Kerberos principal {sasl_options['principal']} "
            f"(SASL GSSAPI to {sasl_options['service']}/<host>; {type(exc).__name__}); nothing was written"
        ) from None
    except KAZOO_ERRORS as exc:
        client.stop()
        client.close()
        raise translate(exc, f"ZooKeeper at {hosts} (SASL GSSAPI as {sasl_options['principal']})") from None


def _refused_everywhere(hosts: str, timeout: float) -> bool:
    """Whether every server of the quorum refuses a TCP connection right now (nothing listens):
    then there is no point waiting for a session."""
    for part in hosts.split("/", 1)[0].split(","):
        host, _, port = part.rpartition(":")
        try:
            with socket.create_connection((host.strip("[]"), int(port)), timeout=min(timeout, 2.0)):
                return False
        except ConnectionRefusedError:
            continue
        except OSError:
            return False  # unreachable or slow: kazoo's own wait decides
    return True


def _start(client: KazooClient, hosts: str, timeout: float) -> None:
    """``client.start(timeout)``, but a quorum where nothing listens fails at once, not after
    ``timeout``.

    :raises ZkUnavailableError: every server refused the connection.
    :raises KazooTimeoutError: no session within ``timeout`` seconds.
    """
    if _refused_everywhere(hosts, timeout):
        client.close()
        raise ZkUnavailableError(f"ZooKeeper at {hosts} refused every connection (is it running there?)")
    client.start(timeout=timeout)


def inherit_acls(client: KazooClient, parent: str) -> None:
    """Check that ``parent`` (the cluster's znode parent) can be read with this session's
    credentials, and make the znodes this client creates get its ACLs.

    :raises ZkAuthError: no read access to ``parent`` (names it; nothing was written).
    """
    try:
        if client.exists(parent) is None:
            return  # nothing to inherit yet (a new cluster): kazoo's open default stays
        acls, _ = client.get_acls(parent)
        client.get_children(parent)
    except (NoAuthError, AuthFailedError) as exc:
        who = _refused_who(
            exc,
            kerberos=bool(getattr(client._connection, "sasl_options", None)),
            hint=" (give --zk-auth SCHEME:CREDENTIAL or WALSHIP_ZK_AUTH)",
        )
        raise ZkAuthError(
            f"znode {parent}: ZooKeeper refused access ({type(exc).__name__}): {who}; nothing was written"
        ) from exc
    except KAZOO_ERRORS as exc:
        raise translate(exc, f"znode {parent}") from exc
    client.default_acl = acls


@contextlib.contextmanager
def zk_client(
    hosts: str,
    *,
    timeout: float = 10.0,
    session_timeout: float | None = None,
    auth: str | None = None,
    parent: str | None = None,
) -> Iterator[KazooClient]:
    """A connected client, stopped and closed on exit; with ``parent``, its ACLs are checked
    and inherited (see :func:`inherit_acls`)."""
    client = connect(hosts, timeout=timeout, session_timeout=session_timeout, auth=auth)
    if parent is not None:
        try:
            inherit_acls(client, parent)
        except BaseException:
            client.stop()
            client.close()
            raise
    try:
        yield client
    finally:
        client.stop()
        client.close()
