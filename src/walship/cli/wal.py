"""``walship wal dump`` and ``walship wal sample``: read and write HBase WAL files."""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
import uuid
from collections.abc import Iterator
from typing import IO

from walship.cli.argtypes import clip, nonneg_int
from walship.cli.common import open_input
from walship.errors import WalshipError
from walship.files import check_url
from walship.servername import ServerName
from walship.wal import Cell, CellType, Tag, WalKey, WalReader, WalWriter, build_wal_name
from walship.wal.dump import entry_to_json, entry_to_text

__all__ = ["register"]

log = logging.getLogger(__name__)


def cmd_wal_dump(args: argparse.Namespace) -> int:
    out: IO[str] = sys.stdout
    count = 0
    shown = clip(args.path)
    try:
        if "://" in args.path:
            check_url(args.path, "wal dump")
        with open_input(args.path) as f:
            reader = WalReader(f, args.path)
            if reader.header is None:
                size = f.seek(0, 2)
                print(
                    f"walship: {shown}: {size} bytes, no complete WAL header: not a WAL, or one being created",
                    file=sys.stderr,
                )
                return 1
            for entry in reader.entries(args.start_offset):
                if args.json:
                    out.write(json.dumps(entry_to_json(entry)))
                else:
                    out.write(entry_to_text(entry))
                out.write("\n")
                count += 1
    except FileNotFoundError:
        print(f"walship: {shown}: no such file", file=sys.stderr)
        return 1
    except IsADirectoryError:
        print(f"walship: {shown}: a folder, not a WAL file", file=sys.stderr)
        return 1
    except (OSError, ValueError) as exc:  # ValueError: a NUL byte in the path
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        print(f"walship: {shown!r}: cannot be read: {reason}", file=sys.stderr)
        return 1
    except WalshipError as exc:
        out.flush()
        print(f"walship: {exc}", file=sys.stderr)
        return 1
    out.flush()
    if reader.incomplete_tail:
        print(
            f"walship: {args.path}: {count} entries; stopped at an incomplete entry at byte offset "
            f"{reader.stop_offset} (the WAL may still be written)",
            file=sys.stderr,
        )
    else:
        state = "closed (trailer present)" if reader.has_trailer else "no trailer"
        print(
            f"walship: {args.path}: {count} entries; read to the end at byte offset {reader.stop_offset}, {state}"
            + _compression_note(reader),
            file=sys.stderr,
        )
    return 0


def _compression_note(reader: WalReader) -> str:
    """``, compressed (tag compression, gz values)`` for a compressed WAL, else nothing."""
    st = reader.compressed
    if st is None:
        return ""
    parts = ["tag compression"] if st.tag_compression else []
    if st.codec is not None:
        parts.append(f"{st.codec.name} values")
    return ", compressed" + (f" ({', '.join(parts)})" if parts else "")


def sample_entries(
    count: int, *, table: bytes = b"demo", now_ms: int | None = None
) -> Iterator[tuple[WalKey, list[Cell]]]:
    """Entries of every cell type, for ``walship wal sample`` and tests of the tools."""
    now = now_ms if now_ms is not None else int(time.time() * 1000)
    region = uuid.uuid5(uuid.NAMESPACE_OID, table.decode()).hex.encode()
    kinds = [CellType.Put, CellType.Put, CellType.DeleteColumn, CellType.Delete, CellType.DeleteFamily]
    for i in range(count):
        row = b"row-%06d" % i
        kind = kinds[i % len(kinds)]
        ts = now + i
        cells = [Cell(row, b"r", b"q", ts, kind, b"value-%d" % i if kind is CellType.Put else b"")]
        if kind is CellType.Put:
            cells.append(Cell(row, b"l", b"local", ts, CellType.Put, b"\x00\xff binary", (Tag(1, b"ttl"),)))
        key = WalKey(region, table, i + 1, ts, scopes={b"r": 1})
        yield key, cells


def cmd_wal_sample(args: argparse.Namespace) -> int:
    server = ServerName("localhost", 16020, 1)
    path = args.path or build_wal_name(server, int(time.time() * 1000))
    with open(path, "wb") as f, WalWriter(f) as writer:
        writer.append_many(sample_entries(args.entries))
    print(path)
    return 0


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    wal = sub.add_parser("wal", help="read and write HBase WAL files")
    wal_sub = wal.add_subparsers(dest="wal_command", required=True, metavar="WAL_COMMAND")
    dump = wal_sub.add_parser("dump", help="print the entries of a WAL, like HBase's WALPrettyPrinter")
    dump.add_argument("path", help="WAL file: a local path or an fsspec URL")
    dump.add_argument("--start-offset", type=nonneg_int, default=None, help="byte offset of an entry to start at")
    dump.add_argument("--json", action="store_true", help="one JSON object per entry, one per line")
    dump.set_defaults(func=cmd_wal_dump)

    sample = wal_sub.add_parser("sample", help="write a small WAL with every cell type")
    sample.add_argument("path", nargs="?", help="file to write (default: an HBase-style name here)")
    sample.add_argument("--entries", type=nonneg_int, default=10)
    sample.set_defaults(func=cmd_wal_sample)
