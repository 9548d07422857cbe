"""The minicluster's WAL files: replay at start, rolls, archiving to ``oldWALs/``.

A WAL lives under ``WALs/<server name>/`` while its region server writes it, then moves to
``oldWALs/`` once the store holds its edits durably (a checkpoint first). At start every WAL
left under ``WALs/`` (a crash, or a server aborted) is replayed into the store, then archived:
what was acknowledged is never lost (:func:`replay_wals`).

With checksum files on (``--wal-checksums``) every closed WAL gets Hadoop's checksum file
``.<name>.crc`` beside it (:func:`~walship_testing.minicluster.checksums.write_checksum_file`), as a Hadoop local file system writes
one, and moves with it.

A :class:`WalRoller` rolls in one of :data:`ROLL_ORDERS`. ``default``: the new WAL is added to
every peer's queue and opened, the old one closed with its trailer at once and archived.
``hbase``, HBase's own order: the new WAL is enqueued and opened, the old one keeps taking
appends for ``close_delay`` seconds (HBase writes the entries in flight to it), then gets its
trailer; it is archived only at the next roll, after a flush. A shipper must then not take
"a newer WAL follows" for "closed".
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from collections.abc import Callable
from pathlib import Path

from walship.wal import WalReader, parse_wal_name
from walship.wal.names import is_checksum_file
from walship_testing.minicluster.checksums import archive_wal
from walship_testing.minicluster.regionserver import RegionServer
from walship_testing.minicluster.store import Store

__all__ = ["ROLL_ORDERS", "WalRoller", "archive_dir", "list_wals", "replay_wals"]


log = logging.getLogger(__name__)

#: ``default``: a roll closes the old WAL at once and archives it; ``hbase``: HBase's order.
ROLL_ORDERS = ("default", "hbase")


def replay_wals(store: Store, wal_root: Path, old_wals_dir: Path, seq: dict[str, int]) -> None:
    """Replay every WAL left under ``wal_root`` into the store, then archive it.

    :param seq: each region's last sequence id; raised to the highest one replayed.
    """
    tables = set(store.table_names())
    replayed = 0
    for server_dir in sorted(wal_root.iterdir()):
        if not server_dir.is_dir():
            continue
        files = sorted(
            (p for p in server_dir.iterdir() if p.is_file() and not is_checksum_file(p.name)),
            key=lambda p: parse_wal_name(p.name),
        )
        for path in files:
            with open(path, "rb") as f:
                reader = WalReader(f, str(path))
                for entry in reader.entries():
                    region = entry.key.encoded_region_name.decode()
                    seq[region] = max(seq.get(region, 0), entry.key.sequence_id)
                    if entry.key.table in tables and not entry.is_meta:
                        store.apply(entry.key.table, entry.cells, {region: entry.key.sequence_id})
                        replayed += 1
                if reader.incomplete_tail:
                    log.warning(
                        "%s ends with an incomplete entry at offset %d (a crash mid-write)",
                        path,
                        reader.stop_offset,
                    )
        store.checkpoint()
        for path in files:
            archive_wal(path, old_wals_dir)
        with contextlib.suppress(OSError):
            server_dir.rmdir()
    if replayed:
        log.info("replayed %d WAL entries into the store", replayed)


def archive_dir(wal_dir: Path, old_wals_dir: Path) -> None:
    """Move every WAL of a server's directory to ``old_wals_dir``, then remove the directory."""
    if not wal_dir.exists():
        return
    for path in wal_dir.iterdir():
        os.replace(path, old_wals_dir / path.name)
    with contextlib.suppress(OSError):
        wal_dir.rmdir()


def list_wals(wal_root: Path) -> dict[str, list[str]]:
    """The WAL names under ``wal_root``, per server directory."""
    out: dict[str, list[str]] = {}
    if wal_root.exists():
        for d in sorted(wal_root.iterdir()):
            out[d.name] = sorted(p.name for p in d.iterdir())
    return out


class WalRoller:
    """Rolls region servers' WALs in one of :data:`ROLL_ORDERS` and archives the rolled ones.

    :param lock: the cluster's lock; held by :meth:`roll`'s caller, taken when a delayed
        close completes.
    """

    def __init__(self, order: str, close_delay: float, old_wals_dir: Path, lock: threading.RLock) -> None:
        self.order = order
        self.close_delay = close_delay
        self.old_wals_dir = old_wals_dir
        self.lock = lock
        self._closed: list[Path] = []  # rolled in HBase's order, closed, not archived yet

    def roll(self, targets: list[RegionServer], store: Callable[[], Store]) -> list[str]:
        """Roll the WALs of ``targets`` (live servers); returns the archived WAL names.

        :param store: the cluster's store, flushed before a WAL is archived.
        """
        if self.order == "hbase":
            return self._roll_as_hbase(targets, store)
        rolled = []
        for rs in targets:
            old = rs.open_new_wal()
            if old:
                store().checkpoint()
            for path in old:
                archive_wal(path, self.old_wals_dir)
                rolled.append(path.name)
        return rolled

    def _roll_as_hbase(self, targets: list[RegionServer], store: Callable[[], Store]) -> list[str]:
        """Archive what earlier rolls closed (after a flush), then begin rolling ``targets``;
        their old WALs are closed ``close_delay`` seconds later. Returns the archived names."""
        archived = []
        if self._closed:
            store().checkpoint()
            for path in self._closed:
                if path.exists():
                    archive_wal(path, self.old_wals_dir)
                    archived.append(path.name)
            self._closed = []
        starting = [rs for rs in targets if not rs.rolling]
        for rs in starting:
            rs.begin_roll()
        if starting:
            timer = threading.Timer(self.close_delay, self._complete_rolls, [starting])
            timer.daemon = True
            timer.start()
        return archived

    def _complete_rolls(self, servers: list[RegionServer]) -> None:
        with self.lock:
            for rs in servers:
                if rs.alive:
                    self._closed.extend(rs.complete_roll())
