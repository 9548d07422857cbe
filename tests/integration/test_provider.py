"""walship as a shop installs it: the built wheel ``pip install``-ed into a clean Airflow
(a virtualenv of its own with Airflow alone, then walship), which then lists walship among its
providers, loads its plugin, shows the ``walship`` connection form through its API server, and
builds every DAG of two sources from one DAG file."""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from waiting import wait_until

from walship.zk.localserver import free_port

pytestmark = [pytest.mark.integration]

ROOT = Path(__file__).resolve().parents[2]
AIRFLOW_VERSION = "3.3.2"
USER = "walship"

#: every per-source DAG the provider builds
PER_SOURCE = [
    "walship_add_peer",
    "walship_clean",
    "walship_copy",
    "walship_drain",
    "walship_replay",
    "walship_replicate",
    "walship_scope",
    "walship_sep",
    "walship_status",
    "walship_tail",
    "walship_verify",
]


@dataclass(frozen=True)
class CleanAirflow:
    """A virtualenv with Airflow and the walship wheel, and an ``AIRFLOW_HOME`` of its own
    (SQLite, migrated) whose DAGs folder holds one file: ``build_all(globals())``."""

    bin: Path
    home: Path

    def env(self, **extra: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "WALSHIP"))}
        return {
            **env,
            "AIRFLOW_HOME": str(self.home),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__CORE__DAGS_FOLDER": str(self.home / "dags"),
            "PATH": f"{self.bin}:{env.get('PATH', '')}",
            **extra,
        }

    def run(self, *args: str, **extra: str) -> str:
        done = subprocess.run(
            [str(self.bin / args[0]), *args[1:]],
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
            env=self.env(**extra),
        )
        assert done.returncode == 0, f"{' '.join(args)}:\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
        return done.stdout


def json_of(out: str) -> Any:
    """The JSON an ``airflow ... -o json`` printed (its last line; Airflow logs warnings first)."""
    (last,) = [line for line in out.splitlines() if line.startswith(("[", "{"))][-1:]
    return json.loads(last)


