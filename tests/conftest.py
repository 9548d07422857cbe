"""Shared fixtures: a real ZooKeeper server per test session, a chroot per test, miniclusters,
and Airflow's DagBag (Airflow is configured here, before anything imports it)."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import airflow_env
import fsspec
import pytest
import real_hbase as real_hbase_helpers
import secure_hbase as secure_hbase_helpers
from _pytest.nodeid import coerce_node_id
from kazoo.client import KazooClient
from replication_helpers import Cluster, add_peer, make_cluster

from walship.zk import ZnodeLayout, connect, zk_client
from walship.zk.localserver import LocalZooKeeper, free_port
from walship_testing.minicluster.process import MiniClusterProcess


@pytest.fixture
def compiled_decoder() -> None:
    """A test of the compiled WAL decoder fails, never skips, where it is not built (``make
    setup`` builds it, as it builds the batcher and the sinks' rows, whose tests import them)."""
    from walship.wal import compressed, entries

    assert entries.c_parse is not None and compressed.c_parse_compressed is not None, (
        "the compiled WAL decoder is not built (`make setup` builds it)"
    )


@pytest.fixture(scope="session")
def zk_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalZooKeeper]:
    server = LocalZooKeeper(tmp_path_factory.mktemp("zookeeper"), free_port())
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def real_hbase(zk_server: LocalZooKeeper, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Any, Any]]:
    """Real HBase 2.6 clusters A (three region servers) and B (one) from the harness, on the
    session's ZooKeeper: started once per run, in parallel; tests use tables and peers of
    their own (``real_hbase.unique``)."""
    a, b = real_hbase_helpers.start_pair(tmp_path_factory.mktemp("hbase"), zk_server.hosts)
    yield a, b
    for hb in (a, b):
        hb.stop()


