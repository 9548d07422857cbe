"""The ``walship_switchover`` DAG's logic: each task runs one step of
:class:`walship.switchover.Switchover` for the source connection the run names, and notes its
log's address in the switchover's record for the Replication page.

The peer's cluster must be a source of this Airflow too (``[walship] sources``): its
``walship_replicate`` ships the writes back once the source is unfenced. Preflight finds its
connection by the peer's cluster key (or takes the ``peer_source`` Param) and fails when there
is none.

A step's :class:`~walship.errors.SwitchoverError` fails its task for good (no retry: a switchover
step is cleared by an operator who read why); ``rollback`` runs when a step before ``switch``
failed, undoes what the record says was changed, and then fails too, so that the run does.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from airflow.sdk.exceptions import AirflowException, AirflowFailException, AirflowSkipException

from walship_airflow.hooks.source import SourceCluster, WalshipHook
from walship_airflow.sources import configured_sources

if TYPE_CHECKING:
    from walship.switchover import Switchover

__all__ = ["begin_drain", "end_drain", "read_switchovers", "rollback", "run_step", "task_log_path"]

log = logging.getLogger(__name__)


def _same_cluster(source: SourceCluster, key: str) -> bool:
    from walship.errors import ConfigError
    from walship.switchover import cluster_key, same_cluster

    try:
        return same_cluster(cluster_key(source.zk, source.znode_parent), key)
    except ConfigError:  # a quorum no cluster key can name is not the peer's
        return False


def _peer_source_check(peer_key: str, wanted: str) -> Callable[[], str | None]:
    """Preflight's check that the peer's cluster is a source of this Airflow (the way back)."""

    def check() -> str | None:
        conn_ids = [s.conn_id for s in configured_sources()]
        if wanted:
            if wanted not in conn_ids:
                return f"peer_source {wanted!r} is not a walship source of this Airflow ([walship] sources)"
            if not _same_cluster(WalshipHook(wanted).get_source(), peer_key):
                return f"connection {wanted} is not the peer's cluster ({peer_key})"
            return None
        for conn_id in conn_ids:
            try:
                if _same_cluster(WalshipHook(conn_id).get_source(), peer_key):
                    return None
            except AirflowException as exc:  # one broken connection does not hide the others
                log.warning("preflight: connection %s: %s", conn_id, exc)
        return (
            f"no walship connection of this Airflow reaches the peer's cluster ({peer_key}): add it to "
            "[walship] sources, so that its walship_replicate ships the writes back"
        )

    return check


def task_log_path(ti: Any) -> str:
    """The task's log in Airflow's UI, relative to the UI's base (the page adds its own way there)."""
    from urllib.parse import quote

    path = "/".join(quote(str(p), safe="") for p in ("dags", ti.dag_id, "runs", ti.run_id, "tasks", ti.task_id))
    return f"{path}?try_number={ti.try_number}" if getattr(ti, "try_number", None) else path


@contextlib.contextmanager
def _switchover(step: str, params: Mapping[str, Any], context: Mapping[str, Any]) -> Iterator[Switchover]:
    """The switchover the run's Params describe, for one step: walship's errors become a failed
    task naming the step, and the step's record notes the task's log.

    :raises AirflowSkipException: a dry run, past preflight.
    """
    from walship.errors import SwitchoverError, WalshipError
    from walship.switchover import Switchover, SwitchoverRequest, open_sides, split_tables

    if params.get("dry_run") and step != "preflight":
        raise AirflowSkipException(f"{step}: a dry run changes nothing")
    source = WalshipHook(str(params["source"])).get_source()
    try:
        request = SwitchoverRequest(
            peer_id=str(params["peer_id"]),
            tables=split_tables([params.get("tables") or ""]),
            fence=str(params.get("fence") or "read_only"),
            reverse=bool(params.get("reverse", True)),
            reverse_peer_id=str(params.get("reverse_peer_id") or ""),
            source_thrift2=source.thrift2 or "",
            run_id=str(context["run_id"]),
            drain_timeout=float(params.get("drain_timeout") or 3600),
        )
        with open_sides(source.site(), request.peer_id) as sides:
            checks = []
            if request.reverse:
                checks.append(_peer_source_check(sides.peer.cluster_key, str(params.get("peer_source") or "")))
            run = Switchover(sides, request, say=log.info, checks=checks)
            try:
                yield run
            finally:
                ti = context.get("ti")
                if ti is not None and not params.get("dry_run") and run.record() is not None:
                    run.set_log_url(step, task_log_path(ti))
    except SwitchoverError as exc:
        raise AirflowFailException(str(exc)) from None
    except WalshipError as exc:
        raise AirflowFailException(f"{step}: {exc}") from None


def run_step(step: str, params: Mapping[str, Any], context: Mapping[str, Any]) -> str:
    """Run ``step`` of the switchover the run's Params describe; what it did, one line (a dry
    run's preflight: what each step would change).

    :raises AirflowSkipException: a dry run, past preflight.
    :raises AirflowFailException: the step's precondition does not hold, or it failed.
    """
    with _switchover(step, params, context) as run:
        if params.get("dry_run"):
            lines = run.dry_run()
            for line in lines:
                log.info("dry run: %s", line)
            return "; ".join(lines)
        return run.run(step)


def begin_drain(params: Mapping[str, Any], context: Mapping[str, Any]) -> dict[str, Any] | None:
    """The drain step begun: what its trigger waits for (the cut, the source's ZooKeeper, the
    timeout), or ``None`` when the step is done already.

    :raises AirflowSkipException: a dry run.
    :raises AirflowFailException: the fence has not run, or the cut cannot be taken.
    """
    with _switchover("drain", params, context) as run:
        cut = run.start_drain()
        if cut is None:
            return None
        site = run.sides.site
        return {
            "zk": site.zk,
            "znode_parent": site.znode_parent,
            "cut": cut.to_json(),
            "timeout": run.request.drain_timeout,
        }


def end_drain(params: Mapping[str, Any], context: Mapping[str, Any], event: Mapping[str, Any] | None) -> str:
    """The drain step ended by its trigger's event: done, or failed naming what is behind.

    :raises AirflowFailException: not drained.
    """
    with _switchover("drain", params, context) as run:
        drained = event is not None and event.get("status") == "drained"
        return run.end_drain(drained, str(event.get("message") if event else "the trigger sent no event"))


def rollback(params: Mapping[str, Any], context: Mapping[str, Any]) -> None:
    """Undo a switchover whose step before ``switch`` failed, then fail (so does the run)."""
    message = run_step("rollback", params, context)
    raise AirflowFailException(f"a step failed; rolled back: {message}")


def read_switchovers(conn_id: str) -> list[dict[str, Any]]:
    """Every peer's last switchover from this source, newest first (the Replication page)."""
    from walship.switchover import SwitchoverStore

    with WalshipHook(conn_id).get_source().site().state() as (client, layout):
        return [r.to_json() for r in SwitchoverStore(client, layout).list()]
