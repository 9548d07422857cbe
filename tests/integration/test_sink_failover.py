"""A peer served by two Thrift servers (``walship.sink.thrift`` / ``walship.sink.thrift2`` list
both): while a tailer ships, one server is stopped (its open connections dropped), and the sink
goes on through the other; then it comes back and the other stops, and the sink fails back.
Nothing is lost, on both sinks."""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable

import pytest
from replication_helpers import SINK_PROTOCOLS, add_peer, contents, make_cluster, tail_in_thread
from waiting import wait_until

from walship_testing.minicluster import AdminClient
from walship_testing.minicluster.process import MiniClusterProcess

pytestmark = pytest.mark.integration


class _At:
    """A cluster's process as seen through another of its Thrift servers."""

    def __init__(self, mc: MiniClusterProcess, address: str) -> None:
        self._mc = mc
        host, port = address.rsplit(":", 1)
        self.thrift = (host, int(port))

    def __getattr__(self, name: str) -> object:
        return getattr(self._mc, name)


@pytest.mark.parametrize("protocol", SINK_PROTOCOLS)
def test_the_sink_fails_over_between_two_servers_and_back(
    minicluster_factory: Callable[..., MiniClusterProcess], zk_hosts: str, protocol: str
) -> None:
    a = make_cluster(minicluster_factory, zk_hosts, "A", regionservers=1)
    b = make_cluster(minicluster_factory, zk_hosts, "B", regionservers=1)
    admin = AdminClient(b.mc.admin)
    reader = admin.start_thrift("thrift1")  # the test reads B through a server it never stops
    b_read = dataclasses.replace(b, mc=_At(b.mc, reader))
    service = "thrift2" if protocol == "thrift2" else "thrift1"
    first = b.thrift2_address() if protocol == "thrift2" else b.thrift_address()
    second = admin.start_thrift(service)
    key = "walship.sink.thrift2" if protocol == "thrift2" else "walship.sink.thrift"
    add_peer(a, b, protocol=protocol, **{key: f"{first},{second}"})
    stop = threading.Event()
    tailing, result = tail_in_thread(a, duration=300, idle_sleep=0.02, stop=stop)
    table = a.table()
    written = 0

    def write(n: int) -> None:
        nonlocal written
        for _ in range(n):
            table.put(b"row%05d" % written, {b"r:q": b"v%d" % written})
            written += 1

    def all_on_b(what: str) -> None:
        wait_until(lambda: len(contents(b_read)) == written, timeout=120, interval=0.2, what=what)

    try:
        write(100)
        wait_until(lambda: len(contents(b_read)) > 0, what="shipping under way")
        admin.stop_thrift(first)  # mid-ship: the sink's connections to it drop
        write(200)
        all_on_b(f"every row on B through {second} alone")
        admin.start_thrift(service, int(first.rsplit(":", 1)[1]))  # back on its own port
        admin.stop_thrift(second)
        write(200)
        all_on_b(f"every row on B through {first} alone")
    finally:
        stop.set()
        tailing.join(60)
    assert result and result[0].status == "ok", result
    assert contents(b_read) == contents(a, b"r") and len(contents(b_read)) == written == 500
