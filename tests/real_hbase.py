"""Helpers for the tests that run on real HBase 2.6 (the harness in ``harness/``): a session
pair of clusters A and B on the test session's ZooKeeper, and per-test tables and peers, so
the JVMs start once per run and the tests stay apart."""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import happybase
from replication_helpers import Cluster
from thriftpy2.rpc import make_client
from waiting import wait_until

from walship.peer import PeerConfig
from walship.replicate import WalStore
from walship.thrift.hbase2 import hbase2 as T
from walship.wal import CellType, WalReader
from walship.wal.model import WalEntry
from walship.zk import ReplicationPeers, ReplicationQueues, ZnodeLayout, ensure_cluster_id, zk_client
from walship.zk.records import ProgressStore
from walship_testing.harness import HBaseProcess

#: Source A: three region servers, HBase's log cleaner every second with a 2 s TTL, so a test
#: sees archived WALs deleted once no queue holds them.
A_CONF = {
    "hbase.master.logcleaner.ttl": "2000",
    "hbase.master.cleaner.interval": "1000",
    # an aborted region server's abort timeout task runs this long after the abort (HBase never
    # cancels its timer): the harness's task warns, where HBase's would halt the cluster's JVM
    "hbase.regionserver.abort.timeout": "3000",
    # the region server the master picks to claim a dead server's queue moves it at once (it
    # waits this long, and up to as long again; HBase's default: 30 s), while walship may still
    # be shipping it where it is
    "replication.sleep.before.failover": "0",
}
#: what the harness logs when an aborted region server's abort timeout task runs
ABORT_TIMEOUT_WARNING = (
    "walship-harness: an aborted region server has not stopped within hbase.regionserver.abort.timeout"
)
#: A's region servers: the tests that abort one start another in its place (``keep_servers``).
A_SERVERS = 3
#: Peer B: one region server is enough to receive.
B_CONF: dict[str, str] = {}

_counter = itertools.count(1)

BIG = bytes(range(256)) * (6 * 1024)  # 1.5 MiB
Cells = list[tuple[bytes, bytes, bytes, int, int, bytes]]

#: The backends a behaviour suite runs on (see the ``backend`` fixture).
BACKENDS = ("mini", "real")


def start_pair(base: Path, zk: str) -> tuple[HBaseProcess, HBaseProcess]:
    """Start A and B side by side (their JVMs start in parallel) on one ZooKeeper."""
    a = HBaseProcess("A", base / "A", zk=zk, znode_parent="/hbase-real-a", regionservers=A_SERVERS, conf=A_CONF)
    b = HBaseProcess("B", base / "B", zk=zk, znode_parent="/hbase-real-b", regionservers=1, conf=B_CONF)
    with ThreadPoolExecutor(max_workers=2) as pool:
        started = [pool.submit(hb.start) for hb in (a, b)]
    failed = [f.exception() for f in started if f.exception() is not None]
    if failed:
        for hb in (a, b):
            hb.kill()
        raise failed[0]
    return a, b


#: The queues of the YARN beside the HDFS cluster (``real_hdfs``).
YARN_QUEUES = ("default", "walship")


def start_hdfs(base: Path, zk: str) -> HBaseProcess:
    """See the ``real_hdfs`` fixture."""
    hb = HBaseProcess(
        "H", base / "H", zk=zk, znode_parent="/hbase-real-h", regionservers=1, wal_fs="hdfs",
        yarn_queues=YARN_QUEUES, heap="1g",
    )  # fmt: skip
    return hb.start()


def start_multiwal(base: Path, zk: str) -> HBaseProcess:
    """See the ``real_multiwal`` fixture."""
    hb = HBaseProcess(
        "M", base / "M", zk=zk, znode_parent="/hbase-real-m", regionservers=2,
        conf={"hbase.wal.provider": "multiwal", "hbase.wal.regiongrouping.numgroups": "2"},
    )  # fmt: skip
    hb.start()
    return hb


