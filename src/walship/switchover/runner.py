"""The runner of a switchover's steps (:mod:`walship.switchover.steps` says what each does):
each step checks its precondition against the switchover's record (the step before it ran;
no rollback after the switch; another unfinished switchover to the peer refused), is recorded
running, then done, skipped or failed, so that a step run again resumes, and a rollback knows
what to undo.

Example::

    with open_sides(SourceSite("zk-a:2181", wal_root="hdfs://nn-a/hbase"), "1") as sides:
        run = Switchover(sides, SwitchoverRequest("1", ("orders",), source_thrift2="thrift-a:9090"))
        for step in STEPS:
            print(run.run(step))
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from walship.errors import SwitchoverError, SwitchoverStateError, WalshipError
from walship.status.drain import Cut
from walship.switchover.checks import Check, dry_run_lines, new_record
from walship.switchover.record import ROLLBACK, STEPS, SwitchoverRecord, SwitchoverRequest, SwitchoverStore, now_ms
from walship.switchover.sides import Sides
from walship.switchover.steps import Steps

__all__ = ["Switchover"]

log = logging.getLogger(__name__)


class Switchover:
    """The steps of one switchover to ``sides.peer`` (see the module docstring).

    :param say: where each step's lines go as it runs (the command prints them, a task logs them).
    :param checks: more preflight checks: each returns ``None``, or what is wrong.
    :param pump: called while the drain waits (the command ships the peer's queues itself).
    """

    def __init__(
        self,
        sides: Sides,
        request: SwitchoverRequest,
        *,
        say: Callable[[str], None] = log.info,
        checks: Sequence[Check] = (),
        pump: Callable[[], None] | None = None,
    ) -> None:
        self.sides = sides
        self.request = request
        self.say = say
        self.checks = checks
        self.store = SwitchoverStore(sides.source.client, sides.source.layout)
        self.steps = Steps(sides, request, self.store, say=say, checks=checks, pump=pump)
        self._bodies = self.steps.by_name()

    @property
    def peer_id(self) -> str:
        return self.request.peer_id

    # -- the record --------------------------------------------------------------------------------

    def record(self) -> SwitchoverRecord | None:
        """The last switchover to the peer, or ``None``."""
        return self.store.get(self.peer_id)

    def _current(self, step: str) -> SwitchoverRecord:
        """This run's record.

        :raises SwitchoverStateError: there is none, or it is another run's.
        """
        record = self.record()
        if record is None or (self.request.run_id and record.run_id != self.request.run_id):
            name = f"switchover {self.request.run_id}" if self.request.run_id else "switchover"
            raise SwitchoverStateError(f"{step}: no {name} to peer {self.peer_id} is recorded: run preflight first")
        return record

    def _begin(self) -> SwitchoverRecord:
        """The record preflight starts from: this run's, or a new one.

        :raises SwitchoverStateError: another switchover to the peer is unfinished.
        """
        found = self.record()
        if found is not None and not found.finished and found.run_id == (self.request.run_id or found.run_id):
            return found
        if found is not None and not found.finished and found.changed_anything:
            at = next((s for s in (*STEPS, ROLLBACK) if found.steps[s].state not in ("done", "skipped")), "-")
            raise SwitchoverStateError(
                f"preflight: the switchover {found.run_id} to peer {self.peer_id} is unfinished (state {found.state}, "
                f"at step {at}): resume it, or roll it back (walship switchover --peer {self.peer_id} --rollback)"
            )
        record = new_record(self.sides, self.request, self.request.run_id or f"cli-{now_ms()}")
        self.store.put(record)
        return record

    def set_log_url(self, step: str, url: str) -> None:
        """Where the step's log is (the Airflow task's), for the Replication page."""
        self.store.set_log_url(self.peer_id, step, url)

    # -- running a step ----------------------------------------------------------------------------

    def run(self, step: str) -> str:
        """Run one step; what it found or did, one line.

        :raises SwitchoverStateError: its precondition does not hold.
        :raises SwitchoverError: it failed (the record says so; run it again, or roll back).
        """
        record = self._ready(step)
        if record.steps[step].state in ("done", "skipped") and step != "preflight":
            self.say(f"{step}: {record.steps[step].state} already: {record.steps[step].message}")
            return record.steps[step].message
        self.say(f"{step}: ...")
        self.store.mark(self.peer_id, step, "running", overall="running")
        try:
            message = self._bodies[step](record)
        except WalshipError as exc:
            raise self._failed(step, exc) from None
        return self._finished(step, message)

    def _ready(self, step: str) -> SwitchoverRecord:
        """The record a step starts from, once its precondition holds.

        :raises SwitchoverStateError: the step before it has not run, the switch was reported
            (no rollback after it), or the switchover is finished.
        """
        if step not in self._bodies:
            raise SwitchoverError(f"no step {step!r}: expected one of {', '.join((*STEPS, ROLLBACK))}")
        record = self._begin() if step == "preflight" else self._current(step)
        if step == ROLLBACK and record.switched_at is not None:
            raise SwitchoverStateError(
                f"rollback: the switch of {record.run_id} was reported (clients may write to the peer's cluster): "
                "no rollback after it; fail back with a switchover from the peer's cluster"
            )
        if step not in ("preflight", ROLLBACK):
            before = STEPS[STEPS.index(step) - 1]
            if record.steps[before].state not in ("done", "skipped"):
                raise SwitchoverStateError(
                    f"{step}: step {before} of switchover {record.run_id} to peer {self.peer_id} has not run "
                    f"(it is {record.steps[before].state})"
                )
        if record.finished and record.steps[step].state not in ("done", "skipped"):
            raise SwitchoverStateError(
                f"{step}: the switchover {record.run_id} to peer {self.peer_id} is {record.state} already"
            )
        return record

    def _failed(self, step: str, exc: WalshipError) -> SwitchoverError:
        """The step failed: recorded so, and the error to raise (naming the step)."""
        text = str(exc) if str(exc).startswith(f"{step}:") else f"{step}: {exc}"
        self.store.mark(self.peer_id, step, "failed", text, overall="failed")
        return (type(exc) if isinstance(exc, SwitchoverError) else SwitchoverError)(text)

    def _finished(self, step: str, message: str) -> str:
        final = {"unfence": "done", ROLLBACK: "rolled-back"}.get(step, "running")
        state = "skipped" if message.startswith("skipped") else "done"
        self.store.mark(self.peer_id, step, state, message, overall=final)
        self.say(f"{step}: {message}")
        return message

    # -- the drain, waited for elsewhere (a deferred Airflow task) ---------------------------------

    def start_drain(self) -> Cut | None:
        """Begin the drain step: its cut (taken now, or the one an earlier try took), for the
        caller to wait for; ``None`` when the step is done already.

        :raises SwitchoverStateError: the fence has not run.
        :raises SwitchoverError: the cut cannot be taken.
        """
        record = self._ready("drain")
        if record.done("drain"):
            return None
        self.store.mark(self.peer_id, "drain", "running", overall="running")
        try:
            return self.steps.cut(record)
        except WalshipError as exc:
            raise self._failed("drain", exc) from None

    def end_drain(self, drained: bool, message: str) -> str:
        """End the drain step begun by :meth:`start_drain`: drained, or not (``message`` says
        what is behind).

        :raises SwitchoverError: it did not drain.
        """
        if not drained:
            raise self._failed("drain", SwitchoverError(f"drain: {message}"))
        return self._finished("drain", message)

    def dry_run(self) -> list[str]:
        """Preflight's checks and what each step would change, changing nothing.

        :raises SwitchoverError: a preflight check fails, or another switchover is unfinished.
        """
        return dry_run_lines(self.sides, self.request, self.record(), self.checks)
