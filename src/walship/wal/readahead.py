"""The bytes a WAL reader has read ahead of its parser, and the Python parsers' view of them.

A reader parses a window of the file, ``[offset, offset + len(view))``, and then drops what it
parsed and reads on. Made new for each chunk (``rest + f.read(chunk)``), a window costs a fresh
allocation the kernel has to map and zero and a copy of the whole chunk: over small entries
that is as much time as the compiled decoder spends decoding them (``benchmarks/wal_read.py``).
:class:`ReadAhead` keeps one ``bytearray`` instead, moves only the unparsed rest to its front
and reads into the space after it, growing only for an entry longer than the chunk.

The compiled decoders read any buffer and copy what they keep. The Python parsers slice their
fields out of the buffer, so they are given bytes: :func:`on_bytes` hands them a bytes copy
of the window from where they start, a small one first, larger until an entry fits.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import BinaryIO

from walship.errors import CorruptWalError
from walship.wal.model import WalEntry

__all__ = ["FALLBACK_WINDOW", "Buffer", "Parsed", "ReadAhead", "on_bytes"]

log = logging.getLogger(__name__)

#: The bytes a Python parser is first given from a reused buffer (an entry longer than this
#: gets four times as many, and so on, up to the buffer's end).
FALLBACK_WINDOW = 64 * 1024

Buffer = bytes | memoryview
#: what a parser returns: the entries, the index where it stopped, the corruption that stopped it
Parsed = tuple[list[WalEntry], int, CorruptWalError | None]


class ReadAhead:
    """The window of a file a parser works on.

    :param reuse: keep one buffer and read into it (for the compiled decoders); otherwise each
        read makes a new ``bytes`` (for the Python parser, whose fields are slices of it).
    """

    def __init__(self, fileobj: BinaryIO, offset: int, *, reuse: bool) -> None:
        self._f = fileobj
        #: the file offset of ``view[0]``
        self.offset = offset
        #: the bytes read and not dropped yet
        self.view: Buffer = b""
        self._reuse = reuse
        self._store = bytearray()
        self._readinto = getattr(fileobj, "readinto", None)

    def __len__(self) -> int:
        return len(self.view)

    def read_on(self, parsed: int, want: int) -> int:
        """Drop the first ``parsed`` bytes and read up to ``want`` more after the rest (a little
        less when the reused buffer is nearly that large already); the number read (0: the file
        ends here)."""
        if not self._reuse:
            more = self._f.read(want)
            if parsed or more:
                self.view = bytes(self.view[parsed:]) + more
            self.offset += parsed
            return len(more)
        rest = len(self.view) - parsed
        store = self._store
        room = len(store) - rest
        if room < want and room < max(1, len(store) // 2):  # the first read, or a long entry
            grown = bytearray(rest + want)
            grown[:rest] = self.view[parsed:]
            self._store = store = grown
        elif parsed and rest:
            store[:rest] = store[parsed : parsed + rest]
        space = memoryview(store)[rest : rest + min(want, len(store) - rest)]
        if self._readinto is not None:
            got = self._readinto(space) or 0
        else:  # a file object without readinto: read, then copy in
            more = self._f.read(len(space))
            got = len(more)
            space[:got] = more
        space.release()
        self.offset += parsed
        self.view = memoryview(store)[: rest + got]
        return got


def on_bytes(parse: Callable[[bytes, int, int], Parsed], buf: Buffer, p: int, buf_off: int) -> Parsed:
    """``parse(window, 0, offset)`` over a bytes copy of ``buf`` from ``p`` (``buf[p]`` at file
    offset ``buf_off + p``), its index moved back to ``buf``'s; over ``buf`` itself when it is
    bytes.

    The copy is :data:`FALLBACK_WINDOW` bytes, four times larger each time the parser found
    nothing whole in it, until it reaches ``buf``'s end: a Python parser stops at an entry cut
    short by its buffer's end, as at a chunk's.
    """
    if isinstance(buf, bytes):
        return parse(buf, p, buf_off)
    n = len(buf)
    size = FALLBACK_WINDOW
    while True:
        end = min(n, p + size)
        entries, q, error = parse(bytes(buf[p:end]), 0, buf_off + p)
        if entries or error is not None or end == n:
            return entries, p + q, error
        size *= 4
