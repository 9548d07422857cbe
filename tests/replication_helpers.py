"""Helpers for end-to-end replication tests: clusters with a table, peers, shipping, comparing."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import happybase
from waiting import wait_until

from walship.peer import PeerConfig
from walship.protos import Replication_pb2
from walship.replicate import PeerSummary, Shipper, WalStore
from walship.replicate.summary import TailSummary
from walship.replicate.tailer import Tailer
from walship.zk import ReplicationPeers, ReplicationQueues, ZnodeLayout, zk_client
from walship_testing.harness import HBaseProcess
from walship_testing.minicluster import AdminClient
from walship_testing.minicluster.process import MiniClusterProcess

TABLE = b"t"
#: The sinks of one behaviour suite: each test of it runs once per sink.
SINK_PROTOCOLS = ("thrift1", "thrift2")


@dataclass
class Cluster:
    """A source or peer cluster of a test: a minicluster, or a real HBase of the harness
    (:class:`walship_testing.harness.HBaseProcess`, which has the same shape)."""

    mc: MiniClusterProcess | HBaseProcess
    zk_hosts: str  # with the test's chroot
    table_name: bytes = TABLE

    @property
    def parent(self) -> str:
        return self.mc.znode_parent

    @property
    def cluster_key(self) -> str:
        hostport, _, chroot = self.zk_hosts.partition("/")
        return f"{hostport}:{'/' + chroot if chroot else ''}{self.parent}"

    def conn(self) -> happybase.Connection:
        return happybase.Connection(*self.mc.thrift)

    def table(self) -> happybase.Table:
        return self.conn().table(self.table_name)

    def thrift_address(self) -> str:
        host, port = self.mc.thrift
        return f"{host}:{port}"

    def thrift2_address(self) -> str:
        host, port = self.mc.thrift2
        return f"{host}:{port}"

    def cli_flags(self) -> list[str]:
        """The global flags of ``walship`` for this cluster as the source (its Thrift2 server
        for what serial peers read from ``hbase:meta``)."""
        return [
            "--zk", self.zk_hosts, "--znode-parent", self.parent, "--wal-root", str(self.mc.wal_root),
            "--source-thrift2", self.thrift2_address(),
        ]  # fmt: skip

    def sink_config(self, protocol: str = "thrift1") -> dict[str, str]:
        """A peer's sink settings to ship into this cluster over ``protocol``."""
        config = {"walship.sink.thrift": self.thrift_address()}
        if protocol in ("thrift2", "hbase"):  # hbase: the region servers, found through the cluster key
            config |= {"walship.sink.protocol": protocol, "walship.sink.thrift2": self.thrift2_address()}
        elif protocol != "thrift1":
            raise ValueError(f"no sink protocol {protocol!r} in the tests")
        return config


def make_cluster(factory: Callable[..., MiniClusterProcess], zk_hosts: str, name: str, **kwargs: object) -> Cluster:
    mc = factory(name, **kwargs)
    c = Cluster(mc, zk_hosts)
    conn = c.conn()
    conn.create_table(TABLE, {"r": {"max_versions": 5}, "l": {"max_versions": 5}})
    AdminClient(mc.admin).set_scope(TABLE.decode(), "r", 1)
    conn.close()
    return c


def current_wals_enqueued(cluster: Cluster, queues: ReplicationQueues, peer_id: str) -> bool:
    """Every live region server's current WALs (one per WAL group) are in its queue for the peer."""
    current = {
        (rs["name"], wal)
        for rs in AdminClient(cluster.mc.admin).info()["regionservers"]
        if rs["alive"]
        for wal in rs["wals"]
    }
    enqueued = {(q.server, w.name) for q in queues.list_queues(peer_id) if not q.recovered for w in q.wals}
    return bool(current) and current <= enqueued


def add_peer(source: Cluster, target: Cluster, peer_id: str = "1", protocol: str = "thrift1", **config: str) -> None:
    """Add the peer (its sink speaking ``protocol`` to ``target``), then wait for the source
    cluster to enqueue its current WALs for it (it does so on a ZooKeeper watch, as HBase does)."""
    with zk_client(source.zk_hosts) as client:
        ReplicationPeers(client, ZnodeLayout(source.parent)).add(
            PeerConfig(peer_id, target.cluster_key, configuration={**target.sink_config(protocol), **config})
        )
        queues = ReplicationQueues(client, ZnodeLayout(source.parent))
        wait_until(
            lambda: current_wals_enqueued(source, queues, peer_id),
            what=f"{source.mc.name}'s current WALs in peer {peer_id}'s queues",
        )


def raw_peer(client: Any, layout: ZnodeLayout, peer_id: str) -> tuple[Replication_pb2.ReplicationPeer, int]:
    """The peer znode's ReplicationPeer message, parsed here with protobuf alone (not walship's
    decoder), and the znode's version."""
    data, stat = client.get(layout.peer(peer_id))
    assert data.startswith(b"PBUF")
    pb = Replication_pb2.ReplicationPeer()
    pb.ParseFromString(data[4:])
    return pb, stat.version


