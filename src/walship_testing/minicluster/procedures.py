"""The minicluster master's procedures and their executor, run as HBase 2.6's master runs
them: here the peer procedures (``ModifyPeerProcedure`` and its ``AddPeerProcedure``,
``RemovePeerProcedure``, ``EnablePeerProcedure``, ``DisablePeerProcedure``,
``UpdatePeerConfigProcedure``); the table procedures are in
:mod:`walship_testing.minicluster.tableprocedures`.

**States.** Each procedure goes PRE_PEER_MODIFICATION (HBase's checks, see
:mod:`walship_testing.minicluster.peerchecks`: a refusal fails the procedure) -> UPDATE_PEER_STORAGE
(the znodes HBase's master writes, :class:`~walship.zk.peers.ReplicationPeers`) ->
REFRESH_PEER_ON_RS (every region server takes the peers as they are) -> for a serial peer
SERIAL_PEER_REOPEN_REGIONS, SERIAL_PEER_UPDATE_LAST_PUSHED_SEQ_ID and, if it is to be enabled,
SERIAL_PEER_SET_PEER_ENABLED (a serial peer is written DISABLED until its regions' last pushed
ids are set, see :mod:`walship_testing.minicluster.serialpeers`) -> POST_PEER_MODIFICATION (a removed
peer's queues and last pushed ids go). A state that fails on ZooKeeper is tried again with
back-off, as HBase suspends a procedure on a ``ReplicationException``.

**One at a time.** A single executor thread runs them in order of submission (HBase holds a
peer's exclusive lock for a procedure); each state runs under the cluster's lock, so a WAL
roll sees a peer either before or after a change, never half way.

**Results.** A call gets the procedure's id at once (:meth:`ProcedureExecutor.submit`);
:func:`procedure_result` answers ``getProcedureResult``: RUNNING, FINISHED (with a
``ForeignExceptionMessage`` naming HBase's exception when it failed), or NOT_FOUND. A client
older than HBase 2.0 (or naming no version) waits behind the procedure's latch instead
(HBase's ``ProcedurePrepareLatch``): until it finished (or, for a procedure that releases it
after its checks, until they passed), and its call fails with the procedure's error.

**Nonces.** A call that carries a nonce (the table calls) and comes again with the same one
gets the id of the procedure the first one started, or failed to start (HBase's
``ProcedureExecutor.registerNonce`` and ``setFailureResultForNonce``), as long as the
executor keeps that procedure.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator

from walship.errors import MasterCallError, ZkError, ZkUnavailableError
from walship.peer import PeerConfig
from walship.protos import ErrorHandling_pb2, Master_pb2, Replication_pb2
from walship.zk.lastpushed import LastPushedIds
from walship.zk.peers import ReplicationPeers
from walship.zk.queues import ReplicationQueues
from walship_testing.minicluster import serialpeers
from walship_testing.minicluster.peerchecks import (
    IOE,
    REPLICATION_EXCEPTION,
    OwnCluster,
    StoredPeer,
    merged_config,
    pre_add,
    pre_remove,
    pre_set_state,
    pre_update,
    walship_config,
)
from walship_testing.minicluster.view import MasterView

__all__ = [
    "AddPeer",
    "PeerProcedure",
    "Procedure",
    "ProcedureExecutor",
    "RemovePeer",
    "SetPeerState",
    "UpdatePeerConfig",
    "procedure_result",
]

log = logging.getLogger(__name__)

#: One state's work (what it returns is not used).
Step = Callable[[], object]


def _now_ms() -> int:
    return int(time.time() * 1000)


def _storage_error(exc: ZkError) -> MasterCallError:
    """HBase's ``ReplicationException`` from its peer storage, as its RPC layer wraps it."""
    cause = MasterCallError(REPLICATION_EXCEPTION, str(exc), do_not_retry=False)
    return MasterCallError(IOE, str(exc), do_not_retry=False, cause=cause)


