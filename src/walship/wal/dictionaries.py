"""The dictionaries of a compressed WAL (``hbase.regionserver.wal.enablecompression``).

HBase 2.6 (``CompressionContext``, ``LRUDictionary``, ``WALCellCodec``, ``WALKeyImpl``) keeps
one set of dictionaries per WAL file, created empty when the file is opened and never reset
while it is written; a reader rebuilds them by reading the file from its first entry:

==========  ========  ================================================================
dictionary  capacity  holds
==========  ========  ================================================================
REGION      32767     the WALKey's encoded region name
TABLE       32767     the WALKey's table name, then each extended attribute's value
FAMILY      127       the WALKey's scope families, then each cell's family
QUALIFIER   127       each cell's qualifier
ROW         32767     each cell's row
TAG         32767     each tag (type byte + value), only with tag compression
==========  ========  ================================================================

A field is written as a *token*: ``0xFF`` (``NOT_IN_DICTIONARY``), the length as a raw
varint32 and the bytes, which both sides then add to the dictionary; or the entry's index
as a big-endian int16. A hit or an add makes the entry the most recent; a full dictionary
overwrites its least recently used entry in place, keeping its index. Empty byte strings
are written in full and never added.

:class:`LruDictionary` is that dictionary. A reader's dictionaries journal every change, so
that an entry cut short by the end of the bytes read so far can be undone
(:meth:`CompressionContext.rollback`) and decoded again once the rest has arrived.
"""

from __future__ import annotations

import itertools
import logging
import struct
from typing import Any

from walship.wal.format import encode_varint

__all__ = [
    "DEFAULT_CAPACITIES",
    "DICTIONARY_NAMES",
    "NOT_IN_DICTIONARY",
    "CompressionContext",
    "DictionaryState",
    "LruDictionary",
]

log = logging.getLogger(__name__)

#: The status byte of a token whose bytes follow in full.
NOT_IN_DICTIONARY = 0xFF

#: The dictionaries in the order of ``CompressionContext.DictionaryIndex``, the tag one last.
DICTIONARY_NAMES = ("region", "table", "family", "qualifier", "row", "tag")
_SHORT_MAX = 0x7FFF  # Short.MAX_VALUE
_BYTE_MAX = 0x7F  # Byte.MAX_VALUE
#: Capacities of :data:`DICTIONARY_NAMES` as HBase initialises them for a region server's WAL
#: (a recovered-edits file has REGION and TABLE of capacity 1). Tests make them smaller to
#: reach evictions quickly: both the writer and the reader read this when a file is opened.
DEFAULT_CAPACITIES: tuple[int, ...] = (_SHORT_MAX, _SHORT_MAX, _BYTE_MAX, _BYTE_MAX, _SHORT_MAX, _SHORT_MAX)

#: One dictionary's state, as :meth:`LruDictionary.export` gives it: its entries by index,
#: and their indexes from the most to the least recently used.
DictionaryState = tuple[list[bytes], list[int]]

_INDEX = struct.Struct(">h")
_APPENDED = object()  # journal marker: the change added a new index