def _pip(python: Path, *args: str) -> None:
    done = subprocess.run(
        [str(python), "-m", "pip", "--disable-pip-version-check", *args],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert done.returncode == 0, f"pip {' '.join(args)}:\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"


def _checkout_copy(to: Path) -> Path:
    """The files git tracks in this checkout, copied: the wheel is built from them alone (pip
    builds in the source tree, where an old ``build/`` would add what was deleted since)."""
    files = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    for name in filter(None, files.decode().split("\0")):
        source = ROOT / name
        if source.is_file():
            (to / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, to / name)
    return to


@pytest.fixture(scope="module")
def clean_airflow(tmp_path_factory: pytest.TempPathFactory) -> CleanAirflow:
    """An existing Airflow (installed first, alone), then ``pip install walship[airflow]`` of
    the wheel built from this checkout, as a shop installs a provider."""
    tmp = tmp_path_factory.mktemp("clean-airflow")
    venv = tmp / "venv"
    subprocess.run([sys._base_executable, "-m", "venv", str(venv)], check=True, timeout=120)  # type: ignore[attr-defined]
    python = venv / "bin" / "python"
    constraints = str(ROOT / "constraints.txt")
    _pip(python, "install", "-c", constraints, f"apache-airflow=={AIRFLOW_VERSION}")
    dist = tmp / "dist"
    _pip(Path(sys.executable), "wheel", "--no-deps", "-w", str(dist), str(_checkout_copy(tmp / "src")))
    (wheel,) = dist.glob("walship-*.whl")
    _pip(python, "install", "-c", constraints, f"{wheel}[airflow]")
    home = tmp / "home"
    (home / "dags").mkdir(parents=True)
    (home / "dags" / "walship_dags.py").write_text(
        '"""walship\'s Airflow DAGs, every source of [walship] sources."""\n\n'
        "from walship_airflow.dags import build_all\n\nbuild_all(globals())\n"
    )
    airflow = CleanAirflow(venv / "bin", home)
    airflow.run("airflow", "db", "migrate")
    return airflow


def test_airflow_lists_walship_among_its_providers_and_plugins(clean_airflow: CleanAirflow) -> None:
    from importlib.metadata import version

    providers = json_of(clean_airflow.run("airflow", "providers", "list", "-o", "json"))
    (walship,) = [p for p in providers if p["package_name"] == "walship"]
    assert walship["version"] == version("walship")
    plugins = json_of(clean_airflow.run("airflow", "plugins", "-o", "json"))
    (plugin,) = [p for p in plugins if p["name"] == "walship"]
    assert plugin["source"].startswith(f"walship=={version('walship')}: EntryPoint(name='walship'")
    assert [v["name"] for v in plugin["external_views"]] == ["Replication"]
    hooks = json_of(clean_airflow.run("airflow", "providers", "hooks", "-o", "json"))
    (hook,) = [h for h in hooks if h["connection_type"] == "walship"]
    assert hook["class"] == "walship_airflow.hooks.source.WalshipHook" and hook["package_name"] == "walship"


def test_one_dag_file_builds_the_dags_of_every_source(clean_airflow: CleanAirflow) -> None:
    listed = json_of(
        clean_airflow.run(
            "airflow", "dags", "list", "--local", "-o", "json", AIRFLOW__WALSHIP__SOURCES="walship_source, hbase_east"
        )
    )
    expected = {*PER_SOURCE, *(f"{d}_hbase_east" for d in PER_SOURCE), "walship_maintenance", "walship_switchover"}
    assert {d["dag_id"] for d in listed} == expected
    errors = json_of(
        clean_airflow.run(
            "airflow", "dags", "list-import-errors", "--local", "-o", "json",
            AIRFLOW__WALSHIP__SOURCES="walship_source, hbase_east",
        )
    )  # fmt: skip
    assert errors == []


@pytest.fixture(scope="module")
def clean_api_server(clean_airflow: CleanAirflow) -> Iterator[tuple[str, str]]:
    """The clean Airflow's ``airflow api-server`` (URL, bearer token of the admin ``walship``)."""
    password = secrets.token_urlsafe(12)
    passwords = clean_airflow.home / "passwords.json"
    passwords.write_text(json.dumps({USER: password}))
    port = free_port()
    env = clean_airflow.env(
        AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS=f"{USER}:admin",
        AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE=str(passwords),
        AIRFLOW__API_AUTH__JWT_SECRET=secrets.token_hex(32),
        AIRFLOW__API__SECRET_KEY=secrets.token_hex(32),
    )
    log = clean_airflow.home / "api-server.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [str(clean_airflow.bin / "airflow"), "api-server", "--host", "127.0.0.1", "--port", str(port)],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )
    url = f"http://127.0.0.1:{port}"

    def token() -> str | None:
        assert proc.poll() is None, f"the API server exited ({proc.returncode}):\n{log.read_text()[-3000:]}"
        try:
            r = httpx.post(f"{url}/auth/token", json={"username": USER, "password": password}, timeout=5)
        except httpx.TransportError:
            return None
        return str(r.json()["access_token"]) if r.status_code in (200, 201) else None

    try:
        bearer = wait_until(token, timeout=180, what="the clean Airflow's API server")
        yield url, bearer
    finally:
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(proc.pid, sig)
                proc.wait(timeout=20)
                break
            except ProcessLookupError:
                break
            except subprocess.TimeoutExpired:
                continue


def test_the_connection_form_has_walships_fields(clean_api_server: tuple[str, str]) -> None:
    url, bearer = clean_api_server
    r = httpx.get(f"{url}/ui/connections/hook_meta", headers={"Authorization": f"Bearer {bearer}"}, timeout=30)
    assert r.status_code == 200, r.text
    (meta,) = [m for m in r.json() if m["connection_type"] == "walship"]
    assert meta["hook_name"] == "walship source cluster"
    standard: dict[str, Any] = meta["standard_fields"]
    assert standard["host"]["title"] == "ZooKeeper quorum" and standard["port"]["title"] == "ZooKeeper port", standard
    assert standard["url_schema"]["hidden"] is True
    extra: dict[str, Any] = meta["extra_fields"]
    assert standard["host"]["placeholder"].startswith("zk1,zk2:2181")
    assert set(extra) == {"znode_parent", "wal_root", "thrift2", "principal", "keytab", "zk_auth"}
    assert extra["znode_parent"]["schema"]["title"] == "Znode parent" and extra["znode_parent"]["value"] == "/hbase"
    assert extra["keytab"]["schema"]["title"] == "Keytab path"
    assert extra["principal"]["schema"]["title"] == "Kerberos principal"
    assert extra["zk_auth"]["schema"]["format"] == "password"
