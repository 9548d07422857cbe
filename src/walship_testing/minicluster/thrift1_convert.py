"""Thrift1 (``Hbase`` service) structs and errors to the minicluster's terms and back, as HBase's
Thrift1 server converts them: column specs, cells and row results, timestamps, and walship's
errors as the exceptions the server raises."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from walship.errors import BadRequestError, MiniClusterError, ReadOnlyTableError, TableExistsError
from walship.thrift.hbase1 import Hbase_thrift
from walship_testing.minicluster.cluster import LATEST_TIMESTAMP
from walship_testing.minicluster.filters import FilterSyntaxError
from walship_testing.minicluster.readonly import thrift1_message
from walship_testing.minicluster.store import VisibleCell

__all__ = [
    "illegal_argument",
    "parse_columns",
    "prefix_end",
    "row_result",
    "tcell",
    "thrift_errors",
    "thrift_timestamp",
]

F = TypeVar("F", bound=Callable[..., Any])


def thrift_errors(func: F) -> F:
    """Turn walship's errors into the exceptions HBase's Thrift server raises."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except TableExistsError as exc:
            raise Hbase_thrift.AlreadyExists(message=str(exc)) from None
        except ReadOnlyTableError as exc:  # HBase's own message (see walship_testing.minicluster.readonly)
            raise Hbase_thrift.IOError(message=thrift1_message(exc, func.__name__)) from None
        except BadRequestError as exc:
            if getattr(func, "_illegal_argument", False):
                raise Hbase_thrift.IllegalArgument(message=str(exc)) from None
            raise Hbase_thrift.IOError(message=str(exc)) from None
        except (MiniClusterError, FilterSyntaxError) as exc:
            raise Hbase_thrift.IOError(message=f"{type(exc).__name__}: {exc}") from None

    return wrapper  # type: ignore[return-value]


def illegal_argument(func: F) -> F:
    """Mark a call whose Thrift signature declares IllegalArgument for bad arguments."""
    func._illegal_argument = True  # type: ignore[attr-defined]
    return func


def parse_columns(columns: Sequence[bytes] | None) -> dict[bytes, set[bytes] | None] | None:
    """Thrift column specs as HBase's ``CellUtil.parseColumn``: ``f`` is the whole family,
    ``f:q`` one column (``f:`` the empty qualifier)."""
    if not columns:
        return None
    out: dict[bytes, set[bytes] | None] = {}
    for col in columns:
        fam, sep, qual = col.partition(b":")
        if not fam:
            raise BadRequestError(f"invalid column {col!r}")
        if not sep:
            out[fam] = None
        elif fam not in out:
            out[fam] = {qual}
        else:
            quals = out[fam]
            if quals is not None:
                quals.add(qual)
    return out


def tcell(c: VisibleCell) -> Any:
    """A cell as Thrift1's ``TCell``: its value and timestamp."""
    return Hbase_thrift.TCell(value=c.value, timestamp=c.timestamp)


def row_result(row: bytes, cells: Sequence[VisibleCell], sort_columns: bool) -> Any:
    """A row's cells as ``TRowResult``: in order in ``sortedColumns``, or by column in
    ``columns`` (the newest version of each)."""
    if sort_columns:
        return Hbase_thrift.TRowResult(
            row=row,
            sortedColumns=[
                Hbase_thrift.TColumn(columnName=c.family + b":" + c.qualifier, cell=tcell(c)) for c in cells
            ],
        )
    columns: dict[bytes, Any] = {}
    for c in cells:
        columns.setdefault(c.family + b":" + c.qualifier, tcell(c))  # newest version wins
    return Hbase_thrift.TRowResult(row=row, columns=columns)


def thrift_timestamp(timestamp: int) -> int | None:
    """A timestamp argument as the store takes it: ``None`` for HBase's LATEST_TIMESTAMP."""
    return None if timestamp == LATEST_TIMESTAMP else timestamp


def prefix_end(prefix: bytes) -> bytes:
    """The first row after every row starting with ``prefix`` (empty: the table's end)."""
    stripped = prefix.rstrip(b"\xff")
    return stripped[:-1] + bytes([stripped[-1] + 1]) if stripped else b""