def keep_servers(hb: HBaseProcess, count: int = A_SERVERS) -> None:
    """Start region servers until ``count`` are live (after a test aborted one, so the tests
    after it find the cluster they were written for)."""
    for _ in range(count):
        if len(hb.servers()) >= count:
            return
        hb.call("start_rs")
    assert len(hb.servers()) >= count, f"{hb.name} has fewer than {count} live region servers: {hb.servers()}"


def unique(prefix: str) -> str:
    """A name no other test of this run uses (tables, peers: no '-' in peer ids)."""
    return f"{prefix}{next(_counter)}x{uuid.uuid4().hex[:6]}"


def cluster(hb: HBaseProcess, table: str) -> Cluster:
    return Cluster(hb, hb.zk_hosts, table.encode())


def create_table(hb: HBaseProcess, table: str, splits: list[bytes] | None = None, **families: dict[str, int]) -> None:
    """Create ``table`` with ``families`` (``r={"scope": 1, "versions": 5}``) through HBase's Admin."""
    families = families or {"r": {"scope": 1, "versions": 5}, "l": {"scope": 0, "versions": 5}}
    hb.call("create_table", table=table, families=families, splits=[s.hex() for s in splits or []])


def table_on_both(source: HBaseProcess, target: HBaseProcess, prefix: str) -> tuple[Cluster, Cluster]:
    """A new table (r scoped 1, l scoped 0) created on the source and the peer cluster: both
    clusters' views of it."""
    table = unique(prefix)
    for hb in (source, target):
        create_table(hb, table)
    return cluster(source, table), cluster(target, table)


def layout(c: Cluster) -> ZnodeLayout:
    return ZnodeLayout(c.parent)


def add_managed_peer(
    source: Cluster,
    target: Cluster,
    peer_id: str,
    protocol: str = "thrift1",
    tables: list[str] | None = None,
    **extra: str,
) -> None:
    """The production path on a running HBase: the peer is added through HBase's own Admin
    (STATE DISABLED, ``walship.managed=true`` and the sink in its configuration, table-cfs
    limited to ``tables``; ``extra`` more configuration), then adopted by walship, which creates
    its ENABLED switch."""
    hb = source.mc
    assert isinstance(hb, HBaseProcess)
    config = {"walship.managed": "true", **target.sink_config(protocol), **extra}
    hb.call(
        "add_peer",
        peer=peer_id,
        cluster_key=target.cluster_key,
        state="DISABLED",
        configuration=config,
        table_cfs={t: [] for t in tables or [source.table_name.decode()]},
    )
    with zk_client(source.zk_hosts) as client:
        ReplicationPeers(client, layout(source)).adopt(peer_id)


def add_managed_serial(source: Cluster, peer: PeerConfig) -> None:
    """A walship peer (a subscription among them) added as the production path on a running
    HBase does it: through HBase's Admin, DISABLED for HBase, serial as ``peer`` says (HBase's
    AddPeerProcedure then sets its regions' last pushed ids), then adopted by walship. A
    subscription's ``hbaseid`` is written first, as ``walship subscription add`` does."""
    hb = source.mc
    assert isinstance(hb, HBaseProcess)
    with zk_client(source.zk_hosts) as client:
        if peer.subscription:
            ensure_cluster_id(client, ZnodeLayout(layout(source).subscription(peer.peer_id)))
    hb.call(
        "add_peer",
        peer=peer.peer_id,
        cluster_key=peer.cluster_key,
        state="DISABLED",
        configuration=dict(peer.configuration),
        table_cfs={source.table_name.decode(): []},
        serial=peer.serial,
    )
    with zk_client(source.zk_hosts) as client:
        ReplicationPeers(client, layout(source)).adopt(peer.peer_id)