class Procedure:
    """One procedure: :meth:`steps` yields its states' work in order, the first being HBase's
    checks (a :class:`MasterCallError` there fails it)."""

    #: HBase's class of the procedure, named in the log
    name = "Procedure"
    #: its latch opens once its checks passed, not only once it finished (HBase's table
    #: procedures that call ``releaseSyncLatch`` after their prepare state)
    release_after_checks = False

    def __init__(self, host: MasterView) -> None:
        self.host = host
        self.proc_id = 0
        #: HBase's NonceKey ``(nonce_group, nonce)`` of the call that started it, if any
        self.nonce: tuple[int, int] | None = None
        self.submitted = _now_ms()
        self.last_update = self.submitted
        self.finished = False
        self.error: MasterCallError | None = None
        #: HBase's ProcedurePrepareLatch: set once it failed its checks or finished (or passed them: release_after_checks)
        self.latch = threading.Event()

    def steps(self) -> Iterator[Step]:
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"{self.name}(pid={self.proc_id})"


class PeerProcedure(Procedure):
    """One peer procedure."""

    name = "PeerProcedure"

    def __init__(self, host: MasterView, peer_id: str) -> None:
        super().__init__(host)
        self.peer_id = peer_id

    @property
    def peers(self) -> ReplicationPeers:
        assert self.host.zk is not None
        return ReplicationPeers(self.host.zk, self.host.layout)

    def refresh(self) -> None:
        """REFRESH_PEER_ON_RS."""
        self.host.refresh_peers()

    def __repr__(self) -> str:
        return f"{self.name}(pid={self.proc_id}, peer={self.peer_id})"


class AddPeer(PeerProcedure):
    name = "AddPeerProcedure"

    def __init__(
        self, host: MasterView, peer_id: str, pb: Replication_pb2.ReplicationPeer, enabled: bool, own: OwnCluster
    ) -> None:
        super().__init__(host, peer_id)
        self.pb = pb
        self.enabled = enabled
        self.own = own
        self.config: PeerConfig | None = None

    def _pre(self) -> None:
        assert self.host.zk is not None
        queues = ReplicationQueues(self.host.zk, self.host.layout)
        self.config = pre_add(self.peers, queues, self.peer_id, self.pb, self.own)

    def _store(self) -> None:
        assert self.config is not None
        # a serial peer is written DISABLED until its regions' last pushed ids are set
        self.peers.create(self.config, hbase_enabled=self.enabled and not self.config.serial)

    def steps(self) -> Iterator[Step]:
        yield self._pre
        yield self._store
        yield self.refresh
        assert self.config is not None
        config = self.config
        if config.serial:
            yield lambda: serialpeers.reopen_regions(self.host, config)
            yield lambda: serialpeers.set_last_pushed(self.host, config)
            if self.enabled:
                yield lambda: self.peers.set_hbase_state(self.peer_id, True)
                yield self.refresh
        log.info("added %s peer %s", "ENABLED" if self.enabled else "DISABLED", self.peer_id)


class RemovePeer(PeerProcedure):
    name = "RemovePeerProcedure"

    def steps(self) -> Iterator[Step]:
        yield lambda: pre_remove(self.peers, self.peer_id)
        # the peer, then every queue of it (twice, as HBase does, for a queue being claimed) and
        # its last pushed ids; the cluster's lock keeps a roll from queueing a WAL in between
        yield lambda: self.peers.delete(self.peer_id)
        yield self.refresh
        assert self.host.zk is not None
        zk, layout = self.host.zk, self.host.layout
        yield lambda: ReplicationQueues(zk, layout).remove_peer_queues(self.peer_id)
        log.info("removed peer %s", self.peer_id)


class SetPeerState(PeerProcedure):
    """EnablePeerProcedure or DisablePeerProcedure."""

    def __init__(self, host: MasterView, peer_id: str, enabled: bool) -> None:
        super().__init__(host, peer_id)
        self.enabled = enabled
        self.name = "EnablePeerProcedure" if enabled else "DisablePeerProcedure"

    def steps(self) -> Iterator[Step]:
        yield lambda: pre_set_state(self.peers, self.peer_id, self.enabled)
        yield lambda: self.peers.set_hbase_state(self.peer_id, self.enabled)
        yield self.refresh
        log.info("%s peer %s", "enabled" if self.enabled else "disabled", self.peer_id)