class LruDictionary:
    """``LRUDictionary`` of HBase: entries by index, in least-recently-used order.

    :param capacity: the most entries it holds; when full, an add overwrites the least
        recently used one and keeps its index.
    :param journal: a list the reader's changes are recorded in (see
        :meth:`CompressionContext.rollback`), or ``None`` for a writer's dictionary.
    """

    __slots__ = ("_by_value", "_journal", "capacity", "entries", "head", "name", "next", "prev", "tail")

    def __init__(self, name: str, capacity: int, journal: list[Any] | None = None) -> None:
        if not 1 <= capacity <= _SHORT_MAX:
            raise ValueError(f"'capacity' must be within 1..{_SHORT_MAX}, got {capacity}")
        self.name = name
        self.capacity = capacity
        self.entries: list[bytes] = []
        # a doubly linked list of indexes, most recent at head; -1 ends it
        self.prev: list[int] = []
        self.next: list[int] = []
        self.head = -1
        self.tail = -1
        self._journal = journal
        self._by_value: dict[bytes, int] | None = {} if journal is None else None

    def __len__(self) -> int:
        return len(self.entries)

    # -- the linked list ---------------------------------------------------------------------

    def _move_to_head(self, i: int) -> None:
        prev, nxt = self.prev, self.next
        p, n = prev[i], nxt[i]
        if p == -1:
            return  # already the head
        nxt[p] = n
        if n != -1:
            prev[n] = p
        else:
            self.tail = p
        prev[i] = -1
        nxt[i] = self.head
        prev[self.head] = i
        self.head = i

    def _record(self, i: int, old: object) -> None:
        if self._journal is not None:
            self._journal.append((self, i, self.prev[i], self.next[i], self.head, self.tail, old))

    def undo(self, i: int, old_prev: int, old_next: int, old_head: int, old_tail: int, old: object) -> None:
        """Undo one journalled change (the caller goes through the journal backwards)."""
        prev, nxt = self.prev, self.next
        n = nxt[i]  # i is the head now: unlink it
        if n != -1:
            prev[n] = -1
        if old is _APPENDED:
            self.entries.pop()
            prev.pop()
            nxt.pop()
        else:
            if isinstance(old, bytes):
                self.entries[i] = old
            prev[i], nxt[i] = old_prev, old_next
            if old_prev != -1:
                nxt[old_prev] = i
            if old_next != -1:
                prev[old_next] = i
        self.head, self.tail = old_head, old_tail

    # -- the reader's side -----------------------------------------------------------------------

    def get(self, i: int) -> bytes | None:
        """The entry at index ``i``, made the most recent; ``None`` if there is none."""
        if not 0 <= i < len(self.entries):
            return None
        if i != self.head:
            self._record(i, None)
            self._move_to_head(i)
        return self.entries[i]

    def add(self, data: bytes) -> None:
        """Add ``data`` as the most recent entry (``addEntry``); an empty one is not added."""
        if not data:
            return
        entries = self.entries
        size = len(entries)
        if size < self.capacity:
            head = self.head
            if self._journal is not None:
                self._journal.append((self, size, -1, -1, head, self.tail, _APPENDED))
            entries.append(data)
            self.prev.append(-1)
            self.next.append(head)
            if head != -1:
                self.prev[head] = size
            else:
                self.tail = size
            self.head = size
            return
        victim = self.tail
        self._record(victim, entries[victim])
        if self._by_value is not None:
            del self._by_value[entries[victim]]
            self._by_value[data] = victim
        entries[victim] = data
        self._move_to_head(victim)

    # -- the writer's side --------------------------------------------------------------------

    def encode(self, data: bytes) -> bytes:
        """The token for ``data`` (``Dictionary.write``): its index when present (made the most
        recent), else ``0xFF``, the length and the bytes, and ``data`` is added."""
        assert self._by_value is not None, "a reader's dictionary does not encode"
        i = self._by_value.get(data)
        if i is not None:
            self._move_to_head(i)
            return _INDEX.pack(i)
        if data:
            size = len(self.entries)
            self.add(data)
            if size < self.capacity:
                self._by_value[data] = size
        return b"\xff" + encode_varint(len(data)) + data

    # -- state ---------------------------------------------------------------------------------

    def export(self) -> DictionaryState:
        order = []
        i = self.head
        while i != -1:
            order.append(i)
            i = self.next[i]
        return list(self.entries), order

    def load(self, state: DictionaryState) -> None:
        entries, order = state
        if len(order) != len(entries) or sorted(order) != list(range(len(entries))) or len(entries) > self.capacity:
            raise ValueError(f"not a state of the {self.name} dictionary")
        self.entries = list(entries)
        n = len(entries)
        self.prev = [-1] * n
        self.next = [-1] * n
        for a, b in itertools.pairwise(order):
            self.next[a] = b
            self.prev[b] = a
        self.head = order[0] if order else -1
        self.tail = order[-1] if order else -1
        if self._by_value is not None:
            self._by_value = {e: i for i, e in enumerate(entries)}


class CompressionContext:
    """The dictionaries of one compressed WAL file (``CompressionContext`` of HBase).

    :param tag_compression: the file's header says ``has_tag_compression``: tags are
        written token by token through the TAG dictionary.
    :param reader: journal changes so that :meth:`rollback` can undo a partly decoded entry;
        a writer's dictionaries instead index their entries by value to encode them.
    :param capacities: of :data:`DICTIONARY_NAMES`; default :data:`DEFAULT_CAPACITIES`.
    """

    def __init__(
        self, *, tag_compression: bool, reader: bool = True, capacities: tuple[int, ...] | None = None
    ) -> None:
        caps = DEFAULT_CAPACITIES if capacities is None else capacities
        if len(caps) != len(DICTIONARY_NAMES):
            raise ValueError(f"'capacities' must give {len(DICTIONARY_NAMES)} capacities, got {len(caps)}")
        self.capacities = tuple(caps)
        self.tag_compression = tag_compression
        self.journal: list[Any] | None = [] if reader else None
        dicts = [LruDictionary(name, cap, self.journal) for name, cap in zip(DICTIONARY_NAMES, caps, strict=True)]
        self.region, self.table, self.family, self.qualifier, self.row, self.tag = dicts
        self.dictionaries = tuple(dicts if tag_compression else dicts[:-1])

    def commit(self) -> None:
        """Forget the changes journalled so far: the entry they belong to is whole."""
        if self.journal:
            self.journal.clear()

    def rollback(self) -> None:
        """Undo every change since the last :meth:`commit`."""
        journal = self.journal
        while journal:
            d, *change = journal.pop()
            d.undo(*change)

    def export_state(self) -> tuple[DictionaryState | None, ...]:
        """Every dictionary's state (``None`` for the TAG one without tag compression)."""
        self.commit()
        return tuple(d.export() if d in self.dictionaries else None for d in self._all())

    def load_state(self, state: tuple[DictionaryState | None, ...]) -> None:
        """Take the state :meth:`export_state` (or the compiled decoder's twin) gave."""
        self.commit()
        for d, s in zip(self._all(), state, strict=True):
            if s is not None:
                d.load(s)
            elif d in self.dictionaries:
                raise ValueError(f"no state for the {d.name} dictionary")

    def _all(self) -> tuple[LruDictionary, ...]:
        return (self.region, self.table, self.family, self.qualifier, self.row, self.tag)
