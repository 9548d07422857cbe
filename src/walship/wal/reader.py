"""Read HBase WAL files (ProtobufLogWriter / AsyncProtobufLogWriter, plain or compressed).

The reader works on any seekable binary file object (a local file, an fsspec or pyarrow
file on HDFS) and decodes entries from any entry boundary, so a replication position can
resume exactly where the last shipped entry ended.

Two ways a read can stop short, told apart on purpose:

* an **incomplete tail**: the last entry of a file without a trailer is cut short by the
  end of the file. The writer may still be appending, so this is no error: iteration stops
  before that entry and :attr:`WalReader.incomplete_tail` is set, with
  :attr:`WalReader.stop_offset` at its first byte.
* **corruption**: the bytes of an entry are all there but do not parse, or a closed file
  (one with a trailer) ends inside an entry. :class:`~walship.errors.CorruptWalError` names
  the file and the byte offset. Nothing is ever skipped.

Entries are decoded by the compiled ``walship.wal._walcodec`` (src/walship/wal/_walcodec.c,
built by ``make setup``) when it is there, else, with one log line saying so, by the
pure-Python parser (:func:`walship.wal.entries.parse_entries_py`). The compiled one decodes the
plainly valid entries and leaves every other one (cut short, corrupt, a rare key shape) to the
Python parser, so both give the same entries and the same errors; ``WalReader(...,
decoder="python")`` picks the pure-Python one.

A compressed WAL (``hbase.regionserver.wal.enablecompression``, :mod:`walship.wal.compressed`)
can only be decoded with the dictionaries its earlier entries built: the reader rebuilds them
from the first entry when asked to start anywhere else, as HBase's reader does, and keeps them
between calls, so that a reader that goes on from where it stopped (``entries(start=
reader.stop_offset)``, after new bytes were appended, or after :meth:`WalReader.reopen`) decodes
only the new entries.

Example::

    with open(path, "rb") as f:
        reader = WalReader(f, path)
        for entry in reader.entries(start=position):
            ...
        position = reader.stop_offset
"""

from __future__ import annotations

import functools
import io
import itertools
import logging
from collections.abc import Callable, Iterator
from typing import Any, BinaryIO

from google.protobuf.message import DecodeError

from walship.errors import CorruptWalError, WalError
from walship.protos import WAL_pb2
from walship.wal import entries as _entries
from walship.wal.compressed import CompressedState, c_parse_compressed, parse_compressed_c, parse_compressed_py
from walship.wal.entries import (
    BATCH,
    DECODERS,
    NeedMore,
    batch_limit,
    default_decoder,
    parse_entries_c,
    parse_entries_py,
    varint,
)
from walship.wal.format import INT32, MAGIC, TRAILER_MAGIC, TRAILER_TAIL_SIZE, check_header, header_compression
from walship.wal.model import WalEntry
from walship.wal.readahead import Parsed, ReadAhead

__all__ = ["DECODERS", "DEFAULT_CHUNK_SIZE", "WalReader", "default_decoder", "read_wal"]

log = logging.getLogger(__name__)

DEFAULT_CHUNK_SIZE = 4 * 1024 * 1024


