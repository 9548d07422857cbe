"""Small file-system helpers shared by the writers of durable files (dead letters, the Parquet
change log): write aside, make it durable, move it into place."""

from __future__ import annotations

import contextlib
import os
from typing import Any

from fsspec.implementations.local import LocalFileSystem

__all__ = ["fsync_file", "move_into_place", "sync_dir"]


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
