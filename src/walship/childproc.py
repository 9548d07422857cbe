"""Child processes of walship's own (the minicluster, the real-HBase harness): ending one."""

from __future__ import annotations

import contextlib
import subprocess
from typing import Any

__all__ = ["terminate", "wait_or_kill"]


def wait_or_kill(proc: subprocess.Popen[Any], timeout: float) -> int:
    """Wait up to ``timeout`` seconds for ``proc`` to exit, then SIGKILL it; its exit code."""
    try:
        return proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        return proc.wait()


def terminate(proc: subprocess.Popen[Any], timeout: float) -> int:
    """SIGTERM ``proc``, then :func:`wait_or_kill`; its exit code."""
    with contextlib.suppress(ProcessLookupError):
        proc.terminate()
    return wait_or_kill(proc, timeout)
