"""Small file-system helpers shared by the writers of durable files (dead letters, the Parquet
change log): write aside, make it durable, move it into place; and the check that a path or
URL names a file system walship can open, made before anything is written."""

from __future__ import annotations

import contextlib
import os
from typing import Any

import fsspec
from fsspec.implementations.local import LocalFileSystem

from walship.errors import ConfigError

__all__ = ["check_url", "fsync_file", "move_into_place", "sync_dir"]


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
