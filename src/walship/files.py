"""Small file-system helpers shared by the writers of durable files (dead letters, the Parquet
change log)."""

from __future__ import annotations

import os
from typing import Any

from fsspec.implementations.local import LocalFileSystem

__all__ = ["sync_dir"]


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
