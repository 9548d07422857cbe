"""What ``walship verify`` compares and what it finds: the options, the splits, the cells of
a row, the difference of a row, the counters and the result of a split or of a run.

Counters carry HBase ``VerifyReplication``'s names, plus ``IN_FLIGHT_ROWS``:

==============================  ==================================================================
``GOODROWS``                    same cells (values and timestamps) on both sides
``BADROWS``                     ``ONLY_IN_SOURCE_TABLE_ROWS + ONLY_IN_PEER_TABLE_ROWS +
                                CONTENT_DIFFERENT_ROWS``
``ONLY_IN_SOURCE_TABLE_ROWS``   the row has cells on the source only
``ONLY_IN_PEER_TABLE_ROWS``     the row has cells on the peer only
``CONTENT_DIFFERENT_ROWS``      both sides have the row, with different cells
``IN_FLIGHT_ROWS``              still different after the recompare, but an unshipped edit of the
                                peer's queues touches the row: not bad
``REPAIRED_ROWS``               (``--repair``) bad rows made equal; not counted bad any more
==============================  ==================================================================
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "BAD_KINDS",
    "CONTENT_DIFFERENT",
    "COUNTER_NAMES",
    "LATEST",
    "ONLY_IN_PEER",
    "ONLY_IN_SOURCE",
    "CellKey",
    "Counters",
    "RepairOutcome",
    "RowCells",
    "RowDiff",
    "Split",
    "SplitResult",
    "cells_json",
    "to_bytes_binary",
    "to_string_binary",
]

log = logging.getLogger(__name__)

ONLY_IN_SOURCE = "ONLY_IN_SOURCE_TABLE_ROWS"
ONLY_IN_PEER = "ONLY_IN_PEER_TABLE_ROWS"
CONTENT_DIFFERENT = "CONTENT_DIFFERENT_ROWS"
BAD_KINDS = (ONLY_IN_SOURCE, ONLY_IN_PEER, CONTENT_DIFFERENT)
COUNTER_NAMES = ("GOODROWS", "BADROWS", *BAD_KINDS, "IN_FLIGHT_ROWS")
#: HBase's ``HConstants.LATEST_TIMESTAMP`` (``Long.MAX_VALUE``): the open end of a time range.
LATEST = 2**63 - 1

#: A cell's coordinates in a row: family, qualifier, timestamp.
CellKey = tuple[bytes, bytes, int]
#: The cells of one row: coordinates -> value.
RowCells = dict[CellKey, bytes]

_PLAIN = frozenset(
    b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz" + b" `~!@#$%^&*()-_=+[]{}|;:'\",.<>/?"
)


def to_string_binary(data: bytes) -> str:
    """HBase's ``Bytes.toStringBinary``: printable ASCII as is (but the backslash), every
    other byte as ``\\xNN`` with uppercase hex."""
    return "".join(chr(b) if b in _PLAIN else f"\\x{b:02X}" for b in data)


def to_bytes_binary(text: str) -> bytes:
    """HBase's ``Bytes.toBytesBinary``, the inverse of :func:`to_string_binary`: ``\\xNN``
    is the byte NN, every other character its own (latin-1) byte."""
    out = bytearray()
    i = 0
    while i < len(text):
        ch = text[i]
        if ch == "\\" and text[i + 1 : i + 2] == "x" and len(text) >= i + 4:
            try:
                out.append(int(text[i + 2 : i + 4], 16))
                i += 4
                continue
            except ValueError:
                pass
        out += bytes([ord(ch)]) if ord(ch) < 256 else ch.encode()
        i += 1
    return bytes(out)


def cells_json(cells: Mapping[CellKey, bytes]) -> list[dict[str, Any]]:
    """Cells as JSON: family, qualifier and value as ``toStringBinary``, and the timestamp."""
    return [
        {
            "family": to_string_binary(f),
            "qualifier": to_string_binary(q),
            "timestamp": ts,
            "value": to_string_binary(v),
        }
        for (f, q, ts), v in sorted(cells.items())
    ]


@dataclass(frozen=True)
class Split:
    """The part of one table one task compares: a source region, cut to the row prefixes.

    :param ranges: ``(start, stop)`` row ranges, stop exclusive (``b""``: open).
    :param families: each compared family and the versions compared of it.
    """

    table: str
    region: int
    ranges: tuple[tuple[bytes, bytes], ...]
    families: tuple[tuple[bytes, int], ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "table": self.table,
            "region": self.region,
            "ranges": [[s.hex(), e.hex()] for s, e in self.ranges],
            "families": [[f.hex(), v] for f, v in self.families],
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Split:
        return cls(
            table=str(data["table"]),
            region=int(data["region"]),
            ranges=tuple((bytes.fromhex(s), bytes.fromhex(e)) for s, e in data["ranges"]),
            families=tuple((bytes.fromhex(f), int(v)) for f, v in data["families"]),
        )

    def describe(self) -> str:
        return f"table {self.table} region {self.region}"


@dataclass
class RowDiff:
    """How one row differs: the cells only the source has, those only the peer has, and
    those at the same coordinates with different values (source value, peer value)."""

    table: str
    row: bytes
    kind: str
    only_source: RowCells = field(default_factory=dict)
    only_peer: RowCells = field(default_factory=dict)
    different: dict[CellKey, tuple[bytes, bytes]] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "table": self.table,
            "row": to_string_binary(self.row),
            "kind": self.kind,
            "only_in_source": cells_json(self.only_source),
            "only_in_peer": cells_json(self.only_peer),
            "different": [
                {
                    "family": to_string_binary(f),
                    "qualifier": to_string_binary(q),
                    "timestamp": ts,
                    "source_value": to_string_binary(sv),
                    "peer_value": to_string_binary(pv),
                }
                for (f, q, ts), (sv, pv) in sorted(self.different.items())
            ],
        }


@dataclass
class RepairOutcome:
    """What ``--repair`` did to one row: the audit line."""

    table: str
    row: bytes
    kind: str
    put: int = 0
    deleted: int = 0
    repaired: bool = False
    reason: str | None = None
    remedy: str | None = None
    remaining: RowDiff | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "table": self.table,
            "row": to_string_binary(self.row),
            "kind": self.kind,
            "cells_put": self.put,
            "cells_deleted": self.deleted,
            "repaired": self.repaired,
        }
        if not self.repaired:
            out["reason"] = self.reason
            out["remedy"] = self.remedy
            if self.remaining is not None:
                out["remaining"] = self.remaining.to_json()
        return out


@dataclass
class Counters:
    """The row counters of a split or of a run (see the module's description)."""

    good: int = 0
    only_in_source: int = 0
    only_in_peer: int = 0
    content_different: int = 0
    in_flight: int = 0
    repaired: int = 0

    @property
    def bad(self) -> int:
        return self.only_in_source + self.only_in_peer + self.content_different

    def count_bad(self, kind: str, n: int = 1) -> None:
        if kind == ONLY_IN_SOURCE:
            self.only_in_source += n
        elif kind == ONLY_IN_PEER:
            self.only_in_peer += n
        elif kind == CONTENT_DIFFERENT:
            self.content_different += n
        else:
            raise ValueError(f"not a kind of bad row: {kind!r}")

    def add(self, other: Counters) -> None:
        self.good += other.good
        self.only_in_source += other.only_in_source
        self.only_in_peer += other.only_in_peer
        self.content_different += other.content_different
        self.in_flight += other.in_flight
        self.repaired += other.repaired

    def to_json(self, *, repair: bool = False) -> dict[str, int]:
        out = {
            "GOODROWS": self.good,
            "BADROWS": self.bad,
            ONLY_IN_SOURCE: self.only_in_source,
            ONLY_IN_PEER: self.only_in_peer,
            CONTENT_DIFFERENT: self.content_different,
            "IN_FLIGHT_ROWS": self.in_flight,
        }
        if repair:
            out["REPAIRED_ROWS"] = self.repaired
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, int]) -> Counters:
        return cls(
            good=data["GOODROWS"],
            only_in_source=data[ONLY_IN_SOURCE],
            only_in_peer=data[ONLY_IN_PEER],
            content_different=data[CONTENT_DIFFERENT],
            in_flight=data["IN_FLIGHT_ROWS"],
            repaired=data.get("REPAIRED_ROWS", 0),
        )


