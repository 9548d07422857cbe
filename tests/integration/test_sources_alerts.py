"""One Airflow, two source clusters (``[walship] sources``: ``walship_source=main`` and
``hbase_east``, so that the plain DAG ids' runs and samples, which other test modules read from
the same metadata DB, stay theirs), each with its own DAGs, and the
failure notifier of ``[walship] on_failure_notifier`` reaching a webhook receiver (a local
HTTP server): a stuck queue fails ``walship_status``'s check, a replay gap fails a replay,
each POSTs once, naming its DAG, task and reason; a drained source's check passes quietly."""

from __future__ import annotations

import datetime as dt
import json
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import airflow_env
import pytest
from airflow_env import AIRFLOW_MARKS, source_conn
from replication_helpers import add_peer, make_cluster, ship
from waiting import wait_until

from walship.status import read_status, stuck_queues
from walship_testing.minicluster.process import MiniClusterProcess

pytestmark = [pytest.mark.integration, *AIRFLOW_MARKS]

NOTIFIER = "walship_airflow.notifications.webhook.WebhookNotifier"


class Receiver:
    """A webhook receiver on a free port: every POSTed JSON body, in order."""

    def __init__(self) -> None:
        bodies: list[dict[str, Any]] = []

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                bodies.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
                self.send_response(204)
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.bodies = bodies
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hooks/walship"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> Receiver:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    with Receiver() as r:
        yield r


def put_rows(cluster: Any, prefix: bytes, n: int) -> None:
    with cluster.table().batch() as batch:
        for i in range(n):
            batch.put(prefix + b"-%03d" % i, {b"r:q": b"%d" % i})


def test_two_sources_their_dags_and_failures_reaching_the_notifier(
    minicluster_factory: Callable[..., MiniClusterProcess],
    zk_hosts: str,
    receiver: Receiver,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
) -> None:
    a = make_cluster(minicluster_factory, zk_hosts, "A")
    e = make_cluster(minicluster_factory, zk_hosts, "E")
    b = make_cluster(minicluster_factory, zk_hosts, "B")
    add_peer(a, b)
    add_peer(e, b)
    put_rows(a, b"a", 20)
    assert ship(a).status == "ok"  # A drained: nothing of it is stuck
    put_rows(e, b"e", 20)  # E's queue has a backlog nobody ships

    def stuck() -> list[Any]:
        status = read_status(e.zk_hosts, e.parent, e.mc.wal_root, stuck_after=1.0)
        return stuck_queues(status)

    (queue,) = wait_until(stuck, timeout=60, what="E's queue stuck for a second")
    monkeypatch.setenv("AIRFLOW_CONN_WALSHIP_SOURCE", source_conn(a))
    monkeypatch.setenv("AIRFLOW_CONN_HBASE_EAST", source_conn(e))
    monkeypatch.setenv("AIRFLOW__WALSHIP__SOURCES", "walship_source=main, hbase_east")
    monkeypatch.setenv("AIRFLOW__WALSHIP__ON_FAILURE_NOTIFIER", NOTIFIER)
    monkeypatch.setenv("AIRFLOW__WALSHIP__ON_FAILURE_NOTIFIER_KWARGS", json.dumps({"url": receiver.url}))
    dagbag = airflow_env.load_dagbag()
    assert dagbag.import_errors == {}
    assert {"walship_status_main", "walship_status_hbase_east", "walship_replay_hbase_east"} <= set(dagbag.dags)
    assert "source:hbase_east" in dagbag.dags["walship_status_hbase_east"].tags
    assert "`hbase_east`" in dagbag.dags["walship_status_hbase_east"].doc_md

    run = dagbag.dags["walship_status_main"].test(run_conf={"stuck_after": 1})
    assert run.state == "success", {ti.task_id: ti.state for ti in run.get_task_instances()}
    assert receiver.bodies == []

    run = dagbag.dags["walship_status_hbase_east"].test(run_conf={"stuck_after": 1})
    states = {ti.task_id: ti.state for ti in run.get_task_instances()}
    assert run.state == "failed" and states == {"record": "success", "check": "failed"}, states
    (stuck_post,) = receiver.bodies
    assert (stuck_post["event"], stuck_post["dag_id"], stuck_post["task_id"]) == (
        "task_failed",
        "walship_status_hbase_east",
        "check",
    )
    assert stuck_post["run_id"] == run.run_id
    assert f"queue {queue.queue_id} of peer 1 on {queue.server} is stuck" in stuck_post["exception"]
    assert "stuck queue(s) of hbase_east" in stuck_post["exception"]

    hour = dt.datetime(2026, 1, 1, 1, tzinfo=dt.UTC)  # long before E wrote its first WAL
    run = dagbag.dags["walship_replay_hbase_east"].test(logical_date=hour, run_conf={"peer_id": "1"})
    assert run.state == "failed"
    gap_post = receiver.bodies[1]
    assert (gap_post["dag_id"], gap_post["task_id"]) == ("walship_replay_hbase_east", "replay_interval")
    assert gap_post["exception"].startswith("airflow.sdk.exceptions.AirflowFailException: ")
    assert "no WAL covers" in gap_post["exception"] and "walship clean keeps archived WALs" in gap_post["exception"]
    assert len(receiver.bodies) == 2  # one notification a failed task, none for the rest


def test_bad_sources_and_notifiers_are_import_errors_naming_them(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIRFLOW__WALSHIP__SOURCES", "walship_source, east=x, west=x")
    errors = airflow_env.load_dagbag().import_errors
    assert errors and all("connections 'east' and 'west' both get suffix 'x'" in e for e in errors.values()), errors
    monkeypatch.setenv("AIRFLOW__WALSHIP__SOURCES", "walship_source")
    monkeypatch.setenv("AIRFLOW__WALSHIP__ON_FAILURE_NOTIFIER", "walship_airflow.notifications.nope.Pager")
    errors = airflow_env.load_dagbag().import_errors
    dag_files = sorted((airflow_env.ROOT / "dags").glob("walship_*.py"))
    assert (
        len(dag_files) == 13
        and len(errors) == len(dag_files)
        and all(
            "[walship] on_failure_notifier 'walship_airflow.notifications.nope.Pager' cannot be imported" in e
            for e in errors.values()
        )
    ), errors
    monkeypatch.setenv("AIRFLOW__WALSHIP__ON_FAILURE_NOTIFIER", NOTIFIER)
    monkeypatch.setenv("AIRFLOW__WALSHIP__ON_FAILURE_NOTIFIER_KWARGS", '{"url": "ftp://alerts"}')
    errors = airflow_env.load_dagbag().import_errors
    assert errors and all("refused its kwargs: WebhookNotifier: url 'ftp://alerts'" in e for e in errors.values())
