"""``walship_maintenance`` with Airflow itself (``dag.test()``): records and task logs older than
``keep_days`` go, newer ones stay."""

from __future__ import annotations

import datetime
import os
from pathlib import Path
from typing import Any

import pytest
from airflow_env import AIRFLOW_MARKS

pytestmark = [pytest.mark.integration, *AIRFLOW_MARKS]


def run_exists(run_id: str) -> bool:
    from airflow.models.dagrun import DagRun
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session(scoped=False) as session:
        return session.scalar(select(DagRun.id).where(DagRun.run_id == run_id)) is not None


def age_run(run_id: str, days: int) -> None:
    """Make a run look ``days`` old, as if it had run then (its start date is what the clean reads)."""
    from airflow.models.dagrun import DagRun
    from airflow.utils.session import create_session
    from sqlalchemy import update

    then = datetime.datetime.now(datetime.UTC) - datetime.timedelta(days=days)
    with create_session(scoped=False) as session:
        session.execute(update(DagRun).where(DagRun.run_id == run_id).values(start_date=then, end_date=then))
        session.commit()


def test_old_runs_and_task_logs_go_new_ones_stay(dagbag: Any) -> None:
    from airflow.sdk.configuration import conf

    dag = dagbag.dags["walship_maintenance"]
    assert dag.params["keep_days"] == 30 and type(dag.timetable).__name__ == "CronTriggerTimetable"
    first = dag.test(run_conf={"keep_days": 3650})  # cleans nothing: everything is younger
    assert first.state == "success"
    assert run_exists(first.run_id)
    age_run(first.run_id, 60)
    logs = Path(conf.get("logging", "base_log_folder"))
    old = logs / "dag_id=old" / "run_id=r" / "attempt=1.log"
    new = logs / "dag_id=new" / "run_id=r" / "attempt=1.log"
    for path in (old, new):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("a task's log\n")
    sixty_days_ago = (datetime.datetime.now(datetime.UTC) - datetime.timedelta(days=60)).timestamp()
    os.utime(old, (sixty_days_ago, sixty_days_ago))

    second = dag.test(run_conf={"keep_days": 30})
    states = {ti.task_id: ti.state for ti in second.get_task_instances()}
    assert second.state == "success", states
    assert not run_exists(first.run_id)  # 60 days old: cleaned
    assert run_exists(second.run_id)
    assert not old.exists() and not old.parent.parent.exists()  # the file, and its emptied folders
    assert new.exists()