@dataclass
class SplitResult:
    """What one split found: its counters, the rows still bad (with their difference), the
    rows found bad before ``--repair`` (their kinds), and the repair audit lines.

    Plain JSON crosses between a Spark executor and the driver (:meth:`to_json`)."""

    split: Split
    counters: Counters = field(default_factory=Counters)
    found: Counters = field(default_factory=Counters)
    bad: list[dict[str, Any]] = field(default_factory=list)
    bad_keys: list[str] = field(default_factory=list)
    repairs: list[dict[str, Any]] = field(default_factory=list)
    rows_scanned: int = 0
    seconds: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return {
            "split": self.split.to_json(),
            "counters": self.counters.to_json(repair=True),
            "found": self.found.to_json(repair=True),
            "bad": self.bad,
            "bad_keys": self.bad_keys,
            "repairs": self.repairs,
            "rows_scanned": self.rows_scanned,
            "seconds": self.seconds,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> SplitResult:
        return cls(
            split=Split.from_json(data["split"]),
            counters=Counters.from_json(data["counters"]),
            found=Counters.from_json(data["found"]),
            bad=list(data["bad"]),
            bad_keys=list(data["bad_keys"]),
            repairs=list(data["repairs"]),
            rows_scanned=int(data["rows_scanned"]),
            seconds=float(data["seconds"]),
        )
