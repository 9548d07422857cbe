"""Multi calls' bytes (walship.rpc.multi) against the WAL writer's cell encoding and HBase's
answer shapes; the calls themselves run against real HBase in
tests/integration/test_real_region_multi.py."""

from __future__ import annotations

import io
import uuid

import pytest

from walship.clusterids import encode_cluster_ids
from walship.protos import Client_pb2, HBase_pb2
from walship.rpc.cellblock import cells_of, keyvalue, results_of
from walship.rpc.multi import CONSUMED_CLUSTER_IDS, ActionFailure, RowMutation, failures, multi_call
from walship.rpc.wire import RpcProtocolError
from walship.wal import Cell, CellType, Tag, WalKey, WalReader, WalWriter, entries
from walship.wal.writer import encode_cell

CELLS = [
    Cell(b"row", b"f", b"q", 5, int(CellType.Put), b"value"),
    Cell(b"r" * 300, b"family", b"", -1, int(CellType.DeleteFamily), b""),
    Cell(b"", b"f", b"q" * 70_000, 2**62, int(CellType.DeleteColumn), b"v" * 100_000),
]


def test_a_cell_is_the_keyvalue_a_wal_holds_without_tags() -> None:
    for cell in CELLS:
        assert keyvalue(cell) == encode_cell(cell)
    tagged = CELLS[0]._replace(tags=(Tag(1, b"acl"),))
    assert keyvalue(tagged) == encode_cell(CELLS[0])


def test_a_call_holds_each_row_and_its_cells_in_order() -> None:
    mutations = [RowMutation(b"a", False, CELLS[:1]), RowMutation(b"b", True, CELLS[1:])]
    ids = encode_cluster_ids((uuid.UUID(int=3),))
    request, block = multi_call(b"t,,1.abc.", mutations, ids)
    (action,) = request.regionAction
    assert action.region == HBase_pb2.RegionSpecifier(type=HBase_pb2.RegionSpecifier.REGION_NAME, value=b"t,,1.abc.")
    assert [
        (a.index, a.mutation.row, a.mutation.mutate_type, a.mutation.associated_cell_count) for a in action.action
    ] == [
        (0, b"a", Client_pb2.MutationProto.PUT, 1),
        (1, b"b", Client_pb2.MutationProto.DELETE, 2),
    ]
    assert all(
        [(p.name, p.value) for p in a.mutation.attribute] == [(CONSUMED_CLUSTER_IDS, ids)] for a in action.action
    )
    # the cell block reads back, cell by cell, as a WAL entry's cells
    wal = io.BytesIO()
    writer = WalWriter(wal)
    writer.append(WalKey(b"r" * 32, b"t", 1, 1), CELLS)
    head = wal.getvalue()
    entry_start = len(head) - sum(len(encode_cell(c)) for c in CELLS)
    data = head[:entry_start] + block
    (entry,) = WalReader(io.BytesIO(data), "x").entries()
    assert list(entry.cells) == CELLS


def test_failures_name_each_failed_mutation() -> None:
    ok = Client_pb2.MultiResponse()
    result = ok.regionActionResult.add()
    for i in range(3):
        result.resultOrException.add(index=i, result=Client_pb2.Result())
    assert failures(ok, 3) == []
    result.resultOrException[1].exception.name = "org.apache.hadoop.hbase.RegionTooBusyException"
    result.resultOrException[
        1
    ].exception.value = b"org.apache.hadoop.hbase.RegionTooBusyException: over memstore limit\n\tat x"
    assert failures(ok, 3) == [
        ActionFailure(1, "org.apache.hadoop.hbase.RegionTooBusyException", "over memstore limit")
    ]
    assert failures(ok, 4)[-1] == ActionFailure(3, "", "the region server did not answer for it")
    gone = Client_pb2.MultiResponse()
    gone.regionActionResult.add().exception.name = "org.apache.hadoop.hbase.NotServingRegionException"
    assert [(f.index, f.short_class) for f in failures(gone, 2)] == [
        (0, "NotServingRegionException"),
        (1, "NotServingRegionException"),
    ]


