"""The walship DAGs, built for each source cluster this Airflow serves
(:func:`walship_airflow.sources.configured_sources`): every module here has a
``build(source) -> DAG``; the repository's ``dags/`` files call :func:`build_dags` with one of
them, and a single DAG file can build them all with :func:`build_all`::

    # $AIRFLOW_HOME/dags/walship.py (the words "airflow" and "dag" let Airflow parse it)
    from walship_airflow.dags import build_all
    build_all(globals())
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, MutableMapping
from typing import Any

from walship_airflow.sources import PER_SOURCE_DAGS, Source, configured_sources


def build_dags(build: Callable[[Source], Any], namespace: MutableMapping[str, Any]) -> list[Any]:
    """``build(source)`` for every configured source, each DAG put in ``namespace`` (a DAG
    file's ``globals()``) under its id.

    :raises walship_airflow.sources.SourcesError: ``[walship] sources`` is malformed.
    """
    dags = [build(source) for source in configured_sources()]
    for dag in dags:
        namespace[dag.dag_id] = dag
    return dags


def build_all(namespace: MutableMapping[str, Any]) -> list[Any]:
    """Every walship DAG: the per-source ones for each source, ``walship_maintenance`` and
    ``walship_switchover``."""
    from walship_airflow.dags import maintenance, switchover

    dags = []
    for dag_id in PER_SOURCE_DAGS:
        module = importlib.import_module(f"walship_airflow.dags.{dag_id.removeprefix('walship_')}")
        dags += build_dags(module.build, namespace)
    shared = [maintenance.build(), switchover.build()]
    for dag in shared:
        namespace[dag.dag_id] = dag
    return [*dags, *shared]