class UpdatePeerConfig(PeerProcedure):
    name = "UpdatePeerConfigProcedure"

    def __init__(self, host: MasterView, peer_id: str, pb: Replication_pb2.ReplicationPeer, own: OwnCluster) -> None:
        super().__init__(host, peer_id)
        self.pb = pb
        self.own = own

    def steps(self) -> Iterator[Step]:
        found: list[StoredPeer] = []
        yield lambda: found.append(pre_update(self.peers, self.peer_id, self.pb, self.own))
        old_peer = found[0]
        merged_config(old_peer.pb, self.pb)
        old = walship_config(self.peer_id, old_peer.pb)
        new = walship_config(self.peer_id, self.pb)
        serial_work = (new.serial and (not old.serial or serialpeers.tables_changed(old, new))) or (
            old.serial and not new.serial
        )
        enabled = old_peer.enabled
        yield lambda: self.peers.write_config(self.peer_id, new)
        if enabled and serial_work:
            # HBase disables the peer for the serial states, and enables it again after them
            yield lambda: self.peers.set_hbase_state(self.peer_id, False)
        yield self.refresh
        if serial_work:
            if new.serial:
                yield lambda: serialpeers.reopen_regions(self.host, new, old)
            yield lambda: self._last_pushed(old, new)
            if enabled:
                yield lambda: self.peers.set_hbase_state(self.peer_id, True)
                yield self.refresh
        log.info("updated the configuration of peer %s", self.peer_id)

    def _last_pushed(self, old: PeerConfig, new: PeerConfig) -> None:
        """``updateLastPushedSequenceIdForSerialPeer``."""
        assert self.host.zk is not None
        if not new.serial:
            LastPushedIds(self.host.zk, self.host.layout).remove_peer(self.peer_id)
        elif not old.serial:
            serialpeers.set_last_pushed(self.host, new)
        else:
            serialpeers.forget_tables(self.host, old, new)
            serialpeers.set_last_pushed(self.host, new, lambda table: not serialpeers.need_to_replicate(old, table))


