# the entry filter and the Thrift2 sink's put rows, compiled (src/walship/sinks/_fastpath.c),
# used by walship.replicate.filters and walship.sinks.hbase2.
import uuid
from collections.abc import Callable, Sequence
from typing import Any

def filter_entry(
    rules: dict[bytes, Any],
    own_ids: tuple[uuid.UUID, ...],
    source_id: uuid.UUID,
    peer_cluster_id: uuid.UUID,
    filtered_type: type[Any],
    fallback: Callable[[Any], Any],
    entry: Any,
    /,
) -> Any: ...
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
def group_rows(
    entries: Sequence[Any], i: int, groups: dict[Any, dict[bytes, list[Any]]], /
) -> tuple[int, int, int]: ...
def take_run(member: Any, entries: list[Any], i: int, filter_args: tuple[object, ...], /) -> tuple[int, bool]: ...
