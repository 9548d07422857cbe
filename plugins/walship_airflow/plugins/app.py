"""The "Replication" page and its JSON: a FastAPI app that Airflow's API server mounts at
``/walship`` (see :mod:`walship_airflow.plugins.replication`), authenticated like the rest of the UI.

- ``GET /walship/[?source=CONN_ID][&refresh=SECONDS]``: the page
  (:func:`walship_airflow.plugins.page.render_page`) of one source cluster: the status of every
  peer, charts of the samples of its status asset of the last 24 hours, its walship DAGs (the
  shipping ones paused or not) and their recent runs; it re-fetches itself every ``refresh``
  seconds (default 30, 0: never).
- ``GET /walship/api/status[?source=CONN_ID][&peer=ID]``: exactly what ``walship status --json``
  prints for that source; an unknown peer is a 404, a malformed peer id a 400, an unreachable
  or unreadable source a 503 or 502, each with the message as ``{"detail": ...}``.

``source`` is a connection of ``[walship] sources``
(:func:`walship_airflow.sources.configured_sources`), by default the first one; another is a
404 naming it and the configured ones. Its connection is read through
:class:`~walship_airflow.hooks.source.WalshipHook`: in the API server, the Task SDK's connection
lookup uses the server's secrets backends (``AIRFLOW_CONN_*`` variables, then the metadata
DB). The samples, DAGs and runs come from the metadata DB. Endpoints are plain ``def``s, so
that FastAPI runs their ZooKeeper, file and DB work in its thread pool, off the event loop.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any

from airflow.api_fastapi.core_api.security import requires_authenticated
from fastapi import Depends, FastAPI, HTTPException, Query
from fastapi.responses import HTMLResponse, JSONResponse

from walship.errors import ConfigError, PeerNotFoundError, WalshipError, ZkUnavailableError
from walship.peer import validate_peer_id
from walship_airflow.plugins.page import DEFAULT_REFRESH_S, DagState, RunLink, Sample, render_page
from walship_airflow.plugins.switchovers import render_switchovers
from walship_airflow.sources import (
    DEFAULT_CONN_ID,
    Source,
    SourcesError,
    UnknownSourceError,
    configured_sources,
    source_by_conn_id,
)
from walship_airflow.status import read_source_status, status_asset

log = logging.getLogger(__name__)

#: the samples the charts show: the last day, one a minute at most
SAMPLE_WINDOW = timedelta(hours=24)
MAX_SAMPLES = 1440
#: the newest runs of each walship DAG the page links to
RUNS_PER_DAG = 5
#: the DAGs one Airflow runs for all its sources (their ids carry no suffix)
SHARED_DAG_IDS = ("walship_maintenance", "walship_switchover")

app = FastAPI(
    title="walship replication",
    description="The replication status of the walship source clusters",
    dependencies=[Depends(requires_authenticated())],
)

SourceParam = Annotated[
    str | None, Query(description="the source's walship connection (default: the first of [walship] sources)")
]


def resolve_source(conn_id: str | None) -> tuple[Source, list[Source]]:
    """The source of ``?source=`` (the first configured one for ``None``) and all of them, or an
    :class:`HTTPException`: 404 for a connection that is not a configured source, 500 for a
    malformed ``[walship] sources``."""
    try:
        sources = configured_sources()
        return source_by_conn_id(conn_id, sources), sources
    except UnknownSourceError as exc:
        raise HTTPException(status_code=404, detail=str(exc)) from exc
    except SourcesError as exc:
        log.warning("replication page: %s", exc)
        raise HTTPException(status_code=500, detail=str(exc)) from exc


def source_status(peer_id: str | None = None, conn_id: str = DEFAULT_CONN_ID) -> dict[str, Any]:
    """The status, or an :class:`HTTPException` whose detail is the one-line reason."""
    from airflow.sdk.exceptions import AirflowException

    try:
        return read_source_status(peer_id, conn_id=conn_id)
    except PeerNotFoundError as exc:
        raise HTTPException(status_code=404, detail=str(exc)) from exc
    except ZkUnavailableError as exc:
        log.warning("replication status: %s", exc)
        raise HTTPException(status_code=503, detail=str(exc)) from exc
    except WalshipError as exc:
        log.warning("replication status: %s", exc)
        raise HTTPException(status_code=502, detail=str(exc)) from exc
    except AirflowException as exc:  # the connection is missing or incomplete
        log.warning("replication status: %s", exc)
        raise HTTPException(status_code=503, detail=str(exc)) from exc


def _parse_time(value: Any) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        at = datetime.fromisoformat(value)
    except ValueError:
        return None
    return at if at.tzinfo else at.replace(tzinfo=UTC)


def _sample(timestamp: datetime, extra: Any) -> Sample | None:
    """A sample from an asset event's extra; ``None`` for an extra not written by
    :func:`walship_airflow.status.record_sample`."""
    if not isinstance(extra, dict) or not isinstance(extra.get("peers"), dict):
        return None
    peers = {str(k): v for k, v in extra["peers"].items() if isinstance(v, dict)}
    at = _parse_time(extra.get("generated_at")) or (timestamp if timestamp.tzinfo else timestamp.replace(tzinfo=UTC))
    return Sample(at=at, peers=peers)


def read_samples(now: datetime, source: Source | None = None) -> list[Sample]:
    """The samples of the :data:`SAMPLE_WINDOW` before ``now`` of a source's status asset (the
    default source's without one), oldest first."""
    from airflow.models.asset import AssetEvent, AssetModel
    from airflow.utils.session import create_session
    from sqlalchemy import select

    name = status_asset(source or Source()).name
    query = (
        select(AssetEvent.timestamp, AssetEvent.extra)
        .join(AssetModel, AssetModel.id == AssetEvent.asset_id)
        # by name: Airflow stores the URI normalized ("walship://status/")
        .where(AssetModel.name == name, AssetEvent.timestamp >= now - SAMPLE_WINDOW)
        .order_by(AssetEvent.timestamp.desc())
        .limit(MAX_SAMPLES)
    )
    with create_session(scoped=False) as session:
        rows = session.execute(query).all()
    samples = [s for s in (_sample(ts, extra) for ts, extra in rows) if s is not None]
    return sorted(samples, key=lambda s: s.at)


