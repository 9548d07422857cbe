"""The ``walship_add_peer`` DAG's logic: a new walship-managed peer onboarded from the UI, each
step a task that can be run again on its own.

* :func:`check_peer` (task ``check``): the Params made into a :class:`~walship.peer.PeerConfig`
  (:func:`walship_airflow.peerparams.peer_config`: every error names its Param), compared with
  a peer of that id that exists already, and its scope check
  (:func:`walship_airflow.peerscope.check_scope`: ``walship scope audit`` of that configuration,
  the tables and families the peer lacks created first when ``create_missing`` is set). Fails
  while a finding would lose data.
* :func:`add_peer` (task ``add``): the peer added through HBase's master
  (:func:`walship.rpc.peers.peer_admin`), managed, HBase's peer-state DISABLED and walship's
  switch DISABLED: HBase queues its WALs from here on, nobody ships it yet. A peer already
  there with the same configuration (an earlier try or run) is taken as added; one with another
  configuration fails the task, naming each difference. Its XCom holds the moment it was added:
  the creation time of walship's switch in ZooKeeper, written once the master's AddPeerProcedure
  finished (the queues exist by then), so every try and every run reads the same moment.
* :func:`copy_plan` (task ``plan_copy``, then the Spark task ``copy``): ``walship copy`` of the
  rows with timestamps before that moment (plus ``copy_margin`` seconds, for clock skew), or
  skipped when ``copy`` is false. Later rows reach the peer from the queues.
* :func:`enable_peer` (task ``enable``): walship's switch ENABLED: ``walship_replicate`` (or a
  ``walship_tail`` run) ships the peer from its next run on.
* the ``wait_drained`` sensor (:class:`~walship_airflow.sensors.WalDrainedSensor`), then
  :func:`verify_plan` and the verify tasks of ``walship_verify``
  (:mod:`walship_airflow.verify`): the cells older than the drain cut compared (without a
  copy, only those written since the peer was added); a bad row fails the run.
* :func:`confirm_shipping` (task ``shipping``): the peer as the master has it, managed, shipping.
* :func:`disable_on_failure` (task ``disable_on_failure``, trigger rule ``one_failed``): when a
  step failed after ``add`` ran, the peer this run adds is left DISABLED (walship's switch);
  the task then fails, so the run does too. A run that failed before ``add`` changed no peer,
  and a peer with another configuration is not this run's: both are left as they are.
"""

from __future__ import annotations

import contextlib
import datetime
import logging
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from airflow.sdk.exceptions import AirflowException, AirflowFailException, AirflowSkipException

from walship_airflow.hooks.source import SourceCluster, WalshipHook
from walship_airflow.peerparams import differences, different, fail, flag, number, peer_config, text

if TYPE_CHECKING:
    from kazoo.client import KazooClient

    from walship.peer import PeerConfig
    from walship.rpc.peers import MasterPeers
    from walship.zk import ReplicationPeers, ZnodeLayout

__all__ = [
    "ADD_TASK",
    "COPY_MARGIN_S",
    "STEP_TASKS",
    "add_peer",
    "check_peer",
    "confirm_shipping",
    "copy_plan",
    "disable_on_failure",
    "enable_peer",
    "verify_plan",
]

log = logging.getLogger(__name__)

#: HBase's ``hbase.master.maxclockskew``: region servers whose clocks are further off are
#: refused by the master, so cells written before the peer was added carry timestamps at most
#: this far past the moment ZooKeeper recorded.
COPY_MARGIN_S = 30
#: The task that changes the peer first: a run whose ``add`` never ran changed no peer.
ADD_TASK = "add"
#: Every step of the DAG (the tasks ``disable_on_failure`` watches).
STEP_TASKS = (
    "check",
    ADD_TASK,
    "plan_copy",
    "copy",
    "enable",
    "wait_drained",
    "plan_verify",
    "verify",
    "report",
    "verified",
    "shipping",
)


def _source(conn_id: str) -> SourceCluster:
    """The source cluster, which must name its Thrift2 server (the audit, copy and verify read it)."""
    source = WalshipHook(conn_id).get_source()
    if not source.thrift2:
        raise fail(
            f"connection {conn_id}: set the extra 'thrift2' (host:port of the source's Thrift2 server): the scope "
            "check, the copy and the verify read the source over Thrift2"
        )
    return source


