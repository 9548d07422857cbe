"""A queue's batches cut from runs of entries (``Member.take_run``, over the reader's lists of
entries) are the batches cut entry by entry (``Member.take``): the same entries, counts, sizes,
positions and write times, the same entries filtered, the same stop at a bad bulk load marker;
and the reader's lists of entries are its entries."""

from __future__ import annotations

import random
import uuid
from pathlib import Path
from types import MappingProxyType

import pytest

from walship.errors import CorruptWalError, InvalidPeerConfigError
from walship.peer import PeerConfig
from walship.replicate.batcher import member as batcher_member
from walship.replicate.batcher.filters import EntryFilter
from walship.replicate.batcher.member import Batch, Feed, Member, Ramp
from walship.replicate.progressbook import PendingProgress
from walship.replicate.summary import QueueSummary
from walship.sinks.base import FilteredEntry
from walship.wal import Cell, CellType, WalEntry, WalKey, WalReader, WalWriter
from walship.wal.entries import BATCH
from walship.wal.markers import BULK_LOAD
from walship.wal.model import METAFAMILY
from walship.zk.queueid import QueueId, QueueInfo, WalPosition

SOURCE, PEER = uuid.uuid4(), uuid.uuid4()
WAL = "rs1%2C16020%2C1700000000000.1700000000001"


def entries(rng: random.Random, n: int) -> list[WalEntry]:
    """Entries of scoped and unscoped families, other tables, some from the peer, some empty
    after filtering, some markers of the catalog family (not bulk loads)."""
    out, offset = [], 60
    for seq in range(n):
        table = rng.choice((b"t", b"t", b"t", b"u", b"hbase:meta"))
        ids = rng.choice(((), (), (), (PEER,)))
        families = (METAFAMILY,) if rng.random() < 0.05 else rng.choices((b"r", b"l"), k=rng.randint(1, 4))
        cells = tuple(
            Cell(b"row-%d" % seq, f, b"q%d" % i, 1000 + seq, int(CellType.Put), b"v" * rng.randrange(200))
            for i, f in enumerate(families)
        )
        key = WalKey(b"region", table, seq + 1, 1000 + seq, cluster_ids=ids, scopes=MappingProxyType({b"r": 1}))
        size = rng.randrange(40, 3000)
        out.append(WalEntry(key, cells, offset, offset + size))
        offset += size
    return out


def member(position: int, limits: tuple[int, int]) -> Member:
    peer = PeerConfig("1", "127.0.0.1:2181:/hbase-b")
    feed = Feed(peer, "rs1,16020,1700000000000", "1", EntryFilter(peer, SOURCE, PEER), None)  # type: ignore[arg-type]
    queue = QueueInfo(feed.server, QueueId.parse("1"), (WalPosition(WAL, position, 0),))
    m = Member(feed, QueueSummary(feed.server, "1"), PendingProgress(), queue, 0.0)
    m.start_pass(Ramp(*limits))
    m.begin(WAL)
    return m


def shape(batch: Batch) -> tuple[object, ...]:
    return (
        [fe.entry.offset for fe in batch.entries],
        [fe.cells for fe in batch.entries],
        [fe.cluster_ids for fe in batch.entries],
        batch.read,
        batch.size,
        batch.position,
        batch.last_write_time,
        batch.kept_bytes,
    )


def one_by_one(m: Member, run: list[WalEntry]) -> list[Batch]:
    cut = []
    for entry in run:
        if m.take(entry) and m.full():
            cut.append(m.cut())
    return cut


def in_runs(m: Member, run: list[WalEntry], size: int, way: str = "c") -> list[Batch]:
    take_run = m.take_run if way == "c" else m.take_run_py
    cut = []
    for k in range(0, len(run), size):
        part, i = run[k : k + size], 0
        while i < len(part):
            i = take_run(part, i)
            if m.full():
                cut.append(m.cut())
    return cut


WAYS = ["c", "python"]


