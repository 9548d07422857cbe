# the Thrift sinks' grouping of cells, compiled (src/walship/sinks/_fastpath.c), used by
# walship.sinks.hbase and walship.sinks.hbase2.
import uuid
from collections.abc import Sequence
from typing import Any

#: "Type.field" -> the position the module reads it at (see walship.wal.layout)
LAYOUT: dict[str, int]

def put_rows(
    entries: Sequence[Any],
    i: int,
    ci: int,
    table: bytes,
    ids: tuple[uuid.UUID, ...],
    mutations: list[Any],
    size: float,
    max_mutations: int,
    max_bytes: float,
    /,
) -> tuple[int, int, float, int, int, bool]: ...
def multi_call(region_name: bytes, mutations: list[Any], cluster_ids: bytes | None, /) -> tuple[bytes, bytes]: ...
def tagged(cells: tuple[Any, ...], /) -> int: ...
def multi_applied(body: bytes, actions: int, /) -> bool: ...
def row_runs(cells: tuple[Any, ...], /) -> list[tuple[bytes, bool, tuple[Any, ...]]]: ...
def group_rows(
    entries: Sequence[Any], i: int, groups: dict[Any, dict[bytes, list[Any]]], /
) -> tuple[int, int, int]: ...
