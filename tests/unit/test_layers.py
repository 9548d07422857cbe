"""The library never imports Airflow (nor Spark, outside the modules where Spark is the point)."""

from __future__ import annotations

import pkgutil
import subprocess
import sys

import walship


def test_library_imports_no_airflow() -> None:
    modules = [m.name for m in pkgutil.walk_packages(walship.__path__, "walship.")]
    assert "walship.wal.reader" in modules
    code = (
        "import importlib, sys\n"
        f"for m in {modules!r}: importlib.import_module(m)\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('airflow', 'pyspark'))\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout.strip()
    assert out == ""


def test_every_exported_error_derives_from_the_root() -> None:
    for name in walship.__all__:
        assert hasattr(walship, name), name
        obj = getattr(walship, name)
        if isinstance(obj, type) and issubclass(obj, Exception):
            assert issubclass(obj, walship.WalshipError), name
