"""The entry parsers behind :class:`~walship.wal.reader.WalReader`: the compiled
``walship.wal._walcodec`` (src/walship/wal/_walcodec.c, built by ``make setup``) and the pure-Python
parser (:func:`parse_entries_py`), which decodes whatever the compiled one hands back (an entry
cut short, a corrupt one, a rare key shape), so both give the same entries and the same errors.

A parser takes ``(buf, p, buf_off, path, limit)`` and returns up to ``limit`` complete entries
parsed from ``buf[p:]``, the index where it stopped, and the corruption that stopped it, if any.
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Callable, Sequence
from typing import Any

from google.protobuf.message import DecodeError

from walship.errors import CorruptWalError
from walship.protos import WAL_pb2
from walship.wal.format import INT32
from walship.wal.keys import attribute, cluster_uuid, key_from_raw, scopes_from_raw
from walship.wal.model import CELL_TYPE_CODES, EMPTY_SCOPES, Cell, Tag, WalEntry, WalKey
from walship.wal.readahead import Buffer, on_bytes

__all__ = [
    "BATCH",
    "BATCH_BYTES",
    "C_DEFER",
    "C_DONE",
    "C_NEED_MORE",
    "C_UNAVAILABLE",
    "DECODERS",
    "NeedMore",
    "batch_limit",
    "c_parse",
    "default_decoder",
    "parse_entries_c",
    "parse_entries_py",
    "varint",
]

log = logging.getLogger(__name__)

_CELL_HEAD = struct.Struct(">iiih")  # total length, key length, value length, row length
_TS_TYPE = struct.Struct(">qB")
_INT16 = struct.Struct(">h")
_NO_TAGS: tuple[tuple[Tag, ...]] = ((),)
_SHAPES: dict[tuple[int, int, int, int, int], struct.Struct] = {}
_SHAPES_SEEN: dict[tuple[int, ...], int] = {}
_Regroup = Callable[[tuple[Any, ...]], tuple[Cell, ...]]
_RUNS: dict[tuple[int, int, int, int, int, int], tuple[struct.Struct, _Regroup]] = {}
_REGROUPERS: dict[int, _Regroup] = {}
_SHAPES_MAX = 8192
# Entries parsed per call: enough to spread the call's cost, few enough to stay in cache. A
# call decodes up to BATCH entries, fewer when the entries before took more than about
# BATCH_BYTES of the WAL between them (see batch_limit): 64 entries of three 100-byte cells
# decode 4% faster than 32 and 256 a third slower (wal_read.py), and a shipper of entries of
# thousands of cells goes through one at a time.
BATCH = 64
BATCH_BYTES = 32 << 10


def batch_limit(nbytes: int, entries: int) -> int:
    """How many entries to decode in the next call, after ``entries`` took ``nbytes``: as many
    of their size as BATCH_BYTES holds, at least 1 and at most BATCH."""
    return max(1, min(BATCH, BATCH_BYTES * entries // max(nbytes, 1)))


_tuple_new = tuple.__new__
_key_from_string = WAL_pb2.WALKeyRaw.FromString

#: The decoders :class:`WalReader` can use: ``"c"``, the compiled ``walship.wal._walcodec``
#: (built by ``make setup``), and ``"python"``, the pure-Python parser of this module.
DECODERS = ("c", "python")


class NeedMore(Exception):
    """The buffer ends inside the entry being parsed."""


def varint(buf: bytes, p: int, path: str, file_off: int) -> tuple[int, int]:
    """Decode a varint32 as ``CodedInputStream.readRawVarint32`` does."""
    result = 0
    shift = 0
    n = len(buf)
    for i in range(10):
        if p + i >= n:
            raise NeedMore
        b = buf[p + i]
        if i < 5:
            result |= (b & 0x7F) << shift
            shift += 7
        if b < 0x80:
            return result & 0xFFFFFFFF, p + i + 1
    raise CorruptWalError(path, file_off, "malformed varint length prefix")


def parse_entries_c(
    buf: Buffer, p: int, buf_off: int, path: str, limit: int
) -> tuple[list[WalEntry], int, CorruptWalError | None]:
    """:func:`parse_entries_py` done by the compiled decoder, with the same results.

    The compiled decoder decodes only whole, plainly valid entries; it stops before any other
    (corrupt, or a WALKey in a rarer protobuf shape) and leaves it to :func:`parse_entries_py`,
    which decodes it or names its corruption. So every error message and offset comes from the
    Python parser. An entry cut short by the end of ``buf`` (valid as far as it goes) stops it
    where the Python parser would stop too: the reader reads on, nothing is parsed twice. ``buf`` may be any buffer: the
    entries it hands to the Python parser are copied out as bytes
    (:func:`~walship.wal.readahead.on_bytes`).
    """
    assert c_parse is not None
    out, p, status = c_parse(buf, p, buf_off, limit)
    while status == C_DEFER and len(out) < limit:
        more, p, error = on_bytes(lambda b, q, off: parse_entries_py(b, q, off, path, 1), buf, p, buf_off)
        out += more
        if error is not None or not more:
            return out, p, error
        if len(out) < limit:
            more, p, status = c_parse(buf, p, buf_off, limit - len(out))
            out += more
    return out, p, None


def parse_entries_py(
    buf: bytes, p: int, buf_off: int, path: str, limit: int
) -> tuple[list[WalEntry], int, CorruptWalError | None]:
    """Parse up to ``limit`` complete entries in ``buf`` from index ``p``.

    Returns the entries, the index where parsing stopped (the start of an entry cut short
    by the end of ``buf``, or ``len(buf)``) and the corruption that stopped it, if any: the
    entries before a corrupt one are returned first, so nothing that was readable is lost.

    This is the hot loop of every read: it is written for speed (locals, one struct call per
    cell, tuples built directly) and checks every length it trusts.
    """
    out: list[WalEntry] = []
    n = len(buf)
    unpack_head = _CELL_HEAD.unpack_from
    unpack_ts = _TS_TYPE.unpack_from
    types = CELL_TYPE_CODES
    new = _tuple_new
    shapes = _SHAPES
    runs = _RUNS
    try:
        while p < n and len(out) < limit:
            b0 = buf[p]
            if b0 < 0x80:
                q = p + 1
                kend = q + b0
            else:
                klen, q = varint(buf, p, path, buf_off + p)
                kend = q + klen
            if kend > n:
                raise NeedMore
            try:
                pb = _key_from_string(buf[q:kend])
            except DecodeError as exc:
                raise CorruptWalError(path, buf_off + p, f"WALKey does not parse: {exc}") from exc
            count = pb.following_kv_count
            c = kend
            cells: list[Cell] = []
            decoded: tuple[Cell, ...] | None = None
            if count > 1 and runs:
                run = _uniform_run(buf, c, n, count)
                if run is not None:
                    decoded, c = run
                    count = 0  # decoded
            if count:
                append = cells.append
                run_shape: tuple[int, int, int, int, int] | None = None
                uniform = count > 1
                for i in range(count):
                    if c + 18 > n:  # int32 total + the fixed head unpacked below
                        if c + 4 <= n and INT32.unpack_from(buf, c)[0] < 14:
                            raise _corrupt_cell(path, buf_off, p, c, i, "length too small")
                        raise NeedMore
                    total, klen_kv, vlen, rowlen = unpack_head(buf, c)
                    if total < 14:  # as when the buffer ended before the head: whatever is read ahead
                        raise _corrupt_cell(path, buf_off, p, c, i, "length too small")
                    cend = c + 4 + total
                    if cend > n:
                        raise NeedMore
                    fpos = c + 14 + rowlen
                    if rowlen >= 0 and fpos < cend:
                        shape = (total, klen_kv, vlen, rowlen, buf[fpos])
                        if i == 0:
                            run_shape = shape
                        elif shape != run_shape:
                            uniform = False
                        fast = shapes.get(shape)
                        if fast is not None:
                            # a known, already validated layout: one struct call decodes the cell
                            t = fast.unpack_from(buf, c)
                            if t[4] not in types:
                                raise _corrupt_cell(path, buf_off, p, c, i, f"unknown cell type {t[4]}")
                            append(new(Cell, t + _NO_TAGS))
                            c = cend
                            continue
                        _learn_shape(shape)
                    else:
                        uniform = False
                    kend_kv = c + 12 + klen_kv
                    vend = kend_kv + vlen
                    if rowlen < 0 or klen_kv < 12 + rowlen or vlen < 0 or (vend != cend and vend + 2 > cend):
                        raise _corrupt_cell(
                            path,
                            buf_off,
                            p,
                            c,
                            i,
                            f"inconsistent lengths (cell {total}, key {klen_kv}, value {vlen}, row {rowlen})",
                        )
                    qstart = fpos + 1 + buf[fpos]
                    tspos = kend_kv - 9
                    if qstart > tspos:
                        raise _corrupt_cell(path, buf_off, p, c, i, f"family length {buf[fpos]} overruns the key")
                    ts, tcode = unpack_ts(buf, tspos)
                    if tcode not in types:
                        raise _corrupt_cell(path, buf_off, p, c, i, f"unknown cell type {tcode}")
                    append(
                        new(
                            Cell,
                            (
                                buf[c + 14 : fpos],
                                buf[fpos + 1 : qstart],
                                buf[qstart:tspos],
                                ts,
                                tcode,
                                buf[kend_kv:vend],
                                _parse_tags(buf, vend, cend, path, buf_off, i, p) if vend != cend else (),
                            ),
                        )
                    )
                    c = cend
                if uniform and run_shape is not None:
                    _learn_run(run_shape, len(cells))
            if decoded is None:
                decoded = tuple(cells)
            try:
                key = key_from_raw(pb)
            except DecodeError as exc:
                raise CorruptWalError(path, buf_off + p, f"WALKey does not parse: {exc}") from exc
            out.append(new(WalEntry, (key, decoded, buf_off + p, buf_off + c)))
            p = c
    except NeedMore:
        pass
    except CorruptWalError as exc:
        return out, p, exc
    return out, p, None


def _seen_twice(key: tuple[int, ...]) -> bool:
    """Count a layout; true on its second sighting (then it is worth compiling)."""
    seen = _SHAPES_SEEN.get(key, 0) + 1
    if seen < 2:
        if len(_SHAPES_SEEN) >= _SHAPES_MAX:
            _SHAPES_SEEN.clear()
        _SHAPES_SEEN[key] = seen
        return False
    _SHAPES_SEEN.pop(key, None)
    return True


def _learn_shape(shape: tuple[int, int, int, int, int]) -> None:
    """Count a cell layout; on its second sighting compile one struct that decodes it whole.

    A layout is (cell length, key length, value length, row length, family length). Cells of
    one table mostly share a few layouts, and one ``unpack_from`` per cell replaces a dozen
    slices and checks. Only valid, tag-free layouts are compiled, so the fast path needs no
    checks but the cell type's. The caches are bounded; data whose every cell differs just
    stays on the general path.
    """
    fmt = _cell_format(shape)
    if fmt is None or not _seen_twice(shape):
        return
    if len(_SHAPES) >= _SHAPES_MAX:
        _SHAPES.clear()
    _SHAPES[shape] = struct.Struct(">" + fmt)


def _cell_format(shape: tuple[int, int, int, int, int]) -> str | None:
    """The struct format decoding a valid, tag-free cell of this layout, or ``None``.

    It skips the int32 total, key length, value length and row length, then reads the row,
    skips the family length, then reads family, qualifier, timestamp, type and value.
    """
    total, klen, vlen, rowlen, famlen = shape
    qlen = klen - 12 - rowlen - famlen
    if rowlen < 0 or qlen < 0 or vlen < 0 or total != 8 + klen + vlen:
        return None
    return f"14x{rowlen}sx{famlen}s{qlen}sqB{vlen}s"


def _learn_run(shape: tuple[int, int, int, int, int], count: int) -> None:
    """Count an entry whose ``count`` cells share one layout; compile the run on its second
    sighting, so that one struct call decodes all its cells (see :func:`_uniform_run`)."""
    key = (*shape, count)
    if key in _RUNS:
        return
    fmt = _cell_format(shape)
    if fmt is None or not _seen_twice(key):
        return
    if len(_RUNS) >= _SHAPES_MAX:
        _RUNS.clear()
    _RUNS[key] = (struct.Struct(">" + fmt * count), _regrouper(count))


def _regrouper(count: int) -> _Regroup:
    """A function turning the flat fields of ``count`` unpacked cells (six each) into their
    Cells: one tuple display per cell, which builds them faster than any generic regrouping."""
    found = _REGROUPERS.get(count)
    if found is None:
        cells = "".join(
            f"new(Cell, (t[{i}], t[{i + 1}], t[{i + 2}], t[{i + 3}], t[{i + 4}], t[{i + 5}], ())), "
            for i in range(0, 6 * count, 6)
        )
        found = _REGROUPERS[count] = eval(f"lambda t: ({cells})", {"new": _tuple_new, "Cell": Cell})
    return found


def _uniform_run(buf: bytes, c: int, n: int, count: int) -> tuple[tuple[Cell, ...], int] | None:
    """Decode ``count`` cells at ``buf[c]`` with one struct call when they all share a
    compiled layout; ``None`` sends them down the cell-by-cell path.

    Every cell's 14-byte head and family length are compared with the first cell's before
    the struct is trusted, so a differing cell is never decoded with the wrong layout.
    """
    if c + 18 > n:
        return None
    total, klen, vlen, rowlen = _CELL_HEAD.unpack_from(buf, c)
    stride = 4 + total
    end = c + count * stride
    fpos = 14 + rowlen
    if end > n or rowlen < 0 or fpos >= stride:
        return None
    famlen = buf[c + fpos]
    compiled = _RUNS.get((total, klen, vlen, rowlen, famlen, count))
    if compiled is None:
        return None
    run, regroup = compiled
    head = buf[c : c + 14]
    j = c + stride
    while j < end:
        if buf[j : j + 14] != head or buf[j + fpos] != famlen:
            return None
        j += stride
    t = run.unpack_from(buf, c)
    if not CELL_TYPE_CODES.issuperset(t[4::6]):
        return None  # the cell-by-cell path names the bad cell
    return regroup(t), end


def _corrupt_cell(path: str, buf_off: int, p: int, c: int, i: int, what: str) -> CorruptWalError:
    return CorruptWalError(path, buf_off + c, f"cell {i} of entry at offset {buf_off + p}: {what}")


def _parse_tags(
    buf: bytes, start: int, end: int, path: str, buf_off: int, cell_no: int, entry_p: int
) -> tuple[Tag, ...]:
    tags_len = _INT16.unpack_from(buf, start)[0] & 0xFFFF
    t = start + 2
    if t + tags_len != end:
        raise CorruptWalError(
            path,
            buf_off + start,
            f"cell {cell_no} of entry at offset {buf_off + entry_p}: tags length {tags_len} does not match the cell",
        )
    out: list[Tag] = []
    while t < end:
        if t + 3 > end:
            raise CorruptWalError(path, buf_off + t, f"cell {cell_no}: truncated tag")
        tlen = _INT16.unpack_from(buf, t)[0] & 0xFFFF
        if tlen < 1 or t + 2 + tlen > end:
            raise CorruptWalError(path, buf_off + t, f"cell {cell_no}: tag length {tlen} overruns the tags")
        out.append(Tag(buf[t + 2], buf[t + 3 : t + 2 + tlen]))
        t += 2 + tlen
    return tuple(out)


# -- the compiled decoder -------------------------------------------------------------------

#: ``walship.wal._walcodec.parse`` once configured, else ``None``
c_parse: Callable[[Buffer, int, int, int], tuple[list[WalEntry], int, int]] | None = None
#: what the compiled parsers' third result says: stopped at the limit or the buffer's end, at an
#: entry left to the Python parser, or inside an entry the buffer cuts short (read on)
C_DONE, C_DEFER, C_NEED_MORE = 0, 1, 2
#: ``walship.wal._walcodec.cellblock`` (an RPC cell block's cells, by result) once configured
c_cellblock: Callable[[Buffer, Sequence[int]], list[tuple[Cell, ...]] | None] | None = None
C_UNAVAILABLE: str | None = None  # why the compiled decoder cannot be used, when it cannot
_fallback_logged = False
try:
    from walship.wal import _walcodec
except ImportError as exc:
    C_UNAVAILABLE = f"walship.wal._walcodec is not built ({exc})"
else:
    try:
        _walcodec.configure(
            Cell, Tag, WalKey, WalEntry, cluster_uuid, scopes_from_raw, attribute, EMPTY_SCOPES, DecodeError
        )
    except TypeError as exc:  # a model the compiled decoder cannot build: decode in Python
        C_UNAVAILABLE = f"walship.wal._walcodec refused the WAL model: {exc}"
    else:
        c_parse = _walcodec.parse
        c_cellblock = _walcodec.cellblock


def default_decoder() -> str:
    """The decoder a :class:`WalReader` uses when none is named: ``"c"`` when the compiled
    decoder is built, else ``"python"`` (said once per process in the log, at INFO)."""
    global _fallback_logged
    if C_UNAVAILABLE is None:
        return "c"
    if not _fallback_logged:
        _fallback_logged = True
        log.info("%s: WALs are decoded in pure Python, several times slower; `make setup` builds it", C_UNAVAILABLE)
    return "python"
