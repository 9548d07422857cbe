"""Airflow's UI for the tests: a real ``airflow api-server`` on a free port, a headless
Chromium, and the login through the UI's own form (SimpleAuthManager's admin ``walship``)."""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from waiting import wait_until

from walship.zk.localserver import free_port

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
USER = "walship"


@dataclass(frozen=True)
class ApiServer:
    url: str
    password: str
    log: Path

    def token(self) -> str:
        r = httpx.post(f"{self.url}/auth/token", json={"username": USER, "password": self.password}, timeout=10)
        assert r.status_code in (200, 201), r.text
        return str(r.json()["access_token"])

    def client(self) -> httpx.Client:
        return httpx.Client(base_url=self.url, headers={"Authorization": f"Bearer {self.token()}"}, timeout=30)

    def set_paused(self, dag_id: str, paused: bool) -> None:
        with self.client() as client:
            r = client.patch(f"/api/v2/dags/{dag_id}", json={"is_paused": paused})
            assert r.status_code == 200 and r.json()["is_paused"] is paused, r.text


@contextlib.contextmanager
def api_server_process(tmp: Path, env: dict[str, str]) -> Iterator[ApiServer]:
    """``airflow api-server`` on a free port, in its own process group, with SimpleAuthManager's
    user ``walship`` (admin) and ``env`` (the sources' connections) in its environment."""
    password = secrets.token_urlsafe(12)
    passwords = tmp / "passwords.json"
    passwords.write_text(json.dumps({USER: password}))
    port = free_port()
    full_env = {
        **os.environ,
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": f"{USER}:admin",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(passwords),
        "AIRFLOW__API_AUTH__JWT_SECRET": secrets.token_hex(32),
        "AIRFLOW__API__SECRET_KEY": secrets.token_hex(32),
        **env,
    }
    log = tmp / "api-server.log"
    airflow = Path(sys.executable).parent / "airflow"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [str(airflow), "api-server", "--host", "127.0.0.1", "--port", str(port), "--workers", "1"],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=full_env,
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


@contextlib.contextmanager
def chromium_driver(tmp: Path) -> Iterator[Any]:
    """Headless Chromium, 1,400 px wide, its console kept (``driver.get_log("browser")``)."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    for arg in (
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={tmp / 'chromium-profile'}",
        "--window-size=1400,1000",
    ):
        options.add_argument(arg)
    driver = webdriver.Chrome(options=options, service=Service(CHROMEDRIVER, log_output=str(tmp / "driver.log")))
    try:
        yield driver
    finally:
        driver.quit()


def through_navigation(condition: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """``condition`` for a ``WebDriverWait`` while the page may still navigate (the UI sends
    a fresh visitor on to its login page, and back once logged in): a look the browser
    aborted because the page navigated is a look to take again, not a failure."""
    from selenium.common.exceptions import WebDriverException

    def check(driver: Any) -> Any:
        try:
            return condition(driver)
        except WebDriverException as exc:
            if "aborted by navigation" not in (exc.msg or ""):
                raise
            return False

    return check


def login(driver: Any, api_server: ApiServer) -> Any:
    """Log in through the UI's own form (SimpleAuthManager); the "Replication" nav entry."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    wait = WebDriverWait(driver, 30)
    driver.get(api_server.url + "/")
    wait.until(through_navigation(ec.presence_of_element_located((By.NAME, "username")))).send_keys(USER)
    driver.find_element(By.NAME, "password").send_keys(api_server.password)
    wait.until(ec.element_to_be_clickable((By.CSS_SELECTOR, "button[type=submit]"))).click()
    nav = wait.until(through_navigation(ec.element_to_be_clickable((By.CSS_SELECTOR, "a[aria-label='Replication']"))))
    assert nav.text == "Replication" and nav.get_attribute("href") == f"{api_server.url}/plugin/walship"
    return nav
