"""Argument types of the ``walship`` command, defined once for every subcommand: each refuses
what it cannot use (NaN, infinities, numbers out of range, overlong text) with one line that
names the value, before anything is read or written.

Each is an ``argparse`` ``type=``: a bad value makes argparse print ``argument --flag: <why>``
and exit 2, so the flag is named too.
"""

from __future__ import annotations

import argparse
import datetime
import math
from collections.abc import Callable

from walship.replicate.throttle import MAX_BANDWIDTH

__all__ = [
    "MAX_COUNT",
    "MAX_SECONDS",
    "bandwidth",
    "between",
    "boolean",
    "clip",
    "count",
    "duration",
    "iso_time",
    "nonneg_int",
    "port",
    "positive_int",
    "seconds",
    "shorten",
]

#: The longest time any flag takes: ten years, in seconds.
MAX_SECONDS = 10 * 365 * 86400.0
#: The largest count any flag takes (HBase's own limits are Java ints).
MAX_COUNT = 2**31 - 1
#: Characters of a bad value quoted in a message.
QUOTED = 160


def clip(text: str, limit: int = QUOTED) -> str:
    """``text`` as shown in a message without quotes, cut to about ``limit`` characters."""
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text):,} characters)"


def shorten(text: str, limit: int = QUOTED) -> str:
    """``text`` as quoted in a message: ``repr``, cut to about ``limit`` characters."""
    if len(text) <= limit:
        return repr(text)
    return f"{text[:limit]!r}... ({len(text):,} characters)"


def _number(text: str, what: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not {what}: {shorten(text)}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"not {what}: {shorten(text)} is not a finite number")
    return value


def seconds(text: str) -> float:
    """A number of seconds, 0 up to :data:`MAX_SECONDS`."""
    value = _number(text, "a number of seconds")
    if not 0 <= value <= MAX_SECONDS:
        raise argparse.ArgumentTypeError(f"must be 0 to {MAX_SECONDS:.0f} seconds, got {shorten(text)}")
    return value


def duration(text: str) -> float:
    """A number of seconds > 0, up to :data:`MAX_SECONDS` (how long to run)."""
    value = seconds(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be more than 0 seconds, got {shorten(text)}")
    return value


def _integer(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {shorten(text)}") from None
    return value


def count(text: str, minimum: int = 0) -> int:
    """An integer from ``minimum`` up to :data:`MAX_COUNT`."""
    value = _integer(text)
    if not minimum <= value <= MAX_COUNT:
        raise argparse.ArgumentTypeError(f"must be {minimum} to {MAX_COUNT}, got {shorten(text)}")
    return value


def nonneg_int(text: str) -> int:
    """An integer >= 0 (up to :data:`MAX_COUNT`)."""
    return count(text, 0)


def positive_int(text: str) -> int:
    """An integer > 0 (up to :data:`MAX_COUNT`)."""
    return count(text, 1)


def between(low: int, high: int) -> Callable[[str], int]:
    """An argument type: an integer from ``low`` to ``high``."""

    def parse(text: str) -> int:
        value = _integer(text)
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"must be {low} to {high}, got {shorten(text)}")
        return value

    return parse


def port(text: str) -> int:
    """A TCP port, 0 (pick a free one) to 65535."""
    value = _integer(text)
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"not a TCP port (0 to 65535): {shorten(text)}")
    return value


def iso_time(text: str) -> datetime.datetime:
    """An ISO 8601 time (UTC when it names no zone)."""
    try:
        value = datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an ISO time: {shorten(text)}") from None
    return value if value.tzinfo else value.replace(tzinfo=datetime.UTC)


def boolean(text: str) -> bool:
    """``true`` or ``false`` (any case)."""
    value = text.strip().lower()
    if value not in ("true", "false"):
        raise argparse.ArgumentTypeError(f"expected true or false, got {shorten(text)}")
    return value == "true"


def bandwidth(text: str) -> int:
    """``--bandwidth``: bytes per second, an integer >= 0 (0: unlimited)."""
    try:
        value = int(text.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected bytes per second, an integer >= 0 (0: unlimited), got {shorten(text)}"
        ) from None
    if not 0 <= value <= MAX_BANDWIDTH:
        raise argparse.ArgumentTypeError(
            f"expected bytes per second, 0 (unlimited) to {MAX_BANDWIDTH}, got {shorten(text)}"
        )
    return value
