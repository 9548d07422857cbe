"""The "Replication" page and its JSON: a FastAPI app that Airflow's API server mounts at
``/walship`` (see :mod:`walship_airflow.plugins.replication`), authenticated like the rest of the UI.

- ``GET /walship/``: the page (:func:`walship_airflow.plugins.page.render_page`): the status of every
  peer, charts of the ``walship_status`` samples of the last 24 hours, the walship DAGs'
  recent runs.
- ``GET /walship/api/status[?peer=ID]``: exactly what ``walship status --json`` prints; an
  unknown peer is a 404, a malformed peer id a 400, an unreachable or unreadable source a 503
  or 502, each with the message as ``{"detail": ...}``.

The source cluster is the ``walship_source`` connection, read through
:class:`~walship_airflow.hooks.WalshipHook`: in the API server, the Task SDK's connection
lookup uses the server's secrets backends (``AIRFLOW_CONN_*`` variables, then the metadata
DB). The samples and runs come from the metadata DB. Endpoints are plain ``def``s, so that
FastAPI runs their ZooKeeper, file and DB work in its thread pool, off the event loop.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any

from airflow.api_fastapi.core_api.security import requires_authenticated
from fastapi import Depends, FastAPI, HTTPException, Query
from fastapi.responses import HTMLResponse, JSONResponse

from walship.errors import ConfigError, PeerNotFoundError, WalshipError, ZkUnavailableError
from walship.peer import validate_peer_id
from walship_airflow.plugins.page import RunLink, Sample, render_page
from walship_airflow.status import STATUS_ASSET_NAME, read_source_status

log = logging.getLogger(__name__)

#: the samples the charts show: the last day, one a minute at most
SAMPLE_WINDOW = timedelta(hours=24)
MAX_SAMPLES = 1440
#: the newest runs of each walship DAG the page links to
RUNS_PER_DAG = 5

app = FastAPI(
    title="walship replication",
    description="The replication status of the walship_source cluster",
    dependencies=[Depends(requires_authenticated())],
)


def source_status(peer_id: str | None = None) -> dict[str, Any]:
    """The status, or an :class:`HTTPException` whose detail is the one-line reason."""
    from airflow.sdk.exceptions import AirflowException

    try:
        return read_source_status(peer_id)
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


def read_samples(now: datetime) -> list[Sample]:
    """The ``walship_status`` samples of the :data:`SAMPLE_WINDOW` before ``now``, oldest first."""
    from airflow.models.asset import AssetEvent, AssetModel
    from airflow.utils.session import create_session
    from sqlalchemy import select

    query = (
        select(AssetEvent.timestamp, AssetEvent.extra)
        .join(AssetModel, AssetModel.id == AssetEvent.asset_id)
        # by name: Airflow stores the URI normalized ("walship://status/")
        .where(AssetModel.name == STATUS_ASSET_NAME, AssetEvent.timestamp >= now - SAMPLE_WINDOW)
        .order_by(AssetEvent.timestamp.desc())
        .limit(MAX_SAMPLES)
    )
    with create_session(scoped=False) as session:
        rows = session.execute(query).all()
    samples = [s for s in (_sample(ts, extra) for ts, extra in rows) if s is not None]
    return sorted(samples, key=lambda s: s.at)


def read_runs() -> list[RunLink]:
    """The newest :data:`RUNS_PER_DAG` runs of every ``walship_*`` DAG."""
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
        .where(DagRun.dag_id.startswith("walship_", autoescape=True))
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
            run_after=run_after,
        )
        for dag_id, run_id, state, run_type, run_after in rows
    ]


@app.get("/", response_class=HTMLResponse, summary="The Replication page")
def replication_page() -> HTMLResponse:
    samples = read_samples(datetime.now(UTC))
    runs = read_runs()
    try:
        status: dict[str, Any] | None = source_status()
        error, code = None, 200
    except HTTPException as exc:
        status, error, code = None, str(exc.detail), exc.status_code
    return HTMLResponse(render_page(status, samples, runs, error=error), status_code=code)


@app.get("/api/status", summary="walship status --json")
def replication_status(
    peer: Annotated[str | None, Query(description="only this peer (default: all)")] = None,
) -> JSONResponse:
    if peer is not None:
        try:
            validate_peer_id(peer)
        except ConfigError as exc:
            raise HTTPException(status_code=400, detail=str(exc)) from exc
    return JSONResponse(source_status(peer))
