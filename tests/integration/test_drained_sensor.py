"""``WalDrainedSensor``: the drained check as a deferrable DAG task, run by Airflow itself
(``dag.test()`` runs the trigger inline) against real miniclusters."""

from __future__ import annotations

import json
from typing import Any

import pytest
from airflow_env import AIRFLOW_MARKS, source_conn
from replication_helpers import Cluster, LockstepShipper

pytestmark = [
    pytest.mark.integration,
    *AIRFLOW_MARKS,
]


def test_the_sensor_waits_until_every_earlier_row_is_on_the_peer(
    ab: tuple[Cluster, Cluster], dagbag: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    a, b = ab
    t = a.table()
    for i in range(120):
        t.put(b"pre%04d" % i, {b"r:q": b"%d" % i})
    monkeypatch.setenv("AIRFLOW_CONN_WALSHIP_SOURCE", source_conn(a))
    with LockstepShipper(a, b, monkeypatch, batch_entries=10) as shipper:
        run = dagbag.dags["walship_drain"].test(run_conf={"peer_id": "1", "timeout_s": 120})
    ti = run.get_task_instance("wait_drained")
    assert ti.state == "success", ti.state
    assert shipper.batches > 3  # it had to wait for several batches
    on_peer = shipper.on_peer  # the peer when the trigger said drained, no batch shipped since
    assert on_peer is not None
    assert {row: cells[b"r:q"][0][0] for row, cells in on_peer.items()} == {
        b"pre%04d" % i: b"%d" % i for i in range(120)
    }
    assert not shipper.failures


def test_the_sensor_fails_on_timeout_naming_the_queues_behind(
    ab: tuple[Cluster, Cluster], dagbag: Any, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from walship_airflow.triggers.queues import WalDrainedTrigger

    a, _ = ab
    a.table().put(b"never-shipped", {b"r:q": b"x"})
    monkeypatch.setenv("AIRFLOW_CONN_WALSHIP_SOURCE", source_conn(a))
    run = dagbag.dags["walship_drain"].test(run_conf={"peer_id": "1", "timeout_s": 2})
    assert run.get_task_instance("wait_drained").state == "failed"

    # the trigger itself: serializable, and its timeout event names each queue behind
    from walship.status.drain import take_cut_at

    cut = take_cut_at(a.zk_hosts, a.parent, str(a.mc.data_dir), "1")
    trigger = WalDrainedTrigger(a.zk_hosts, a.parent, cut.to_json(), poll_interval=0.1, timeout=0.3)
    classpath, kwargs = trigger.serialize()
    assert classpath == "walship_airflow.triggers.queues.WalDrainedTrigger"
    json.dumps(kwargs)

    import asyncio

    async def first(t: WalDrainedTrigger) -> Any:
        async for event in t.run():
            return event.payload
        return None

    payload = asyncio.run(first(WalDrainedTrigger(**kwargs)))
    assert payload["status"] == "timeout" and not payload["drained"] and payload["behind"]
    assert "bytes behind the cut" in payload["message"]
    for late in payload["behind"]:
        assert f"queue {late['server']}/{late['queue_id']}" in payload["message"]
