# the sinks' Thrift calls encoded from WAL cells (src/walship/thrift/_putencoder.c), used by walship.thrift.encoded.
from collections.abc import Sequence
from typing import Any

def encode_put_multiple(
    table: bytes, puts: list[tuple[bytes, Sequence[Any]]], attributes: dict[bytes, bytes], /
) -> bytes: ...
def encode_mutate_rows_ts(
    table: bytes, rows: list[tuple[bytes, Sequence[Any]]], timestamp: int, attributes: dict[bytes, bytes], /
) -> bytes: ...
