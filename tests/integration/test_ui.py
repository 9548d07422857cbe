"""The "Replication" page in a real ``airflow api-server``, used through a real headless
Chromium as a user does: login through the UI's own form, the nav entry, and inside the UI's
sandboxed iframe a click on a run link and a DAG link (the UI's own route changes), on the
JSON link (the JSON shows in the page, which stays), on a queue's details; the page's own
refresh picking up a DAG unpaused meanwhile, without a reload and at the same scroll
position; the queue tables within a 1,400 px window; the source selector. On its own at
``/walship/``: peers, badges, charts and every field of every queue against ``read_status``,
its run link and JSON link. Over HTTP: the JSON, 401 without credentials, 404 for an unknown
peer or source.

Two sources: ``walship_source`` (the default, plain DAG ids) is miniclusters A and B, peers 1
and 2 from A to B; rows written and shipped, two ``walship_status`` samples recorded with
``dag.test()``, more rows written between them and shipped to peer 2 only, so that peer 2 is
drained and peer 1 is not. ``walship_other`` (suffix ``other``) is cluster B, with a peer 3
to A, never shipped, and one ``walship_status_other`` sample. Every DAG is in the metadata DB,
paused as Airflow creates them.
"""

from __future__ import annotations

import gc
import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import airflow_env
import httpx
import pytest
from airflow_ui import ApiServer, api_server_process, chromium_driver, login
from replication_helpers import Cluster, add_peer, make_cluster, ship

from walship.status import read_status
from walship.zk import zk_client
from walship.zk.localserver import LocalZooKeeper
from walship_testing.minicluster.process import MiniClusterProcess

pytestmark = [
    pytest.mark.integration,
    *airflow_env.AIRFLOW_MARKS,
]

OTHER = "walship_other"
SOURCES = f"walship_source,{OTHER}=other"
#: fields of a queue that change by themselves as time passes
TIME_DEPENDENT = {"age_of_last_shipped_op_s", "lag_s", "stalled_s", "stuck"}


@dataclass(frozen=True)
class Source:
    a: Cluster
    b: Cluster

    def status(self, peer_id: str | None = None) -> dict[str, Any]:
        return read_status(self.a.zk_hosts, self.a.parent, str(self.a.mc.data_dir), peer_id)

    def other_status(self) -> dict[str, Any]:
        return read_status(self.b.zk_hosts, self.b.parent, str(self.b.mc.data_dir))

    def env(self) -> dict[str, str]:
        """The two sources and their connections (A the default one, B the other)."""
        return {
            "AIRFLOW__WALSHIP__SOURCES": SOURCES,
            "AIRFLOW_CONN_WALSHIP_SOURCE": airflow_env.source_conn(self.a, thrift2=False),
            f"AIRFLOW_CONN_{OTHER.upper()}": airflow_env.source_conn(self.b, thrift2=False),
        }


def put_rows(cluster: Cluster, prefix: bytes, n: int) -> None:
    with cluster.table().batch() as batch:
        for i in range(n):
            batch.put(prefix + b"-%03d" % i, {b"r:q": b"%d" % i, b"l:q": b"local"})


@pytest.fixture(scope="module")
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
        add_peer(b, a, "3")
        put_rows(a, b"first", 50)
        ship(a, "1")
        ship(a, "2")
        yield Source(a, b)
    finally:
        for mc in started:
            mc.stop()


@pytest.fixture(scope="module")
def two_sources(source: Source) -> Iterator[Source]:
    """This process configured for both sources while the module's tests run."""
    with pytest.MonkeyPatch.context() as mp:
        for key, value in source.env().items():
            mp.setenv(key, value)
        yield source


@pytest.fixture(scope="module")
def ui_dagbag(two_sources: Source) -> Any:
    """Both sources' DAGs, in the migrated metadata DB the API server is started on, as the DAG
    processor leaves them: paused, as Airflow creates them."""
    from airflow.dag_processing.bundles.manager import DagBundlesManager
    from airflow.dag_processing.dagbag import sync_bag_to_db
    from airflow.utils.session import create_session

    dagbag = airflow_env.load_dagbag()
    assert not dagbag.import_errors, dagbag.import_errors
    assert {"walship_replicate", "walship_tail", "walship_status_other", "walship_tail_other"} <= set(dagbag.dags)
    with create_session() as session:
        DagBundlesManager().sync_bundles_to_db(session=session)
    sync_bag_to_db(dagbag, "dags-folder", None)
    return dagbag


