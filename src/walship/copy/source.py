"""A copy's raw scan read straight from the source's region servers (``ClientService.Scan``,
:mod:`walship.rpc.scan`), when the source registers hbase:meta's region server in its
ZooKeeper (a real HBase; the minicluster serves no region server RPC and is read over Thrift2,
:func:`walship.copy.raw.raw_scan`).

The same rows as the Thrift2 raw scan, in the same order: every put version and every delete
marker of the families, with timestamps at or above the start, each cell with its type. A range
is read a region at a time, from hbase:meta's regions of the table; a region that moved or
split, a server that went away, a scanner that expired: the regions are read again and the scan
goes on after the last row it gave, for up to ``RETRY_SECONDS``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Iterator, Sequence
from types import TracebackType

from walship.errors import (
    MasterUnavailableError,
    RemoteHBaseError,
    TableNotFoundError,
    VerifyError,
    VerifyUnavailableError,
    ZkError,
)
from walship.rpc.auth import default_auth
from walship.rpc.locator import BUSY, RELOCATE, RegionLocator
from walship.rpc.meta import RegionLocation
from walship.rpc.multi import short_class
from walship.rpc.scan import raw_scan_spec, region_scan
from walship.verify import VerifyJob
from walship.verify.model import LATEST
from walship.wal.model import CELL_TYPE_CODES, Cell
from walship.zk import ZnodeLayout

__all__ = ["RETRY_SECONDS", "RegionServerSource"]

log = logging.getLogger(__name__)

#: How long a scan keeps going again after regions moved or servers went away.
RETRY_SECONDS = 120.0
_BACKOFF = (0.05, 2.0)
#: HBase's answers that mean "open the scanner again where it was"
_SCANNER_LOST = frozenset({"UnknownScannerException", "OutOfOrderScannerNextException", "ScannerResetException"})


class RegionServerSource:
    """The source cluster's region servers, found through its ZooKeeper and hbase:meta."""

    def __init__(self, job: VerifyJob) -> None:
        self._where = RegionLocator(
            job.zk, ZnodeLayout(job.znode_parent), default_auth(), "the source cluster", zk_auth=job.zk_auth
        )

    def _region(self, table: bytes, row: bytes) -> RegionLocation:
        try:
            return self._where.region_of(table, row)
        except TableNotFoundError as exc:
            raise VerifyError(str(exc)) from None
        except ZkError as exc:
            raise VerifyUnavailableError(f"the source cluster: ZooKeeper {self._where.zk_hosts}: {exc}") from None
        except MasterUnavailableError as exc:
            raise VerifyUnavailableError(str(exc)) from None

    def raw_scan(
        self, table: str, start: bytes, stop: bytes, families: Iterable[bytes], min_ts: int = 0, *, caching: int
    ) -> Iterator[tuple[bytes, Sequence[Cell]]]:
        """Rows of ``[start, stop)`` of ``table`` in key order, each with its cells of
        ``families`` as the source keeps them (see :func:`walship.copy.raw.raw_scan`).

        :raises VerifyError: the server refused (names the table and region), a cell of an
            unknown type, an unknown table.
        :raises VerifyUnavailableError: the regions could not be read for ``RETRY_SECONDS``.
        """
        name, fams = table.encode(), sorted(families)
        cursor = start
        deadline, backoff = time.monotonic() + RETRY_SECONDS, _BACKOFF[0]
        while True:
            region = self._region(name, cursor)
            why = ""
            if not region.host:
                why = f"region {region.encoded} is not assigned"
            else:
                region_stop = region.end if region.end and (not stop or region.end < stop) else stop
                spec = raw_scan_spec(cursor, region_stop, fams, min_ts, LATEST, caching)
                what = f"the source cluster: table {table} region {region.encoded}"
                client = self._where.server(region.host, region.port)
                try:
                    for rows in region_scan(client, region.name, spec, caching, what):
                        for cells in rows:
                            if not {c.type for c in cells} <= CELL_TYPE_CODES:
                                raise VerifyError(f"{what}: row {cells[0].row!r} has a cell of unknown type")
                            yield cells[0].row, cells
                            cursor = cells[0].row + b"\x00"
                except RemoteHBaseError as exc:
                    kind = short_class(exc.exception_class)
                    if kind not in RELOCATE | BUSY | _SCANNER_LOST:
                        raise VerifyError(f"{what} on {client.server}: {exc}") from None
                    why = f"{client.server}: {kind}"
                except MasterUnavailableError as exc:
                    self._where.drop_server(client.server)
                    why = str(exc)
            if not why:
                if not region.end or (stop and region.end >= stop):
                    return
                cursor = region.end
                continue
            if time.monotonic() + backoff > deadline:
                raise VerifyUnavailableError(
                    f"the source cluster: table {table} not read from row {cursor!r} after {RETRY_SECONDS:g} s: {why}"
                )
            log.info("the source cluster: table %s read again from row %r in %.2f s: %s", table, cursor, backoff, why)
            self._where.forget(name)
            time.sleep(backoff)
            backoff = min(backoff * 2, _BACKOFF[1])

    def close(self) -> None:
        self._where.close()

    def __enter__(self) -> RegionServerSource:
        return self

    def __exit__(self, _t: type[BaseException] | None, _e: BaseException | None, _tb: TracebackType | None) -> None:
        self.close()
