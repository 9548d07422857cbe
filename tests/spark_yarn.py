"""Spark on the harness's YARN (the ``real_hdfs`` fixture): the packed environment, a Spark
connection to it in cluster deploy mode, what the ResourceManager lists, and a table's rows in
one scan. Shared by the tests of Spark on YARN and of the production topology."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import requests

from walship_testing.harness import HBaseProcess, YarnInfo

ROOT = Path(__file__).resolve().parents[1]
PYSPARK_JARS = (
    Path(sys.prefix)
    / "lib"
    / f"python{sys.version_info[0]}.{sys.version_info[1]}"
    / "site-packages"
    / "pyspark"
    / "jars"
)


def pack(out: Path) -> Path:
    """walship and its dependencies packed by ``walship spark pack`` (from this checkout)."""
    done = subprocess.run(
        [str(Path(sys.executable).parent / "walship"), "spark", "pack", "-o", str(out), "--json",
         "--constraint", str(ROOT / "constraints.txt")],
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    info = json.loads(done.stdout)
    assert (
        info["path"] == str(out) and info["size"] == out.stat().st_size and info["installed"][0].startswith("walship")
    )
    return out


def put_on_hdfs(hb: HBaseProcess, local: Path, path: str) -> str:
    """``local`` copied to ``path`` on the cluster's HDFS (over WebHDFS); its ``hdfs://`` URL."""
    import fsspec

    assert hb.yarn is not None
    host, port = str(hb.ready["webhdfs"]).split(":")
    fs = fsspec.filesystem("webhdfs", host=host, port=int(port), user=os.environ.get("USER", "root"))
    fs.put_file(str(local), path)
    return f"{hb.yarn.default_fs}{path}"


def yarn_connection(yarn: YarnInfo, archive: Path | str, queue: str = "walship", **extra: Any) -> str:
    """A Spark connection (JSON, as ``AIRFLOW_CONN_*`` takes it) to the harness's YARN in
    cluster deploy mode, its Python the packed environment ``archive``."""
    return json.dumps(
        {
            "conn_type": "spark",
            "host": "yarn",
            "extra": {
                "deploy-mode": "cluster",
                "queue": queue,
                "archive": str(archive),
                "yarn_resourcemanager_webapp_address": yarn.webapp,
                "num_executors": 2,
                "executor_cores": 1,
                "executor_memory": "512m",
                "driver_memory": "512m",
                "spark_conf": {
                    # Spark's jars from the node's own pyspark, not zipped and uploaded each submit
                    "spark.yarn.jars": f"local:{PYSPARK_JARS}/*",
                    "spark.yarn.stagingDir": f"{yarn.default_fs}/tmp/spark-staging",
                    "spark.yarn.am.memory": "512m",
                    "spark.yarn.maxAppAttempts": "1",
                    # the queue lock of a killed executor's task is free again within seconds
                    "spark.executorEnv.WALSHIP_ZK_SESSION_TIMEOUT": "4",
                },
                **extra,
            },
        }
    )


def yarn_apps(yarn: YarnInfo) -> list[dict[str, Any]]:
    """Every application the ResourceManager knows."""
    answer = requests.get(
        f"http://{yarn.webapp}/ws/v1/cluster/apps", headers={"Accept": "application/json"}, timeout=10
    ).json()
    return list((answer.get("apps") or {}).get("app") or [])


def rows(c: Any) -> dict[bytes, dict[bytes, bytes]]:
    """Every row's latest r:q cell of a test cluster's table, by one scan."""
    conn = c.conn()
    try:
        return dict(conn.table(c.table_name).scan(columns=[b"r:q"]))
    finally:
        conn.close()


class PacedWriter:
    """Writes ``batch`` rows (``row-NNNNNN``, column r:q) every ``pause`` seconds into a test
    cluster's table on a thread of its own, from ``with`` until its end: :attr:`written` rows."""

    def __init__(self, cluster: Any, batch: int = 100, pause: float = 0.5) -> None:
        self.cluster = cluster
        self.batch = batch
        self.pause = pause
        self.written = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._write, daemon=True, name="paced-writer")

    def _write(self) -> None:
        conn = self.cluster.conn()
        table = conn.table(self.cluster.table_name)
        try:
            while not self._stop.wait(self.pause):
                with table.batch() as batch:
                    for i in range(self.written, self.written + self.batch):
                        batch.put(b"row-%06d" % i, {b"r:q": b"v%d" % i})
                self.written += self.batch
        finally:
            conn.close()

    def __enter__(self) -> PacedWriter:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=60)
        assert not self._thread.is_alive(), "the writer did not stop"
