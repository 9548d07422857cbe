"""The java command line of the real-HBase harness: its garbage collectors (the harness's Maven
build gives its class path)."""

from __future__ import annotations

from pathlib import Path

import pytest

from walship.errors import ConfigError
from walship_testing.harness import HBaseProcess, java_command

pytestmark = pytest.mark.integration


def test_the_parallel_collector_fixes_the_heap_and_the_serial_one_grows_it() -> None:
    parallel = java_command("512m", "parallel")
    assert "-XX:+UseParallelGC" in parallel and "-XX:+UseSerialGC" not in parallel
    assert "-Xmx512m" in parallel and "-Xms512m" in parallel
    serial = java_command("512m")
    assert "-XX:+UseSerialGC" in serial and "-XX:+UseParallelGC" not in serial
    assert "-Xmx512m" in serial and "-Xms128m" in serial


def test_an_unknown_collector_is_refused_by_name(tmp_path: Path) -> None:
    why = "the harness's collector must be one of serial, parallel, got 'g1'"
    with pytest.raises(ConfigError, match=why):
        java_command(collector="g1")
    with pytest.raises(ConfigError, match=why):  # at once, not when the cluster starts
        HBaseProcess("A", tmp_path, collector="g1")
