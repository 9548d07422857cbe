"""Verify replicated data: compare a peer with its source row by row, and repair what differs.

HBase's ``VerifyReplication``, rebuilt on Thrift2: for every table and family the peer
replicates (REPLICATION_SCOPE 1 and selected by the peer), both sides are scanned region by
region of the source table over the time range, merged in key order and compared (values and
timestamps, every version up to the family's VERSIONS). A row that differs is read again
after a pause; it is bad only if it still differs and no unshipped edit in the peer's queues
touches it (else it is in flight). ``repair`` makes bad rows of the peer equal to the source's.

* :mod:`walship.verify.model`: options, splits, counters, row differences, ``toStringBinary``.
* :mod:`walship.verify.compare`: the pure row comparison and the key-ordered merge.
* :mod:`walship.verify.scan`: one side over Thrift2.
* :mod:`walship.verify.inflight`: the rows the peer's queues still have to ship.
* :mod:`walship.verify.repair`: repairing one row.
* :mod:`walship.verify.plan`: the job, the checks of the request, the splits.
* :mod:`walship.verify.run`: a split, a whole run in process, the report.
"""

from __future__ import annotations

from walship.verify.model import COUNTER_NAMES, Counters, RowDiff, Split, SplitResult, to_bytes_binary, to_string_binary
from walship.verify.plan import VerifyJob
from walship.verify.repair import MASKED_REASON, MASKED_REMEDY
from walship.verify.run import VerifyResult, combine, plan, run_split, verify, write_report

__all__ = [
    "COUNTER_NAMES",
    "MASKED_REASON",
    "MASKED_REMEDY",
    "Counters",
    "RowDiff",
    "Split",
    "SplitResult",
    "VerifyJob",
    "VerifyResult",
    "combine",
    "plan",
    "run_split",
    "to_bytes_binary",
    "to_string_binary",
    "verify",
    "write_report",
]