@pytest.fixture(scope="module")
def samples(ui_dagbag: Any, two_sources: Source) -> dict[str, list[str]]:
    """Runs of the sources' status DAGs (their run ids by DAG): two of walship_status, one with
    both peers drained, one after more rows, shipped to peer 2 only; one of walship_status_other."""
    run_ids: dict[str, list[str]] = {}

    def test(dag_id: str) -> None:
        run = ui_dagbag.dags[dag_id].test()
        assert run.state == "success", {ti.task_id: ti.state for ti in run.get_task_instances()}
        run_ids.setdefault(dag_id, []).append(run.run_id)

    test("walship_status")
    put_rows(two_sources.a, b"second", 50)
    ship(two_sources.a, "2")
    test("walship_status")
    test("walship_status_other")
    gc.collect()  # the task runner's pipes: their ResourceWarnings here, not in a later test
    return run_ids


@pytest.fixture(scope="module")
def api_server(ui_dagbag: Any, two_sources: Source, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApiServer]:
    """``airflow api-server`` with both sources' connections in its environment."""
    with api_server_process(tmp_path_factory.mktemp("api-server"), two_sources.env()) as server:
        yield server


@pytest.fixture
def chromium(tmp_path: Path) -> Iterator[Any]:
    with chromium_driver(tmp_path) as driver:
        yield driver


def into_frame(driver: Any, peer_id: str) -> None:
    """Into the UI's frame of the page, once it shows ``peer_id``'s chart."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    wait = WebDriverWait(driver, 30)
    wait.until(ec.frame_to_be_available_and_switch_to_it((By.CSS_SELECTOR, "iframe[title='Replication']")))
    wait.until(ec.presence_of_element_located((By.CSS_SELECTOR, f"svg.walship-chart[data-peer='{peer_id}']")))


def blocked(driver: Any) -> list[str]:
    """The console's messages of navigations the browser refused."""
    return [e["message"] for e in driver.get_log("browser") if "Unsafe attempt" in e["message"]]


def without_time(status: dict[str, Any]) -> dict[str, Any]:
    """The status without what changes by itself as time passes."""
    return {
        "peers": [
            {
                **peer,
                "queues": [{k: v for k, v in q.items() if k not in TIME_DEPENDENT} for q in peer["queues"]],
                "totals": {k: v for k, v in peer["totals"].items() if k not in ("lag_s", "stuck_queues")},
            }
            for peer in status["peers"]
        ]
    }


def test_the_status_dags_record_their_sources_samples(ui_dagbag: Any) -> None:
    for dag_id, name in (("walship_status", "walship_status"), ("walship_status_other", "walship_status-other")):
        (outlet,) = ui_dagbag.dags[dag_id].task_dict["record"].outlets
        assert outlet.name == name


def test_unauthenticated_requests_are_refused(api_server: ApiServer) -> None:
    for path in ("/walship/", "/walship/api/status", "/walship/api/status?peer=1", f"/walship/?source={OTHER}"):
        r = httpx.get(api_server.url + path, timeout=10)
        assert r.status_code == 401, (path, r.status_code, r.text[:200])


def test_status_json_is_what_walship_status_prints(api_server: ApiServer, source: Source) -> None:
    with api_server.client() as client:
        r = client.get("/walship/api/status")
        assert r.status_code == 200, r.text
        got = r.json()
        expected = source.status()
        assert set(got) == set(expected) and "peers" in got
        assert without_time(got) == without_time(expected)
        assert [p["peer_id"] for p in got["peers"]] == ["1", "2"]
        named = client.get("/walship/api/status", params={"source": "walship_source"})
        assert named.status_code == 200 and without_time(named.json()) == without_time(expected)

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


