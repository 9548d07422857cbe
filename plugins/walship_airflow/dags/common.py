"""What the walship DAGs of a source share: their start date, tags, docs, default arguments
(the configured failure notifier among them) and where the Spark jobs are."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pendulum
from airflow.sdk import Param

from walship import defaults
from walship_airflow.notifications.callbacks import failure_callbacks
from walship_airflow.sources import SECTION, Source

START_DATE = pendulum.datetime(2026, 1, 1, tz="UTC")


def dag_kwargs(
    source: Source, base: str, doc: str | None, *, tags: list[str], default_args: dict[str, Any], **kwargs: Any
) -> dict[str, Any]:
    """The ``@dag`` arguments of the DAG ``base`` of a source.

    :raises walship_airflow.notifications.callbacks.NotifierError: the notifier cannot be built.
    """
    callbacks = failure_callbacks()
    return {
        "dag_id": source.dag_id(base),
        "start_date": START_DATE,
        "catchup": False,
        "doc_md": source.doc(doc or ""),
        "tags": ["walship", *tags, *source.tags],
        "default_args": {
            "owner": "walship",
            **({"on_failure_callback": callbacks} if callbacks else {}),
            **default_args,
        },
        **kwargs,
    }


def peer_ids_param() -> Param:
    """``peer_id`` of the shipping DAGs: the peers to ship to, empty for every enabled one."""
    return Param(
        "",
        type="string",
        description="the peer(s) to ship to, comma-separated (empty: every enabled walship peer and subscription)",
    )


def duration_param() -> Param:
    """``duration`` of the continuous DAGs: seconds before a run hands over to the next,
    ``[walship] tail_duration`` by default."""
    from airflow.sdk import conf

    default = conf.getfloat(SECTION, "tail_duration", fallback=defaults.TAIL_DURATION)
    return Param(default, type="number", minimum=1, description="seconds before this run hands over")


def gather_param() -> Param:
    """``gather`` of ``walship_tail``: seconds a pass that read few entries lets new edits
    gather, ``[walship] tail_gather`` by default."""
    from airflow.sdk import conf

    default = conf.getfloat(SECTION, "tail_gather", fallback=defaults.TAIL_GATHER)
    return Param(
        default,
        type="number",
        minimum=0,
        maximum=10,
        description=f"after a pass that read fewer than {defaults.TAIL_GATHER_ENTRIES:,} entries, seconds to let "
        "new edits gather: fewer, fuller passes, less CPU, at most this much more lag (0: pass again at once)",
    )


def spark_conn_param() -> Param:
    """``spark_conn_id`` of the DAGs that submit a Spark job."""
    return Param("spark_default", type="string", minLength=1, description="the Spark connection")


def spark_jobs_dir() -> Path:
    """The folder of ``ship.py``, ``verify.py``, ``copy_rows.py`` and ``pyrunner.jar`` as the
    Spark hosts see it: ``[walship] spark_jobs``, else ``spark_jobs/`` beside the DAGs folder."""
    from airflow.sdk import conf

    configured = (conf.get(SECTION, "spark_jobs", fallback="") or "").strip()
    if configured:
        return Path(configured)
    return Path(conf.get("core", "dags_folder")).resolve().parent / "spark_jobs"


def cleaner_queue() -> str:
    """The executor queue of walship_clean's task: ``[walship] cleaner_queue``, else ``default``."""
    from airflow.sdk import conf

    return (conf.get(SECTION, "cleaner_queue", fallback="") or "").strip() or "default"


def spark_job(file: str, env: str) -> str:
    """A Spark job's path: the environment variable ``env`` when set, else ``file`` in
    :func:`spark_jobs_dir`."""
    return os.environ.get(env) or str(spark_jobs_dir() / file)


def pyrunner_jar() -> str:
    return spark_job("pyrunner.jar", "WALSHIP_PYRUNNER_JAR")