class WalReader:
    """Decode the entries of one WAL file.

    :param fileobj: a seekable binary file object positioned anywhere.
    :param path: how the file is named in errors and logs.
    :param chunk_size: bytes read at a time; memory use stays near this plus one entry.
    :param decoder: one of :data:`DECODERS`; default: :func:`default_decoder`, the compiled
        one when it is built. Both decode the same bytes into the same entries and errors.
    :raises CorruptWalError: the file does not start with ``PWAL`` or its header is corrupt.
    :raises UnsupportedWalError: the header names encryption, a value compression type
        walship cannot decode, or an unknown writer or codec.
    :raises ValueError: an unknown ``decoder``, or ``"c"`` when it is not built.
    """

    def __init__(
        self,
        fileobj: BinaryIO,
        path: str = "<wal>",
        *,
        chunk_size: int = DEFAULT_CHUNK_SIZE,
        decoder: str | None = None,
    ) -> None:
        if chunk_size <= 0:
            raise ValueError(f"'chunk_size' must be > 0, got {chunk_size}")
        if decoder is None:
            decoder = default_decoder()
        elif decoder not in DECODERS:
            raise ValueError(f"'decoder' must be one of {list(DECODERS)}, got {decoder!r}")
        elif decoder == "c" and _entries.C_UNAVAILABLE is not None:
            raise ValueError(f"'decoder' 'c' is not available: {_entries.C_UNAVAILABLE}")
        if not fileobj.seekable():
            raise WalError(path, None, "the WAL must be opened as a seekable file")
        self._f = fileobj
        self.path = path
        self._chunk = chunk_size
        #: The decoder in use: ``"c"`` or ``"python"``.
        self.decoder = decoder
        # the compiled decoders read the reused buffer of a ReadAhead; the Python parser is
        # handed bytes (ReadAhead(reuse=False)), whose slices are its fields
        self._parse: Callable[[Any, int, int, str, int], Parsed] = (
            parse_entries_c if decoder == "c" else parse_entries_py
        )
        #: The decoded header, or ``None`` when the file is too short to hold one yet.
        self.header: WAL_pb2.WALHeader | None = None
        #: Offset of the first entry (just after the header); 0 while there is no header.
        self.header_end = 0
        self._stop_offset = 0
        # the batch :meth:`entries` hands out now, and the iterator over it (how far it got)
        self._shown: list[WalEntry] = []
        self._unshown: Iterator[WalEntry] | None = None
        #: True when the last :meth:`entries` call stopped before an entry cut short by the
        #: end of a file that has no trailer.
        self.incomplete_tail = False
        #: True when the file ends with a trailer (``LAWP``): it was closed cleanly.
        self.has_trailer = False
        #: Where the entries end: the trailer's first byte, or the file size.
        self.edits_end = 0
        #: The dictionaries of a compressed WAL, else ``None``.
        self.compressed: CompressedState | None = None
        #: For a compressed WAL, the offset its dictionaries have been rebuilt up to.
        self.context_offset = 0
        # entries decoded past the last one handed out (a consumer may stop mid-batch)
        self._pending: list[WalEntry] = []
        self._read_header()

    # -- header and trailer -------------------------------------------------------------

    def _size(self) -> int:
        return self._f.seek(0, io.SEEK_END)

    def _read_header(self) -> None:
        size = self._size()
        self._f.seek(0)
        head = self._f.read(min(size, 4 + 5 + 4096))
        if head[: len(MAGIC)] != MAGIC[: len(head)]:
            raise CorruptWalError(self.path, 0, f"not a PWAL file: starts with {head[:4]!r}, expected {MAGIC!r}")
        if len(head) < len(MAGIC):
            return  # a WAL being created: not even the magic yet
        try:
            length, pos = varint(head, len(MAGIC), self.path, len(MAGIC))
        except NeedMore:
            return
        end = pos + length
        if end > size:
            return  # header still being written
        if end > len(head):
            self._f.seek(0)
            head = self._f.read(end)
        header = WAL_pb2.WALHeader()
        try:
            header.ParseFromString(head[pos:end])
        except DecodeError as exc:
            raise CorruptWalError(self.path, len(MAGIC), f"WALHeader does not parse: {exc}") from exc
        for name in ("writer_cls_name", "cell_codec_cls_name"):
            value = getattr(header, name)
            if isinstance(value, bytes):  # protobuf hands a proto2 string that is not UTF-8 back as bytes
                raise CorruptWalError(self.path, len(MAGIC), f"WALHeader does not parse: {name} {value!r} is not UTF-8")
        check_header(header, self.path)
        compression = header_compression(header, self.path)
        if compression is not None:
            if self.decoder == "c" and c_parse_compressed is None:
                raise ValueError(f"'decoder' 'c' is not available: {_entries.C_UNAVAILABLE or 'an old build'}")
            self.compressed = CompressedState(compression.tag_compression, compression.value_codec, self.decoder)
            parse = parse_compressed_c if self.decoder == "c" else parse_compressed_py
            self._parse = functools.partial(parse, self.compressed)
            self.context_offset = end
        self.header = header
        self.header_end = end

    def reopen(self, fileobj: BinaryIO) -> None:
        """Go on reading the same WAL through another file object (reopened after it grew,
        say), keeping the header, the position and a compressed WAL's dictionaries."""
        if not fileobj.seekable():
            raise WalError(self.path, None, "the WAL must be opened as a seekable file")
        self._f = fileobj

    def refresh(self) -> None:
        """Look at the file again: its header if it had none yet, its size and trailer
        (:attr:`edits_end`, :attr:`has_trailer`). :meth:`entries` does this itself."""
        size = self._size()
        if self.header is None:
            self._read_header()
        self._locate_trailer(size)

    def _locate_trailer(self, size: int) -> None:
        """Find where the entries end: before the trailer if there is one, else at EOF."""
        self.has_trailer = False
        self.edits_end = size
        if self.header is None or size < self.header_end + TRAILER_TAIL_SIZE:
            return
        self._f.seek(size - TRAILER_TAIL_SIZE)
        tail = self._f.read(TRAILER_TAIL_SIZE)
        if tail[4:] != TRAILER_MAGIC:
            return
        trailer_size = INT32.unpack_from(tail)[0]
        trailer_start = size - TRAILER_TAIL_SIZE - trailer_size
        if trailer_size < 0 or trailer_start < self.header_end:
            return  # HBase reads such a file as having no trailer
        if trailer_size:
            self._f.seek(trailer_start)
            try:
                WAL_pb2.WALTrailer.FromString(self._f.read(trailer_size))
            except DecodeError as exc:
                # as HBase's reader: a trailer that does not parse is no trailer (an open WAL
                # whose last entry merely ends with ``LAWP``, or a torn close)
                log.debug(
                    "%s: bytes ending in the trailer magic at %d are no WALTrailer: %s", self.path, trailer_start, exc
                )
                return
        self.has_trailer = True
        self.edits_end = trailer_start

    # -- entries -------------------------------------------------------------------------

    @property
    def stop_offset(self) -> int:
        """Offset where reading stopped: the end of the last entry handed out, or the first
        byte of an incomplete tail."""
        it = self._unshown
        if it is None:
            return self._stop_offset
        shown = self._shown
        seen = len(shown) - it.__length_hint__()  # type: ignore[attr-defined]
        return shown[seen - 1].end_offset if seen else shown[0].offset

    @stop_offset.setter
    def stop_offset(self, offset: int) -> None:
        self._stop_offset = offset
        self._unshown = None

    def _entries_run_to_eof(self, start: int) -> bool:
        """The bytes from ``start`` to the end of the file are whole entries, ending exactly
        at EOF (so what looked like a trailer is the tail of the last one)."""
        here = self._f.tell()
        self._f.seek(start)
        buf = self._f.read()
        self._f.seek(here)  # the caller reads on from where it was
        saved = self.compressed.snapshot() if self.compressed is not None else None
        try:
            batch, end, error = self._parse(buf, 0, start, self.path, BATCH)
        finally:
            if self.compressed is not None:
                self.compressed.restore(saved)
        return bool(batch) and error is None and end == len(buf)

    def entries(self, start: int | None = None) -> Iterator[WalEntry]:
        """Yield the entries from ``start`` (an entry boundary; default: the first entry), as
        :meth:`batches` reads them, one at a time (:attr:`stop_offset` the end of the last one
        yielded).

        The entries of a batch are handed out by the batch's own iterator, with no Python
        frame between it and the caller; :attr:`stop_offset` reads how far that iterator got.
        """
        return itertools.chain.from_iterable(self._iterators(start))

    def _iterators(self, start: int | None) -> Iterator[Iterator[WalEntry]]:
        for batch in self.batches(start):
            self._shown = batch
            self._unshown = it = iter(batch)
            yield it

    def batches(self, start: int | None = None) -> Iterator[list[WalEntry]]:
        """Yield the entries from ``start`` (an entry boundary; default: the first entry) in
        lists of up to :data:`~walship.wal.entries.BATCH` (fewer of large entries:
        :func:`~walship.wal.entries.batch_limit`), as the decoder hands them out
        (:attr:`stop_offset` the end of the last list yielded). A corrupt entry is raised after
        the list of those before it.

        The file's size and trailer are looked at again on every call, so a reader of a
        WAL still being written sees the entries appended since.

        In a compressed WAL the dictionaries are kept between calls (:attr:`context_offset`):
        a call that goes on from where the last one stopped decodes only what follows; one
        from further on decodes the entries between without yielding them; one from before
        rebuilds the dictionaries from the first entry, as HBase's reader does.

        :raises WalError: ``start`` lies inside the header or past the end of the entries,
            or, in a compressed WAL, is not the first byte of an entry.
        :raises CorruptWalError: an entry does not parse; the message names its offset.
        """
        self.refresh()
        self.incomplete_tail = False
        if self.header is None:
            if start:
                raise WalError(self.path, start, f"position {start} is past the end of a WAL with no header yet")
            self.stop_offset = 0
            self.incomplete_tail = True
            return
        pos = start if start else self.header_end
        if pos < self.header_end:
            raise WalError(
                self.path, pos, f"position {pos} lies inside the WAL header (entries start at {self.header_end})"
            )
        if pos > self.edits_end:
            raise WalError(self.path, pos, f"position {pos} is past the end of the entries ({self.edits_end})")
        self.stop_offset = pos
        if self.compressed is None:
            yield from self._iter_from(pos)
            return
        pending, pos, skip_to = self._plan_compressed(pos)
        if pending:
            self.stop_offset = pending[-1].end_offset
            yield pending
        yield from self._iter_from(pos, skip_to)
        if skip_to is not None and self.context_offset < skip_to:
            raise WalError(
                self.path,
                skip_to,
                f"position {skip_to} is not the start of an entry (entries end at {self.context_offset})",
            )

    def _plan_compressed(self, pos: int) -> tuple[list[WalEntry], int, int | None]:
        """How to read a compressed WAL from ``pos``: the entries already decoded from there
        (when a consumer stopped inside a batch), where to decode on from, and the position
        before which decoded entries only rebuild the dictionaries.

        The dictionaries are where the last decoding left them (:attr:`context_offset`): a
        read from there goes on, one from further on decodes the entries between without
        handing them out, and one from before rebuilds them from the first entry.
        """
        assert self.compressed is not None
        if pos == self.context_offset:
            return [], pos, None
        pending = self._pending
        if pending and pending[0].offset <= pos < self.context_offset:
            for k, entry in enumerate(pending):
                if entry.offset == pos:
                    return pending[k:], self.context_offset, None
            raise WalError(self.path, pos, f"position {pos} is not the start of an entry")
        if pos > self.context_offset:
            return [], self.context_offset, pos
        log.debug("%s: rebuilding the dictionaries from the first entry up to %d", self.path, pos)
        self.compressed.reset()
        self.context_offset = self.header_end
        self._pending = []
        return [], self.header_end, pos if pos > self.header_end else None

    def _skip(self, batch: list[WalEntry], skip_to: int) -> tuple[list[WalEntry], int | None]:
        """The entries of ``batch`` from ``skip_to`` on (those before it only rebuilt the
        dictionaries), and ``skip_to`` while it is not reached yet."""
        for k, entry in enumerate(batch):
            if entry.offset >= skip_to:
                return batch[k:], None
            if entry.end_offset > skip_to:
                raise WalError(self.path, skip_to, f"position {skip_to} is not the start of an entry")
        return [], skip_to

    def _iter_from(self, pos: int, skip_to: int | None = None) -> Iterator[list[WalEntry]]:
        compressed = self.compressed is not None
        f = self._f
        limit = self.edits_end
        f.seek(pos)
        # the compiled decoders read a reused buffer; the Python parser slices bytes
        window = ReadAhead(f, pos, reuse=self.decoder == "c")
        p = 0
        entries_wanted = 1  # then as many of its size as BATCH_BYTES holds (batch_limit)
        while True:
            buf, buf_off, n = window.view, window.offset, len(window)
            while p < n:
                at = p
                batch, p, error = self._parse(buf, p, buf_off, self.path, entries_wanted)
                if compressed:
                    self.context_offset = buf_off + p
                    self._pending = batch
                shown = batch
                if skip_to is not None:
                    shown, skip_to = self._skip(batch, skip_to)
                if shown:
                    self.stop_offset = shown[-1].end_offset
                    yield shown
                if error is not None:
                    raise error
                if len(batch) < entries_wanted:
                    break  # the buffer ends inside an entry, or at its end
                entries_wanted = batch_limit(p - at, len(batch))
            read_to = buf_off + n
            if read_to >= limit and p == n and self.has_trailer and self._entries_run_to_eof(limit):
                # an open WAL whose last entries happen to end like a trailer (``<int32>LAWP``,
                # the bytes before it a valid WALTrailer): they are entries; read on to EOF
                log.debug("%s: the bytes that look like a trailer at %d are entries", self.path, limit)
                self.has_trailer = False
                limit = self.edits_end = self._size()
                f.seek(read_to)  # _size() moved to the end
            if read_to >= limit:
                if p < n:
                    start = buf_off + p
                    if self.has_trailer and self._entries_run_to_eof(start):
                        # an open WAL whose last entry happens to end like a trailer
                        # (``<int32>LAWP``): the "trailer" is entry bytes; read on to EOF
                        log.debug("%s: the bytes that look like a trailer belong to the entry at %d", self.path, start)
                        self.has_trailer = False
                        limit = self.edits_end = self._size()
                        f.seek(read_to)  # _size() moved to the end
                        continue
                    if self.has_trailer:
                        raise CorruptWalError(
                            self.path,
                            start,
                            f"entry runs past the end of the entries ({limit}) of a closed WAL",
                        )
                    self.incomplete_tail = True
                    log.debug("%s: incomplete entry at offset %d (file size %d)", self.path, start, limit)
                return
            want = min(max(self._chunk, n - p), limit - read_to)
            read = window.read_on(p, want)
            p = 0
            if not read:
                # the file shrank under us; treat what we have as the end
                limit = read_to


def read_wal(path: str, start: int | None = None) -> list[WalEntry]:
    """Read every complete entry of a local WAL file (a convenience for tools and tests)."""
    with open(path, "rb") as f:
        return list(WalReader(f, path).entries(start))
