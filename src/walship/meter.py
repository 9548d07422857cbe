"""How long work tells how far it is: a :class:`Meter` the library advances as it goes and
the CLI draws (rows or bytes done, rate, time left) on a terminal. The library itself draws
nothing: without a meter it goes on silently (:data:`NO_METER`)."""

from __future__ import annotations

import logging
from typing import Protocol

__all__ = ["NO_METER", "Meter", "NoMeter"]

log = logging.getLogger(__name__)


class Meter(Protocol):
    def start(self, total: int | None, unit: str) -> None:
        """The work ahead: ``total`` units (``None``: not known), e.g. ``rows``, ``bytes``."""

    def advance(self, n: int = 1) -> None:
        """``n`` more units done."""


class NoMeter:
    """A meter that shows nothing."""

    def start(self, total: int | None, unit: str) -> None:
        pass

    def advance(self, n: int = 1) -> None:
        pass


NO_METER: Meter = NoMeter()