@dataclass
class _Admin:
    """The source's ZooKeeper, its master's peer calls and walship's own peer znodes."""

    client: KazooClient
    layout: ZnodeLayout
    peers: MasterPeers
    store: ReplicationPeers

    def get(self, peer_id: str) -> PeerConfig | None:
        """The peer as the master has it (walship's switch as its state), or ``None``."""
        from walship.errors import PeerNotFoundError

        try:
            return self.peers.get(peer_id)
        except PeerNotFoundError:
            return None

    def added_ms(self, peer_id: str) -> int:
        """When walship's switch of the peer was created (ZooKeeper's clock, epoch ms)."""
        stat = self.client.exists(self.layout.walship_peer_state(peer_id))
        if stat is None:
            raise AirflowException(
                f"peer {peer_id}: walship's switch {self.layout.walship_peer_state(peer_id)} is gone"
            )
        return int(stat.ctime)


@contextlib.contextmanager
def _admin(source: SourceCluster) -> Iterator[_Admin]:
    """:class:`_Admin` of the source; the master's errors become Airflow's (a refusal HBase
    marks final is not retried)."""
    from walship.errors import MasterError, MasterNotFoundError, RemoteHBaseError
    from walship.rpc.peers import MasterPeers, peer_admin
    from walship.zk import ReplicationPeers

    with source.site().state() as (client, layout):
        try:
            peers = peer_admin(client, layout)
        except MasterNotFoundError as exc:
            raise AirflowException(f"walship_add_peer: {exc}") from None
        if not isinstance(peers, MasterPeers):  # peer_admin gives the znode writer only when offline
            raise AirflowException(f"walship_add_peer: peers of {layout.parent} are not changed through a master")
        try:
            yield _Admin(client, layout, peers, ReplicationPeers(client, layout))
        except RemoteHBaseError as exc:
            if exc.do_not_retry:
                raise fail(str(exc)) from None
            raise AirflowException(f"walship_add_peer: {exc}") from None
        except MasterError as exc:
            raise AirflowException(f"walship_add_peer: {exc}") from None
        finally:
            peers.admin.close()


def _owned(admin: _Admin, config: PeerConfig) -> PeerConfig:
    """The peer, which must be the one the Params describe and shipped by walship alone.

    :raises AirflowFailException: it is gone, it differs, or HBase ships it too.
    """
    from walship.errors import DoubleShippingError

    existing = admin.get(config.peer_id)
    if existing is None:
        raise fail(f"peer {config.peer_id} does not exist (removed since it was added?): run the DAG again")
    lines = differences(existing, config)
    if lines:
        raise different(config.peer_id, lines)
    try:
        existing.check_ownership()
    except DoubleShippingError as exc:
        raise fail(str(exc)) from None
    return existing


def check_peer(context: Any, conn_id: str = WalshipHook.default_conn_name) -> dict[str, Any]:
    """The ``check`` task: the peer the Params describe
    (:func:`~walship_airflow.peerparams.peer_config`), compared with
    one of that id that exists already, then its scope check
    (:func:`walship_airflow.peerscope.check_scope`: with ``create_missing``, the tables and
    families it lacks are created on it first). Returns the peer, whether it exists, what was
    created and the audit's warnings.

    :raises AirflowFailException: a bad Param; a peer with that id and another configuration;
        a finding that would lose data (each listed); the peer's table-cfs names a table or
        family the source lacks.
    :raises AirflowException: a server did not answer (retried).
    """
    from walship_airflow.peerscope import check_scope

    params = context["params"]
    config = peer_config(params)
    source = _source(conn_id)
    with _admin(source) as admin:
        existing = admin.get(config.peer_id)
        if existing is not None:
            lines = differences(existing, config)
            if lines:
                raise different(config.peer_id, lines)
            log.info("peer %s exists already with this configuration (an earlier run): going on", config.peer_id)
    checked = check_scope(
        config,
        str(source.thrift2),
        create_missing=flag(params, "create_missing", False),
        name=f"the extra 'thrift2' of connection {conn_id}",
    )
    return {"peer": config.to_json(), "exists": existing is not None, **checked}


def _iso(ms: int) -> str:
    return datetime.datetime.fromtimestamp(ms / 1000, datetime.UTC).isoformat(timespec="milliseconds")


