"""The exceptions walship raises.

Every error walship raises on purpose derives from :class:`WalshipError`, so a caller can
catch the whole family in one place and let programming errors through::

    WalshipError
    ├── WalError                     a write-ahead log cannot be read as HBase wrote it
    │   ├── CorruptWalError          bytes that are all present but do not parse (file, offset)
    │   ├── UnsupportedWalError      a header walship refuses: compression, encryption, codec
    │   └── InvalidWalNameError      a file name that is not an HBase WAL name
    └── ConfigError                  invalid configuration or command-line input

Messages name the thing that is wrong and where it is (file and byte offset, flag, znode
path, peer id), so that an operator can find it without reading code.
"""

from __future__ import annotations


class WalshipError(Exception):
    """Root of every error walship raises on purpose."""


class ConfigError(WalshipError, ValueError):
    """Invalid configuration or command-line input."""


class WalError(WalshipError):
    """A write-ahead log cannot be read as HBase wrote it.

    :param path: the file, as the caller named it.
    :param offset: the byte offset the problem starts at, or ``None`` when not about a byte.
    """

    def __init__(self, path: str, offset: int | None, reason: str) -> None:
        where = path if offset is None else f"{path} at byte offset {offset}"
        super().__init__(f"{where}: {reason}")
        self.path = path
        self.offset = offset
        self.reason = reason


class CorruptWalError(WalError):
    """Bytes that are all present in the file but do not parse as a WAL entry."""


class UnsupportedWalError(WalError):
    """A WAL walship will not read: compressed, value-compressed, encrypted, or an unknown
    writer or cell codec. The reason says which."""


class InvalidWalNameError(WalshipError, ValueError):
    """A file name that is not an HBase WAL name."""

    def __init__(self, name: str, reason: str) -> None:
        super().__init__(f"not a WAL file name: {name!r}: {reason}")
        self.name = name