def test_each_source_has_its_status_and_an_unknown_one_is_a_404(api_server: ApiServer, source: Source) -> None:
    with api_server.client() as client:
        other = client.get("/walship/api/status", params={"source": OTHER})
        assert other.status_code == 200, other.text
        assert without_time(other.json()) == without_time(source.other_status())
        assert [p["peer_id"] for p in other.json()["peers"]] == ["3"]
        expected = f"source 'nope' is not a walship source of this Airflow ([walship] sources: walship_source, {OTHER})"
        unknown = client.get("/walship/api/status", params={"source": "nope"})
        assert (unknown.status_code, unknown.json()) == (404, {"detail": expected})
        page = client.get("/walship/", params={"source": "nope"})
        assert page.status_code == 404 and expected.replace("'", "&#x27;") in page.text


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


#: the page's peers as the browser sees them: badge, chart, and each queue's raw values (its
#: row's and its folded details row's)
READ_PAGE = """
const out = {};
for (const section of document.querySelectorAll('section.peer')) {
  const chart = section.querySelector('svg.walship-chart');
  out[section.dataset.peerId] = {
    drained: section.querySelector('.badge').dataset.drained,
    samples: chart.dataset.samples,
    series: Array.from(chart.querySelectorAll('polyline.series')).map(
      p => [p.dataset.series, p.getAttribute('points').trim().split(/\\s+/).length]),
    rows: Array.from(section.querySelectorAll('tbody.queue')).map(tbody => Object.fromEntries(
      Array.from(tbody.querySelectorAll('[data-field]')).map(e => [e.dataset.field, JSON.parse(e.dataset.value)]))),
  };
}
return out;
"""
#: per queue table: its width and the width it has (the frame's, less the page's margins)
TABLE_WIDTHS = """
return Array.from(document.querySelectorAll('div.table-wrap')).map(
  w => [w.scrollWidth, w.clientWidth]).concat([[document.documentElement.scrollWidth, window.innerWidth]]);
"""


