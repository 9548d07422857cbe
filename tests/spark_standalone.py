"""A standalone Spark master and worker on loopback, started with pyspark's own spark-class."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pyspark
from waiting import wait_until

from walship.zk.localserver import free_port


@dataclass(frozen=True)
class Standalone:
    master: str  # spark://127.0.0.1:port
    host: str
    port: int
    rest_port: int
    work_dir: Path


def _alive_workers(webui: int) -> int:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{webui}/json/", timeout=2) as r:
            return int(json.load(r).get("aliveworkers", 0))
    except OSError:
        return 0


@contextlib.contextmanager
def standalone_spark(tmp_path: Path, *, cores: int = 2, memory: str = "2g") -> Iterator[Standalone]:
    home = Path(pyspark.__file__).resolve().parent
    port, webui, rest, worker_ui = free_port(), free_port(), free_port(), free_port()
    work = tmp_path / "spark-work"
    work.mkdir(parents=True)
    env = {
        **os.environ,
        "SPARK_HOME": str(home),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "PYSPARK_PYTHON": sys.executable,
        "PATH": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}",
        "SPARK_MASTER_OPTS": f"-Dspark.master.rest.enabled=true -Dspark.master.rest.port={rest}",
    }
    spark_class = str(home / "bin" / "spark-class")
    logs = open(tmp_path / "spark-standalone.log", "w")  # noqa: SIM115 - closed below
    master = subprocess.Popen(
        [spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(port),
         "--webui-port", str(webui)],
        env=env, stdout=logs, stderr=subprocess.STDOUT,
    )  # fmt: skip
    worker = subprocess.Popen(
        [spark_class, "org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1", "--cores", str(cores),
         "--memory", memory, "--work-dir", str(work), "--webui-port", str(worker_ui), f"spark://127.0.0.1:{port}"],
        env=env, stdout=logs, stderr=subprocess.STDOUT,
    )  # fmt: skip
    try:

        def up() -> bool:
            if master.poll() is not None or worker.poll() is not None:
                raise RuntimeError(
                    f"standalone Spark did not start: {(tmp_path / 'spark-standalone.log').read_text()[-3000:]}"
                )
            return _alive_workers(webui) >= 1

        wait_until(up, timeout=120, interval=0.5, what="a standalone Spark worker to register")
        yield Standalone(f"spark://127.0.0.1:{port}", "127.0.0.1", port, rest, work)
    finally:
        for proc in (worker, master):
            proc.terminate()
        for proc in (worker, master):
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        logs.close()