def test_the_compiled_check_of_an_answer_passes_only_what_failures_finds_clean() -> None:
    """``multi_applied`` reads the answer's bytes without parsing them: true only for one region
    result with a result for each index in order and no exception (what :func:`failures` finds
    empty), false for every answer :func:`failures` finds a failure in."""
    from walship.sinks.compiled import FASTPATH

    assert FASTPATH is not None, "walship.sinks._fastpath is not built (make setup builds it)"

    def answer(indexes: list[int], *, failed: int | None = None, region_error: bool = False) -> bytes:
        response = Client_pb2.MultiResponse(processed=True)
        result = response.regionActionResult.add()
        for i in indexes:
            item = result.resultOrException.add(index=i, result=Client_pb2.Result())
            if i == failed:
                item.exception.name = "org.apache.hadoop.hbase.RegionTooBusyException"
        if region_error:
            result.exception.name = "org.apache.hadoop.hbase.NotServingRegionException"
        return response.SerializeToString()

    cases = [
        (answer(list(range(300))), 300, True),
        (answer(list(range(300))), 301, False),  # one not answered
        (answer([0, 2, 1]), 3, False),  # out of order: failures takes a closer look
        (answer([0, 1, 2], failed=1), 3, False),
        (answer([], region_error=True), 2, False),
        (answer([0, 1]) + answer([2]), 3, False),  # two region results
        (answer([0, 1])[:-1], 2, False),  # cut short
        (b"", 0, False),  # no region result
    ]
    for body, actions, applied in cases:
        assert FASTPATH.multi_applied(body, actions) is applied, (body[:20], actions)
        if applied:
            response = Client_pb2.MultiResponse()
            response.ParseFromString(body)
            assert failures(response, actions) == []


def test_a_cell_block_reads_back_and_a_broken_one_is_named() -> None:
    block = b"".join(map(keyvalue, CELLS))
    assert cells_of(block, "a scan") == CELLS
    starts = [0, len(keyvalue(CELLS[0])), len(keyvalue(CELLS[0])) + len(keyvalue(CELLS[1]))]
    for cut, start in ((1, 0), (13, 0), (starts[1] + 20, starts[1]), (len(block) - 1, starts[2])):
        with pytest.raises(RpcProtocolError, match=f"a scan: a cell .* at byte {start} of the cell block"):
            cells_of(block[:cut], "a scan")
    bad = bytearray(block)
    bad[3] ^= 0x01  # the first cell's length no longer matches its key and value
    with pytest.raises(RpcProtocolError, match="does not parse at byte 0"):
        cells_of(bytes(bad), "a scan")


@pytest.mark.parametrize("decoder", ["compiled", "python"])
def test_a_scan_answer_is_cut_into_its_results_and_a_wrong_count_is_named(
    decoder: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``cells_per_result`` cuts the block into rows, by the compiled decoder (built by ``make
    setup``) and by the Python one alike; a block that does not hold the cells the counts say,
    one cut short, or a cell with tags (``KeyValueCodec`` has none) is refused, naming it."""
    block = b"".join(map(keyvalue, CELLS))
    assert entries.c_cellblock is not None
    if decoder == "python":
        monkeypatch.setattr(entries, "c_cellblock", None)
    else:
        assert entries.c_cellblock(block, [2, 0, 1]) is not None  # not left to Python
    results = results_of(block, [2, 0, 1], "a scan")
    assert [tuple(r) for r in results] == [tuple(CELLS[:2]), (), tuple(CELLS[2:])]
    for counts in ([2], [2, 0, 2], [4]):
        with pytest.raises(RpcProtocolError, match=f"a scan: 3 cells for results of {sum(counts)}"):
            results_of(block, counts, "a scan")
    last = len(keyvalue(CELLS[0])) + len(keyvalue(CELLS[1]))
    with pytest.raises(RpcProtocolError, match=f"a scan: a cell cut short at byte {last} of the cell block"):
        results_of(block[: last + 10], [2, 1], "a scan")
    tagged = encode_cell(CELLS[0]._replace(tags=(Tag(1, b"acl"),)))
    with pytest.raises(RpcProtocolError, match="a scan: a cell that does not parse at byte 0"):
        results_of(tagged, [1], "a scan")