class ProcedureExecutor:
    """Runs procedures one at a time on its own thread and keeps the last ``retain``
    finished ones for ``getProcedureResult`` (HBase keeps them until the client has read them
    and a while after).

    :param retry_pause: the first pause before a state that failed on ZooKeeper runs again.
    """

    def __init__(self, *, retain: int = 1000, retry_pause: float = 0.1) -> None:
        self.retain = retain
        self.retry_pause = retry_pause
        self._queue: queue.Queue[Procedure | None] = queue.Queue()
        self._procedures: OrderedDict[int, Procedure] = OrderedDict()
        self._lock = threading.Lock()
        self._next_id = 0
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, name="master-procedures", daemon=True)
        self._thread.start()

    def _register(self, procedure: Procedure) -> None:
        with self._lock:
            if self._stopped.is_set():
                raise MasterCallError(IOE, "the master is stopping", do_not_retry=False)
            self._next_id += 1
            procedure.proc_id = self._next_id
            self._procedures[procedure.proc_id] = procedure
            while len(self._procedures) > self.retain:
                oldest = next(iter(self._procedures.values()))
                if not oldest.finished:
                    break
                self._procedures.popitem(last=False)

    def submit(self, procedure: Procedure) -> Procedure:
        """Give the procedure an id and queue it."""
        self._register(procedure)
        log.info("submitted %r", procedure)
        self._queue.put(procedure)
        return procedure

    def record_failure(self, procedure: Procedure, error: MasterCallError) -> None:
        """A procedure whose call was refused before it was submitted, kept (with an id, as
        failed) only for its nonce: HBase's ``setFailureResultForNonce``."""
        if procedure.nonce is None:
            return
        self._register(procedure)
        self._finish(procedure, error)

    def get(self, proc_id: int) -> Procedure | None:
        with self._lock:
            return self._procedures.get(proc_id)

    def by_nonce(self, nonce: tuple[int, int]) -> Procedure | None:
        """The procedure a call with this nonce started (or failed to start), if still kept."""
        with self._lock:
            return next((p for p in self._procedures.values() if p.nonce == nonce), None)

    def _run(self) -> None:
        while True:
            procedure = self._queue.get()
            if procedure is None:
                return
            if self._stopped.is_set():
                self._finish(procedure, MasterCallError(IOE, "the master stopped", do_not_retry=False))
                continue
            self._execute(procedure)

    def _execute(self, procedure: Procedure) -> None:
        try:
            for i, step in enumerate(procedure.steps()):
                if not self._step(procedure, step, first=i == 0):
                    return
                if i == 0 and procedure.release_after_checks:
                    procedure.latch.set()
        except MasterCallError as exc:
            self._finish(procedure, exc)
        except Exception as exc:  # a bug: fail the procedure rather than the executor
            log.exception("%r failed", procedure)
            self._finish(procedure, MasterCallError(IOE, f"{type(exc).__name__}: {exc}", do_not_retry=False))
        else:
            self._finish(procedure, None)

    def _step(self, procedure: Procedure, step: Step, *, first: bool) -> bool:
        """Run one state, again after a ZooKeeper failure; False: the procedure is over."""
        pause = self.retry_pause
        while True:
            try:
                with procedure.host.lock:
                    step()
                procedure.last_update = _now_ms()
                return True
            except MasterCallError as exc:
                if not first:
                    log.error("%r: %s after its checks passed", procedure, exc)
                self._finish(procedure, exc)
                return False
            except ZkUnavailableError as exc:
                if self._stopped.is_set():
                    self._finish(procedure, _storage_error(exc))
                    return False
                log.warning("%r: %s; trying again in %.1f s", procedure, exc, pause)
                self._stopped.wait(pause)
                pause = min(pause * 2, 5.0)
            except ZkError as exc:  # not a passing failure (a znode changed behind the master)
                log.error("%r: %s", procedure, exc)
                self._finish(procedure, _storage_error(exc))
                return False

    def _finish(self, procedure: Procedure, error: MasterCallError | None) -> None:
        procedure.error = error
        procedure.finished = True
        procedure.last_update = _now_ms()
        procedure.latch.set()
        if error is not None:
            log.info("%r failed: %s", procedure, error)
        else:
            log.info("%r finished", procedure)

    def stop(self, timeout: float = 10.0) -> None:
        """Run no more: the queued procedures fail (their callers answered), the running one
        is waited for."""
        self._stopped.set()
        with self._lock:
            waiting = [p for p in self._procedures.values() if not p.finished]
        self._queue.put(None)
        self._thread.join(timeout)
        for procedure in waiting:
            if not procedure.finished:
                self._finish(procedure, MasterCallError(IOE, "the master stopped", do_not_retry=False))


def procedure_result(procedure: Procedure | None) -> Master_pb2.GetProcedureResultResponse:
    """``getProcedureResult``'s answer for the procedure (``None``: not known)."""
    State = Master_pb2.GetProcedureResultResponse.State
    if procedure is None:
        return Master_pb2.GetProcedureResultResponse(state=State.NOT_FOUND)
    answer = Master_pb2.GetProcedureResultResponse(
        state=State.FINISHED if procedure.finished else State.RUNNING,
        submitted_time=procedure.submitted,
        last_update=procedure.last_update,
    )
    if procedure.finished and procedure.error is not None:
        error = procedure.error
        generic = ErrorHandling_pb2.GenericExceptionMessage(class_name=error.exception_class)
        if error.message is not None:
            generic.message = error.message
        answer.exception.CopyFrom(ErrorHandling_pb2.ForeignExceptionMessage(generic_exception=generic))
    return answer
