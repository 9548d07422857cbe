"""HBase WAL file names.

``AbstractFSWAL`` names a WAL ``URLEncoder.encode(prefix) + "." + timestamp + suffix``:

* 2.x default provider: ``host%2C16020%2C1600000000000.1600000000123``
* 1.x default provider: ``host%2C16020%2C1469772903345.default.1470426151350``
* hbase:meta: ``host%2C16020%2C1600000000000.meta.1600000000123.meta``
* multiwal: ``host%2C16020%2C1606673870978.host%2C16020%2C1606673870978.regiongroup-0.1606675447034``

The part before the timestamp is the WAL group; replication keeps one reader per group and
orders a group's files by timestamp.

On a local file system (a ``file://`` root or ``hbase.wal.dir``) Hadoop's ChecksumFileSystem
writes a checksum file ``.<name>.crc`` beside every file: never a WAL, deleted with its WAL.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from urllib.parse import quote, unquote

from walship.errors import ConfigError, InvalidWalNameError
from walship.servername import ServerName

__all__ = [
    "META_SUFFIX",
    "WalName",
    "build_wal_name",
    "checksum_file_of",
    "is_checksum_file",
    "is_wal_name",
    "parse_wal_name",
    "wal_group",
]

META_SUFFIX = ".meta"
# AbstractFSWALProvider's validation pattern: group(1) is the WAL group (prefix).
_WAL_RE = re.compile(r"^(.+)\.(\d+)(\.[0-9A-Za-z]+)?$")
_SERVER_PREFIX_RE = re.compile(r"^([^,]+,\d+,\d+)")


@dataclass(frozen=True, order=True)
class WalName:
    """A parsed WAL file name. Orders by timestamp first, as ``WALStartTimeComparator``."""

    timestamp: int
    name: str
    group: str
    suffix: str
    server: ServerName | None

    @property
    def is_meta(self) -> bool:
        """True for an hbase:meta WAL, which replication never ships."""
        return self.suffix == META_SUFFIX

    def __str__(self) -> str:
        return self.name


def is_checksum_file(name: str) -> bool:
    """True for a Hadoop checksum file name, ``.<file>.crc``."""
    return len(name) > 5 and name.startswith(".") and name.endswith(".crc")


def checksum_file_of(name: str) -> str:
    """The name of the checksum file Hadoop's local file system keeps beside ``name``."""
    return f".{name}.crc"


@functools.lru_cache(maxsize=4096)  # a tailer parses its queues' few names many times a second
def parse_wal_name(name: str) -> WalName:
    """Parse a WAL file name (the last path component).

    :raises InvalidWalNameError: the name is unsafe (a path, ``..``, control characters), a
        Hadoop checksum file (``.<name>.crc``), or does not end in
        ``.<timestamp>[.<suffix>]``, like recovered-edits files.
    """
    if not name or "/" in name or "\\" in name or name in (".", "..") or any(ord(ch) < 0x20 for ch in name):
        raise InvalidWalNameError(name, "unsafe file name")
    if is_checksum_file(name):
        raise InvalidWalNameError(name, "a Hadoop checksum file (.<name>.crc), not a WAL")
    m = _WAL_RE.match(name)
    if not m:
        raise InvalidWalNameError(name, "expected <prefix>.<timestamp>[.<suffix>]")
    group, ts, suffix = m.group(1), int(m.group(2)), m.group(3) or ""
    server: ServerName | None = None
    sm = _SERVER_PREFIX_RE.match(unquote(group))
    if sm:
        try:
            server = ServerName.parse(sm.group(1))
        except ConfigError:
            server = None
    return WalName(ts, name, group, suffix, server)


def wal_group(name: str) -> str:
    """The WAL group of a WAL file name: the name before its timestamp (one per server, or
    one per ``regiongroup-<n>`` with multiwal).

    :raises InvalidWalNameError: as :func:`parse_wal_name`.
    """
    return parse_wal_name(name).group


def is_wal_name(name: str) -> bool:
    """True when :func:`parse_wal_name` accepts ``name``."""
    try:
        parse_wal_name(name)
    except InvalidWalNameError:
        return False
    return True


def build_wal_name(server: ServerName, timestamp: int, *, provider_id: str | None = None, meta: bool = False) -> str:
    """Build the name HBase 2.x gives a WAL of ``server`` created at ``timestamp`` (ms).

    :param provider_id: a WAL group id for multiwal (``regiongroup-0``); the prefix becomes
        ``<server>.<server>.<provider_id>`` as RegionGroupingProvider names it.
    :param meta: name an hbase:meta WAL.
    """
    if timestamp < 0:
        raise ValueError(f"'timestamp' must be >= 0, got {timestamp}")
    enc = quote(str(server), safe="")
    prefix = enc
    if provider_id:
        prefix = f"{enc}.{enc}.{provider_id}"
    if meta:
        return f"{prefix}{META_SUFFIX}.{timestamp}{META_SUFFIX}"
    return f"{prefix}.{timestamp}"
