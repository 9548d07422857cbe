"""Airflow for the tests: configured before anything imports airflow (it reads its
configuration on import), with a migrated SQLite metadata DB of its own."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
_HOME = tempfile.mkdtemp(prefix="walship-airflow-")
os.environ.update(
    {
        "AIRFLOW_HOME": _HOME,
        "AIRFLOW__CORE__DAGS_FOLDER": str(ROOT / "dags"),
        "AIRFLOW__CORE__PLUGINS_FOLDER": str(ROOT / "plugins"),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW_CONN_SPARK_DEFAULT": json.dumps(
            {
                "conn_type": "spark",
                "host": "local[2]",
                "extra": {"pyspark_python": sys.executable, "walship_jvm_options": True},
            }
        ),
        "PATH": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}",
    }
)


def load_dagbag() -> Any:
    """The repository's DAGs, parsed by Airflow (after ``airflow db migrate``)."""
    migrate = subprocess.run(
        [str(Path(sys.executable).parent / "airflow"), "db", "migrate"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env=os.environ.copy(),
    )
    assert migrate.returncode == 0, migrate.stderr[-2000:]
    from airflow.dag_processing.dagbag import DagBag

    return DagBag(dag_folder=str(ROOT / "dags"))


def source_conn(cluster: Any, *, thrift2: bool = True) -> str:
    """``AIRFLOW_CONN_WALSHIP_SOURCE`` for a test cluster (its ZooKeeper chroot in the host),
    with its Thrift2 server as the extra ``thrift2`` unless told not to."""
    hostport, _, chroot = cluster.zk_hosts.partition("/")
    host, port = hostport.split(":")
    return json.dumps(
        {
            "conn_type": "walship",
            "host": f"{host}:{port}/{chroot}" if chroot else host,
            "port": int(port),
            "extra": {
                "znode_parent": cluster.parent,
                "wal_root": cluster.mc.wal_root,
                **({"thrift2": cluster.thrift2_address()} if thrift2 else {}),  # e.g. serial peers' barriers
            },
        }
    )


def task_failures(out: str) -> list[str]:
    """The exception line (``module.Error: message``) of each task that failed in the captured
    output of ``dag.test()`` runs, in the order they failed."""
    reasons = []
    lines = out.splitlines()
    for i, line in enumerate(lines):
        if "Task failed with exception" not in line:
            continue
        for later in lines[i + 1 :]:
            if later and not later[0].isspace() and not later.startswith("Traceback") and ": " in later:
                reasons.append(later)
                break
    return reasons


#: The warnings Airflow, its Spark provider and their libraries raise in these tests, each
#: named (marks for a module's ``pytestmark``); nothing else is ignored.
AIRFLOW_WARNINGS: list[Any] = [
    pytest.mark.filterwarnings("ignore:GitWildMatchPattern:DeprecationWarning"),  # pathspec, under Airflow's bundles
    pytest.mark.filterwarnings("ignore:Using `httpx` with `starlette.testclient` is deprecated"),  # svcs, dag.test()
    # the pipes Airflow's task runner and the Spark hook leave to the garbage collector
    pytest.mark.filterwarnings(r"ignore:unclosed file <_io\.(TextIOWrapper|FileIO):ResourceWarning"),
    pytest.mark.filterwarnings(
        r"ignore:Exception ignored in. <_io\.(TextIOWrapper|FileIO):pytest.PytestUnraisableExceptionWarning"
    ),
]
#: The marks of a test module that runs Airflow: its warnings, and its leftovers collected
#: after each test (the ``collect_airflow_leftovers`` fixture of conftest.py).
AIRFLOW_MARKS: list[Any] = [*AIRFLOW_WARNINGS, pytest.mark.usefixtures("collect_airflow_leftovers")]


class Standalone:
    """A live ``airflow standalone`` (scheduler, DAG processor, triggerer, API server) on a
    metadata DB and free ports of its own, in its own process group; user ``walship`` (admin)."""

    USER = "walship"

    def __init__(self, home: Path, env: dict[str, str]) -> None:
        from walship.zk.localserver import free_port

        self.home = home
        self.password = os.urandom(9).hex()
        (home / "passwords.json").write_text(json.dumps({self.USER: self.password}))
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = home / "standalone.log"
        self.env = {
            **os.environ,
            "AIRFLOW_HOME": str(home),
            "AIRFLOW__CORE__PARALLELISM": "4",
            "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "True",
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": f"{self.USER}:admin",
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(home / "passwords.json"),
            "AIRFLOW__API__HOST": "127.0.0.1",
            "AIRFLOW__API__PORT": str(self.port),
            "AIRFLOW__API__WORKERS": "1",
            "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"{self.url}/execution/",
            "AIRFLOW__API_AUTH__JWT_SECRET": os.urandom(32).hex(),
            "AIRFLOW__API__SECRET_KEY": os.urandom(32).hex(),
            "AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT": str(free_port()),
            "AIRFLOW__LOGGING__TRIGGER_LOG_SERVER_PORT": str(free_port()),
            "AIRFLOW__SCHEDULER__SCHEDULER_HEARTBEAT_SEC": "2",
            **env,
        }
        self.proc: subprocess.Popen[bytes] | None = None
        self._token: str | None = None

    def __enter__(self) -> Standalone:
        with self.log.open("wb") as out:
            self.proc = subprocess.Popen(
                [str(Path(sys.executable).parent / "airflow"), "standalone"],
                stdout=out,
                stderr=subprocess.STDOUT,
                env=self.env,
                start_new_session=True,
            )
        return self

    def __exit__(self, *exc: object) -> None:
        import signal

        if self.proc is None:
            return
        for sig, wait in ((signal.SIGTERM, 20), (signal.SIGKILL, 10)):
            try:
                os.killpg(self.proc.pid, sig)
            except ProcessLookupError:
                return
            try:
                self.proc.wait(timeout=wait)
                if sig == signal.SIGTERM:
                    os.killpg(self.proc.pid, signal.SIGKILL)  # the scheduler's workers outlive the parent
            except (subprocess.TimeoutExpired, ProcessLookupError):
                continue

    def alive(self) -> None:
        assert self.proc is not None and self.proc.poll() is None, (
            f"airflow standalone exited ({None if self.proc is None else self.proc.returncode}):\n"
            f"{self.log.read_text(errors='replace')[-3000:]}"
        )

    def api(self, method: str, path: str, **kwargs: Any) -> Any:
        """A call of the REST API (``/api/v2`` + ``path``) as the admin user; ``None`` while the
        server does not answer."""
        import httpx

        self.alive()
        try:
            if self._token is None:
                r = httpx.post(
                    f"{self.url}/auth/token", json={"username": self.USER, "password": self.password}, timeout=10
                )
                if r.status_code not in (200, 201):
                    return None
                self._token = str(r.json()["access_token"])
            headers = {"Authorization": f"Bearer {self._token}"}
            return httpx.request(method, f"{self.url}/api/v2{path}", headers=headers, timeout=30, **kwargs)
        except httpx.TransportError:
            return None