def add_peer(context: Any, conn_id: str = WalshipHook.default_conn_name) -> dict[str, Any]:
    """The ``add`` task: add the peer through the master, managed and DISABLED (HBase's
    peer-state and walship's switch), unless it is there already with the same configuration.

    Returns ``peer_id``, ``added`` (whether this try added it), ``added_ms`` / ``added_at``
    (when walship's switch was created: the queues existed by then) and ``state`` (walship's
    switch: DISABLED, or ENABLED when an earlier run enabled it).

    :raises AirflowFailException: a bad Param; a peer with that id and another configuration
        (each difference named); a managed peer HBase ships too.
    """
    from walship.errors import RemoteHBaseError

    config = peer_config(context["params"])
    peer_id = config.peer_id
    with _admin(_source(conn_id)) as admin:
        existing = admin.get(peer_id)
        added = False
        if existing is None:
            if admin.store.has_switch(peer_id):
                # left by an earlier peer of this id that HBase removed behind walship's back: its
                # switch's creation time would name the wrong moment
                log.warning("peer %s: removing walship's znodes left by an earlier peer with this id", peer_id)
                admin.store.forget(peer_id)
            try:
                admin.peers.add(config)
                added = True
            except RemoteHBaseError:
                if admin.get(peer_id) is None:  # not a peer added meanwhile (a try whose answer was lost)
                    raise
        if not added:
            _owned(admin, config)
            if not admin.store.has_switch(peer_id):  # an earlier try stopped between the master and ZooKeeper
                admin.store.set_switch(peer_id, False)
        enabled = admin.store.switch(peer_id)
        added_ms = admin.added_ms(peer_id)
    state = "ENABLED" if enabled else "DISABLED"
    if added:
        log.info("added peer %s -> %s (managed, DISABLED) at %s", peer_id, config.cluster_key, _iso(added_ms))
    else:
        log.info("peer %s was added already, at %s (walship's switch %s): going on", peer_id, _iso(added_ms), state)
    return {"peer_id": peer_id, "added": added, "added_ms": added_ms, "added_at": _iso(added_ms), "state": state}


def copy_plan(
    added: Mapping[str, Any], context: Any, app: str, jar: str, conn_id: str = WalshipHook.default_conn_name
) -> list[dict[str, Any]]:
    """The ``plan_copy`` task: the ``copy`` Spark task's keyword arguments (``walship copy``
    of every table the peer replicates, cells with timestamps before the moment the peer was
    added plus ``copy_margin`` seconds), as :func:`walship_airflow.copy.copy_jobs` makes them.

    :param added: the ``add`` task's XCom.
    :raises AirflowSkipException: the Param ``copy`` is false.
    """
    from walship_airflow.copy import copy_jobs
    from walship_airflow.hooks.spark import SPARK_CONN_ID

    params = context["params"]
    if not flag(params, "copy", True):
        raise AirflowSkipException("the Param copy is false: no rows are copied (the peer gets edits from now on)")
    margin = number(params, "copy_margin", COPY_MARGIN_S)
    until = _iso(int(added["added_ms"]) + margin * 1000)
    log.info("peer %s: copying cells older than %s (added at %s)", added["peer_id"], until, added["added_at"])
    copy_params = {
        "peer_id": str(added["peer_id"]),
        "tables": [],
        "until": until,
        "spark_conn_id": str(params.get("spark_conn_id") or SPARK_CONN_ID),
    }
    return copy_jobs(_source(conn_id), {**context, "params": copy_params}, app, jar)


def enable_peer(context: Any, conn_id: str = WalshipHook.default_conn_name) -> dict[str, Any]:
    """The ``enable`` task: walship's switch of the peer ENABLED (HBase's peer-state stays
    DISABLED); the peer must be the one the Params describe."""
    config = peer_config(context["params"])
    with _admin(_source(conn_id)) as admin:
        _owned(admin, config)
        admin.peers.enable(config.peer_id)
    log.info("peer %s ENABLED: walship ships it from the next walship_replicate run on", config.peer_id)
    return {"peer_id": config.peer_id, "state": "ENABLED"}