def remove_peer(source: Cluster, peer_id: str) -> None:
    """Remove the peer through HBase's Admin (the master removes its queues), then walship's
    own znodes of it (its switch, progress records), so a later test may use the id again."""
    hb = source.mc
    assert isinstance(hb, HBaseProcess)
    hb.call("remove_peer", peer=peer_id)
    with zk_client(source.zk_hosts) as client:
        path = layout(source).walship_peer(peer_id)
        if client.exists(path) is not None:
            client.delete(path, recursive=True)
        ProgressStore(client, layout(source)).remove_peer(peer_id)


def real_ab(real: tuple[HBaseProcess, HBaseProcess], protocol: str) -> Iterator[tuple[Cluster, Cluster]]:
    """The ``ab`` fixture on real HBase: a table of the test's own on A and B (r scoped 1 on
    both, l scoped 0), peer 1 from A to B added through HBase's Admin and adopted; the peer
    is removed afterwards."""
    a, b = table_on_both(*real, "t")
    add_managed_peer(a, b, "1", protocol)
    wait_queues_hold_current_wals(a, "1")
    try:
        yield a, b
    finally:
        remove_peer(a, "1")


@contextmanager
def managed_peer(
    source: Cluster,
    target: Cluster,
    peer_id: str,
    protocol: str = "thrift1",
    tables: list[str] | None = None,
    **extra: str,
) -> Iterator[str]:
    add_managed_peer(source, target, peer_id, protocol, tables, **extra)
    try:
        yield peer_id
    finally:
        remove_peer(source, peer_id)


def queued_wals(source: Cluster, peer_id: str) -> dict[str, list[str]]:
    """Queue id -> its WALs, for every queue of the peer (normal and recovered)."""
    with zk_client(source.zk_hosts) as client:
        return {
            f"{q.server}/{q.queue_id}": [w.name for w in q.wals]
            for q in ReplicationQueues(client, layout(source)).list_queues(peer_id)
        }


def wait_queues_hold_current_wals(source: Cluster, peer_id: str) -> None:
    """Wait until every live region server has a queue for the peer (HBase adds one per server
    when the peer is added)."""
    hb = source.mc
    assert isinstance(hb, HBaseProcess)

    def ready() -> bool:
        servers = set(hb.servers())
        queued = {key.split("/", 1)[0] for key, wals in queued_wals(source, peer_id).items() if wals}
        return servers <= queued

    wait_until(ready, what=f"peer {peer_id}'s queues on every live server of {hb.name}")


def all_wal_entries(source: Cluster, decoder: str | None = None) -> list[WalEntry]:
    """Every entry of every WAL under the cluster's WALs/ and oldWALs/ (open WALs included)."""
    store = WalStore(source.mc.wal_root)
    out: list[WalEntry] = []
    for path, archived in store.wal_files():
        name = path.rsplit("/", 1)[-1]
        if name.startswith(".") and name.endswith(".crc"):
            continue  # Hadoop's checksum files beside every file on a local file system
        with store.open(store.location(path, archived)) as f:  # on HDFS, what a reader sees
            out.extend(WalReader(f, path, decoder=decoder).entries())
    return out


def thrift2_client(hb: HBaseProcess) -> Any:
    host, port = hb.thrift2
    return make_client(T.THBaseService, host, port, timeout=60000)


