"""SEP subscriptions for Airflow (the ``walship_sep`` DAG): which subscriptions a run tails.

A run tails the subscriptions its Param ``subscriptions`` names (comma-separated), or, when it
is empty, every enabled subscription of the source cluster. With none at all, it waits for one
to be added or enabled (looking every :data:`walship.defaults.TAIL_REDISCOVER` seconds) for up
to its duration, so that a ``@continuous`` DAG with nothing to do does not start a run every
second.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from airflow.sdk.exceptions import AirflowFailException

if TYPE_CHECKING:
    from walship.sep.subscriptions import Subscriptions

__all__ = ["await_subscriptions", "chosen_subscriptions", "parse_names"]

log = logging.getLogger(__name__)


def parse_names(text: str) -> list[str]:
    """The names of a comma-separated list, stripped, each once, in the order given:
    ``"a, b,,a"`` is ``["a", "b"]``."""
    names: list[str] = []
    for part in text.split(","):
        name = part.strip()
        if name and name not in names:
            names.append(name)
    return names


def chosen_subscriptions(subscriptions: Subscriptions, names: list[str]) -> list[str]:
    """``names`` when given (each must be a subscription; a disabled one is tailed too and
    delivers once enabled), else every enabled subscription, sorted by name.

    :raises AirflowFailException: a name is no peer, or a peer that is not a subscription (no
        retry makes it one).
    """
    from walship.errors import PeerError

    if not names:
        return sorted(p.peer_id for p in subscriptions.list() if p.enabled)
    for name in names:
        try:
            subscriptions.get(name)
        except PeerError as exc:  # PeerNotFoundError too
            raise AirflowFailException(f"Param subscriptions: {exc}") from None
    return names


def await_subscriptions(
    subscriptions: Subscriptions,
    text: str,
    *,
    wait: float,
    poll: float | None = None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> list[str]:
    """The subscriptions to tail (see :func:`chosen_subscriptions`) of the comma-separated
    ``text``; when it is empty and no subscription is enabled, look again every ``poll``
    seconds (default :data:`walship.defaults.TAIL_REDISCOVER`) for up to ``wait`` seconds,
    then return ``[]``.

    :raises AirflowFailException: ``text`` names something that is not a subscription.
    """
    from walship import defaults

    interval = defaults.TAIL_REDISCOVER if poll is None else poll
    names = parse_names(text)
    deadline = clock() + wait
    waited = False
    while True:
        chosen = chosen_subscriptions(subscriptions, names)
        left = deadline - clock()
        if chosen or left <= 0:
            if waited and chosen:
                log.info("subscription(s) %s enabled meanwhile", ", ".join(chosen))
            return chosen
        if not waited:
            log.info("no enabled subscription: waiting up to %g s for one (looking every %g s)", wait, interval)
            waited = True
        sleep(min(interval, left))
