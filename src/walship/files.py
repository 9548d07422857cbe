"""Small file-system helpers shared by the writers of durable files (dead letters, the Parquet
change log): write aside, make it durable, move it into place; and the check that a path or
URL names a file system walship can open, made before anything is written."""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import tempfile
import urllib.parse
from collections.abc import Callable
from typing import Any, TypeVar

import fsspec
from fsspec.implementations.local import LocalFileSystem

from walship.errors import ConfigError, FileAccessError

__all__ = ["check_url", "fsync_file", "move_into_place", "refusals_named", "sync_dir", "url_to_fs"]

log = logging.getLogger(__name__)

T = TypeVar("T", bound=type)

#: The HTTP principal WebHDFS's NameNode answers SPNEGO as (``_HOST``: the URL's host).
WEBHDFS_PRINCIPAL_ENV = "WALSHIP_WEBHDFS_PRINCIPAL"
#: The NameNode's RPC principal for ``hdfs://`` (Hadoop's ``dfs.namenode.kerberos.principal``),
#: when no ``hdfs-site.xml`` on the client's CLASSPATH names it.
HDFS_PRINCIPAL_ENV = "WALSHIP_HDFS_PRINCIPAL"


def url_to_fs(url: str) -> tuple[Any, str]:
    """fsspec's ``url_to_fs``, authenticated as walship's Kerberos principal when it logged in
    (:mod:`walship.security`): ``webhdfs://`` with SPNEGO (requests-gssapi), ``hdfs://``
    through libhdfs with the process's ticket cache. Raises what fsspec raises."""
    from walship import security

    identity = security.active()
    protocol, _ = fsspec.core.split_protocol(url)
    options = _hdfs_kerberos_options() if identity is not None and protocol in ("hdfs", "viewfs") else {}
    fs, path = fsspec.core.url_to_fs(url, **options)
    if identity is not None and protocol in ("webhdfs", "swebhdfs") and fs.session.auth is None:
        principal = os.environ.get(WEBHDFS_PRINCIPAL_ENV) or "HTTP/_HOST"
        host = urllib.parse.urlsplit(fs.url).hostname or ""
        fs.session.auth = security.spnego_auth(identity, principal, host, mutual=False)
        log.debug("WebHDFS %s: SPNEGO as %s to %s", fs.url, identity.principal, principal)
    return fs, str(path)


_FALLBACK_CONF: list[str] = []


def _fallback_core_site() -> None:
    """Hadoop's login (``UserGroupInformation``) reads ``hadoop.security.authentication`` from
    the ``core-site.xml`` on libhdfs's CLASSPATH, not from a file system's own settings: a
    client's configuration directory (first in ``hadoop classpath``) says ``kerberos``. For a
    CLASSPATH without one, a directory holding just that setting goes last on it (a
    ``core-site.xml`` before it wins), once, before libhdfs starts its JVM."""
    if _FALLBACK_CONF:
        return
    directory = tempfile.mkdtemp(prefix="walship-hadoop-conf-")
    with open(os.path.join(directory, "core-site.xml"), "w") as f:
        f.write(
            '<?xml version="1.0"?>\n<configuration>\n'
            "  <property><name>hadoop.security.authentication</name><value>kerberos</value></property>\n"
            "</configuration>\n"
        )
    _FALLBACK_CONF.append(directory)
    classpath = os.environ.get("CLASSPATH", "")
    os.environ["CLASSPATH"] = f"{classpath}{os.pathsep}{directory}" if classpath else directory


