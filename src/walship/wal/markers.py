"""METAFAMILY marker entries that mean something to a shipper: bulk loads.

When HFiles are bulk-loaded into a region, HBase moves them into its stores and writes one WAL
entry with a single cell ``METAFAMILY:HBASE::BULK_LOAD`` whose value is a
``BulkLoadDescriptor`` (table, encoded region, each store's family and HFile names, the
sequence id, the cluster ids, whether to replicate). The loaded cells never pass through the
WAL. Unless ``hbase.replication.bulkload.enabled`` is set, HBase clears the entry's scopes, so
which of the families are replicated cannot be read from the entry itself.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from google.protobuf.message import DecodeError

from walship.errors import CorruptWalError
from walship.protos import WAL_pb2
from walship.wal.model import METAFAMILY, WalEntry

__all__ = ["BULK_LOAD", "BulkLoad", "bulk_load_of"]

#: The qualifier of a bulk load marker cell (``WALEdit.BULK_LOAD``).
BULK_LOAD = b"HBASE::BULK_LOAD"


@dataclass(frozen=True)
class BulkLoad:
    """One bulk load as its WAL marker tells it.

    :param files: family -> the HFiles' paths (``<store home dir>/<file>``, relative to the
        region's directory).
    """

    table: bytes
    region: str
    sequence_id: int
    files: dict[bytes, tuple[str, ...]]
    cluster_ids: tuple[uuid.UUID, ...]
    replicate: bool

    @property
    def families(self) -> list[bytes]:
        return sorted(self.files)

    def describe(self) -> str:
        """``table <t> region <r> families [...]: <hfile>, ...`` for a log line."""
        fams = ", ".join(f.decode(errors="replace") for f in self.families)
        paths = ", ".join(p for f in self.families for p in self.files[f])
        return (
            f"table {self.table.decode(errors='replace')} region {self.region} "
            f"(sequence id {self.sequence_id}) families [{fams}]: {paths}"
        )


def bulk_load_of(entry: WalEntry, path: str) -> BulkLoad | None:
    """The bulk load an entry records, or ``None`` when it is no bulk load marker.

    :raises CorruptWalError: the marker's descriptor does not parse (names ``path`` and the
        entry's offset).
    """
    cells = entry.cells
    if not cells or cells[0].family != METAFAMILY or cells[0].qualifier != BULK_LOAD:
        return None
    try:
        desc = WAL_pb2.BulkLoadDescriptor.FromString(cells[0].value)
        ids = tuple(uuid.UUID(c) for c in desc.cluster_ids)
    except (DecodeError, ValueError) as exc:
        raise CorruptWalError(path, entry.offset, f"bad BulkLoadDescriptor in a bulk load marker: {exc}") from exc
    ns = desc.table_name.namespace
    table = desc.table_name.qualifier if ns in (b"", b"default") else ns + b":" + desc.table_name.qualifier
    files: dict[bytes, tuple[str, ...]] = {}
    for store in desc.stores:
        home = store.store_home_dir.rstrip("/")
        files[store.family_name] = files.get(store.family_name, ()) + tuple(f"{home}/{f}" for f in store.store_file)
    return BulkLoad(
        table, desc.encoded_region_name.decode(errors="replace"), desc.bulkload_seq_num, files, ids, desc.replicate
    )