def test_links_inside_airflows_ui(
    api_server: ApiServer, source: Source, samples: dict[str, list[str]], chromium: Any, tmp_path: Path
) -> None:
    """In the UI's sandboxed frame: the JSON link shows the JSON in the page; a queue's details
    unfold; a run link takes the UI to the run's page. The tables fit the 1,400 px window."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    driver = chromium
    wait = WebDriverWait(driver, 30)
    login(driver, api_server).click()
    frame = wait.until(ec.presence_of_element_located((By.CSS_SELECTOR, "iframe[title='Replication']")))
    sandbox = frame.get_attribute("sandbox")
    assert sandbox == "allow-scripts allow-same-origin allow-forms allow-downloads"  # Airflow 3.3.2's
    frame_width = frame.size["width"]
    into_frame(driver, "1")

    widths = driver.execute_script(TABLE_WIDTHS)
    assert len(widths) == 4 and all(scroll <= client for scroll, client in widths), (frame_width, widths)
    assert frame_width < 1400
    driver.switch_to.default_content()
    in_ui = tmp_path / "replication-in-ui.png"
    driver.save_screenshot(str(in_ui))
    print(f"screenshot: {in_ui}")
    into_frame(driver, "1")

    # the JSON: in the page, which stays
    driver.find_element(By.CSS_SELECTOR, "a.json").click()
    view = wait.until(ec.visibility_of_element_located((By.CSS_SELECTOR, "#json-view[data-loaded='ok'] pre")))
    shown = json.loads(view.text)
    assert without_time(shown) == without_time(source.status())
    assert driver.execute_script("return location.pathname") == "/walship/"
    assert len(driver.find_elements(By.CSS_SELECTOR, "section.peer")) == 2
    assert len(driver.window_handles) == 1
    driver.find_element(By.ID, "json-close").click()
    wait.until(ec.invisibility_of_element_located((By.ID, "json-view")))

    # a queue's details, folded, unfold
    first = driver.find_element(By.CSS_SELECTOR, "section[data-peer-id='1'] tbody.queue")
    details = first.find_element(By.CSS_SELECTOR, "tr.details")
    assert not details.is_displayed()
    first.find_element(By.CSS_SELECTOR, "button.more").click()
    wait.until(lambda _: details.is_displayed())
    wal = details.find_element(By.CSS_SELECTOR, "[data-field='current_wal'] dd")
    assert wal.text == source.status("1")["peers"][0]["queues"][0]["current_wal"]

    # a run link: the UI's own page of the run
    run_id = samples["walship_status"][-1]
    driver.find_element(By.CSS_SELECTOR, f"a.run[data-run-id='{run_id}']").click()
    driver.switch_to.default_content()
    run_url = f"{api_server.url}/dags/walship_status/runs/{quote(run_id, safe='')}"
    wait.until(ec.url_to_be(run_url))
    wait.until(ec.invisibility_of_element_located((By.CSS_SELECTOR, "iframe[title='Replication']")))
    wait.until(ec.presence_of_element_located((By.XPATH, f"//*[contains(text(), '{run_id}')]")))
    assert blocked(driver) == []


REFRESHED = "return [document.getElementById('live').dataset.refreshes || '0', window.scrollY, window.walshipMark]"


def test_paused_shipping_dags_and_the_refresh_inside_airflows_ui(
    api_server: ApiServer, samples: dict[str, list[str]], chromium: Any
) -> None:
    """Both shipping DAGs paused: said, with their links, and peer 1's queue "not shipped".
    Unpausing walship_replicate shows on the next refresh, in place: no reload, same scroll.
    Opened at its deep link, with a 2 s refresh."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    driver = chromium
    wait = WebDriverWait(driver, 30)
    login(driver, api_server)
    driver.get(f"{api_server.url}/plugin/walship/walship/?refresh=2")
    into_frame(driver, "1")
    assert driver.execute_script("return location.pathname + location.search") == "/walship/?refresh=2"

    shipping = driver.find_element(By.CSS_SELECTOR, "section.shipping")
    assert shipping.get_attribute("data-shipping") == "paused"
    dags = {
        li.get_attribute("data-dag-id"): li.find_element(By.CSS_SELECTOR, ".chip").text
        for li in shipping.find_elements(By.CSS_SELECTOR, "li")
    }
    assert dags == {"walship_replicate": "paused", "walship_tail": "paused"}
    flags = driver.find_elements(By.CSS_SELECTOR, "section[data-peer-id='1'] td[data-field='state'] .flag-paused")
    assert [f.text for f in flags] == ["not shipped"]  # peer 1 has a backlog; peer 2 is drained
    assert driver.find_elements(By.CSS_SELECTOR, "section[data-peer-id='2'] .flag-paused") == []

    driver.execute_script("window.walshipMark = 'same page'; window.scrollTo(0, 300)")
    before = int(driver.execute_script(REFRESHED)[0])
    api_server.set_paused("walship_replicate", False)
    try:
        wait.until(
            lambda d: d.find_element(By.CSS_SELECTOR, "section.shipping").get_attribute("data-shipping") == "active"
        )
        refreshes, scroll_y, mark = driver.execute_script(REFRESHED)
        assert int(refreshes) > before and scroll_y == 300 and mark == "same page"
        assert driver.find_elements(By.CSS_SELECTOR, ".flag-paused") == []
        assert driver.find_element(By.ID, "refresh-note").text.startswith("refreshes every 2 s; last at ")
    finally:
        api_server.set_paused("walship_replicate", True)

    # the DAG's link: the UI's page of the DAG
    wait.until(lambda d: d.find_element(By.CSS_SELECTOR, "section.shipping").get_attribute("data-shipping") == "paused")
    driver.find_element(By.CSS_SELECTOR, "section.shipping a.dag[data-dag-id='walship_tail']").click()
    driver.switch_to.default_content()
    wait.until(ec.url_to_be(f"{api_server.url}/dags/walship_tail"))
    assert blocked(driver) == []


