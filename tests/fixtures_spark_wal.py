"""Helpers shared by the tests: a local spark-submit of one of walship's Spark jobs, and WALs
written by the hour (two archived, the last one current) for replay and the SEP DAG."""

from __future__ import annotations

import datetime as dt
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from walship.servername import ServerName
from walship.spark.entry import job_settings
from walship.spark.jvm import local_submit_env
from walship.wal import Cell, CellType, WalKey, WalWriter, build_wal_name

ROOT = Path(__file__).resolve().parents[1]
HOUR = dt.timedelta(hours=1)


def spark_submit(
    app: str | Path, args: list[str], cwd: Path, conf: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``spark-submit --master local[2] spark_jobs/APP ARGS`` (``APP`` a path: that script)
    with this interpreter, walship's job settings and ``conf``, in ``cwd``."""
    bindir = Path(sys.executable).parent
    env = local_submit_env()
    settings = [arg for key, value in (job_settings() | (conf or {})).items() for arg in ("--conf", f"{key}={value}")]
    cmd = [str(bindir / "spark-submit"), "--master", "local[2]", "--conf", "spark.ui.enabled=false",
           "--conf", "spark.driver.memory=512m", *settings, str(ROOT / "spark_jobs" / app), *args]  # fmt: skip
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600, check=False, cwd=cwd)


def ms(t: dt.datetime) -> int:
    return int(t.timestamp() * 1000)


def write_hourly_wals(
    root: Path,
    server: ServerName,
    start: dt.datetime,
    row: Callable[[int, int], bytes],
    value: Callable[[int, int], bytes],
    *,
    hours: int = 3,
    per_hour: int = 10,
) -> None:
    """A WAL an hour from ``start`` under ``root`` (the last in ``WALs/<server>``, the others
    archived in ``oldWALs`` and last changed at the end of their hour), ``per_hour`` puts each a
    minute apart into ``t``, family ``r`` (scope 1): row ``row(hour, i)``, value
    ``value(hour, i)``, timestamp its write time."""
    for h in range(hours):
        begin = start + h * HOUR
        name = build_wal_name(server, ms(begin))
        folder = root / ("WALs" / Path(str(server)) if h == hours - 1 else Path("oldWALs"))
        folder.mkdir(parents=True, exist_ok=True)
        with open(folder / name, "wb") as f, WalWriter(f) as w:
            for i in range(per_hour):
                when = ms(begin) + i * 60_000
                w.append(
                    WalKey(b"0" * 32, b"t", h * per_hour + i, when, scopes={b"r": 1}),
                    [Cell(row(h, i), b"r", b"q", when, CellType.Put, value(h, i))],
                )
        if h < hours - 1:
            end = (begin + HOUR - dt.timedelta(seconds=1)).timestamp()
            os.utime(folder / name, (end, end))
