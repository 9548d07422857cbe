"""The ``walship_switchover`` DAG, run by Airflow itself (``dag.test()``) on real HBase 2.6,
walship shipping both ways meanwhile as the two sources' ``walship_replicate`` would: a run
whose verify finds a bad row rolls back (the source takes writes again, nothing is left on the
peer's cluster); a run that moves the writers to B, watched live on the Replication page in a
real ``airflow api-server`` through headless Chromium; a failback run from B's connection.
Both clusters are equal at the end."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import airflow_env
import pytest
from airflow_env import AIRFLOW_MARKS, source_conn
from airflow_ui import api_server_process, chromium_driver, login
from real_hbase import hbase_peers
from replication_helpers import Cluster, ShippingLoop, contents, ship
from test_switchover import put, read_only, switch_of

pytestmark = [pytest.mark.integration, *AIRFLOW_MARKS]

B_CONN = "walship_b"

#: what the page shows of the switchover to a peer: its run and each step's state
READ_STEPS = """
const box = document.querySelector(`div.switchover[data-peer-id="${arguments[0]}"]`);
if (!box) return null;
return {run: box.dataset.runId, state: box.dataset.state,
        steps: Array.from(box.querySelectorAll("tr[data-step]")).map(
            tr => [tr.dataset.step, tr.dataset.state, (tr.querySelector("a.log") || {}).href || null])};
"""


class PageWatch:
    """Reads the switchover's steps off the open page (its own refresh swaps them in) until
    stopped: every distinct view, in order."""

    def __init__(self, driver: Any, peer: str) -> None:
        self.driver = driver
        self.peer = peer
        self.views: list[dict[str, Any]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="page")

    def _watch(self) -> None:
        while not self._stop.wait(0.1):
            view = self.driver.execute_script(READ_STEPS, self.peer)
            if view is not None and (not self.views or view != self.views[-1]):
                self.views.append(view)

    def __enter__(self) -> PageWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=30)


@pytest.fixture
def airflow_both(
    both_ways: tuple[Cluster, Cluster, str], monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[Cluster, Cluster, str, dict[str, str], Any]]:
    """Both clusters as sources of this Airflow (A the default connection), and the DAG as
    Airflow parses it with them."""
    a, b, peer = both_ways
    env = {
        "AIRFLOW__WALSHIP__SOURCES": f"walship_source,{B_CONN}=b",
        "AIRFLOW_CONN_WALSHIP_SOURCE": source_conn(a),
        f"AIRFLOW_CONN_{B_CONN.upper()}": source_conn(b),
    }
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    dagbag = airflow_env.load_dagbag()
    assert not dagbag.import_errors, dagbag.import_errors
    yield a, b, peer, env, dagbag.dags["walship_switchover"]


def conf(source: str, peer: str, tables: str = "") -> dict[str, Any]:
    """Every Param (dag.test() keeps an earlier run's conf in the DAG object's Params)."""
    return {
        "source": source,
        "peer_id": peer,
        "tables": tables,
        "reverse": True,
        "reverse_peer_id": "",
        "peer_source": "",
        "fence": "read_only",
        "drain_timeout": 120,
        "dry_run": False,
    }


def states(run: Any) -> dict[str, str]:
    return {ti.task_id: str(ti.state) for ti in run.get_task_instances()}


@pytest.mark.parametrize("backend", ["real"])
def test_a_switchover_dag_run_and_its_failback(
    airflow_both: tuple[Cluster, Cluster, str, dict[str, str], Any], tmp_path: Path
) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    a, b, peer, env, dag = airflow_both
    table = a.table_name.decode()
    assert set(dag.task_dict) == {"preflight", "fence", "drain", "verify", "reverse", "switch", "unfence", "rollback"}
    put(a, b"before", 20)

    with ShippingLoop((a, peer), (b, peer)) as shipping:
        # a row on B that A never had: the verify stops the run, which rolls back
        ship(a, peer)
        b.table().put(b"stray", {b"r:q": b"x"})
        failed = dag.test(run_conf=conf("walship_source", peer, table))
        seen = states(failed)
        assert failed.state == "failed" and seen["verify"] == "failed" and seen["rollback"] == "failed", seen
        assert seen["switch"] == "upstream_failed" and seen["fence"] == "success", seen
        assert not read_only(a) and peer not in hbase_peers(b)
        b.table().delete(b"stray")

        with (
            api_server_process(tmp_path, env) as server,
            chromium_driver(tmp_path) as driver,
        ):
            login(driver, server)
            driver.get(server.url + "/walship/?refresh=1")
            WebDriverWait(driver, 30).until(
                ec.presence_of_element_located((By.CSS_SELECTOR, f"div.switchover[data-peer-id='{peer}']"))
            )
            with PageWatch(driver, peer) as watch:
                run = dag.test(run_conf=conf("walship_source", peer, table))
                deadline = time.monotonic() + 30
                while time.monotonic() < deadline and (not watch.views or watch.views[-1]["state"] != "done"):
                    time.sleep(0.1)  # the page's next refresh shows the end
            shot = tmp_path / "switchover.png"
            driver.save_screenshot(str(shot))
            print(f"screenshot: {shot}")
        assert run.state == "success", states(run)
        assert states(run)["rollback"] == "skipped"
        views = [v for v in watch.views if v["run"] == run.run_id]
        assert views, watch.views
        final = {step: (state, log) for step, state, log in views[-1]["steps"]}
        assert views[-1]["state"] == "done" and all(final[s][0] == "done" for s in final), views[-1]
        log = f"{server.url}/dags/walship_switchover/runs/{quote(run.run_id, safe='')}/tasks/switch?try_number=1"
        assert final["switch"][1] == log, final
        # seen live: a view with the fence done and the switch still to come
        live = [{step: state for step, state, _ in v["steps"]} for v in views]
        assert any(v["fence"] == "done" and v["switch"] in ("pending", "running") for v in live), views
        assert not read_only(a) and switch_of(b, peer)

        put(b, b"onb", 20)  # the writers on B; shipped back by B's shipping
        back = dag.test(run_conf=conf(B_CONN, peer))
        assert back.state == "success", states(back)
        assert not read_only(b) and switch_of(a, peer)
        put(a, b"home", 10)
        ship(a, peer)
    assert not shipping.errors, shipping.errors
    ship(b, peer)
    final_a = contents(a)
    assert final_a == contents(b)
    assert {r[:4] for r in final_a} == {b"befo", b"onb0", b"home"}
