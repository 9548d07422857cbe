"""Listeners and filter hooks for the SEP tests, named as ``sep_listeners:JsonLinesListener``.

The listener appends every event it is given as one JSON line to the file named by
``SEP_TEST_OUT``, so a separate ``walship ship`` process can be checked. ``SEP_TEST_FAIL_ROW``
makes it raise on a batch holding that row (before writing anything of the batch);
``SEP_TEST_DELAY`` makes it sleep that many seconds after writing each batch.
``SecondJsonLinesListener`` writes to ``$SEP_TEST_OUT.second`` instead.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Sequence
from typing import Any

from walship.sep import SepEvent

OUT_ENV = "SEP_TEST_OUT"
FAIL_ENV = "SEP_TEST_FAIL_ROW"
DELAY_ENV = "SEP_TEST_DELAY"


def _text(b: bytes | None) -> str | None:
    return None if b is None else b.decode("latin-1")


def event_json(event: SepEvent) -> dict[str, Any]:
    return {
        "table": _text(event.table),
        "row": _text(event.row),
        "cells": [[_text(c.family), _text(c.qualifier), c.timestamp, c.type, _text(c.value)] for c in event.cells],
        "payload": _text(event.payload),
        "write_time": event.write_time,
        "wal": event.wal,
        "offset": event.offset,
        "seqid": event.seqid,
        "cluster_ids": [str(c) for c in event.cluster_ids],
        "thread": threading.current_thread().name,
    }


class JsonLinesListener:
    """Appends events as JSON lines to ``$SEP_TEST_OUT``."""

    def __init__(self) -> None:
        self.path = os.environ[OUT_ENV]
        self.fail_row = os.environ.get(FAIL_ENV, "").encode() or None
        self.delay = float(os.environ.get(DELAY_ENV, "0"))
        self.lock = threading.Lock()

    def process_events(self, events: Sequence[SepEvent]) -> None:
        if self.fail_row is not None and any(e.row == self.fail_row for e in events):
            raise RuntimeError(f"listener refuses row {self.fail_row.decode()}")
        text = "".join(json.dumps(event_json(e)) + "\n" for e in events)
        with self.lock, open(self.path, "a") as f:
            f.write(text)  # one write: a SIGKILL leaves whole lines
            f.flush()
        if self.delay:
            time.sleep(self.delay)


class SecondJsonLinesListener(JsonLinesListener):
    """The same, into ``$SEP_TEST_OUT.second``: a second subscription's events apart."""

    def __init__(self) -> None:
        super().__init__()
        self.path += ".second"


class NoProcessEvents:
    """Not a listener: no ``process_events``."""


def skip_rows(event: SepEvent) -> bool:
    """Filter hook: drop rows whose key starts with ``skip``."""
    return not event.row.startswith(b"skip")


def read_events(path: str) -> list[dict[str, Any]]:
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]
