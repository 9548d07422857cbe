# the entry filter and a queue's batch taken from a run of entries, compiled
# (src/walship/replicate/batcher/_batcher.c), used by walship.replicate.batcher.
import uuid
from collections.abc import Callable
from typing import Any

#: "Type.field" -> the position the module reads it at (see walship.wal.layout)
LAYOUT: dict[str, int]

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
def take_run(
    entries: list[Any],
    i: int,
    filter_args: tuple[object, ...],
    batch: list[Any],
    tally: list[Any],
    limits: tuple[int, int, int],
    /,
) -> tuple[int, bool]: ...