def test_the_source_selector_inside_airflows_ui(
    api_server: ApiServer, source: Source, samples: dict[str, list[str]], chromium: Any
) -> None:
    """The other source: its peer, its samples, its DAGs' runs; the default source's page
    lists none of its DAGs."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import Select, WebDriverWait

    driver = chromium
    wait = WebDriverWait(driver, 30)
    login(driver, api_server).click()
    into_frame(driver, "1")
    default_dags = {a.get_attribute("data-dag-id") for a in driver.find_elements(By.CSS_SELECTOR, "a.dag")}
    assert "walship_status" in default_dags and not any(d.endswith("_other") for d in default_dags)
    default_runs = {
        (a.get_attribute("data-dag-id"), a.get_attribute("data-run-id"))
        for a in driver.find_elements(By.CSS_SELECTOR, "a.run")
    }
    # other test modules' runs of the default source's DAGs share this metadata DB: they may be listed too
    assert {("walship_status", r) for r in samples["walship_status"]} <= default_runs
    assert not any(dag_id.endswith("_other") for dag_id, _ in default_runs)

    Select(driver.find_element(By.CSS_SELECTOR, "select[data-source-select]")).select_by_value(OTHER)
    wait.until(ec.presence_of_element_located((By.CSS_SELECTOR, "svg.walship-chart[data-peer='3']")))
    assert [s.get_attribute("data-peer-id") for s in driver.find_elements(By.CSS_SELECTOR, "section.peer")] == ["3"]
    chart = driver.find_element(By.CSS_SELECTOR, "svg.walship-chart[data-peer='3']")
    assert chart.get_attribute("data-samples") == "1"
    runs = {
        (a.get_attribute("data-dag-id"), a.get_attribute("data-run-id"))
        for a in driver.find_elements(By.CSS_SELECTOR, "a.run")
    }
    # walship_maintenance and walship_switchover, one for all sources, are listed too, with other test modules' runs
    assert {r for r in runs if r[0] not in ("walship_maintenance", "walship_switchover")} == {
        ("walship_status_other", r) for r in samples["walship_status_other"]
    }
    shipping = driver.find_elements(By.CSS_SELECTOR, "section.shipping li")
    assert [li.get_attribute("data-dag-id") for li in shipping] == ["walship_replicate_other", "walship_tail_other"]
    driver.switch_to.default_content()
    assert driver.current_url == f"{api_server.url}/plugin/walship/walship/?source={OTHER}"


def test_the_page_on_its_own(
    api_server: ApiServer, source: Source, samples: dict[str, list[str]], chromium: Any, tmp_path: Path
) -> None:
    """At /walship/, no frame: what it shows against read_status; its run link navigates the
    window, its JSON link opens a tab."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    driver = chromium
    wait = WebDriverWait(driver, 30)
    login(driver, api_server)
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

    # the whole page in one screenshot: a window as tall as the page plus the browser's own frame
    height = driver.execute_script(
        "return document.documentElement.scrollHeight + window.outerHeight - window.innerHeight"
    )
    driver.set_window_size(1400, max(1000, int(height)))
    shot = tmp_path / "replication.png"
    driver.save_screenshot(str(shot))
    print(f"screenshot: {shot}")

    # the JSON link: a new tab
    page_window = driver.current_window_handle
    driver.find_element(By.CSS_SELECTOR, "a.json").click()
    wait.until(ec.number_of_windows_to_be(2))
    driver.switch_to.window(next(h for h in driver.window_handles if h != page_window))
    wait.until(ec.url_to_be(f"{api_server.url}/walship/api/status"))
    assert without_time(json.loads(driver.find_element(By.TAG_NAME, "body").text)) == without_time(source.status())
    driver.close()
    driver.switch_to.window(page_window)
    assert driver.current_url == f"{api_server.url}/walship/"

    # a run link: this window goes to the run's page in the UI
    run_id = samples["walship_status"][0]
    driver.find_element(By.CSS_SELECTOR, f"a.run[data-run-id='{run_id}']").click()
    wait.until(ec.url_to_be(f"{api_server.url}/dags/walship_status/runs/{quote(run_id, safe='')}"))
    wait.until(ec.presence_of_element_located((By.XPATH, f"//*[contains(text(), '{run_id}')]")))