def _hdfs_kerberos_options() -> dict[str, Any]:
    """pyarrow's HadoopFileSystem options for a Kerberized HDFS: the ticket cache this process
    logged in to (:func:`walship.security.login`), the NameNode's principal when given, and the
    krb5.conf of ``KRB5_CONFIG`` for libhdfs's JVM."""
    ccache = os.environ.get("KRB5CCNAME", "")
    options: dict[str, Any] = {}
    if ccache.startswith(("FILE:", "/")):
        options["kerb_ticket"] = ccache.removeprefix("FILE:")
    elif not ccache:
        options["kerb_ticket"] = f"/tmp/krb5cc_{os.getuid()}"
    namenode = os.environ.get(HDFS_PRINCIPAL_ENV)
    extra = {"hadoop.security.authentication": "kerberos"}
    if namenode:
        extra["dfs.namenode.kerberos.principal"] = namenode
    options["extra_conf"] = extra
    _fallback_core_site()
    krb5_conf = os.environ.get("KRB5_CONFIG")
    opts = os.environ.get("LIBHDFS_OPTS", "")
    if krb5_conf and "java.security.krb5.conf" not in opts:
        os.environ["LIBHDFS_OPTS"] = f"{opts} -Djava.security.krb5.conf={krb5_conf}".strip()
    return options


def check_url(url: str, what: str) -> str:
    """``url`` when it is a local path or a URL whose scheme fsspec can open here.

    :raises ConfigError: an empty value, or a scheme fsspec does not know or cannot load (its
        package is not installed); the message names ``what`` (a flag or key) and the URL.
    """
    shown = url if len(url) <= 80 else f"{url[:80]}... ({len(url):,} characters)"
    if not url.strip():
        raise ConfigError(f"{what} is empty: give a path or a URL")
    protocol, _ = fsspec.core.split_protocol(url)
    if protocol is None:
        if "://" in url:
            raise ConfigError(f"{what} {shown!r}: a URL without a scheme")
        return url
    try:
        fsspec.get_filesystem_class(protocol)
    except ValueError:
        scheme = protocol if len(protocol) <= 40 else f"{protocol[:40]}..."
        raise ConfigError(f"{what} {shown!r}: unknown URL scheme {scheme!r}") from None
    except ImportError as exc:
        raise ConfigError(f"{what} {shown!r}: the {protocol}:// file system is not installed here ({exc})") from None
    return url


def fsync_file(f: Any) -> None:
    """Flush an open file and, when it is a local one, sync it to disk (other file systems
    make a file durable as they close it)."""
    f.flush()
    fileno = getattr(f, "fileno", None)
    if callable(fileno):
        with contextlib.suppress(OSError, ValueError):  # not a local file
            os.fsync(fileno())


def move_into_place(fs: Any, tmp: str, path: str) -> None:
    """Rename a file written aside to its name, durably (see :func:`sync_dir`)."""
    fs.mv(tmp, path)
    sync_dir(fs, path.rsplit("/", 1)[0])


def sync_dir(fs: Any, directory: str) -> None:
    """On a local file system, sync ``directory`` so that a rename into it survives a crash
    (other file systems make a rename durable themselves, or cannot be asked)."""
    if not isinstance(fs, LocalFileSystem):
        return
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def refused(root: str, exc: PermissionError) -> FileAccessError:
    """One line for a file system's refusal under ``root``: who walship is and what it said."""
    from walship import security

    identity = security.active()
    who = f"Kerberos principal {identity.principal}" if identity else "walship's user (no Kerberos principal)"
    detail = " ".join(str(exc).split()) or type(exc).__name__
    return FileAccessError(f"{root} refused {who}: {detail} (permission denied; nothing was deleted or changed)")


def refusals_named(root_attr: str) -> Callable[[T], T]:
    """A class decorator: every public method turns a ``PermissionError`` into a
    :class:`FileAccessError` naming the object's ``root_attr`` (a URL) and the principal."""

    def wrap(cls: T) -> T:
        for name, member in list(vars(cls).items()):
            if name.startswith("_") or not callable(member) or isinstance(member, staticmethod | classmethod):
                continue
            setattr(cls, name, _translating(member, root_attr))
        return cls

    return wrap


def _translating(fn: Callable[..., Any], root_attr: str) -> Callable[..., Any]:
    @functools.wraps(fn)
    def call(self: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return fn(self, *args, **kwargs)
        except FileAccessError:
            raise
        except PermissionError as exc:
            raise refused(str(getattr(self, root_attr)), exc) from None

    return call
