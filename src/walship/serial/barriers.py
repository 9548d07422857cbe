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
from collections.abc import Callable, Generator, Iterator
from typing import Any, TypeVar

from walship.errors import BarrierReadError, BarrierUnavailableError, ConfigError, InvalidPeerConfigError
from walship.peer import parse_host_ports
from walship.serial.metarow import (
    INFO,
    META_TABLE,
    NINES,
    REP_BARRIER,
    SEQNUM,
    STATE,
    RegionBarriers,
    barriers_of,
    encoded_region_name,
    parse_meta_row,
)
from walship.thrift.conn import THRIFT2_REFUSALS, ThriftOptions, ThriftSession, open_thrift2
from walship.thrift.hbase2 import hbase2

__all__ = ["BarrierReader"]

log = logging.getLogger(__name__)

T = TypeVar("T")

#: Read every version (``Scan.readAllVersions``).
_ALL_VERSIONS = 2**31 - 1


def _table_text(table: bytes) -> str:
    return table.decode(errors="replace")


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
    :param options: its transport, protocol, TLS and authentication (default:
        :meth:`~walship.thrift.conn.ThriftOptions.for_source`: buffered, binary, SASL when
        walship is logged in to Kerberos).
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
            options=options or ThriftOptions.for_source(),
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
