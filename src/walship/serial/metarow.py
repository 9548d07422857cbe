"""A region's row of ``hbase:meta`` as HBase 2.x writes it for serial replication (see
:mod:`walship.serial.barriers` for what each column holds), read as HBase's
``ReplicationBarrierFamilyFormat`` reads it: the open barriers, the state, the parents. Pure
parsing; the reader that fetches the rows is :class:`~walship.serial.barriers.BarrierReader`."""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from walship.errors import BarrierReadError

__all__ = [
    "INFO",
    "META_TABLE",
    "NINES",
    "PARENT",
    "REGION_STATES",
    "REP_BARRIER",
    "SEQNUM",
    "STATE",
    "RegionBarriers",
    "barriers_of",
    "encoded_region_name",
    "parse_meta_row",
    "split_parent_names",
]

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
