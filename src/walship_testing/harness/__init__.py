"""Real HBase 2.6 for tests and the demo: the Maven project in ``harness/`` (HBase's own test
cluster and Thrift servers) run as a child JVM; see :class:`HBaseProcess`."""

from __future__ import annotations

from walship_testing.harness.process import (
    COLLECTORS,
    HBaseProcess,
    YarnInfo,
    check_collector,
    harness_dir,
    java_command,
)

__all__ = ["COLLECTORS", "HBaseProcess", "YarnInfo", "check_collector", "harness_dir", "java_command"]
