"""Switchover and failback: the writers of some tables moved from the source cluster to a
peer's cluster, and back, losing nothing (``walship switchover``, the ``walship_switchover``
DAG). :mod:`walship.switchover.steps` says what each step does."""

from walship.switchover.checks import Check, preflight_problems, resolve_tables, split_tables
from walship.switchover.record import (
    FENCE_MODES,
    ROLLBACK,
    STEPS,
    StepRecord,
    SwitchoverRecord,
    SwitchoverRequest,
    SwitchoverStore,
)
from walship.switchover.runner import Switchover
from walship.switchover.sides import Side, Sides, cluster_key, open_sides, same_cluster

__all__ = [
    "FENCE_MODES",
    "ROLLBACK",
    "STEPS",
    "Check",
    "Side",
    "Sides",
    "StepRecord",
    "Switchover",
    "SwitchoverRecord",
    "SwitchoverRequest",
    "SwitchoverStore",
    "cluster_key",
    "open_sides",
    "preflight_problems",
    "resolve_tables",
    "same_cluster",
    "split_tables",
]
