"""Region moves, splits and merges on either backend (the minicluster's admin endpoint, or the
real HBase harness), and the WAL entries of a cluster by the server that wrote them: what the
tests of barriers and of serial peers share."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from replication_helpers import Cluster
from thriftpy2.rpc import make_client
from waiting import wait_until

from walship.replicate import WalStore
from walship.thrift.hbase2 import hbase2 as T
from walship.wal import WalReader, parse_wal_name
from walship.wal.model import WalEntry
from walship.wal.names import is_checksum_file
from walship_testing.harness import HBaseProcess
from walship_testing.minicluster import AdminClient


@dataclass
class Source:
    """The source cluster of the scenario: a minicluster (its admin endpoint) or a real HBase
    (its harness), with a table whose family r has replication scope 1 (and l scope 0)."""

    c: Cluster
    real: bool

    @property
    def table(self) -> str:
        return self.c.table_name.decode()

    def regions(self) -> list[dict[str, Any]]:
        if self.real:
            return list(self._hb().call("regions", table=self.table))
        return AdminClient(self.c.mc.admin).regions(self.table)

    def servers(self) -> list[str]:
        if self.real:
            return self._hb().servers()
        return [rs["name"] for rs in AdminClient(self.c.mc.admin).info()["regionservers"] if rs["alive"]]

    def _hb(self) -> HBaseProcess:
        assert isinstance(self.c.mc, HBaseProcess)
        return self.c.mc

    def move(self, region: str, server: str) -> None:
        if self.real:
            self._hb().call("move_region", region=region, server=server)
        else:
            AdminClient(self.c.mc.admin).move(self.table, region, server)
        wait_until(lambda: {r["region"]: r["server"] for r in self.regions()}.get(region) == server, what="the move")

    def split(self, region: str, row: bytes) -> None:
        before = len(self.regions())
        if self.real:
            self._hb().call("split_region", region=region, split_key=row.hex())
        else:
            AdminClient(self.c.mc.admin).split_region(self.table, row, region)

        def done() -> bool:
            now = self.regions()
            return len(now) == before + 1 and region not in {r["region"] for r in now}

        wait_until(done, what="two daughters online")

    def merge(self, regions: list[str]) -> None:
        before = len(self.regions())
        if self.real:
            # HBase merges no region still holding references to its split parent: compact them away
            self._hb().call("major_compact", table=self.table)
            self._hb().call("merge_regions", regions=regions)
        else:
            AdminClient(self.c.mc.admin).merge(self.table, regions)

        def done() -> bool:
            now = {r["region"] for r in self.regions()}
            return not now & set(regions) and len(now) == before - len(regions) + 1

        wait_until(done, what="the merged region online")

    def abort(self, server: str) -> None:
        """Crash a region server (its regions open elsewhere; on real HBase the master's
        ServerCrashProcedure claims its queues for nobody: walship's planner does)."""
        if self.real:
            self._hb().call("abort_rs", server=server)
        else:
            AdminClient(self.c.mc.admin).abort_rs(server)
        wait_until(
            lambda: server not in self.servers() and all(r["server"] != server for r in self.regions()),
            what=f"{server}'s regions open elsewhere",
        )

    def write(self, rows: range, version: int) -> None:
        conn = self.c.conn()
        table = conn.table(self.c.table_name)
        for i in rows:
            table.put(b"row%03d" % i, {b"r:q": b"v%d-%d" % (i, version), b"l:x": b"local"})
        conn.close()


def thrift2_at(address: tuple[str, int]) -> Any:
    return make_client(T.THBaseService, *address, timeout=60000)


def create_scoped_table(thrift2: tuple[str, int], table: str, splits: list[bytes] | None = None) -> None:
    """Over Thrift2, so that r has scope 1 from the start (Thrift1 knows no scopes): the first
    open of its region already records a barrier, on either backend."""
    client = thrift2_at(thrift2)
    client.createTable(
        T.TTableDescriptor(
            tableName=T.TTableName(ns=b"default", qualifier=table.encode()),
            columns=[
                T.TColumnFamilyDescriptor(name=b"r", scope=1, maxVersions=5),
                T.TColumnFamilyDescriptor(name=b"l", scope=0, maxVersions=5),
            ],
        ),
        splits or [],
    )
    client.close()


#: HBase's master local region (``MasterRegion``) archives its WALs into oldWALs with this suffix.
MASTER_LOCAL_WAL_SUFFIX = "$masterlocalwal$"


def wals_by_server(wal_root: str) -> dict[str, list[WalEntry]]:
    """Every entry of the cluster's WALs (open and archived), by the server that wrote them,
    in the order it wrote them (its WALs by start time, each from its first entry). The HBase
    master's own local-region WALs, archived beside them (``...$masterlocalwal$``), are no
    region server's and are passed over."""
    store = WalStore(wal_root)
    files = []
    for path, archived in store.wal_files():
        base = path.rsplit("/", 1)[-1]
        if is_checksum_file(base) or base.endswith(MASTER_LOCAL_WAL_SUFFIX):
            continue
        wal = parse_wal_name(base)
        if not wal.is_meta:
            files.append((str(wal.server), wal.timestamp, path, archived))
    out: dict[str, list[WalEntry]] = {}
    for server, _, path, archived in sorted(files):
        with store.open(store.location(path, archived)) as f:
            out.setdefault(server, []).extend(WalReader(f, path).entries())
    return out
