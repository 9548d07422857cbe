"""Rows read straight from a region server: ``ClientService.Scan``, as HBase's client scans a
region, the cells coming back in the answer's cell block (``KeyValueCodec``).

A scanner is opened with the region and the ``Scan``; each call returns up to ``rows`` whole rows
(``cells_per_result`` cuts the block into them) and says whether the region has more. The
region server closes a scanner that reached the end of its region; one left early is closed
here. A raw scan (:func:`raw_scan_spec`) is HBase's ``Scan.setRaw(true)``: the ``_raw_``
attribute, so every version and every delete marker comes back, each cell with its own type.

Example::

    spec = raw_scan_spec(b"", b"", [b"f"], 0, 2**63 - 1)
    for rows in region_scan(rs, region.name, spec, 1000, "table t"):
        for cells in rows:
            print(cells[0].row, len(cells))
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator, Sequence

from walship.errors import MasterError
from walship.protos import Client_pb2, HBase_pb2
from walship.rpc.cellblock import results_of
from walship.rpc.multi import RegionServerClient
from walship.wal.model import Cell

__all__ = ["ALL_VERSIONS", "RAW_ATTRIBUTE", "RAW_TRUE", "raw_scan_spec", "region_scan"]

log = logging.getLogger(__name__)

#: HBase's ``Scan.RAW_ATTR`` and ``Bytes.toBytes(true)``.
RAW_ATTRIBUTE = "_raw_"
RAW_TRUE = b"\xff"
#: ``Integer.MAX_VALUE``: every version (a raw scan's are not bounded by the family's).
ALL_VERSIONS = 2**31 - 1
_REGION_NAME = HBase_pb2.RegionSpecifier.REGION_NAME


def raw_scan_spec(
    start: bytes, stop: bytes, families: Iterable[bytes], min_ts: int, max_ts: int, caching: int = 1000
) -> Client_pb2.Scan:
    """A raw scan of ``[start, stop)`` (empty: the region's own bound) of ``families``, every
    version with a timestamp in ``[min_ts, max_ts)``, and every delete marker."""
    scan = Client_pb2.Scan(
        column=[Client_pb2.Column(family=f) for f in sorted(families)],
        start_row=start,
        stop_row=stop,
        max_versions=ALL_VERSIONS,
        caching=caching,
        cache_blocks=False,
    )
    scan.attribute.add(name=RAW_ATTRIBUTE, value=RAW_TRUE)
    scan.time_range.to = max_ts
    if min_ts:
        setattr(scan.time_range, "from", min_ts)  # "from" is a Python keyword
    return scan


def region_scan(
    client: RegionServerClient, region: bytes, scan: Client_pb2.Scan, rows: int, what: str
) -> Iterator[list[Sequence[Cell]]]:
    """The rows of ``scan`` in ``region`` on ``client``, an answer at a time (each a list of
    rows, each row its cells in HBase's order). Leaving early closes the scanner.

    :raises RemoteHBaseError: the server refused (``NotServingRegionException``: the region
        moved; ``UnknownScannerException``: the scanner expired).
    :raises MasterUnavailableError: the server did not answer.
    :raises RpcProtocolError: an answer whose cells do not match its counts (names ``what``).
    """
    request = Client_pb2.ScanRequest(scan=scan, number_of_rows=rows)
    request.region.type = _REGION_NAME
    request.region.value = region
    scanner = 0
    done = False
    try:
        while True:
            response, block = client.call("Scan", request, Client_pb2.ScanResponse)
            scanner = response.scanner_id or scanner
            results = results_of(block, response.cells_per_result, f"{what} on {client.server}")
            if results:
                yield [cells for cells in results if cells]
            if not response.more_results or not response.more_results_in_region:
                done = True  # the server closed the scanner at the end of the region
                return
            request = Client_pb2.ScanRequest(scanner_id=scanner, number_of_rows=rows)
    finally:
        if scanner and not done:
            _close(client, scanner, what)


def _close(client: RegionServerClient, scanner: int, what: str) -> None:
    close = Client_pb2.ScanRequest(scanner_id=scanner, close_scanner=True, number_of_rows=0)
    try:
        client.call("Scan", close, Client_pb2.ScanResponse)
    except MasterError as exc:  # the scan's own error, if any, is the one to see
        log.debug("%s: closing scanner %d on %s: %s", what, scanner, client.server, exc)
