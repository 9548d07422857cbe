"""The ``walship_maintenance`` DAG's logic: keep Airflow's metadata database and task logs to a
bounded age, so that a pipeline running every minute does not grow them without end.

* :func:`clean_db` runs ``airflow db clean`` (Airflow's own purge: runs, task instances, XComs,
  logs table, asset events...) for records older than the cut, without archive tables.
* :func:`prune_logs` deletes task log files older than the cut under the log folder, and the
  folders left empty.
"""

from __future__ import annotations

import datetime
import logging
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

__all__ = ["KEEP_DAYS_ENV", "clean_db", "cut_of", "keep_days_default", "prune_logs"]

log = logging.getLogger(__name__)

#: The environment variable with the days to keep (docker-compose.yml sets it from .env).
KEEP_DAYS_ENV = "WALSHIP_KEEP_DAYS"


def keep_days_default() -> int:
    """``$WALSHIP_KEEP_DAYS``, else 30."""
    text = os.environ.get(KEEP_DAYS_ENV, "").strip()
    return int(text) if text.isdigit() else 30


def cut_of(keep_days: int, now: datetime.datetime | None = None) -> datetime.datetime:
    return (now or datetime.datetime.now(datetime.UTC)) - datetime.timedelta(days=keep_days)


def clean_db(cut: datetime.datetime) -> dict[str, Any]:
    """``airflow db clean`` of every table for records before ``cut``.

    :raises AirflowException: the command failed (its output's tail in the message).
    """
    from airflow.sdk.exceptions import AirflowException

    airflow = str(Path(sys.executable).parent / "airflow")
    cmd = [airflow, "db", "clean", "--clean-before-timestamp", cut.isoformat(), "--yes", "--skip-archive"]
    cmd.append("--error-on-cleanup-failure")
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=3600, check=False)
    if done.returncode != 0:
        raise AirflowException(
            f"airflow db clean failed (exit {done.returncode}): {(done.stderr or done.stdout)[-2000:]}"
        )
    log.info("airflow db clean before %s: done", cut.isoformat())
    return {"before": cut.isoformat()}


def prune_logs(folder: str | os.PathLike[str], cut: datetime.datetime) -> dict[str, Any]:
    """Delete files under ``folder`` last changed before ``cut``, then the folders left empty."""
    root = Path(folder)
    limit = cut.timestamp()
    removed = kept = 0
    if not root.is_dir():
        return {"folder": str(root), "removed": 0, "kept": 0}
    for path in sorted(root.rglob("*"), key=lambda p: len(p.parts), reverse=True):
        try:
            if path.is_file() or path.is_symlink():
                if path.lstat().st_mtime < limit:
                    path.unlink()
                    removed += 1
                else:
                    kept += 1
            elif path.is_dir() and not any(path.iterdir()):
                path.rmdir()
        except FileNotFoundError:
            continue  # gone meanwhile
    log.info("task logs under %s: %d file(s) older than %s removed, %d kept", root, removed, cut.isoformat(), kept)
    return {"folder": str(root), "removed": removed, "kept": kept}
