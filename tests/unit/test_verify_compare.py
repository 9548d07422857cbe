"""The pure parts of ``walship verify``: row comparison, the merge, versions, toStringBinary."""

from __future__ import annotations

import pytest

from walship.verify.compare import compare_row, limit_versions, merge_rows
from walship.verify.model import (
    CONTENT_DIFFERENT,
    ONLY_IN_PEER,
    ONLY_IN_SOURCE,
    Counters,
    RowDiff,
    Split,
    to_bytes_binary,
    to_string_binary,
)
from walship.verify.plan import prefix_range


def test_equal_rows_do_not_differ() -> None:
    cells = {(b"r", b"q", 1): b"v", (b"r", b"q", 2): b"w"}
    assert compare_row("t", b"k", cells, dict(cells)) is None


def test_a_row_on_one_side_only() -> None:
    only_src = compare_row("t", b"k", {(b"r", b"q", 1): b"v"}, {})
    only_peer = compare_row("t", b"k", {}, {(b"r", b"q", 1): b"v"})
    assert only_src is not None and only_src.kind == "ONLY_IN_SOURCE_TABLE_ROWS"
    assert only_src.only_source == {(b"r", b"q", 1): b"v"}
    assert only_peer is not None and only_peer.kind == "ONLY_IN_PEER_TABLE_ROWS"


def test_content_differences_split_by_cell() -> None:
    src = {(b"r", b"a", 1): b"same", (b"r", b"b", 1): b"src", (b"r", b"c", 5): b"only-src"}
    dst = {(b"r", b"a", 1): b"same", (b"r", b"b", 1): b"peer", (b"r", b"c", 6): b"only-peer"}
    diff = compare_row("t", b"k", src, dst)
    assert diff is not None and diff.kind == "CONTENT_DIFFERENT_ROWS"
    assert diff.different == {(b"r", b"b", 1): (b"src", b"peer")}
    assert diff.only_source == {(b"r", b"c", 5): b"only-src"}
    assert diff.only_peer == {(b"r", b"c", 6): b"only-peer"}
    assert diff.to_json()["different"][0]["source_value"] == "src"


def test_a_timestamp_difference_alone_is_a_difference() -> None:
    diff = compare_row("t", b"k", {(b"r", b"q", 1): b"v"}, {(b"r", b"q", 2): b"v"})
    assert diff is not None and diff.kind == "CONTENT_DIFFERENT_ROWS"


def test_merge_in_key_order() -> None:
    src = [(b"a", {(b"r", b"", 1): b"1"}), (b"c", {(b"r", b"", 1): b"3"})]
    dst = [(b"b", {(b"r", b"", 1): b"2"}), (b"c", {(b"r", b"", 1): b"3"}), (b"d", {(b"r", b"", 1): b"4"})]
    merged = [(row, bool(s), bool(d)) for row, s, d in merge_rows(src, dst)]
    assert merged == [(b"a", True, False), (b"b", False, True), (b"c", True, True), (b"d", False, True)]
    assert list(merge_rows([], [])) == []


def test_limit_versions_keeps_the_newest_per_column() -> None:
    cells = {(b"r", b"q", ts): b"v" for ts in (1, 2, 3)} | {(b"s", b"q", ts): b"v" for ts in (1, 2)}
    kept = limit_versions(cells, {b"r": 2, b"s": 1})
    assert sorted(kept) == [(b"r", b"q", 2), (b"r", b"q", 3), (b"s", b"q", 2)]


@pytest.mark.parametrize(
    ("raw", "text"),
    [
        (b"row-1", "row-1"),
        (b"a\\b", "a\\x5Cb"),
        (b"\x00\xff\x7f", "\\x00\\xFF\\x7F"),
        (b" ~!{}|?", " ~!{}|?"),
        (b"\n\t", "\\x0A\\x09"),
        ("é".encode(), "\\xC3\\xA9"),
    ],
)
def test_to_string_binary_as_hbase(raw: bytes, text: str) -> None:
    assert to_string_binary(raw) == text
    assert to_bytes_binary(text) == raw


def test_prefix_range() -> None:
    assert prefix_range(b"ab") == (b"ab", b"ac")
    assert prefix_range(b"a\xff") == (b"a\xff", b"b")
    assert prefix_range(b"\xff\xff") == (b"\xff\xff", b"")


def test_counters_and_split_round_trip() -> None:
    c = Counters(good=3)
    c.count_bad("ONLY_IN_SOURCE_TABLE_ROWS")
    c.count_bad("CONTENT_DIFFERENT_ROWS", 2)
    assert c.to_json()["BADROWS"] == 3
    assert Counters.from_json(c.to_json()) == c
    with pytest.raises(ValueError, match="not a kind"):
        c.count_bad("GOODROWS")
    split = Split("ns:t", 2, ((b"a\x00", b"b"),), ((b"r", 5),))
    assert Split.from_json(split.to_json()) == split


def test_unshipped_edits_explain_a_difference_only_when_they_cover_all_of_it() -> None:
    from walship.verify.inflight import Unshipped
    from walship.wal.model import CellType

    pending = Unshipped(
        puts={(b"r", b"q", 200)},
        deletes=[(int(CellType.Delete), b"r", b"a", 50), (int(CellType.DeleteFamily), b"s", b"", 70)],
    )
    newer = RowDiff(
        "t", b"x", CONTENT_DIFFERENT, only_source={(b"r", b"q", 200): b"v"}, only_peer={(b"r", b"q", 100): b"o"}
    )
    assert pending.explains(newer)  # a newer version still to come pushes the old one out
    masked = RowDiff(
        "t", b"x", ONLY_IN_PEER, only_peer={(b"r", b"a", 50): b"v", (b"s", b"k", 60): b"w"}
    )  # one version deleted, a family deleted
    assert pending.explains(masked)
    assert not pending.explains(RowDiff("t", b"x", ONLY_IN_PEER, only_peer={(b"r", b"a", 49): b"v"}))
    assert not pending.explains(RowDiff("t", b"x", ONLY_IN_SOURCE, only_source={(b"r", b"q", 199): b"v"}))
    different = RowDiff("t", b"x", CONTENT_DIFFERENT, different={(b"r", b"q", 200): (b"new", b"old")})
    assert pending.explains(different)
    both = RowDiff(
        "t", b"x", CONTENT_DIFFERENT, only_source={(b"r", b"q", 200): b"v"}, only_peer={(b"r", b"z", 1): b"stray"}
    )
    assert not pending.explains(both)  # an unshipped edit and a stray cell besides: bad
