"""The "Replication" page in a real ``airflow api-server``, seen through a real headless
Chromium: login through the UI's own form, the nav entry, the page's peers, badges, charts,
queue rows and run links against ``read_status``; the JSON endpoint over HTTP; 401 without
credentials, 404 for an unknown peer.

The source: miniclusters A and B, peers 1 and 2 from A to B; rows written and shipped, two
``walship_status`` samples recorded with ``dag.test()``, more rows written between them and
shipped to peer 2 only, so that peer 2 is drained and peer 1 is not.
"""

from __future__ import annotations

import gc
import json
import os
import secrets
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any
from urllib.parse import quote

import airflow_env
import httpx
import pytest
from replication_helpers import Cluster, add_peer, make_cluster, ship
from waiting import wait_until

from walship.minicluster.process import MiniClusterProcess
from walship.status import read_status
from walship.zk import zk_client
from walship.zk.localserver import LocalZooKeeper, free_port

pytestmark = [
    pytest.mark.integration,
    *airflow_env.AIRFLOW_MARKS,
]

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
USER = "walship"
#: fields of a queue that change by themselves as time passes
TIME_DEPENDENT = {"age_of_last_shipped_op_s", "lag_s"}


@dataclass(frozen=True)
class Source:
    a: Cluster
    b: Cluster

    def status(self, peer_id: str | None = None) -> dict[str, Any]:
        return read_status(self.a.zk_hosts, self.a.parent, str(self.a.mc.data_dir), peer_id)

    def connection(self) -> str:
        """``AIRFLOW_CONN_WALSHIP_SOURCE`` for A (the chroot rides in the host)."""
        hostport, _, chroot = self.a.zk_hosts.partition("/")
        return json.dumps(
            {
                "conn_type": "walship",
                "host": f"{hostport}/{chroot}",
                "extra": {"znode_parent": self.a.parent, "wal_root": str(self.a.mc.data_dir)},
            }
        )


@dataclass(frozen=True)
class ApiServer:
    url: str
    password: str
    log: Path

    def token(self) -> str:
        r = httpx.post(f"{self.url}/auth/token", json={"username": USER, "password": self.password}, timeout=10)
        assert r.status_code in (200, 201), r.text
        return str(r.json()["access_token"])


def put_rows(cluster: Cluster, prefix: bytes, n: int) -> None:
    with cluster.table().batch() as batch:
        for i in range(n):
            batch.put(prefix + b"-%03d" % i, {b"r:q": b"%d" % i, b"l:q": b"local"})


@pytest.fixture(scope="session")
def ui_dagbag() -> Any:
    """The DAGs, in the migrated metadata DB the API server is started on."""
    return airflow_env.load_dagbag()


@pytest.fixture(scope="session")
def source(zk_server: LocalZooKeeper, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Source]:
    """A and B on a chroot of their own; the API server and all tests of this module share them."""
    zk_hosts = f"{zk_server.hosts}/walship-ui-{uuid.uuid4().hex}"
    with zk_client(zk_server.hosts) as client:
        client.ensure_path(zk_hosts.partition("/")[2])
    root = tmp_path_factory.mktemp("ui-clusters")
    started: list[MiniClusterProcess] = []

    def make(name: str, **kwargs: Any) -> MiniClusterProcess:
        mc = MiniClusterProcess(name, root / name, zk=zk_hosts, znode_parent=f"/hbase-{name.lower()}", **kwargs)
        mc.start()
        started.append(mc)
        return mc

    try:
        a = make_cluster(make, zk_hosts, "A")
        b = make_cluster(make, zk_hosts, "B")
        add_peer(a, b, "1")
        add_peer(a, b, "2")
        put_rows(a, b"first", 50)
        ship(a, "1")
        ship(a, "2")
        yield Source(a, b)
    finally:
        for mc in started:
            mc.stop()


@pytest.fixture(scope="session")
def samples(ui_dagbag: Any, source: Source) -> list[str]:
    """Two runs of the walship_status DAG (their run ids): one with both peers drained, one
    after more rows, shipped to peer 2 only."""
    dag = ui_dagbag.dags["walship_status"]
    run_ids = []
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("AIRFLOW_CONN_WALSHIP_SOURCE", source.connection())
        run = dag.test()
        assert run.state == "success", {ti.task_id: ti.state for ti in run.get_task_instances()}
        run_ids.append(run.run_id)
        put_rows(source.a, b"second", 50)
        ship(source.a, "2")
        run = dag.test()
        assert run.state == "success", {ti.task_id: ti.state for ti in run.get_task_instances()}
        run_ids.append(run.run_id)
    gc.collect()  # the task runner's pipes: their ResourceWarnings here, not in a later test
    return run_ids


