"""The java command line of the real-HBase harness: its garbage collectors."""

from __future__ import annotations

import pytest

from walship.errors import HarnessError
from walship.harness import java_command


def test_the_parallel_collector_fixes_the_heap_and_the_serial_one_grows_it() -> None:
    parallel = java_command("512m", "parallel")
    assert "-XX:+UseParallelGC" in parallel and "-XX:+UseSerialGC" not in parallel
    assert "-Xmx512m" in parallel and "-Xms512m" in parallel
    serial = java_command("512m")
    assert "-XX:+UseSerialGC" in serial and "-XX:+UseParallelGC" not in serial
    assert "-Xmx512m" in serial and "-Xms128m" in serial


def test_an_unknown_collector_is_refused_by_name() -> None:
    with pytest.raises(HarnessError, match="no collector 'g1' for the harness: one of serial, parallel"):
        java_command(collector="g1")