def ship(source: Cluster, peer_id: str = "1", **kwargs: object) -> PeerSummary:
    with (
        zk_client(source.zk_hosts) as client,
        Shipper(
            client, ZnodeLayout(source.parent), WalStore(source.mc.wal_root), source_thrift2=source.thrift2_address()
        ) as shipper,
    ):
        return shipper.ship_peer(peer_id, **kwargs)  # type: ignore[arg-type]


class ShippingLoop:
    """Ships each (source, peer) one pass after the other, in a thread of its own, as each
    source's ``walship_replicate`` would while a DAG runs: nothing for a peer that does not
    exist (yet) or is switched off; the passes' errors kept."""

    def __init__(self, *targets: tuple[Cluster, str]) -> None:
        self.targets = targets
        self.errors: list[str] = []
        self.passes = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._ship, name="shipping")

    def _ship(self) -> None:
        from walship.errors import PeerNotFoundError

        while not self._stop.wait(0.2):
            for source, peer_id in self.targets:
                try:
                    summary = ship(source, peer_id)
                except PeerNotFoundError:
                    continue
                self.passes += 1
                if summary.status == "error":
                    self.errors.append(str(summary.error))

    def __enter__(self) -> ShippingLoop:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=120)


def tail_in_thread(
    source: Cluster, peers: str | list[str] = "1", *, tailers: list[Tailer] | None = None, **options: Any
) -> tuple[threading.Thread, list[TailSummary]]:
    """A tailer of the source's peer(s) with ``options`` (``duration``, ``stop``, ...), run in
    a thread of its own over its own ZooKeeper client; its summary lands in the list when it
    ends (and the tailer itself in ``tailers`` as it starts)."""
    out: list[TailSummary] = []

    def run() -> None:
        with zk_client(source.zk_hosts) as client:
            options.setdefault("source_thrift2", source.thrift2_address())
            tailer = Tailer(client, ZnodeLayout(source.parent), WalStore(source.mc.wal_root), peers, **options)
            if tailers is not None:
                tailers.append(tailer)
            out.append(tailer.run())

    thread = threading.Thread(target=run)
    thread.start()
    return thread, out


def contents(
    cluster: Cluster, family: bytes | None = None, versions: int = 5
) -> dict[bytes, dict[bytes, list[tuple[bytes, int]]]]:
    """Every visible cell of every row (all versions), optionally of one family."""
    conn = cluster.conn()
    t = conn.table(cluster.table_name)
    out: dict[bytes, dict[bytes, list[tuple[bytes, int]]]] = {}
    for row, data in t.scan(columns=[family] if family else None):
        out[row] = {col: t.cells(row, col, versions=versions, include_timestamp=True) for col in sorted(data)}
    conn.close()
    return out


class LockstepShipper:
    """Ships peer 1 of ``source`` one small batch at a time, never while a drained check runs.

    Every check of :func:`walship.status.drain.behind` (what ``wait-drained`` and the drain
    trigger poll) takes the same lock as a batch, and the check that finds nothing behind
    reads the peer's rows (``on_peer``) and stops the shipping before releasing it: so
    ``on_peer`` is the peer exactly when the drained answer was given, not a moment later
    when the shipper may have caught up with an answer given too early. Shipping starts
    after the first check, so that one always finds the rows written before it behind."""

    def __init__(self, source: Cluster, target: Cluster, monkeypatch: Any, *, batch_entries: int) -> None:
        from walship.status import drain

        self.source, self.target, self.batch_entries = source, target, batch_entries
        self.on_peer: dict[bytes, dict[bytes, list[tuple[bytes, int]]]] | None = None
        self.failures: list[str] = []
        self.batches = 0
        self._gate = threading.Lock()
        self._stop = threading.Event()
        self._checked = threading.Event()
        self._thread = threading.Thread(target=self._ship, name="lockstep-shipper")
        checked = drain.behind

        def behind_between_batches(*args: Any, **kwargs: Any) -> Any:
            with self._gate:
                late = checked(*args, **kwargs)
                if not late and self.on_peer is None:
                    self.on_peer = contents(self.target)
                    self._stop.set()
                self._checked.set()
                return late

        monkeypatch.setattr(drain, "behind", behind_between_batches)

    def _ship(self) -> None:
        with zk_client(self.source.zk_hosts) as client:
            shipper = Shipper(
                client,
                ZnodeLayout(self.source.parent),
                WalStore(self.source.mc.wal_root),
                batch_entries=self.batch_entries,
            )
            while not self._checked.wait(0.05):
                if self._stop.is_set():
                    return
            while not self._stop.is_set():
                with self._gate:
                    if self._stop.is_set():
                        break
                    summary = shipper.ship_peer("1", max_batches=1)
                    self.batches += 1
                if summary.status == "error":
                    self.failures.append(str(summary.error))

    def __enter__(self) -> LockstepShipper:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def bytes_by_hand(a: Cluster) -> int:
    """Unshipped bytes as the files and ZooKeeper say: file size minus position, per WAL."""
    total = 0
    with zk_client(a.zk_hosts) as client:
        for q in ReplicationQueues(client, ZnodeLayout(a.parent)).list_queues("1"):
            for wp in q.wals:
                found = list(Path(a.mc.data_dir).glob(f"*WALs/**/{wp.name}"))
                assert len(found) == 1, (wp.name, found)
                total += max(0, found[0].stat().st_size - wp.position)
    return total
