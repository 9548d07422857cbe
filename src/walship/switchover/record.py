"""The record of a switchover, kept in the source's ZooKeeper beside walship's other records:
each step's state, timings and what it changed, so that a step run again (a retried task, the
command run again) knows what is done, a rollback knows what to undo, and the Replication page
shows the steps as they go.

``<parent>/replication/walship/switchovers/<peer>`` holds the last switchover to the peer::

    {"peer_id": "1", "run_id": "manual__2026-11-29T10:00", "reverse_peer_id": "1",
     "peer_cluster_key": "zk-b:2181:/hbase", "source_cluster_key": "zk-a:2181:/hbase",
     "tables": ["t1"], "fence": "read_only", "reverse": true, "state": "running",
     "started_at": 1767225600000, "ended_at": null, "switched_at": null,
     "fenced": {"t1": {"read_only": false, "enabled": true}},
     "reverse_peer": {"added": true, "switch_before": null},
     "cut": {...}, "verify": {"bad_rows": 0, ...},
     "steps": {"preflight": {"state": "done", "started_at": ..., "ended_at": ...,
                             "changed": [], "message": "...", "log_url": null}, ...}}

``state`` is ``running``, ``done``, ``failed`` (a step failed; resume or roll back) or
``rolled-back``; a step's is ``pending``, ``running``, ``done``, ``failed`` or ``skipped``.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from walship.errors import SwitchoverError
from walship.peer import validate_peer_id
from walship.zk.client import translated
from walship.zk.layout import ZnodeLayout
from walship.zk.records import load_json, update_json

__all__ = [
    "FENCE_MODES",
    "ROLLBACK",
    "STEPS",
    "StepRecord",
    "SwitchoverRecord",
    "SwitchoverRequest",
    "SwitchoverStore",
    "now_ms",
]

log = logging.getLogger(__name__)

#: The steps in order; a DAG task each, named so.
STEPS = ("preflight", "fence", "drain", "verify", "reverse", "switch", "unfence")
#: The step that undoes a switchover that failed before ``switch``.
ROLLBACK = "rollback"
#: How the source's tables are fenced: their descriptors' ``READONLY``, or disabled.
FENCE_MODES = ("read_only", "disable")


def now_ms() -> int:
    return int(time.time() * 1000)


@dataclass(frozen=True)
class SwitchoverRequest:
    """What a switchover is asked to do.

    :param tables: the tables to move (empty: those the peer's table-cfs name).
    :param fence: ``read_only`` (the descriptors' ``READONLY``) or ``disable``.
    :param reverse: add the peer back and unfence the source (off: the source stays fenced).
    :param reverse_peer_id: the id of the peer back to the source on the peer's cluster
        (empty: the same id).
    :param source_thrift2: the source's Thrift2 server(s): the verify reads them, the
        reverse peer writes to them.
    :param run_id: names this switchover (a DAG run's id); a step of another, unfinished
        switchover to the peer is refused.
    """

    peer_id: str
    tables: tuple[str, ...] = ()
    fence: str = "read_only"
    reverse: bool = True
    reverse_peer_id: str = ""
    source_thrift2: str = ""
    run_id: str = ""
    drain_timeout: float = 3600.0
    poll: float = 0.5

    def __post_init__(self) -> None:
        validate_peer_id(self.peer_id)
        if self.reverse_peer_id:
            validate_peer_id(self.reverse_peer_id)
        if self.fence not in FENCE_MODES:
            raise SwitchoverError(f"fence {self.fence!r}: expected one of {', '.join(FENCE_MODES)}")
        if not self.drain_timeout > 0:
            raise SwitchoverError(f"drain timeout {self.drain_timeout!r}: expected seconds > 0")

    @property
    def back_id(self) -> str:
        return self.reverse_peer_id or self.peer_id


@dataclass
class StepRecord:
    """One step: its state, when it ran, what it changed (a line each), its last message."""

    state: str = "pending"
    started_at: int | None = None
    ended_at: int | None = None
    changed: list[str] = field(default_factory=list)
    message: str = ""
    log_url: str | None = None


@dataclass
class SwitchoverRecord:
    """A switchover of the writers from this cluster to the peer's (see the module docstring)."""

    peer_id: str
    run_id: str
    reverse_peer_id: str
    peer_cluster_key: str
    source_cluster_key: str
    tables: list[str]
    fence: str = "read_only"
    reverse: bool = True
    state: str = "running"
    started_at: int = field(default_factory=now_ms)
    ended_at: int | None = None
    switched_at: int | None = None
    #: per table fenced, its state before the fence: {"read_only": bool, "enabled": bool}
    fenced: dict[str, dict[str, bool]] = field(default_factory=dict)
    #: the reverse peer as found before the step: {"added": bool, "switch_before": bool | None}
    reverse_peer: dict[str, Any] | None = None
    cut: dict[str, Any] | None = None
    verify: dict[str, Any] | None = None
    steps: dict[str, StepRecord] = field(default_factory=lambda: {s: StepRecord() for s in (*STEPS, ROLLBACK)})

    @property
    def finished(self) -> bool:
        """Nothing left to do or undo: done, or rolled back."""
        return self.state in ("done", "rolled-back")

    @property
    def changed_anything(self) -> bool:
        """Whether a step past preflight ran: until then there is nothing to undo."""
        return any(self.steps[s].state != "pending" for s in STEPS[1:]) or self.steps[ROLLBACK].state != "pending"

    def done(self, step: str) -> bool:
        return self.steps[step].state == "done"

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any], path: str) -> SwitchoverRecord:
        """:raises ZkDataError: not a switchover record (names ``path``)."""
        from walship.errors import ZkDataError

        try:
            fields = dict(data)
            steps = {name: StepRecord(**step) for name, step in fields.pop("steps").items()}
            record = cls(**fields, steps={s: StepRecord() for s in (*STEPS, ROLLBACK)})
            record.steps.update(steps)
        except (KeyError, TypeError, AttributeError) as exc:
            raise ZkDataError(path, f"not a walship switchover record: {exc}") from None
        return record


@translated("switchover records")
class SwitchoverStore:
    """The switchover records of a cluster, one per peer."""

    def __init__(self, client: KazooClient, layout: ZnodeLayout) -> None:
        self.client = client
        self.layout = layout

    def get(self, peer_id: str) -> SwitchoverRecord | None:
        """The last switchover to the peer, or ``None``."""
        path = self.layout.switchover(peer_id)
        try:
            data, _ = self.client.get(path)
        except NoNodeError:
            return None
        return SwitchoverRecord.from_json(load_json(data, path), path)

    def list(self) -> list[SwitchoverRecord]:
        """Every peer's last switchover, newest first."""
        try:
            names = self.client.get_children(self.layout.switchovers)
        except NoNodeError:
            return []
        found = [r for r in (self.get(n) for n in sorted(names)) if r is not None]
        return sorted(found, key=lambda r: r.started_at, reverse=True)

    def put(self, record: SwitchoverRecord) -> None:
        """Write the record whole (a new switchover replaces the peer's last one)."""
        path = self.layout.switchover(record.peer_id)
        data = json.dumps(record.to_json()).encode()
        if self.client.exists(path) is None:
            self.client.create(path, data, makepath=True)
        else:
            self.client.set(path, data)

    def update(self, peer_id: str, change: Callable[[SwitchoverRecord], None]) -> SwitchoverRecord:
        """Change the peer's record in place (a versioned write, retried on a race).

        :raises ZkDataError: there is no record to change.
        """
        path = self.layout.switchover(peer_id)
        out: list[SwitchoverRecord] = []

        def apply(data: dict[str, Any]) -> dict[str, Any]:
            from walship.errors import ZkDataError

            if not data:
                raise ZkDataError(path, "no switchover is recorded here")
            record = SwitchoverRecord.from_json(data, path)
            change(record)
            out[:] = [record]
            return record.to_json()

        update_json(self.client, path, apply)
        return out[0]

    def set(self, peer_id: str, **values: Any) -> SwitchoverRecord:
        """Set fields of the peer's record (``cut=``, ``verify=``, ...), in one versioned write."""

        def change(r: SwitchoverRecord) -> None:
            for name, value in values.items():
                setattr(r, name, value)

        return self.update(peer_id, change)

    def keep_fenced(self, peer_id: str, table: str, state: dict[str, bool]) -> SwitchoverRecord:
        """Record how ``table`` was before the fence (``read_only``, ``enabled``), added to the
        tables recorded so far in the same versioned write; a table recorded already keeps its
        first state."""

        def change(r: SwitchoverRecord) -> None:
            r.fenced.setdefault(table, state)

        return self.update(peer_id, change)

    def add_change(self, peer_id: str, step: str, line: str) -> None:
        """What the step changed, one line, recorded at once."""

        def add(r: SwitchoverRecord) -> None:
            r.steps[step].changed.append(line)

        self.update(peer_id, add)

    def mark(self, peer_id: str, step: str, state: str, message: str = "", *, overall: str) -> SwitchoverRecord:
        """The step's new state (``running``: started now, its changes kept from an earlier
        try; else ended now) and the switchover's."""

        def change(r: SwitchoverRecord) -> None:
            s = r.steps[step]
            if state == "running":
                s.started_at, s.ended_at = now_ms(), None
            else:
                s.ended_at = now_ms()
            s.state, s.message, r.state = state, message, overall
            if r.finished:
                r.ended_at = now_ms()

        return self.update(peer_id, change)

    def set_log_url(self, peer_id: str, step: str, url: str) -> None:
        """Where the step's log is (an Airflow task's), for the Replication page."""

        def change(r: SwitchoverRecord) -> None:
            r.steps[step].log_url = url

        self.update(peer_id, change)
