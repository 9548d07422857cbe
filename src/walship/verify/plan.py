"""The verify job and its plan: which tables and families the peer replicates, each split
(one per region of the source table, cut to the row prefixes), checked before anything is
scanned.

A family is compared when its REPLICATION_SCOPE on the source is 1 *and* the peer selects it
(table-cfs, namespaces, or replicate-all minus the exclude lists: the shipper's own rule,
:func:`walship.replicate.batcher.filters.table_rule`); local families are never compared.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from typing import Any, ClassVar

from walship.errors import InvalidPeerConfigError, VerifyError
from walship.jobdesc import JobDescription
from walship.peer import PeerConfig, parse_host_ports, validate_peer_id
from walship.replicate.batcher.filters import table_rule
from walship.scope.admin import family_settings
from walship.scope.model import FamilySettings, family_text
from walship.sinks.base import SINK_PROTOCOL_KEY, SINK_THRIFT2_KEY, SinkContext, thrift2_servers
from walship.sinks.regionservers import STREAMS_KEY, RegionServerSink
from walship.thrift.conn import ThriftOptions
from walship.thrift.hbase2 import table_name_text
from walship.verify.inflight import normalize_table
from walship.verify.model import LATEST, Split, to_bytes_binary
from walship.verify.scan import Side
from walship.zk.client import validate_hosts

__all__ = ["SOURCE_FLAG", "VerifyJob", "compared_families", "plan_splits", "prefix_range"]

log = logging.getLogger(__name__)

SOURCE_FLAG = "--source-thrift2"
_SCOPE_GLOBAL = 1
#: the sink protocol that writes into the peer's region servers
REGION_SERVERS = "hbase"


@dataclass(frozen=True)
class VerifyJob(JobDescription):
    """Everything a split needs, passed as JSON to Spark executors: where the source's
    state, WALs and Thrift2 servers are, the peer and its Thrift2 servers, what to compare.
    ``wal_root`` is read only to tell rows in flight (a verify needs it, a copy does not).

    :param tables: the tables asked for (empty: every table the peer replicates).
    :param families: the families asked for (empty: every replicated family).
    :param row_prefixes: as ``Bytes.toStringBinary`` prints them.
    :param versions: versions compared per column (``None``: each family's VERSIONS).
    """

    KIND: ClassVar[str] = "verify job"
    TUPLES: ClassVar[tuple[str, ...]] = ("tables", "families", "row_prefixes")
    MISSING: ClassVar[dict[str, Any]] = {"wal_root": ""}  # a copy's job needs none

    zk: str
    znode_parent: str
    wal_root: str
    source_thrift2: str
    peer_id: str
    peer_thrift2: str = ""
    peer_options: dict[str, Any] | None = None
    #: a copy into a peer of sink ``hbase``: its cluster key (the copy writes into its region
    #: servers, as the sink does), its ``walship.sink.hbase.streams``, and the source's cluster
    #: id, which every copied mutation carries (a peer replicating back never returns it)
    peer_cluster_key: str = ""
    peer_streams: int = 1
    source_cluster_id: str = ""
    #: a copy reads the source's rows from its region servers (it registers hbase:meta's in
    #: its ZooKeeper), not over Thrift2
    source_region_servers: bool = False
    zk_auth: str | None = None
    tables: tuple[str, ...] = ()
    families: tuple[str, ...] = ()
    start_ms: int = 0
    end_ms: int = LATEST
    row_prefixes: tuple[str, ...] = ()
    versions: int | None = None
    recompare_sleep: float = 2.0
    repair: bool = False

    def __post_init__(self) -> None:
        validate_hosts(self.zk)
        validate_peer_id(self.peer_id)
        if self.start_ms < 0:
            raise VerifyError(f"--start-time is before 1970: {self.start_ms} ms")
        if self.start_ms >= self.end_ms:
            raise VerifyError(
                f"--start-time ({self.start_ms} ms) must be before --end-time ({self.end_ms} ms): "
                "the time range [start, end) is empty or reversed"
            )
        if self.versions is not None and self.versions < 1:
            raise VerifyError(f"--versions must be >= 1, got {self.versions}")
        if self.recompare_sleep < 0:
            raise VerifyError(f"--recompare-sleep must be >= 0 seconds, got {self.recompare_sleep}")
        for fam in self.families:
            if not fam:
                raise VerifyError("--families: an empty family name")

    def source_side(self) -> Side:
        if not self.source_thrift2 or not self.source_thrift2.strip():
            raise VerifyError(
                f"no Thrift2 server of the source cluster: give {SOURCE_FLAG} HOST:PORT (before the subcommand) "
                "or set WALSHIP_SOURCE_THRIFT2"
            )
        try:
            servers = parse_host_ports(self.source_thrift2.strip(), SOURCE_FLAG)
        except InvalidPeerConfigError as exc:
            raise VerifyError(str(exc)) from None
        return Side(servers, label="the source cluster", hint=SOURCE_FLAG, options=ThriftOptions.for_source())

    def peer_side(self) -> Side:
        servers = parse_host_ports(self.peer_thrift2, f"{SINK_THRIFT2_KEY} of peer {self.peer_id}")
        options = ThriftOptions(**self.peer_options) if self.peer_options else ThriftOptions()
        return Side(servers, label=f"peer {self.peer_id}", hint=f"its {SINK_THRIFT2_KEY}", options=options)

    def with_peer(self, peer: PeerConfig, *, copy_source_id: uuid.UUID | None = None) -> VerifyJob:
        """The job with the peer's Thrift2 servers and options; for a copy (``copy_source_id``:
        the source's cluster id) into a peer of sink ``hbase``, its cluster key instead.

        :raises VerifyError: the peer has no ``walship.sink.thrift2`` (and, for a copy, is not
            of sink ``hbase``), or a bad ``walship.sink.hbase.streams``.
        """
        data = asdict(self)
        if copy_source_id is not None and peer.configuration.get(SINK_PROTOCOL_KEY, "").strip() == REGION_SERVERS:
            try:
                data["peer_streams"] = RegionServerSink.streams_of(peer)
            except InvalidPeerConfigError as exc:
                raise VerifyError(str(exc)) from None
            data["peer_cluster_key"] = peer.cluster_key
            data["source_cluster_id"] = str(copy_source_id)
            if thrift2_servers(peer):
                data["peer_thrift2"] = peer.configuration[SINK_THRIFT2_KEY]
                data["peer_options"] = asdict(ThriftOptions.of(peer))
            return VerifyJob(**data)
        if not thrift2_servers(peer):
            raise VerifyError(
                f"peer {peer.peer_id} has no Thrift2 servers: verify, and a copy into a peer not of sink "
                f"{REGION_SERVERS}, reach the peer over Thrift2 and need "
                f"{SINK_THRIFT2_KEY}=HOST:PORT[,...] in its configuration (walship peer set {peer.peer_id} "
                f"--config {SINK_THRIFT2_KEY}=HOST:PORT)"
            )
        data["peer_thrift2"] = peer.configuration[SINK_THRIFT2_KEY]
        data["peer_options"] = asdict(ThriftOptions.of(peer))
        return VerifyJob(**data)

    def peer_region_servers(self) -> RegionServerSink:
        """The peer's region servers, as sink ``hbase`` writes into them (a copy's job only)."""
        peer = PeerConfig(self.peer_id, self.peer_cluster_key, configuration={STREAMS_KEY: str(self.peer_streams)})
        return RegionServerSink(peer, SinkContext(wal_root=""))

    def prefixes(self) -> list[bytes]:
        return [to_bytes_binary(p) for p in self.row_prefixes]


def compared_families(peer: PeerConfig, table: str, families: dict[bytes, FamilySettings]) -> list[bytes]:
    """The families of ``table`` the peer replicates: scope 1 and selected by the peer."""
    rule = table_rule(peer, table.encode())
    return sorted(f for f, s in families.items() if s.scope == _SCOPE_GLOBAL and rule.selects(f))


def prefix_range(prefix: bytes) -> tuple[bytes, bytes]:
    """The row range ``[prefix, stop)`` of the rows starting with ``prefix``."""
    stop = bytearray(prefix)
    while stop and stop[-1] == 0xFF:
        stop.pop()
    if stop:
        stop[-1] += 1
    return prefix, bytes(stop)


def _intersect(a: tuple[bytes, bytes], b: tuple[bytes, bytes]) -> tuple[bytes, bytes] | None:
    start = max(a[0], b[0])
    stops = [s for s in (a[1], b[1]) if s]
    stop = min(stops) if stops else b""
    if stop and start >= stop:
        return None
    return start, stop


def _merged(ranges: Iterable[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
    """Ranges sorted, overlapping ones joined (a prefix inside another scans once)."""
    out: list[tuple[bytes, bytes]] = []
    for start, stop in sorted(ranges):
        if out and (not out[-1][1] or start <= out[-1][1]):
            last = out[-1]
            out[-1] = (last[0], b"" if not last[1] or not stop else max(last[1], stop))
        else:
            out.append((start, stop))
    return out


def _descriptors(source: Side) -> dict[str, dict[bytes, FamilySettings]]:
    descs = source.call("list the table descriptors", lambda c: c.getTableDescriptorsByPattern(".*", False))
    out: dict[str, dict[bytes, FamilySettings]] = {}
    for desc in descs or []:
        name = table_name_text(desc.tableName)
        if not name.startswith("hbase:"):
            out[name] = {bytes(c.name): family_settings(c) for c in desc.columns or []}
    return out


def _table_families(
    job: VerifyJob, peer: PeerConfig, descs: dict[str, dict[bytes, FamilySettings]]
) -> dict[str, list[tuple[bytes, int]]]:
    wanted_fams = [f.encode() for f in job.families]
    chosen: dict[str, list[bytes]] = {}
    if job.tables:
        for name in job.tables:
            table = normalize_table(name)
            if table not in descs:
                raise VerifyError(f"--table {name}: no such table on the source cluster")
            fams = compared_families(peer, table, descs[table])
            if not fams:
                raise VerifyError(
                    f"--table {name}: peer {peer.peer_id} replicates none of its families (REPLICATION_SCOPE 1 "
                    "and selected by the peer's table-cfs/namespaces)"
                )
            chosen[table] = fams
    else:
        for table, families in descs.items():
            fams = compared_families(peer, table, families)
            if fams:
                chosen[table] = fams
        if not chosen:
            raise VerifyError(f"peer {peer.peer_id} replicates no table of the source cluster: nothing to verify")
    if wanted_fams:
        having = {t: [f for f in wanted_fams if f in descs[t]] for t in chosen}
        for fam in wanted_fams:
            if not any(fam in descs[t] for t in chosen):
                raise VerifyError(f"--families: unknown family {family_text(fam)} (in table(s) {', '.join(chosen)})")
            for table in chosen:
                if fam in descs[table] and fam not in chosen[table]:
                    scope = descs[table][fam].scope
                    raise VerifyError(
                        f"--families: family {family_text(fam)} of table {table} is not replicated to peer "
                        f"{peer.peer_id} (REPLICATION_SCOPE {scope}"
                        + (", not selected by the peer)" if scope == _SCOPE_GLOBAL else ")")
                    )
        chosen = {t: [f for f in chosen[t] if f in having[t]] for t in chosen if having[t]}
    return {
        t: [(f, job.versions if job.versions is not None else descs[t][f].max_versions) for f in fams]
        for t, fams in chosen.items()
    }


def plan_splits(
    job: VerifyJob, peer: PeerConfig, source: Side, has_table: Callable[[str], bool], where: str
) -> list[Split]:
    """The splits of every compared table, in table and key order; ``has_table`` says whether
    the peer has a table (``where`` names the peer's servers).

    :raises VerifyError: an unknown table or family, a family not replicated, a table the
        peer lacks.
    """
    descs = _descriptors(source)
    tables = _table_families(job, peer, descs)
    prefixes = _merged(prefix_range(p) for p in job.prefixes())
    splits: list[Split] = []
    for table, families in tables.items():
        if not has_table(table):
            raise VerifyError(f"table {table} does not exist on peer {peer.peer_id} ({where})")
        for i, region in enumerate(source.region_ranges(table)):
            if prefixes:
                ranges = [r for r in (_intersect(region, p) for p in prefixes) if r is not None]
                if not ranges:
                    continue
            else:
                ranges = [region]
            splits.append(Split(table, i, tuple(ranges), tuple(families)))
    log.info("peer %s: %d split(s) over %d table(s)", peer.peer_id, len(splits), len(tables))
    return splits