@pytest.fixture(scope="session")
def api_server(ui_dagbag: Any, source: Source, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApiServer]:
    """``airflow api-server`` on a free port, in its own process group, with SimpleAuthManager's
    user ``walship`` (admin) and the walship_source connection in its environment."""
    tmp = tmp_path_factory.mktemp("api-server")
    password = secrets.token_urlsafe(12)
    passwords = tmp / "passwords.json"
    passwords.write_text(json.dumps({USER: password}))
    port = free_port()
    env = {
        **os.environ,
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": f"{USER}:admin",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(passwords),
        "AIRFLOW__API_AUTH__JWT_SECRET": secrets.token_hex(32),
        "AIRFLOW__API__SECRET_KEY": secrets.token_hex(32),
        "AIRFLOW_CONN_WALSHIP_SOURCE": source.connection(),
    }
    log = tmp / "api-server.log"
    airflow = Path(sys.executable).parent / "airflow"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [str(airflow), "api-server", "--host", "127.0.0.1", "--port", str(port), "--workers", "1"],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )
    url = f"http://127.0.0.1:{port}"

    def healthy() -> bool:
        assert proc.poll() is None, f"the API server exited ({proc.returncode}):\n{log.read_text()[-3000:]}"
        try:
            return httpx.get(f"{url}/api/v2/monitor/health", timeout=2).status_code == 200
        except httpx.TransportError:
            return False

    try:
        wait_until(healthy, timeout=120, interval=0.2, what="the API server's health endpoint")
        yield ApiServer(url, password, log)
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)


@pytest.fixture
def chromium(tmp_path: Path) -> Iterator[Any]:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in (
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={tmp_path / 'chromium-profile'}",
        "--window-size=1400,1000",
    ):
        options.add_argument(arg)
    driver = webdriver.Chrome(options=options, service=Service(CHROMEDRIVER, log_output=str(tmp_path / "driver.log")))
    try:
        yield driver
    finally:
        driver.quit()


def test_status_dag_structure(ui_dagbag: Any) -> None:
    dag = ui_dagbag.dags["walship_status"]
    assert list(dag.task_dict) == ["record"]
    assert dag.catchup is False and dag.max_active_runs == 1 and dag.tags and dag.doc_md
    assert dag.timetable.delta == timedelta(minutes=1)
    (outlet,) = dag.task_dict["record"].outlets
    assert (outlet.name, outlet.uri) == ("walship_status", "walship://status/")  # Airflow adds the "/"


def test_unauthenticated_requests_are_refused(api_server: ApiServer) -> None:
    for path in ("/walship/", "/walship/api/status", "/walship/api/status?peer=1"):
        r = httpx.get(api_server.url + path, timeout=10)
        assert r.status_code == 401, (path, r.status_code, r.text[:200])


def without_time(status: dict[str, Any]) -> dict[str, Any]:
    """The status without what changes by itself as time passes."""
    return {
        "peers": [
            {
                **peer,
                "queues": [{k: v for k, v in q.items() if k not in TIME_DEPENDENT} for q in peer["queues"]],
                "totals": {k: v for k, v in peer["totals"].items() if k != "lag_s"},
            }
            for peer in status["peers"]
        ]
    }


def test_status_json_is_what_walship_status_prints(api_server: ApiServer, source: Source) -> None:
    headers = {"Authorization": f"Bearer {api_server.token()}"}
    with httpx.Client(base_url=api_server.url, headers=headers, timeout=30) as client:
        r = client.get("/walship/api/status")
        assert r.status_code == 200, r.text
        got = r.json()
        expected = source.status()
        assert set(got) == set(expected) == {"generated_at", "peers"}
        assert without_time(got) == without_time(expected)
        assert [p["peer_id"] for p in got["peers"]] == ["1", "2"]

        one = client.get("/walship/api/status", params={"peer": "2"})
        assert one.status_code == 200 and without_time(one.json()) == without_time(source.status("2"))

        missing = client.get("/walship/api/status", params={"peer": "unknown"})
        assert missing.status_code == 404
        assert "unknown" in missing.json()["detail"]
        malformed = client.get("/walship/api/status", params={"peer": "no-such-peer"})
        assert malformed.status_code == 400
        assert "no-such-peer" in malformed.json()["detail"]

        plugins = client.get("/api/v2/plugins").json()["plugins"]
        (plugin,) = [p for p in plugins if p["name"] == "walship"]  # exactly once
        assert [a["url_prefix"] for a in plugin["fastapi_apps"]] == ["/walship"]
        assert [(v["name"], v["destination"]) for v in plugin["external_views"]] == [("Replication", "nav")]
        assert client.get("/api/v2/plugins/importErrors").json()["total_entries"] == 0


