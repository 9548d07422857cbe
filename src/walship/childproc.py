"""Child processes of walship's own (the minicluster, the real-HBase harness): ending one."""

from __future__ import annotations

import subprocess

__all__ = ["wait_or_kill"]


def wait_or_kill(proc: subprocess.Popen[str], timeout: float) -> int:
    """Wait up to ``timeout`` seconds for ``proc`` to exit, then SIGKILL it; its exit code."""
    try:
        return proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        return proc.wait()
