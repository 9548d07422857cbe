"""The replication barriers of serial replication, read from the source cluster's
``hbase:meta`` over its Thrift2 server, as HBase 2.x's ``MetaTableAccessor`` reads them.

What HBase writes there (``RegionStateStore.updateRegionLocation``, ``splitRegion``,
``mergeRegions`` and ``MetaTableAccessor``):

* A region's row is keyed by its region name, ``<table>,<start key>,<region id>.<encoded>.``
  (the encoded name: the MD5 hex of ``<table>,<start key>,<region id>``). ``info:state``
  holds the name of its RegionState (``OPENING``, ``OPEN``, ``CLOSED``, ...).
* The family ``rep_barrier`` keeps every version. Whenever a region of a table with a family
  of replication scope 1 opens, ``rep_barrier:seqnumDuringOpen`` gets the open sequence id
  (8 bytes, big-endian): one barrier per open. Every entry of that open has a higher sequence
  id (its REGION_OPEN marker is the first, at the open sequence id + 1), every entry of the
  previous open a lower one.
* A split gives the parent one more barrier, its highest sequence id + 1, and each daughter
  ``rep_barrier:parent`` = the parent's region name; a merge gives each parent that last
  barrier and the merged region ``parent`` = both names, in key order. Names are separated by
  ``0xFF 0x00``, and every ``0xFF`` inside a name is doubled.

So a range [b(i-1), b(i)) of a region's sequence ids was written by one open on one server.
HBase's ``SerialReplicationChecker`` pushes an entry of a range only once the range before it
is finished (the last pushed sequence id >= b(i-1) - 1); the first range of a region with
parents waits for every parent to be finished (>= its last barrier - 1), and the last range
of a region still OPENING waits.

Example::

    with BarrierReader("source-thrift2:9090") as reader:
        region = reader.region(b"t", b"row-17", "5d2a0c...")
        for parent in region.parents:
            finished_at = reader.parent(parent)[-1] - 1
"""

from __future__ import annotations

import contextlib
import logging
import struct
from collections.abc import Callable, Generator, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from walship.errors import BarrierReadError, BarrierUnavailableError, ConfigError, InvalidPeerConfigError
from walship.peer import parse_host_ports
from walship.thrift.conn import THRIFT2_REFUSALS, ThriftOptions, ThriftSession, open_thrift2
from walship.thrift.hbase2 import hbase2

__all__ = [
    "INFO",
    "META_TABLE",
    "NINES",
    "PARENT",
    "REGION_STATES",
    "REP_BARRIER",
    "SEQNUM",
    "STATE",
    "BarrierReader",
    "RegionBarriers",
    "encoded_region_name",
    "split_parent_names",
]

log = logging.getLogger(__name__)

T = TypeVar("T")

#: The catalog table, as Thrift2 names it.
META_TABLE = b"hbase:meta"
#: hbase:meta's columns a reader of barriers uses (``HConstants``, ``ReplicationBarrierFamilyFormat``).
INFO = b"info"
STATE = b"state"
REP_BARRIER = b"rep_barrier"
SEQNUM = b"seqnumDuringOpen"
PARENT = b"parent"
#: ``HConstants.NINES``: the region id that sorts after every other in a meta row key.
NINES = b"99999999999999"
#: Read every version (``Scan.readAllVersions``).
_ALL_VERSIONS = 2**31 - 1
_MD5_HEX_LENGTH = 32
_ESCAPE, _SEPARATOR = 0xFF, 0x00
#: The names of HBase 2.x's ``RegionState.State``: what ``info:state`` may hold.
REGION_STATES = frozenset(
    {
        "OFFLINE",
        "OPENING",
        "OPEN",
        "CLOSING",
        "CLOSED",
        "SPLITTING",
        "SPLIT",
        "FAILED_OPEN",
        "FAILED_CLOSE",
        "MERGING",
        "MERGED",
        "SPLITTING_NEW",
        "MERGING_NEW",
        "ABNORMALLY_CLOSED",
    }
)


@dataclass(frozen=True)
class RegionBarriers:
    """What ``hbase:meta`` says of one region for serial replication
    (HBase's ``ReplicationBarrierResult``)."""

    #: the region's encoded name
    encoded: str
    #: the open sequence ids, ascending, each once (empty: none recorded)
    barriers: tuple[int, ...]
    #: ``info:state``, e.g. ``OPEN``, ``OPENING``; ``None`` when the row has none (a merged
    #: parent, or no row at all)
    state: str | None
    #: the encoded names of the regions it was split or merged from
    parents: tuple[str, ...]


