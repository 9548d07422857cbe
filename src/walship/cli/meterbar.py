"""Progress of long commands on a terminal (``rich``): units done, rate, time left, drawn on
stderr and gone when the work ends. Nothing is drawn when stdout is not a terminal or
``--json`` was given, so piped and scripted output stays as it was."""

from __future__ import annotations

import contextlib
import logging
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any

from walship.meter import NO_METER, Meter

__all__ = ["meter", "polled"]

log = logging.getLogger(__name__)


class _RichMeter:
    def __init__(self, progress: Any, what: str) -> None:
        self.progress = progress
        self.task = progress.add_task(what, total=None, unit="")

    def start(self, total: int | None, unit: str) -> None:
        self.progress.update(self.task, total=total, unit=unit)

    def advance(self, n: int = 1) -> None:
        self.progress.advance(self.task, n)


def _columns() -> list[Any]:
    from rich.filesize import decimal
    from rich.progress import BarColumn, ProgressColumn, TextColumn, TimeElapsedColumn, TimeRemainingColumn
    from rich.text import Text

    class Done(ProgressColumn):
        def render(self, task: Any) -> Text:
            unit = task.fields.get("unit", "")
            if unit == "bytes":
                done = decimal(int(task.completed))
                return Text(f"{done} of {decimal(int(task.total))}" if task.total else done)
            total = f" of {int(task.total):,}" if task.total else ""
            return Text(f"{int(task.completed):,}{total} {unit}")

    class Rate(ProgressColumn):
        def render(self, task: Any) -> Text:
            speed = task.finished_speed or task.speed
            if not speed:
                return Text("")
            unit = task.fields.get("unit", "")
            return Text(f"{decimal(int(speed))}/s" if unit == "bytes" else f"{speed:,.0f} {unit}/s")

    return [TextColumn("{task.description}"), BarColumn(), Done(), Rate(), TimeElapsedColumn(), TimeRemainingColumn()]


@contextlib.contextmanager
def meter(what: str, *, quiet: bool = False) -> Iterator[Meter]:
    """A meter drawn on stderr while the block runs; :data:`NO_METER` when ``quiet`` (``--json``)
    or when stdout is not a terminal."""
    if quiet or not sys.stdout.isatty():
        yield NO_METER
        return
    from rich.console import Console
    from rich.progress import Progress

    with Progress(*_columns(), console=Console(stderr=True), transient=True) as progress:
        yield _RichMeter(progress, what)


@contextlib.contextmanager
def polled(shown: Meter, done: Callable[[], int], interval: float = 0.2) -> Iterator[None]:
    """Advance ``shown`` from a counter the work keeps (``done()``, read every ``interval``
    seconds in a thread of its own), for work that takes no meter itself."""
    if shown is NO_METER:
        yield
        return
    stop = threading.Event()
    seen = 0

    def follow() -> None:
        nonlocal seen
        while not stop.wait(interval):
            now = done()
            if now > seen:
                shown.advance(now - seen)
                seen = now

    thread = threading.Thread(target=follow, name="walship-progress", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