@pytest.mark.parametrize("way", WAYS)
@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("limits", [(7, 1 << 30), (1000, 20_000), (25_000, 64 << 20)], ids=["entries", "bytes", "none"])
def test_runs_cut_the_batches_entry_by_entry_cuts(way: str, seed: int, limits: tuple[int, int]) -> None:
    rng = random.Random(seed)
    run = entries(rng, 800)
    start = rng.choice((0, run[rng.randrange(len(run))].offset))  # a queue partly shipped: from its position
    a, b = member(start, limits), member(start, limits)
    assert b.feed.entry_filter.compiled is not None and batcher_member._take_run is not None  # both ways run
    expected = [*one_by_one(a, run), a.cut()]
    got = [*in_runs(b, run, rng.choice((1, 5, 32)), way), b.cut()]
    assert [shape(x) for x in got] == [shape(x) for x in expected]
    assert b.qs.entries_filtered == a.qs.entries_filtered > 0
    assert b.position == a.position == run[-1].end_offset
    assert len(expected) > 1 or limits[0] == 25_000  # the limits cut batches where they should


@pytest.mark.parametrize("way", WAYS)
def test_a_run_stops_at_a_bad_bulk_load_marker_where_take_stops(way: str) -> None:
    run = entries(random.Random(7), 50)
    bad = Cell(b"row", METAFAMILY, BULK_LOAD, 1, int(CellType.Put), b"\xff\xff not a descriptor")
    at = 20
    run[at] = run[at]._replace(key=run[at].key._replace(table=b"t", cluster_ids=()), cells=(bad,))
    a, b = member(0, (1000, 1 << 30)), member(0, (1000, 1 << 30))
    with pytest.raises(CorruptWalError) as one:
        one_by_one(a, run)
    with pytest.raises(CorruptWalError) as many:
        in_runs(b, run, 32, way)
    assert str(many.value) == str(one.value) and f"offset {run[at].offset}" in str(many.value)
    # what was taken before the marker is kept, and the position stays at the marker
    assert shape(b.cut()) == shape(a.cut())
    assert b.position == a.position == run[at].offset


def test_the_readers_lists_of_entries_are_its_entries(tmp_path: Path) -> None:
    path = tmp_path / WAL
    with open(path, "wb") as f:
        writer = WalWriter(f)
        for seq in range(1, 301):
            key = WalKey(b"region", b"t", seq, seq, scopes={b"r": 1})
            writer.append(key, [Cell(b"row-%d" % seq, b"r", b"q", seq, int(CellType.Put), b"v" * (seq % 50))])
    with open(path, "rb") as f:
        reader = WalReader(f, str(path))
        every = list(reader.entries())
        start = every[100].offset
        lists, ends = [], []
        for part in reader.batches(start):
            lists.append(part)
            ends.append(reader.stop_offset)
    assert [e for part in lists for e in part] == every[100:]
    assert len(lists) > 1 and all(0 < len(part) <= BATCH for part in lists)
    assert ends == [part[-1].end_offset for part in lists]  # where a consumer of each list goes on from


def refusing(m: Member) -> Member:
    """The member's filter refuses table ``boom`` (as a filter that fails would), both ways: the
    compiled filter leaves a table it has no rule for to its fallback, which refuses it."""
    entry_filter = m.feed.entry_filter
    compiled, apply = entry_filter.compiled, entry_filter.apply
    assert compiled is not None

    def refuse(entry: WalEntry) -> FilteredEntry | None:
        if entry.key.table == b"boom":
            raise InvalidPeerConfigError("peer 1: table boom refused")
        return apply(entry)

    entry_filter.compiled = (*compiled[:5], refuse)
    entry_filter.apply = refuse
    return m


@pytest.mark.parametrize("way", WAYS)
def test_a_run_whose_filter_fails_keeps_what_it_took_and_its_place(way: str) -> None:
    """An error from the filter in the middle of a run: what was taken before it stays in the
    batch, the position stays at the entry, everything counted as ``take`` counts it."""
    run = entries(random.Random(3), 100)
    at = 40
    run[at] = run[at]._replace(key=run[at].key._replace(table=b"boom"))
    reference, m = refusing(member(0, (1000, 1 << 30))), refusing(member(0, (1000, 1 << 30)))
    with pytest.raises(InvalidPeerConfigError, match="table boom"):
        one_by_one(reference, run)
    with pytest.raises(InvalidPeerConfigError, match="table boom"):
        m.take_run(run, 0) if way == "c" else m.take_run_py(run, 0)
    assert (m.read, m.size, m.qs.entries_filtered) == (reference.read, reference.size, reference.qs.entries_filtered)
    assert m.read == at + 1  # the failed entry is counted read, as take counts it
    assert shape(m.cut()) == shape(reference.cut())
    assert m.position == reference.position == run[at].offset