def encoded_region_name(region_name: bytes) -> str:
    """The encoded name inside a region name of HBase's format
    (``<table>,<start key>,<id>.<encoded>.``), as ``RegionInfo.encodeRegionName`` takes it.

    :raises ValueError: a name without an encoded part (HBase's old format, which only
        ``hbase:meta``'s own region uses).
    """
    n = _MD5_HEX_LENGTH
    if len(region_name) < n + 2 or region_name[-1:] != b"." or region_name[-n - 2 : -n - 1] != b".":
        raise ValueError(f"not a region name with an encoded name: {_binary(region_name)}")
    return region_name[-n - 1 : -1].decode("ascii", errors="replace")


def split_parent_names(value: bytes) -> tuple[bytes, ...]:
    """The region names in a ``rep_barrier:parent`` value, as HBase's ``parseParentsBytes``
    reads them: ``0xFF 0x00`` separates two names, ``0xFF 0xFF`` is one ``0xFF`` of a name
    (``0xFF`` before any other byte stands for that byte, as HBase reads it too).

    :raises ValueError: the value ends in a lone ``0xFF`` (HBase's reader fails there too).
    """
    names: list[bytes] = []
    current = bytearray()
    i = 0
    while i < len(value):
        b = value[i]
        if b == _ESCAPE:
            i += 1
            if i == len(value):
                raise ValueError(f"ends in an unpaired 0xFF escape byte at offset {i - 1}")
            if value[i] == _SEPARATOR:
                names.append(bytes(current))
                current.clear()
                i += 1
                continue
            b = value[i]
        current.append(b)
        i += 1
    if current:
        names.append(bytes(current))
    return tuple(names)


def _binary(data: bytes) -> str:
    """``Bytes.toStringBinary``: printable ASCII as it is, every other byte as ``\\xNN``."""
    return "".join(chr(b) if 32 <= b < 127 and b != 92 else f"\\x{b:02X}" for b in data)


def _table_text(table: bytes) -> str:
    return table.decode(errors="replace")


def _where(row: bytes, family: bytes, qualifier: bytes) -> str:
    return f"hbase:meta row {_binary(row)}, column {family.decode()}:{qualifier.decode()}"


def barriers_of(row: bytes, cells: Sequence[Any]) -> tuple[int, ...]:
    """The ``rep_barrier:seqnumDuringOpen`` versions among a meta row's cells (Thrift2
    ``TColumnValue`` s), ascending, each once (HBase's ``getReplicationBarriers``).

    :raises BarrierReadError: a barrier that is not 8 bytes (names the row and the column).
    """
    out = set()
    for cv in cells:
        if bytes(cv.family) != REP_BARRIER or bytes(cv.qualifier or b"") != SEQNUM:
            continue
        value = bytes(cv.value or b"")
        if len(value) != 8:
            raise BarrierReadError(
                f"{_where(row, REP_BARRIER, SEQNUM)}: {len(value)} bytes ({value.hex() or 'empty'}), "
                "not the 8 of a sequence id"
            )
        out.add(struct.unpack(">q", value)[0])
    return tuple(sorted(out))


def _newest(cells: Sequence[Any], family: bytes, qualifier: bytes) -> bytes | None:
    found = [cv for cv in cells if bytes(cv.family) == family and bytes(cv.qualifier or b"") == qualifier]
    return bytes(max(found, key=lambda cv: cv.timestamp or 0).value or b"") if found else None


def parse_meta_row(row: bytes, cells: Sequence[Any]) -> tuple[RegionBarriers, tuple[bytes, ...]]:
    """A region's meta row read as HBase's ``getReplicationBarrierResult`` reads it: its
    barriers, its newest ``info:state``, its parents; and the parents' full region names.

    :raises BarrierReadError: the row holds what HBase would not write there (names the row
        and the column): a barrier not 8 bytes, an unknown state, a parent value that does not
        parse or names no region, a row that is no region name.
    """
    state = None
    raw_state = _newest(cells, INFO, STATE)
    if raw_state is not None:
        state = raw_state.decode("ascii", errors="replace")
        if state not in REGION_STATES:
            raise BarrierReadError(f"{_where(row, INFO, STATE)}: {state!r} is not a region state")
    names: tuple[bytes, ...] = ()
    parents: list[str] = []
    raw_parents = _newest(cells, REP_BARRIER, PARENT)
    if raw_parents is not None:
        try:
            names = split_parent_names(raw_parents)
            parents = [encoded_region_name(name) for name in names]
        except ValueError as exc:
            raise BarrierReadError(f"{_where(row, REP_BARRIER, PARENT)}: {exc}") from None
    try:
        encoded = encoded_region_name(row)
    except ValueError as exc:
        raise BarrierReadError(f"hbase:meta row {_binary(row)}: {exc}") from None
    return RegionBarriers(encoded, barriers_of(row, cells), state, tuple(parents)), names


