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
            {"conn_type": "spark", "host": "local[2]", "extra": {"pyspark_python": sys.executable}}
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


def source_conn(cluster: Any) -> str:
    """``AIRFLOW_CONN_WALSHIP_SOURCE`` for a test cluster (its ZooKeeper chroot in the host)."""
    hostport, _, chroot = cluster.zk_hosts.partition("/")
    host, port = hostport.split(":")
    return json.dumps(
        {
            "conn_type": "walship",
            "host": f"{host}:{port}/{chroot}" if chroot else host,
            "port": int(port),
            "extra": {"znode_parent": cluster.parent, "wal_root": cluster.mc.wal_root},
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