def source_dag_ids(source: Source) -> list[str]:
    """The ids of a source's walship DAGs (its suffix on each, none for the default
    connection), then :data:`SHARED_DAG_IDS`: exactly these, so that one source's list never
    holds another's DAGs."""
    return [*source.dag_ids(), *SHARED_DAG_IDS]


def read_dags(dag_ids: Sequence[str]) -> list[DagState]:
    """Each DAG as the metadata DB has it, in the order given: paused or not, ``None`` for a
    DAG it does not have (not parsed yet, or its file gone)."""
    from airflow.models.dag import DagModel
    from airflow.utils.session import create_session
    from sqlalchemy import select

    query = select(DagModel.dag_id, DagModel.is_paused).where(
        DagModel.dag_id.in_(list(dag_ids)), DagModel.is_stale.is_(False)
    )
    with create_session(scoped=False) as session:
        paused = {dag_id: bool(is_paused) for dag_id, is_paused in session.execute(query).all()}
    return [DagState(dag_id, paused.get(dag_id)) for dag_id in dag_ids]


def read_runs(dag_ids: Sequence[str]) -> list[RunLink]:
    """The newest :data:`RUNS_PER_DAG` runs of each of these DAGs."""
    from airflow.models.dagrun import DagRun
    from airflow.utils.session import create_session
    from sqlalchemy import func, select

    ranked = (
        select(
            DagRun.dag_id,
            DagRun.run_id,
            DagRun.state,
            DagRun.run_type,
            DagRun.run_after,
            func.row_number().over(partition_by=DagRun.dag_id, order_by=DagRun.run_after.desc()).label("n"),
        )
        .where(DagRun.dag_id.in_(list(dag_ids)))
        .subquery()
    )
    query = (
        select(ranked.c.dag_id, ranked.c.run_id, ranked.c.state, ranked.c.run_type, ranked.c.run_after)
        .where(ranked.c.n <= RUNS_PER_DAG)
        .order_by(ranked.c.dag_id, ranked.c.run_after.desc())
    )
    with create_session(scoped=False) as session:
        rows = session.execute(query).all()
    return [
        RunLink(
            dag_id=dag_id,
            run_id=run_id,
            state=str(state) if state is not None else None,
            run_type=str(run_type) if run_type is not None else None,
            run_after=run_after if run_after is None or run_after.tzinfo else run_after.replace(tzinfo=UTC),
        )
        for dag_id, run_id, state, run_type, run_after in rows
    ]


def switchovers_section(conn_id: str) -> str:
    """The source's switchovers, or why they cannot be read."""
    from airflow.sdk.exceptions import AirflowException

    from walship_airflow.switchover import read_switchovers

    try:
        return render_switchovers(read_switchovers(conn_id))
    except (WalshipError, AirflowException) as exc:
        log.warning("replication page: switchovers: %s", exc)
        return render_switchovers(None, error=f"switchovers cannot be read: {exc}")


@app.get("/", response_class=HTMLResponse, summary="The Replication page")
def replication_page(
    source: SourceParam = None,
    refresh: Annotated[
        int, Query(ge=0, le=3600, description="seconds between the page's own refreshes (0: never)")
    ] = DEFAULT_REFRESH_S,
) -> HTMLResponse:
    try:
        chosen, sources = resolve_source(source)
    except HTTPException as exc:  # the page, saying why, and the sources to choose from
        known = configured_sources() if exc.status_code == 404 else []
        unknown = Source(conn_id=source or "", suffix="?")
        page = render_page(None, [], [], error=str(exc.detail), source=unknown, sources=known, refresh_s=0)
        return HTMLResponse(page, status_code=exc.status_code)
    samples = read_samples(datetime.now(UTC), chosen)
    dag_ids = source_dag_ids(chosen)
    dags = read_dags(dag_ids)
    runs = read_runs(dag_ids)
    try:
        status: dict[str, Any] | None = source_status(conn_id=chosen.conn_id)
        error, code = None, 200
    except HTTPException as exc:
        status, error, code = None, str(exc.detail), exc.status_code
    page = render_page(
        status,
        samples,
        runs,
        error=error,
        source=chosen,
        sources=sources,
        dags=dags,
        refresh_s=refresh,
        switchovers=switchovers_section(chosen.conn_id) if status is not None else "",
    )
    return HTMLResponse(page, status_code=code)


@app.get("/api/status", summary="walship status --json")
def replication_status(
    peer: Annotated[str | None, Query(description="only this peer (default: all)")] = None,
    source: SourceParam = None,
) -> JSONResponse:
    chosen, _ = resolve_source(source)
    if peer is not None:
        try:
            validate_peer_id(peer)
        except ConfigError as exc:
            raise HTTPException(status_code=400, detail=str(exc)) from exc
    return JSONResponse(source_status(peer, conn_id=chosen.conn_id))
