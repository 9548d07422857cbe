"""A test that hangs fails alone, with its stack, and the run goes on to the next test (the
suite's pytest-timeout settings, run by pytest in a child process)."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

SETTINGS = tomllib.loads((Path(__file__).resolve().parents[2] / "pyproject.toml").read_text())["tool"]["pytest"]

HANGS = """
import threading

def test_hangs():
    threading.Event().wait()  # never set

def test_after():
    assert True
"""


def test_a_hung_test_fails_alone_and_the_run_goes_on(tmp_path: Path) -> None:
    (tmp_path / "test_hanging.py").write_text(HANGS)
    assert 0 < SETTINGS["ini_options"]["timeout"] <= 1800
    method = SETTINGS["ini_options"]["timeout_method"]  # the suite's, with a shorter timeout
    (tmp_path / "pytest.ini").write_text(f"[pytest]\ntimeout = 2\ntimeout_method = {method}\n")
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 1, run.stdout + run.stderr
    assert "1 failed, 1 passed" in run.stdout
    assert "Timeout (>2.0s)" in run.stdout and "threading.Event().wait()" in run.stdout
