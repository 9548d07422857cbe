"""The serial checker's rule, range by range, as HBase's SerialReplicationChecker decides it.

The barriers and last pushed ids here are plain tables (the reader of ``hbase:meta`` and the
ZooKeeper store have tests of their own on real servers); what is tested is the decision."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from walship.serial.checker import SerialChecker
from walship.serial.metarow import RegionBarriers
from walship.wal import Cell, CellType, WalEntry, WalKey

R = "0123456789abcdef0123456789abcdef"
P1 = "11111111111111111111111111111111"
P2 = "22222222222222222222222222222222"


@dataclass
class Meta:
    rows: dict[str, RegionBarriers] = field(default_factory=dict)
    reads: int = 0

    def region(self, table: bytes, row: bytes, encoded: str) -> RegionBarriers:
        self.reads += 1
        return self.rows.get(encoded, RegionBarriers(encoded, (), None, ()))

    def parent(self, encoded: str) -> tuple[int, ...]:
        self.reads += 1
        return self.rows[encoded].barriers if encoded in self.rows else ()


@dataclass
class Pushed:
    ids: dict[str, int] = field(default_factory=dict)

    def get(self, encoded_region: str, peer_id: str) -> int:
        assert peer_id == "1"
        return self.ids.get(encoded_region, -1)


def entry(seq: int, region: str = R) -> WalEntry:
    key = WalKey(region.encode(), b"t", seq, 1)
    return WalEntry(key, (Cell(b"row", b"f", b"q", 1, CellType.Put, b"v"),), offset=0, end_offset=1)


def checker(meta: Meta, pushed: Pushed) -> SerialChecker:
    return SerialChecker("1", meta, pushed)


def test_no_barriers_pass() -> None:
    meta = Meta()
    c = checker(meta, Pushed())
    assert c.check(entry(5)) is None
    assert c.check(entry(6)) is None  # continuous: no second look-up
    assert meta.reads == 1


def test_before_the_first_barrier_passes() -> None:
    meta = Meta({R: RegionBarriers(R, (10, 20), "OPEN", ())})
    assert checker(meta, Pushed()).check(entry(9)) is None


def test_a_later_range_waits_for_the_one_before() -> None:
    meta = Meta({R: RegionBarriers(R, (10, 20), "OPEN", ())})
    pushed = Pushed({R: 18})
    blocked = checker(meta, pushed).check(entry(21))
    assert blocked is not None
    assert (blocked.region, blocked.seq, blocked.waits_for, blocked.needed, blocked.pushed) == (R, 21, R, 19, 18)
    assert "previous range" in blocked.describe()
    pushed.ids[R] = 19  # the range [10, 20) is shipped: barrier - 1
    assert checker(meta, pushed).check(entry(21)) is None


def test_an_entry_on_a_barrier_is_in_the_range_it_opens() -> None:
    meta = Meta({R: RegionBarriers(R, (10, 20), "OPEN", ())})
    blocked = checker(meta, Pushed({R: 5})).check(entry(20))
    assert blocked is not None and blocked.needed == 19
    assert checker(meta, Pushed({R: 5})).check(entry(10)) is None  # the first range, no parents


def test_a_middle_range_is_remembered_up_to_its_end() -> None:
    meta = Meta({R: RegionBarriers(R, (10, 20, 30), "OPEN", ())})
    pushed = Pushed({R: 19})
    c = checker(meta, pushed)
    assert c.check(entry(21)) is None
    assert c.check(entry(25)) is None  # a gap, but below the range's end: no look-up
    assert meta.reads == 1
    assert c.check(entry(31)) is not None  # the next range needs [20, 30) shipped


def test_the_first_range_waits_for_every_parent() -> None:
    meta = Meta(
        {
            R: RegionBarriers(R, (50,), "OPEN", (P1, P2)),
            P1: RegionBarriers(P1, (1, 40), "MERGED", ()),
            P2: RegionBarriers(P2, (3, 45), "MERGED", ()),
        }
    )
    pushed = Pushed({P1: 39, P2: 30})
    blocked = checker(meta, pushed).check(entry(50))
    assert blocked is not None and (blocked.waits_for, blocked.needed, blocked.pushed) == (P2, 44, 30)
    assert "parent" in blocked.describe()
    pushed.ids[P2] = 44
    assert checker(meta, pushed).check(entry(50)) is None


def test_a_parent_gone_from_meta_is_finished() -> None:
    meta = Meta({R: RegionBarriers(R, (50,), "OPEN", (P1,))})
    assert checker(meta, Pushed()).check(entry(51)) is None


def test_the_last_range_of_an_opening_region_waits() -> None:
    meta = Meta({R: RegionBarriers(R, (10, 20), "OPENING", ())})
    blocked = checker(meta, Pushed({R: 19})).check(entry(22))
    assert blocked is not None and blocked.opening
    assert "opening" in blocked.describe()
    assert checker(meta, Pushed({R: 19})).check(entry(12)) is None  # an earlier range goes


@pytest.mark.parametrize("gap", [2, 100])
def test_a_gap_in_the_sequence_looks_again(gap: int) -> None:
    meta = Meta({R: RegionBarriers(R, (10,), "OPEN", ())})
    c = checker(meta, Pushed())
    assert c.check(entry(10)) is None
    meta.rows[R] = RegionBarriers(R, (10, 10 + gap), "OPEN", ())  # moved away and back meanwhile
    blocked = c.check(entry(10 + gap))
    assert blocked is not None and blocked.needed == 10 + gap - 1
    assert meta.reads == 2
