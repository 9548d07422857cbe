"""A part of HBase's filter language (``ParseFilter``), as Thrift scans pass it.

Supported: ``PrefixFilter``, ``SingleColumnValueFilter``, ``KeyOnlyFilter``,
``FirstKeyOnlyFilter``, ``ColumnPrefixFilter``, ``ValueFilter``, ``RowFilter``,
``QualifierFilter``, ``FamilyFilter``; combined with ``AND``, ``OR`` and parentheses.
Comparators: ``binary:``, ``binaryprefix:``, ``substring:``, ``regexstring:``.

Example: ``PrefixFilter('row-1') AND ValueFilter(=, 'binary:v1')``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from walship.errors import FilterSyntaxError
from walship_testing.minicluster.store import VisibleCell

__all__ = ["Filter", "FilterSyntaxError", "parse_filter"]

Cells = list[VisibleCell]


class Filter:
    def apply(self, row: bytes, cells: Cells) -> Cells | None:
        """The cells of ``row`` that pass, or ``None`` when the row is filtered out."""
        raise NotImplementedError


_OPS: dict[str, Callable[[int], bool]] = {
    "=": lambda c: c == 0,
    "!=": lambda c: c != 0,
    "<": lambda c: c < 0,
    "<=": lambda c: c <= 0,
    ">": lambda c: c > 0,
    ">=": lambda c: c >= 0,
}


@dataclass(frozen=True)
class Comparator:
    kind: str
    operand: bytes

    def compare(self, value: bytes) -> int:
        """Sign of (value - operand) in the comparator's order."""
        if self.kind == "binary":
            return (value > self.operand) - (value < self.operand)
        if self.kind == "binaryprefix":
            head = value[: len(self.operand)]
            return (head > self.operand) - (head < self.operand)
        if self.kind == "substring":
            return 0 if self.operand.lower() in value.lower() else 1
        return 0 if re.search(self.operand, value) else 1  # regexstring


@dataclass(frozen=True)
class Compare:
    op: str
    comparator: Comparator

    def test(self, value: bytes) -> bool:
        return _OPS[self.op](self.comparator.compare(value))


@dataclass(frozen=True)
class PrefixFilter(Filter):
    prefix: bytes

    def apply(self, row: bytes, cells: Cells) -> Cells | None:
        return cells if row.startswith(self.prefix) else None


@dataclass(frozen=True)
class RowFilter(Filter):
    compare: Compare

    def apply(self, row: bytes, cells: Cells) -> Cells | None:
        return cells if self.compare.test(row) else None


@dataclass(frozen=True)
class KeyOnlyFilter(Filter):
    def apply(self, row: bytes, cells: Cells) -> Cells | None:
        return [replace(c, value=b"") for c in cells]


@dataclass(frozen=True)
class FirstKeyOnlyFilter(Filter):
    def apply(self, row: bytes, cells: Cells) -> Cells | None:
        return cells[:1] or None


@dataclass(frozen=True)
class CellFilter(Filter):
    """Keeps the cells for which ``keep`` is true; a row left empty is filtered out."""

    keep: Callable[[VisibleCell], bool]

    def apply(self, row: bytes, cells: Cells) -> Cells | None:
        out = [c for c in cells if self.keep(c)]
        return out or None


@dataclass(frozen=True)
class SingleColumnValueFilter(Filter):
    family: bytes
    qualifier: bytes
    compare: Compare
    filter_if_missing: bool = False

    def apply(self, row: bytes, cells: Cells) -> Cells | None:
        for c in cells:  # newest version first: the latest value decides
            if c.family == self.family and c.qualifier == self.qualifier:
                return cells if self.compare.test(c.value) else None
        return None if self.filter_if_missing else cells


@dataclass(frozen=True)
class AndFilter(Filter):
    parts: Sequence[Filter]

    def apply(self, row: bytes, cells: Cells) -> Cells | None:
        current: Cells | None = cells
        for part in self.parts:
            if current is None:
                return None
            current = part.apply(row, current)
        return current


@dataclass(frozen=True)
class OrFilter(Filter):
    parts: Sequence[Filter]

    def apply(self, row: bytes, cells: Cells) -> Cells | None:
        kept: dict[tuple[bytes, bytes, int], VisibleCell] = {}
        passed = False
        for part in self.parts:
            got = part.apply(row, cells)
            if got is not None:
                passed = True
                for c in got:
                    kept.setdefault((c.family, c.qualifier, c.timestamp), c)
        if not passed:
            return None
        order = {(c.family, c.qualifier, c.timestamp): i for i, c in enumerate(cells)}
        return sorted(kept.values(), key=lambda c: order.get((c.family, c.qualifier, c.timestamp), 0))


_TOKEN = re.compile(
    r"\s*(?:(?P<str>'(?:[^']|'')*')|(?P<op><=|>=|!=|=|<|>)|(?P<punct>[(),])|(?P<word>[A-Za-z0-9_.+-]+))"
)