class _MetaSession(ThriftSession):
    """The source cluster's Thrift2 server, for reads of ``hbase:meta``."""

    service = "Thrift2"
    opener = staticmethod(open_thrift2)
    refusals = THRIFT2_REFUSALS
    refused = BarrierReadError
    unavailable = BarrierUnavailableError


class BarrierReader:
    """Reads regions' replication barriers from the source cluster's ``hbase:meta`` through its
    Thrift2 server. Not thread-safe: one per reader of a queue, as HBase has one
    ``SerialReplicationChecker`` per WAL reader.

    It remembers the region names of the parents it has read (``rep_barrier:parent``), so
    :meth:`parent` gets such a row directly; another region is looked for in all of meta.

    :param thrift2: the source cluster's Thrift2 server, ``host:port`` (a comma list: the first
        that answers).
    :param timeout: seconds to connect and to wait for each answer.
    :param options: its transport, protocol and TLS (default: buffered, binary, plain).
    :param caching: meta rows fetched per call of a scan.
    :raises ConfigError: ``thrift2`` is not ``host:port``.
    :raises BarrierUnavailableError: the server does not answer.
    """

    def __init__(
        self, thrift2: str, *, timeout: float = 10.0, options: ThriftOptions | None = None, caching: int = 10
    ) -> None:
        try:
            servers = parse_host_ports(thrift2, "Thrift2 server address of the source cluster")
        except InvalidPeerConfigError as exc:
            raise ConfigError(str(exc)) from None
        if not timeout > 0:
            raise ConfigError(f"'timeout' must be > 0 seconds, got {timeout}")
        if caching < 1:
            raise ConfigError(f"'caching' must be >= 1, got {caching}")
        self.address = thrift2
        self.caching = caching
        self._session = _MetaSession(
            servers,
            label="the source cluster",
            hint=f"its Thrift2 server {thrift2}",
            options=options,
            timeout_ms=max(1, int(timeout * 1000)),
        )
        self._names: dict[str, bytes] = {}

    def region_name(self, encoded: str) -> bytes | None:
        """The full region name of ``encoded``, if this reader has met it (as a region it read,
        or a parent named by one); else ``None``."""
        return self._names.get(encoded)

    # -- reads -----------------------------------------------------------------------------------

    def region(self, table: bytes, row: bytes, encoded: str) -> RegionBarriers:
        """The barriers, state and parents of region ``encoded`` of ``table``, which holds (or
        held) ``row``: as ``MetaTableAccessor.getReplicationBarrierResult``, a reversed scan of
        the table's meta rows from the row's position that takes the first row of that encoded
        name (a region split or merged since is passed over). A region meta does not know
        (yet): no barriers, state ``None``.

        :raises BarrierReadError: the server refused, or the row holds what HBase would not
            write (the message names the row and the column).
        :raises BarrierUnavailableError: the server did not answer.
        """
        name = table.removeprefix(b"default:")
        if not name:
            raise ConfigError("a table name is needed to read replication barriers")
        scan = hbase2.TScan(
            startRow=b"%s,%s,%s" % (name, row, NINES),
            stopRow=name + b",,",
            columns=[hbase2.TColumn(family=INFO, qualifier=STATE), hbase2.TColumn(family=REP_BARRIER)],
            maxVersions=_ALL_VERSIONS,
            reversed=True,
            caching=self.caching,
        )
        what = f"read the replication barriers of region {encoded} of table {_table_text(name)}"
        with contextlib.closing(self._scan(scan, what)) as results:
            for result in results:
                meta_row = bytes(result.row)
                try:
                    found = encoded_region_name(meta_row)
                except ValueError:
                    continue
                if found == encoded:
                    barriers, parents = self._read(parse_meta_row, meta_row, result.columnValues or [])
                    self._names[encoded] = meta_row
                    self._names.update(zip(barriers.parents, parents, strict=True))
                    log.debug("region %s of %s: %s", encoded, _table_text(name), barriers)
                    return barriers
        log.debug("region %s of %s: no row in hbase:meta", encoded, _table_text(name))
        return RegionBarriers(encoded, (), None, ())

    def parent(self, encoded: str) -> tuple[int, ...]:
        """The barriers of a split or merge parent, ascending (as
        ``MetaTableAccessor.getReplicationBarrier`` of its region name): its last one, minus 1,
        is its highest sequence id. Empty when its row is gone (HBase's cleaner removes it once
        every peer has pushed it all).

        :raises BarrierReadError: the server refused, or a barrier is not 8 bytes.
        :raises BarrierUnavailableError: the server did not answer.
        """
        what = f"read the replication barriers of parent region {encoded}"
        name = self._names.get(encoded)
        if name is None:
            return self._find_parent(encoded, what)
        columns = [hbase2.TColumn(family=REP_BARRIER, qualifier=SEQNUM)]
        tget = hbase2.TGet(row=name, columns=columns, maxVersions=_ALL_VERSIONS)
        result = self._session.call(what, lambda c: c.get(META_TABLE, tget))
        return self._read(barriers_of, name, result.columnValues or [])

    def _find_parent(self, encoded: str, what: str) -> tuple[int, ...]:
        """A region whose name was not seen: its row looked for in all of meta by its
        encoded name (a row filter does the looking on the server)."""
        if not encoded.isalnum():
            raise ConfigError(f"not an encoded region name: {encoded!r}")
        scan = hbase2.TScan(
            columns=[hbase2.TColumn(family=REP_BARRIER, qualifier=SEQNUM)],
            maxVersions=_ALL_VERSIONS,
            filterString=f"RowFilter(=, 'substring:.{encoded}.')".encode(),
            caching=self.caching,
        )
        with contextlib.closing(self._scan(scan, what)) as results:
            for result in results:
                meta_row = bytes(result.row)
                if meta_row.endswith(b".%s." % encoded.encode()):
                    self._names[encoded] = meta_row
                    return self._read(barriers_of, meta_row, result.columnValues or [])
        return ()

    def last_barriers(self) -> Iterator[tuple[bytes, str, int]]:
        """Every region with replication barriers: its table (``ns:t``, or ``t`` in the default
        namespace), encoded name and last barrier (HBase's
        ``getTableEncodedRegionNameAndLastBarrier``, over all tables), in meta's order.

        :raises BarrierReadError: the server refused, or a barrier is not 8 bytes.
        :raises BarrierUnavailableError: the server did not answer.
        """
        scan = hbase2.TScan(
            columns=[hbase2.TColumn(family=REP_BARRIER, qualifier=SEQNUM)],
            maxVersions=_ALL_VERSIONS,
            caching=max(self.caching, 100),
        )
        with contextlib.closing(self._scan(scan, "read the last replication barrier of every region")) as results:
            for result in results:
                meta_row = bytes(result.row)
                barriers = self._read(barriers_of, meta_row, result.columnValues or [])
                try:
                    encoded = encoded_region_name(meta_row)
                except ValueError:
                    continue  # not a region's row
                if barriers:
                    yield meta_row.partition(b",")[0], encoded, barriers[-1]

    def _read(self, parse: Callable[..., T], *args: Any) -> T:
        """``parse(*args)``, its error naming the server the row came from."""
        try:
            return parse(*args)
        except BarrierReadError as exc:
            raise BarrierReadError(f"{exc} (the source cluster's Thrift2 server {self._session.server})") from None

    def _scan(self, scan: Any, what: str) -> Generator[Any, None, None]:
        """The results of a scan of ``hbase:meta``, ``caching`` rows per call; the scanner is
        closed when the caller stops."""
        scanner = self._session.call(what, lambda c: c.openScanner(META_TABLE, scan))
        try:
            while True:
                results = self._session.call(what, lambda c: c.getScannerRows(scanner, self.caching))
                if not results:
                    return
                for result in results:
                    if result.row is not None:
                        yield result
        finally:
            with contextlib.suppress(BarrierReadError):
                self._session.call(what, lambda c: c.closeScanner(scanner))

    # -- life cycle ------------------------------------------------------------------------------

    def close(self) -> None:
        self._session.close()

    def __enter__(self) -> BarrierReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
