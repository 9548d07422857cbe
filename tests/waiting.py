"""Waiting in tests: poll the condition a test waits for, with a deadline, instead of sleeping.

Example::

    row = wait_until(lambda: table.row(b"r1"), timeout=10, what="r1 on the peer")
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

__all__ = ["wait_until"]

T = TypeVar("T")


def wait_until(condition: Callable[[], T], *, timeout: float = 30.0, interval: float = 0.05, what: str) -> T:
    """Call ``condition`` every ``interval`` seconds until it returns something truthy; return that.

    It is called at least once, and once more at the deadline. Its exceptions propagate.

    :raises AssertionError: nothing truthy within ``timeout`` seconds; the message says ``what``.
    """
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(min(interval, remaining))