def write_workload(hb: HBaseProcess, table: str, version_deletes: bool = True) -> Cells:
    """Puts and deletes of every kind through HBase's Thrift1 and Thrift2 servers, every
    timestamp explicit; returns the cells HBase must have logged, in the order written.

    :param version_deletes: also the deletes of one version (``Delete``,
        ``DeleteFamilyVersion``), which Thrift1 cannot apply exactly on a peer.
    """
    expected: Cells = []
    conn = happybase.Connection(*hb.thrift)
    t = conn.table(table)
    binary_row = b"\x00\xff\x10bin\x80"
    for ts in (100, 200, 300):  # several versions, two families (scope 1 and 0)
        t.put(binary_row, {b"r:a": b"a%d" % ts, b"l:x": b"local%d" % ts}, timestamp=ts)
        expected += [
            (binary_row, b"r", b"a", ts, CellType.Put, b"a%d" % ts),
            (binary_row, b"l", b"x", ts, CellType.Put, b"local%d" % ts),
        ]
    t.put(b"empty", {b"r:": b"", b"r:e": b""}, timestamp=400)  # empty qualifier and values
    expected += [(b"empty", b"r", b"", 400, CellType.Put, b""), (b"empty", b"r", b"e", 400, CellType.Put, b"")]
    t.put(b"big", {b"r:v": BIG}, timestamp=500)  # > 1 MiB value
    expected.append((b"big", b"r", b"v", 500, CellType.Put, BIG))
    t.delete(binary_row, columns=[b"r:a"], timestamp=200)  # DeleteColumn (all versions <= 200)
    expected.append((binary_row, b"r", b"a", 200, CellType.DeleteColumn, b""))
    t.delete(b"big", timestamp=600)  # the whole row: a DeleteFamily per family
    expected += [
        (b"big", b"l", b"", 600, CellType.DeleteFamily, b""),
        (b"big", b"r", b"", 600, CellType.DeleteFamily, b""),
    ]
    conn.close()

    c2 = thrift2_client(hb)
    name = table.encode()
    c2.put(name, T.TPut(row=b"t2", columnValues=[T.TColumnValue(b"r", b"q", b"v1", 700)]))
    c2.put(name, T.TPut(row=b"t2", columnValues=[T.TColumnValue(b"r", b"q", b"v2", 800)]))
    expected += [(b"t2", b"r", b"q", 700, CellType.Put, b"v1"), (b"t2", b"r", b"q", 800, CellType.Put, b"v2")]
    if version_deletes:
        c2.deleteSingle(
            name, T.TDelete(row=b"t2", columns=[T.TColumn(b"r", b"q", 700)], deleteType=T.TDeleteType.DELETE_COLUMN)
        )
        expected.append((b"t2", b"r", b"q", 700, CellType.Delete, b""))
        family_version = T.TDeleteType.DELETE_FAMILY_VERSION
        c2.deleteSingle(name, T.TDelete(row=b"t2", columns=[T.TColumn(b"r", None, 800)], deleteType=family_version))
        expected.append((b"t2", b"r", b"", 800, CellType.DeleteFamilyVersion, b""))
    c2.deleteSingle(
        name, T.TDelete(row=b"t2", columns=[T.TColumn(b"l", None, 900)], deleteType=T.TDeleteType.DELETE_FAMILY)
    )
    expected.append((b"t2", b"l", b"", 900, CellType.DeleteFamily, b""))
    c2.close()
    return expected


def hbase_peers(c: Cluster) -> dict[str, dict[str, Any]]:
    """The cluster's peers as HBase's Admin lists them, by id."""
    hb = c.mc
    assert isinstance(hb, HBaseProcess)
    return {p["peer"]: p for p in hb.call("list_peers")}


def switchover_pair(real: tuple[HBaseProcess, HBaseProcess]) -> Iterator[tuple[Cluster, Cluster, str]]:
    """A table of the test's own on A and B (one family, r, scoped 1) and a walship peer from A
    to B over Thrift2, its id free on B too, for the peer back; every peer of that id removed
    from both afterwards."""
    table = unique("sw")
    for hb in real:
        create_table(hb, table, r={"scope": 1, "versions": 5})
    a, b = cluster(real[0], table), cluster(real[1], table)
    peer = unique("sw")
    add_managed_peer(a, b, peer, "thrift2")
    wait_queues_hold_current_wals(a, peer)
    try:
        yield a, b, peer
    finally:
        for c in (a, b):
            if peer in hbase_peers(c):
                remove_peer(c, peer)