def verify_plan(
    drained: Mapping[str, Any],
    added: Mapping[str, Any],
    context: Any,
    app: str,
    jar: str,
    conn_id: str = WalshipHook.default_conn_name,
) -> list[dict[str, Any]]:
    """The ``plan_verify`` task: the ``verify`` Spark task's keyword arguments, as
    :func:`walship_airflow.verify.verify_jobs` makes them: every table and family the peer
    replicates, cells with timestamps before the drain cut (what the peer is known to have);
    without a copy, only those from the moment the peer was added on (older rows were not
    meant to reach it).

    :param drained: the ``wait_drained`` sensor's XCom (its ``cut``).
    :param added: the ``add`` task's XCom.
    """
    from walship_airflow.hooks.spark import SPARK_CONN_ID
    from walship_airflow.verify import verify_jobs

    params = context["params"]
    verify_params: dict[str, Any] = {
        "peer_id": text(params, "peer_id"),
        "tables": [],
        "families": "",
        "start_time": "" if flag(params, "copy", True) else str(added["added_at"]),
        "end_time": str(drained["cut"]["taken_at"]),
        "row_prefixes": [],
        "versions": None,
        "recompare_sleep": 2,
        "repair": False,
        "report_dir": "",
        "spark_conn_id": str(params.get("spark_conn_id") or SPARK_CONN_ID),
    }
    return verify_jobs(_source(conn_id), {**context, "params": verify_params}, app, jar)


def confirm_shipping(context: Any, conn_id: str = WalshipHook.default_conn_name) -> dict[str, Any]:
    """The ``shipping`` task: the peer as the master has it, which must be managed by walship,
    ENABLED, and not shipped by HBase; returns it (``walship peer show --json``)."""
    config = peer_config(context["params"])
    with _admin(_source(conn_id)) as admin:
        peer = _owned(admin, config)
    if not peer.enabled:
        raise fail(f"peer {peer.peer_id} is DISABLED (walship's switch): someone disabled it during the run")
    log.info("peer %s is shipping: walship_replicate ships it to %s", peer.peer_id, peer.cluster_key)
    return peer.to_json()


def _state(value: Any) -> str:
    """A task state as the execution API gives it (a string, or the enum)."""
    return str(getattr(value, "value", value) or "")


def _add_ran(context: Any) -> bool:
    """Whether this run's ``add`` task ran (succeeded or failed): a run that never got there
    changed no peer."""
    ti = context["ti"]
    states = ti.get_task_states(dag_id=ti.dag_id, task_ids=[ADD_TASK], run_ids=[ti.run_id])
    return _state(states.get(ti.run_id, {}).get(ADD_TASK)) in ("success", "failed")


def _failed_steps(context: Any) -> list[str]:
    ti = context["ti"]
    states = ti.get_task_states(dag_id=ti.dag_id, task_ids=list(STEP_TASKS), run_ids=[ti.run_id])
    failed = set()
    for key, state in states.get(ti.run_id, {}).items():
        if _state(state) == "failed":  # a mapped task's instances are "copy_0", "copy_1", ...
            failed.add(key if key in STEP_TASKS else key.rsplit("_", 1)[0])
    return [task for task in STEP_TASKS if task in failed]


def disable_on_failure(context: Any, conn_id: str = WalshipHook.default_conn_name) -> None:
    """The ``disable_on_failure`` task (trigger rule ``one_failed``): leave the peer this run
    adds DISABLED (walship's switch), then fail, so that the run fails too. A run whose
    ``add`` never ran changed no peer, and a peer with another configuration is not this
    run's: both are left as they are.

    :raises AirflowFailException: always, saying what was left how.
    :raises AirflowException: the peer could not be disabled (retried).
    """
    params = context["params"]
    peer_id = text(params, "peer_id")
    if not _add_ran(context):
        outcome = f"no peer was added or changed (peer {peer_id or '-'} is as it was)"
    else:
        config = peer_config(params)  # add ran: the Params made a peer
        with _admin(_source(conn_id)) as admin:
            existing = admin.get(peer_id)
            if existing is None:
                outcome = f"peer {peer_id} was not added"
            elif differences(existing, config) or not existing.managed:
                outcome = f"peer {peer_id} is not the peer this run adds; it was left as it is"
            else:
                admin.peers.disable(peer_id)
                outcome = (
                    f"peer {peer_id} is left DISABLED (walship's switch; HBase keeps queueing its WALs, nothing ships "
                    f"it): fix the cause, then clear the failed task with its downstream tasks to go on from there, or "
                    f"remove the peer (walship peer remove {peer_id})"
                )
    failed = _failed_steps(context)
    raise AirflowFailException(f"walship_add_peer failed at {', '.join(failed) or 'a step'}: {outcome}")