def _tokens(text: str) -> list[tuple[str, str, int]]:
    out = []
    pos = 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m or m.end() == pos:
            if text[pos:].strip() == "":
                break
            raise FilterSyntaxError(f"filter {text!r}: unexpected character at position {pos}")
        kind = m.lastgroup or ""
        out.append((kind, m.group(kind), m.start(kind)))
        pos = m.end()
    return out


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.toks = _tokens(text)
        self.i = 0

    def error(self, what: str) -> FilterSyntaxError:
        pos = self.toks[self.i][2] if self.i < len(self.toks) else len(self.text)
        return FilterSyntaxError(f"filter {self.text!r}: {what} at position {pos}")

    def peek(self) -> tuple[str, str, int] | None:
        return self.toks[self.i] if self.i < len(self.toks) else None

    def take(self, kind: str | None = None, value: str | None = None) -> str:
        tok = self.peek()
        if tok is None or (kind and tok[0] != kind) or (value and tok[1] != value):
            raise self.error(f"expected {value or kind}")
        self.i += 1
        return tok[1]

    def parse(self) -> Filter:
        f = self.expr()
        if self.peek() is not None:
            raise self.error("unexpected text")
        return f

    def expr(self) -> Filter:
        parts = [self.term()]
        ors: list[Filter] = []
        while (tok := self.peek()) is not None and tok[0] == "word" and tok[1].upper() in ("AND", "OR"):
            self.i += 1
            if tok[1].upper() == "AND":
                parts.append(self.term())
            else:
                ors.append(parts[0] if len(parts) == 1 else AndFilter(parts))
                parts = [self.term()]
        last = parts[0] if len(parts) == 1 else AndFilter(parts)
        return OrFilter([*ors, last]) if ors else last

    def term(self) -> Filter:
        tok = self.peek()
        if tok is None:
            raise self.error("expected a filter")
        if tok[1] == "(":
            self.i += 1
            f = self.expr()
            self.take("punct", ")")
            return f
        name = self.take("word")
        self.take("punct", "(")
        args: list[tuple[str, str]] = []
        while (nxt := self.peek()) is not None and nxt[1] != ")":
            if args:
                self.take("punct", ",")
            kind, value, _ = self.peek() or ("", "", 0)
            if kind not in ("str", "op", "word"):
                raise self.error("expected an argument")
            self.i += 1
            args.append((kind, value))
        self.take("punct", ")")
        return self.build(name, args)

    def build(self, name: str, args: list[tuple[str, str]]) -> Filter:
        def arity(*n: int) -> None:
            if len(args) not in n:
                raise self.error(f"{name} takes {' or '.join(map(str, n))} arguments, got {len(args)}")

        if name == "PrefixFilter":
            arity(1)
            return PrefixFilter(self.string(args[0]))
        if name == "KeyOnlyFilter":
            arity(0, 1)
            return KeyOnlyFilter()
        if name == "FirstKeyOnlyFilter":
            arity(0)
            return FirstKeyOnlyFilter()
        if name == "ColumnPrefixFilter":
            arity(1)
            prefix = self.string(args[0])
            return CellFilter(lambda c: c.qualifier.startswith(prefix))
        if name in ("ValueFilter", "QualifierFilter", "FamilyFilter", "RowFilter"):
            arity(2)
            cmp = self.compare(args[0], args[1])
            if name == "RowFilter":
                return RowFilter(cmp)
            attr = {"ValueFilter": "value", "QualifierFilter": "qualifier", "FamilyFilter": "family"}[name]
            return CellFilter(lambda c: cmp.test(getattr(c, attr)))
        if name == "SingleColumnValueFilter":
            arity(4, 5, 6)
            missing = len(args) >= 5 and args[4][1].lower() == "true"
            return SingleColumnValueFilter(
                self.string(args[0]), self.string(args[1]), self.compare(args[2], args[3]), missing
            )
        raise self.error(f"unknown filter {name!r}")

    def string(self, arg: tuple[str, str]) -> bytes:
        kind, value = arg
        if kind != "str":
            raise self.error(f"expected a quoted string, got {value!r}")
        return value[1:-1].replace("''", "'").encode("latin-1")

    def compare(self, op: tuple[str, str], comparator: tuple[str, str]) -> Compare:
        if op[0] != "op":
            raise self.error(f"expected a comparison operator, got {op[1]!r}")
        raw = self.string(comparator)
        kind, sep, operand = raw.partition(b":")
        name = kind.decode("latin-1").lower()
        if not sep or name not in ("binary", "binaryprefix", "substring", "regexstring"):
            raise self.error(f"unknown comparator {raw!r}")
        if name in ("substring", "regexstring") and op[1] not in ("=", "!="):
            raise self.error(f"{name} allows only = and !=")
        return Compare(op[1], Comparator(name, operand))


def parse_filter(text: str) -> Filter:
    """Parse a filter string.

    :raises FilterSyntaxError: with the position of the problem.
    """
    return _Parser(text).parse()