@pytest.fixture(scope="session")
def real_hdfs(zk_server: LocalZooKeeper, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """Real HBase 2.6 (one region server) with its WALs on HDFS (a MiniDFSCluster, read over
    WebHDFS) and a YARN beside it on the same HDFS (``.yarn``: Hadoop's MiniYARNCluster with
    the leaf queues ``default`` and ``walship``), for the tests of WALs on HDFS, of Spark on
    YARN and of the production topology; started once per run."""
    hb = real_hbase_helpers.start_hdfs(tmp_path_factory.mktemp("hbase-hdfs"), zk_server.hosts)
    _STACKS["real_hdfs"] = hb
    yield hb
    if _STACKS.pop("real_hdfs", None) is not None:
        hb.stop()


@pytest.fixture(scope="session")
def packed_env(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """walship and its dependencies packed by ``walship spark pack`` (from this checkout), once."""
    import spark_yarn

    return spark_yarn.pack(tmp_path_factory.mktemp("packed") / "walship-env.tar.gz")


@pytest.fixture(scope="session")
def hdfs_archive(real_hdfs: Any, packed_env: Path) -> str:
    """The packed environment put on the ``real_hdfs`` cluster's HDFS once, as a shop keeps it:
    a submit names it by its ``hdfs://`` URL and uploads nothing."""
    import spark_yarn

    return spark_yarn.put_on_hdfs(real_hdfs, packed_env, "/apps/walship/walship-env.tar.gz")


@pytest.fixture(scope="session")
def real_multiwal(zk_server: LocalZooKeeper, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """Real HBase 2.6 with multiwal (two WAL groups per server) on two region servers, its
    WALs on the local file system (with Hadoop's .crc files) and HBase's log cleaner at its
    default TTL (10 minutes), so walship's own cleaner can be tested beside it."""
    hb = real_hbase_helpers.start_multiwal(tmp_path_factory.mktemp("hbase-multiwal"), zk_server.hosts)
    yield hb
    hb.stop()


#: The heavy session stacks (the fixture's name -> what it started) and the last test that
#: uses each (see :func:`pytest_runtest_teardown`).
_STACKS: dict[str, Any] = {}
_LAST: dict[str, str | None] = {}
#: Stopped after their last test instead of at the end of the session.
HEAVY = ("secure_hbase", "real_hdfs")


#: Session stacks of real HBase (each started once per pytest process, and per worker under
#: ``make test``'s pytest-xdist): their tests run on one worker, which starts each once.
REAL_STACKS = {"real_hbase", "real_hdfs", "real_multiwal", "secure_hbase", "packed_env", "hdfs_archive"}


def pytest_itemcollected(item: pytest.Item) -> None:
    """Under pytest-xdist (``--dist loadgroup``): every test of real HBase (one using a real
    stack, or parametrized ``real``) in the group ``real-hbase``, every other test in its
    module's group, so a module's fixtures are made once. Marked as each test is collected;
    :func:`pytest_collection_modifyitems` names each test's group where pytest-xdist reads it."""
    params = getattr(getattr(item, "callspec", None), "params", {})
    real = REAL_STACKS & set(getattr(item, "fixturenames", ())) or "real" in params.values()
    module = getattr(item, "module", None)
    item.add_marker(pytest.mark.xdist_group("real-hbase" if real else getattr(module, "__name__", item.nodeid)))


@pytest.hookimpl(trylast=True)  # after pytest-xdist's own
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if getattr(config.option, "loadgroup", False):
        # pytest-xdist 3.8 names a test's group by appending "@<group>" to ``item._nodeid``,
        # which pytest 9 no longer reads (its node id is ``item._id``): the same, where it reads
        for item in items:
            groups = "_".join(sorted({str(m.args[0]) for m in item.iter_markers("xdist_group")}))
            if groups and not item.nodeid.endswith(f"@{groups}"):
                item._id = coerce_node_id(f"{item.nodeid}@{groups}")
    for name in HEAVY:
        users = [item for item in items if name in getattr(item, "fixturenames", ())]
        _LAST[name] = users[-1].nodeid if users else None


@pytest.hookimpl(trylast=True)  # after the test's own fixtures are finalized
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    """Stop a heavy stack (the secure one: a KDC, ZooKeeper and two HBase JVMs; HBase on HDFS
    with YARN) after the last test that uses it, not at the end of the session: the tests
    after it get the machine's cores and memory back."""
    for name in HEAVY:
        last = _LAST.get(name)
        # pytest-xdist runs it as "<node id>@<group>"
        if last and item.nodeid in (last, f"{last}@real-hbase") and _STACKS.get(name) is not None:
            _STACKS.pop(name).stop()


@pytest.fixture(scope="session")
def secure_hbase(tmp_path_factory: pytest.TempPathFactory) -> Iterator[secure_hbase_helpers.SecureStack]:
    """The Kerberized stack (``secure_hbase.start_secure``): an MIT KDC, a ZooKeeper with SASL
    Kerberos (``.zk_hosts``, ``localhost:port``) and secure HBase 2.6 clusters ``.sa`` (source,
    two region servers, WALs on Kerberized HDFS) and ``.sb`` (peer, one region server), with the
    keytabs of ``walship``, ``walship-short`` (20 s tickets) and ``intruder``; started once per
    run, in parallel. Tests use tables and peers of their own."""
    stack = secure_hbase_helpers.start_secure(tmp_path_factory.mktemp("secure-hbase"))
    _STACKS["secure_hbase"] = stack
    yield stack
    if _STACKS.pop("secure_hbase", None) is not None:
        stack.stop()


@pytest.fixture
def zk_hosts(zk_server: LocalZooKeeper) -> str:
    """The server's connect string with a fresh chroot of this test's own."""
    chroot = f"/walship-test-{uuid.uuid4().hex}"
    with zk_client(zk_server.hosts) as client:
        client.ensure_path(chroot)
    return zk_server.hosts + chroot


@pytest.fixture
def zk(zk_hosts: str) -> Iterator[KazooClient]:
    client = connect(zk_hosts)
    yield client
    client.stop()
    client.close()


@pytest.fixture
def layout() -> ZnodeLayout:
    return ZnodeLayout("/hbase")


def server_name(i: int) -> str:
    return f"rs-{i}.example-dc.net,16020,{1600000000000 + i}"


def wal_name(server: str, ts: int) -> str:
    from walship.servername import ServerName
    from walship.wal import build_wal_name

    return build_wal_name(ServerName.parse(server), ts)


@pytest.fixture
def memory_root() -> Iterator[str]:
    """A fresh root on fsspec's in-memory file system (a remote store, for the WAL store), removed afterwards."""
    root = f"memory://walship-{uuid.uuid4().hex}"
    yield root
    fs = fsspec.filesystem("memory")
    if fs.exists(root):
        fs.rm(root, recursive=True)


@pytest.fixture
def tmp_dir(tmp_path: Path) -> Path:
    return tmp_path


@pytest.fixture
def minicluster_factory(zk_hosts: str, tmp_path: Path) -> Iterator[Callable[..., MiniClusterProcess]]:
    """Start miniclusters (own processes) on this test's ZooKeeper chroot; stopped afterwards."""
    started: list[MiniClusterProcess] = []

    def make(name: str = "A", parent: str | None = None, **kwargs: Any) -> MiniClusterProcess:
        mc = MiniClusterProcess(
            name, tmp_path / name, zk=zk_hosts, znode_parent=parent or f"/hbase-{name.lower()}", **kwargs
        )
        mc.start()
        started.append(mc)
        return mc

    yield make
    for mc in started:
        mc.stop()


@pytest.fixture
def minicluster(minicluster_factory: Callable[..., MiniClusterProcess]) -> MiniClusterProcess:
    return minicluster_factory("A")


@pytest.fixture
def sink_protocol() -> str:
    """The sink peers ship with. A module that is a behaviour suite of both sinks overrides
    it with one parametrized over ``replication_helpers.SINK_PROTOCOLS``."""
    return "thrift1"


@pytest.fixture
def backend() -> str:
    """What the source and peer clusters are: ``mini`` (walship's minicluster, the fast
    default) or ``real`` (real HBase 2.6 from the harness). A behaviour suite that runs on
    both overrides it with one parametrized over ``real_hbase.BACKENDS``."""
    return "mini"


@pytest.fixture
def queue_claims() -> str:
    """Who claims a crashed minicluster server's queues: ``master``, as HBase 2.5+ does (the
    default), or ``walship``; a module of walship's own claims overrides it."""
    return "master"


@pytest.fixture
def ab(
    request: pytest.FixtureRequest, backend: str, sink_protocol: str, queue_claims: str
) -> Iterator[tuple[Cluster, Cluster]]:
    """Source A and peer B (a table of the test's: family r scoped 1, l scoped 0), peer 1 from
    A to B over the ``sink_protocol`` sink. On real HBase the table is the test's own (A and
    B are shared by the session) and peer 1 is added through HBase's Admin, then adopted."""
    if backend == "real":
        yield from real_hbase_helpers.real_ab(request.getfixturevalue("real_hbase"), sink_protocol)
        return
    factory = request.getfixturevalue("minicluster_factory")
    zk_hosts = request.getfixturevalue("zk_hosts")
    a = make_cluster(factory, zk_hosts, "A", queue_claims=queue_claims)
    b = make_cluster(factory, zk_hosts, "B")
    add_peer(a, b, protocol=sink_protocol)
    yield a, b


@pytest.fixture
def both_ways(request: pytest.FixtureRequest, backend: str) -> Iterator[tuple[Cluster, Cluster, str]]:
    """A and B with a table whose family r is replicated and a walship (managed) peer from A to
    B over Thrift2, added through A's master; the peer's id, free on B for the peer back. On
    real HBase (``real_hbase.switchover_pair``) the table and the peer are the test's own."""
    if backend == "real":
        yield from real_hbase_helpers.switchover_pair(request.getfixturevalue("real_hbase"))
        return
    from walship.peer import MANAGED_KEY, PeerConfig
    from walship.rpc.peers import peer_admin

    factory = request.getfixturevalue("minicluster_factory")
    zk_hosts = request.getfixturevalue("zk_hosts")
    a, b = make_cluster(factory, zk_hosts, "A"), make_cluster(factory, zk_hosts, "B")
    config = {MANAGED_KEY: "true", **b.sink_config("thrift2")}
    with zk_client(zk_hosts) as client:
        peers = peer_admin(client, ZnodeLayout(a.parent))
        try:
            peers.add(PeerConfig("1", b.cluster_key, table_cfs={"t": ("r",)}, configuration=config))
        finally:
            peers.close()
    yield a, b, "1"


@pytest.fixture(scope="module")
def dagbag() -> Any:
    return airflow_env.load_dagbag()


@pytest.fixture
def collect_airflow_leftovers() -> Iterator[None]:
    """Airflow's task runner and the Spark hook leave pipes for the garbage collector: collect
    them after each test of a module that runs Airflow (``airflow_env.AIRFLOW_MARKS``), where
    their ResourceWarnings are expected, not in a later test."""
    import gc

    yield
    gc.collect()