def test_a_missing_or_incomplete_connection_is_a_503_naming_it(ui_dagbag: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from fastapi import HTTPException
    from walship_airflow.plugins.app import source_status

    monkeypatch.delenv("AIRFLOW_CONN_WALSHIP_SOURCE", raising=False)
    for conn, message in (
        (None, "walship_source"),
        ({"conn_type": "walship", "host": "127.0.0.1"}, "connection walship_source: extra 'wal_root' is missing"),
    ):
        if conn is not None:
            monkeypatch.setenv("AIRFLOW_CONN_WALSHIP_SOURCE", json.dumps(conn))
        with pytest.raises(HTTPException) as raised:
            source_status()
        assert raised.value.status_code == 503 and message in str(raised.value.detail)


#: the page's peers as the browser sees them: badge, chart, and each queue row's raw values
READ_PAGE = """
const out = {};
for (const section of document.querySelectorAll('section.peer')) {
  const chart = section.querySelector('svg.walship-chart');
  out[section.dataset.peerId] = {
    drained: section.querySelector('.badge').dataset.drained,
    samples: chart.dataset.samples,
    series: Array.from(chart.querySelectorAll('polyline.series')).map(
      p => [p.dataset.series, p.getAttribute('points').trim().split(/\\s+/).length]),
    rows: Array.from(section.querySelectorAll('tr.queue')).map(tr => Object.fromEntries(
      Array.from(tr.querySelectorAll('td')).map(td => [td.dataset.field, JSON.parse(td.dataset.value)]))),
  };
}
return out;
"""


def test_the_page_in_headless_chromium(
    api_server: ApiServer, source: Source, samples: list[str], chromium: Any, tmp_path: Path
) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    driver = chromium
    wait = WebDriverWait(driver, 30)

    # the UI's own login form (SimpleAuthManager), then the UI with a "Replication" nav entry
    driver.get(api_server.url + "/")
    wait.until(ec.presence_of_element_located((By.NAME, "username"))).send_keys(USER)
    driver.find_element(By.NAME, "password").send_keys(api_server.password)
    wait.until(ec.element_to_be_clickable((By.CSS_SELECTOR, "button[type=submit]"))).click()
    nav = wait.until(ec.element_to_be_clickable((By.CSS_SELECTOR, "a[aria-label='Replication']")))
    assert nav.text == "Replication" and nav.get_attribute("href") == f"{api_server.url}/plugin/walship"

    # the entry shows the page inside the UI (an iframe, authenticated by the UI's cookie)
    nav.click()
    wait.until(ec.frame_to_be_available_and_switch_to_it((By.CSS_SELECTOR, "iframe")))
    wait.until(ec.presence_of_element_located((By.CSS_SELECTOR, "svg.walship-chart[data-peer='1']")))
    driver.switch_to.default_content()
    in_ui = tmp_path / "replication-in-ui.png"
    driver.save_screenshot(str(in_ui))

    # the page itself
    driver.get(api_server.url + "/walship/")
    wait.until(ec.presence_of_element_located((By.CSS_SELECTOR, "svg.walship-chart[data-peer='2']")))
    status = source.status()
    page = driver.execute_script(READ_PAGE)
    assert sorted(page) == ["1", "2"]
    for peer in status["peers"]:
        seen = page[peer["peer_id"]]
        assert seen["drained"] == str(peer["totals"]["drained"]).lower()
        assert seen["samples"] == "2"
        assert seen["series"] == [["bytes-queued", 2], ["lag", 2]]
        expected_rows = [{k: v for k, v in q.items() if k not in TIME_DEPENDENT} for q in peer["queues"]]
        seen_rows = [{k: v for k, v in r.items() if k not in TIME_DEPENDENT} for r in seen["rows"]]
        assert seen_rows == expected_rows
        assert peer["queues"] and all(set(r) == set(q) for r, q in zip(seen["rows"], peer["queues"], strict=True))
    assert page["1"]["drained"] == "false" and page["2"]["drained"] == "true"
    for peer_id, text in (("1", "not drained"), ("2", "drained")):
        badge = driver.find_element(By.CSS_SELECTOR, f"section[data-peer-id='{peer_id}'] .badge")
        assert badge.text == text and badge.is_displayed()
        assert driver.find_element(By.CSS_SELECTOR, f"svg.walship-chart[data-peer='{peer_id}']").is_displayed()

    links = driver.find_elements(By.CSS_SELECTOR, "a.run[data-dag-id='walship_status']")
    hrefs = {a.get_attribute("data-run-id"): a.get_attribute("href") for a in links}
    assert set(hrefs) == set(samples)
    for run_id, href in hrefs.items():
        assert href == f"{api_server.url}/dags/walship_status/runs/{quote(run_id, safe='')}"

    # the whole page in one screenshot: a window as tall as the page plus the browser's own frame
    height = driver.execute_script(
        "return document.documentElement.scrollHeight + window.outerHeight - window.innerHeight"
    )
    driver.set_window_size(1400, max(1000, int(height)))
    shot = tmp_path / "replication.png"
    driver.save_screenshot(str(shot))
    print(f"screenshots: {shot} {in_ui}")
