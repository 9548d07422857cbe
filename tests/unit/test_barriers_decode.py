"""The bytes of serial replication's meta columns, as HBase 2.x's MetaTableAccessor writes and
reads them: ``rep_barrier:parent`` (region names, ``0xFF`` escaped, ``0xFF 0x00`` between
names), ``rep_barrier:seqnumDuringOpen`` (8-byte big-endian longs), ``info:state``; and the
minicluster's writing side of the same bytes, and its meta row order."""

from __future__ import annotations

import hashlib
import struct

import pytest

from walship.errors import BarrierReadError
from walship.serial import encoded_region_name, split_parent_names
from walship.serial.metarow import parse_meta_row
from walship.thrift.hbase2 import hbase2
from walship_testing.minicluster.meta import compare_meta_rows, encoded_name, meta_row_key, parents_value


def name(table: bytes, start: bytes, region_id: int) -> bytes:
    """A region name as ``RegionInfo.createRegionName`` builds it (new format)."""
    head = b"%s,%s,%d" % (table, start, region_id)
    return head + b"." + hashlib.md5(head).hexdigest().encode() + b"."


def test_parent_names_with_escaped_ff_bytes() -> None:
    first = name(b"t", b"\xff\x00k\xff", 1700000000000)  # a start key holding 0xFF, then 0x00
    second = name(b"t", b"m\xff", 1700000000001)
    # as HBase's getParentsBytes writes them, by hand: each 0xFF doubled, 0xFF 0x00 between
    value = first.replace(b"\xff", b"\xff\xff") + b"\xff\x00" + second.replace(b"\xff", b"\xff\xff")
    assert b"\xff\xff\x00k\xff\xff," in value
    assert split_parent_names(value) == (first, second)
    assert parents_value([first, second]) == value  # the minicluster writes the same bytes
    assert split_parent_names(parents_value([first])) == (first,)
    assert [encoded_region_name(n) for n in split_parent_names(value)] == [
        hashlib.md5(b"t,\xff\x00k\xff,1700000000000").hexdigest(),
        hashlib.md5(b"t,m\xff,1700000000001").hexdigest(),
    ]


def test_parent_bytes_hbase_reads_leniently_or_not_at_all() -> None:
    assert split_parent_names(b"") == ()
    assert split_parent_names(b"a\xffbc") == (b"abc",)  # 0xFF before another byte: that byte, as HBase reads it
    with pytest.raises(ValueError, match="unpaired 0xFF escape byte at offset 3"):
        split_parent_names(b"abc\xff")


def test_encoded_names_are_hbase_s() -> None:
    assert encoded_name(b"ns:t", b"row5", 42) == hashlib.md5(b"ns:t,row5,42").hexdigest()
    assert encoded_region_name(name(b"ns:t", b"row5", 42)) == encoded_name(b"ns:t", b"row5", 42)
    for bad in (b"t,,1", b"t,,1.abc.", b"hbase:meta,,1"):
        with pytest.raises(ValueError, match="not a region name"):
            encoded_region_name(bad)


def cell(family: bytes, qualifier: bytes, value: bytes, ts: int = 1) -> object:
    return hbase2.TColumnValue(family=family, qualifier=qualifier, value=value, timestamp=ts)


def test_a_meta_row_parsed_as_hbase_parses_it() -> None:
    row = name(b"t", b"b", 7)
    parent = name(b"t", b"", 3)
    barriers, names = parse_meta_row(
        row,
        [
            cell(b"info", b"state", b"OPENING", 2),
            cell(b"info", b"state", b"CLOSED", 1),
            cell(b"rep_barrier", b"seqnumDuringOpen", struct.pack(">q", 9), 3),
            cell(b"rep_barrier", b"seqnumDuringOpen", struct.pack(">q", 4), 2),
            cell(b"rep_barrier", b"seqnumDuringOpen", struct.pack(">q", 9), 1),
            cell(b"rep_barrier", b"parent", parents_value([parent]), 1),
        ],
    )
    assert barriers.encoded == encoded_region_name(row)
    assert barriers.barriers == (4, 9)  # sorted, each once
    assert barriers.state == "OPENING"  # the newest version
    assert barriers.parents == (encoded_region_name(parent),) and names == (parent,)


@pytest.mark.parametrize(
    ("cells", "column", "why"),
    [
        ([cell(b"rep_barrier", b"seqnumDuringOpen", b"\x00\x01")], "rep_barrier:seqnumDuringOpen", "2 bytes (0001)"),
        ([cell(b"info", b"state", b"DANCING")], "info:state", "'DANCING' is not a region state"),
        ([cell(b"rep_barrier", b"parent", b"t,,1.x.\xff")], "rep_barrier:parent", "unpaired 0xFF"),
        ([cell(b"rep_barrier", b"parent", b"t,,1")], "rep_barrier:parent", "not a region name"),
    ],
)
def test_bytes_hbase_would_not_write_name_the_row_and_column(cells: list[object], column: str, why: str) -> None:
    row = name(b"t", b"\x00k", 7)
    with pytest.raises(BarrierReadError) as info:
        parse_meta_row(row, cells)
    message = str(info.value)
    assert "hbase:meta row t,\\x00k,7." in message and f"column {column}" in message and why in message


def test_meta_rows_sort_as_hbase_sorts_them() -> None:
    """MetaCellComparator: table, then start key, then region id; not plain byte order, which
    puts ``t,a\\x00,...`` before ``t,a,...``."""
    rows = [name(b"t", b"a\x00", 1), name(b"t", b"a", 2), name(b"t", b"", 9), name(b"t", b"", 10)]
    rows += [b"t", name(b"t1", b"", 1)]
    # ids compare as bytes, as HBase compares them (real ids are all 13-digit times)
    assert sorted(rows, key=meta_row_key) == [rows[4], rows[3], rows[2], rows[1], rows[0], rows[5]]
    assert sorted(rows).index(rows[0]) < sorted(rows).index(rows[1])  # what plain byte order would do
    # a row with one comma: its last part is compared from the row's start, as HBase does
    assert compare_meta_rows(b"t,", name(b"t", b"", 1)) > 0 and compare_meta_rows(b"t,,", name(b"t", b"", 1)) < 0
