# The compiled WAL entry decoder (src/walship/wal/_walcodec.c), used by walship.wal.entries.
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from walship.wal.model import WalEntry

def configure(
    cell: type[Any],
    tag: type[Any],
    key: type[Any],
    entry: type[Any],
    uuid: Callable[[bytes], Any],
    scopes: Callable[[Any], Mapping[bytes, int]],
    attribute: Callable[[bytes], tuple[str, bytes]],
    empty_scopes: Mapping[bytes, int],
    decode_error: type[BaseException],
    /,
) -> None: ...
def cellblock(buf: bytes | memoryview, counts: Sequence[int], /) -> list[tuple[Any, ...]] | None: ...
def parse(buf: bytes | memoryview, p: int, buf_off: int, limit: int, /) -> tuple[list[WalEntry], int, int]: ...

class Context:
    """The dictionaries of one compressed WAL (see walship.wal.compressed)."""

    def __init__(
        self,
        capacities: tuple[int, ...],
        tag_compression: bool,
        decompress: Callable[[bytes, int], bytes] | None,
        scopes: Callable[[tuple[tuple[bytes, int], ...]], Mapping[bytes, int]],
        /,
    ) -> None: ...
    def export(self) -> tuple[tuple[list[bytes], list[int]] | None, ...]: ...
    def load(self, state: tuple[tuple[list[bytes], list[int]] | None, ...], /) -> None: ...

def parse_compressed(
    context: Context, buf: bytes | memoryview, p: int, buf_off: int, limit: int, /
) -> tuple[list[WalEntry], int, int]: ...
