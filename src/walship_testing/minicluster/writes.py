"""The minicluster's write path, short of the WAL and the store: what a client's mutations
become before :meth:`MiniCluster.mutate_cells <walship_testing.minicluster.cluster.MiniCluster.mutate_cells>`
appends them.

Thrift1's :class:`RowMutation` s become :class:`RowEdit` s (:func:`row_edits`); every cell of
an edit is checked and gets its timestamp, :data:`LATEST_TIMESTAMP` resolved as HBase's
``HRegion`` does (:func:`resolve_cells`); the edits one call makes in one region become one WAL
entry with the region's next sequence id, as HBase's ``batchMutate`` logs a mini-batch
(:func:`wal_entries`). ``atomicIncrement``'s arithmetic on an 8-byte
long is :func:`incremented`.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field

from walship.clusterids import CLUSTER_ID_ATTRIBUTE, decode_cluster_ids
from walship.errors import BadRequestError, NoSuchFamilyError
from walship.wal import Cell, CellType, WalKey
from walship_testing.minicluster.store import Family, Store

__all__ = [
    "LATEST_TIMESTAMP",
    "MINIBATCH_SIZE",
    "RowEdit",
    "RowMutation",
    "encode_long",
    "incremented",
    "resolve_cells",
    "row_edits",
    "wal_entries",
]

#: HBase's ``HConstants.LATEST_TIMESTAMP``: "now", resolved by the region server.
LATEST_TIMESTAMP = 2**63 - 1
#: HBase's ``hbase.regionserver.minibatch.size``: the most mutations one WAL entry of a batch holds.
MINIBATCH_SIZE = 20000


@dataclass
class RowMutation:
    """What one row of a Thrift ``BatchMutation`` asks for: deletes, then puts."""

    row: bytes
    puts: list[tuple[bytes, bytes, bytes]] = field(default_factory=list)  # family, qualifier, value
    deletes: list[tuple[bytes, bytes | None]] = field(default_factory=list)  # family, qualifier or None


@dataclass
class RowEdit:
    """One WAL entry of one row: the cells of one mutation, or of several applied atomically
    (Thrift2's ``mutateRow``), each mutation a list of typed cells.

    A cell timestamp of :data:`LATEST_TIMESTAMP` is resolved as HBase's ``HRegion`` does: a
    ``Delete`` (one version) takes the timestamp of the newest visible version of its column
    (the n-th newest for the n-th such delete of the column in one mutation), or now when
    there is none; every other cell takes now.
    """

    row: bytes
    mutations: list[list[Cell]]
    cluster_ids: tuple[uuid.UUID, ...] = ()


def row_edits(
    mutations: Sequence[RowMutation], *, timestamp: int | None = None, attributes: dict[bytes, bytes] | None = None
) -> tuple[list[RowEdit], list[RowEdit]]:
    """Thrift1 row mutations as HBase 2.6's Thrift1 server builds them: per row a ``Delete``
    and a ``Put`` (those with cells), one timestamp for every cell (:data:`LATEST_TIMESTAMP`
    by default) and the cluster ids of the ``_cs.id`` attribute on each; returned as the
    deletes and the puts, each list one batch of the server's."""
    cluster_ids: tuple[uuid.UUID, ...] = ()
    if attributes and CLUSTER_ID_ATTRIBUTE in attributes:
        cluster_ids = decode_cluster_ids(attributes[CLUSTER_ID_ATTRIBUTE])
    ts = LATEST_TIMESTAMP if timestamp is None else timestamp
    deletes, puts = [], []
    for m in mutations:
        if m.deletes:
            cells = [
                Cell(m.row, fam, b"", ts, CellType.DeleteFamily)
                if qual is None
                else Cell(m.row, fam, qual, ts, CellType.DeleteColumn)
                for fam, qual in m.deletes
            ]
            deletes.append(RowEdit(m.row, [cells], cluster_ids))
        if m.puts:
            cells = [Cell(m.row, fam, qual, ts, CellType.Put, value) for fam, qual, value in m.puts]
            puts.append(RowEdit(m.row, [cells], cluster_ids))
    return deletes, puts


def resolve_cells(
    store: Store, table: bytes, families: dict[bytes, Family], row: bytes, mutation: Sequence[Cell], now: int
) -> list[Cell]:
    """Check one mutation's cells and give each a timestamp (see :class:`RowEdit`).

    :raises NoSuchFamilyError: a cell of a family the table does not have.
    :raises BadRequestError: a cell of another row, a negative timestamp.
    """
    out = []
    deletes: dict[tuple[bytes, bytes], int] = {}  # single-version deletes at LATEST per column
    for c in mutation:
        if c.row != row:
            raise BadRequestError(f"a cell of row {c.row!r} in the mutation of row {row!r}")
        if c.family not in families:
            raise NoSuchFamilyError(f"table {table!r} has no column family {c.family!r} (row {row!r})")
        ts = c.timestamp
        if ts == LATEST_TIMESTAMP and c.type == CellType.Delete:
            n = deletes[(c.family, c.qualifier)] = deletes.get((c.family, c.qualifier), 0) + 1
            versions = store.read_row(
                table, row, {c.family: {c.qualifier}}, {c.family: families[c.family].max_versions}, versions=n
            )
            ts = versions[n - 1].timestamp if len(versions) >= n else now
        elif ts == LATEST_TIMESTAMP:
            ts = now
        elif ts < 0:
            raise BadRequestError(f"timestamp must be >= 0, got {ts} (row {row!r}, family {c.family!r})")
        out.append(c if ts == c.timestamp else c._replace(timestamp=ts))
    return out


def wal_entries(
    store: Store,
    table: bytes,
    families: dict[bytes, Family],
    encoded_region: str,
    last_seq: int,
    edits: Sequence[RowEdit],
    now: int,
) -> list[tuple[WalKey, list[Cell]]]:
    """The WAL entries of one call's edits in one region, as HBase's ``batchMutate`` logs
    them: one entry for each :data:`MINIBATCH_SIZE` edits, holding their cells in order, with
    the cluster ids of the batch's first edit (``getMutation(0).getClusterIds()``), the next
    sequence id after ``last_seq``, the write time ``now`` and the scopes of the table's
    replicated families. Every edit is checked here, before anything is written.

    :raises NoSuchFamilyError: a cell of a family the table does not have.
    :raises BadRequestError: an empty row key, a cell of another row, a negative timestamp.
    """
    scopes = {f.name: f.scope for f in families.values() if f.scope}
    entries: list[tuple[WalKey, list[Cell]]] = []
    seq = last_seq
    for start in range(0, len(edits), MINIBATCH_SIZE):
        cells = []
        for edit in edits[start : start + MINIBATCH_SIZE]:
            resolved = [c for m in edit.mutations for c in resolve_cells(store, table, families, edit.row, m, now)]
            if resolved and not edit.row:
                raise BadRequestError("row key must not be empty")
            cells += resolved
        if cells:
            seq += 1
            key = WalKey(encoded_region.encode(), table, seq, now, edits[0].cluster_ids, scopes)
            entries.append((key, cells))
    return entries


def incremented(current: bytes | None, amount: int, *, row: bytes, family: bytes, qualifier: bytes) -> int:
    """``atomicIncrement``'s new value: ``current`` (a big-endian 8-byte long, or ``None`` for
    0) plus ``amount``.

    :raises BadRequestError: ``current`` is not 8 bytes long, or the sum overflows a long.
    """
    value = 0
    if current is not None:
        if len(current) != 8:
            raise BadRequestError(f"column {family!r}:{qualifier!r} of row {row!r} is not an 8-byte long")
        (value,) = struct.unpack(">q", current)
    total = value + amount
    if not -(2**63) <= total < 2**63:
        raise BadRequestError(f"increment overflows a long: {value} + {amount}")
    return total


def encode_long(value: int) -> bytes:
    """``Bytes.toBytes(long)``: big-endian, 8 bytes."""
    return struct.pack(">q", value)
