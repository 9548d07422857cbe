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


#: Each part of the library and the parts below it that it may import; imports point down only.
LAYERS: dict[str, set[str]] = {
    "errors": set(),
    "files": {"errors"},
    "childproc": set(),
    "defaults": {"errors"},
    "progress": set(),
    "servername": {"errors"},
    "clusterids": {"errors"},
    "protos": set(),
    "peer": {"errors", "protos"},
    "thrift": {"errors", "peer"},
    "wal": {"errors", "protos", "servername"},
    "zk": {"errors", "defaults", "protos", "servername", "wal", "peer"},
    "hbaseshell": {"peer"},
    "sep": {"errors", "defaults", "files", "wal", "zk", "servername", "peer"},
    "sinks": {"errors", "defaults", "files", "clusterids", "thrift", "wal", "servername", "sep", "peer"},
    "replicate": {
        "errors",
        "defaults",
        "files",
        "sinks",
        "sep",
        "wal",
        "zk",
        "servername",
        "clusterids",
        "peer",
        "progress",
        "thrift",
    },
    "status": {"errors", "defaults", "replicate", "sinks", "wal", "zk", "servername", "peer"},
    "minicluster": {"errors", "defaults", "clusterids", "protos", "servername", "thrift", "wal", "zk", "childproc"},
    "harness": {"errors", "childproc"},
    "scope": {"errors", "defaults", "thrift", "sinks", "zk", "replicate", "wal", "peer"},
    "verify": {
        "errors",
        "defaults",
        "thrift",
        "sinks",
        "zk",
        "replicate",
        "wal",
        "status",
        "scope",
        "peer",
        "progress",
    },
    "copy": {"errors", "verify", "progress"},
    "spark": {"errors", "defaults", "replicate", "sinks", "zk", "wal", "verify", "copy", "peer"},
    "cli": {
        "errors",
        "files",
        "defaults",
        "servername",
        "thrift",
        "wal",
        "zk",
        "sinks",
        "sep",
        "replicate",
        "minicluster",
        "harness",
        "spark",
        "status",
        "scope",
        "verify",
        "peer",
        "copy",
        "progress",
        "hbaseshell",
    },
}


def _part(module: str) -> str:
    """``walship.zk.peers`` -> ``zk``; ``walship`` itself (its version, errors) counts as errors."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "errors"


def test_every_module_imports_only_downwards() -> None:
    import ast
    from pathlib import Path

    root = Path(walship.__file__).parent
    bad = []
    checked = 0
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root)
        if rel.name.endswith("_pb2.py") or rel.parts == ("__init__.py",):
            continue
        part = rel.parts[0].removesuffix(".py")
        assert part in LAYERS, f"{rel}: a new part of the library; give it a place in LAYERS"
        checked += 1
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "walship":
                names = [node.module]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names if a.name.split(".")[0] == "walship"]
            for name in names:
                dep = _part(name)
                if dep != part and dep not in LAYERS[part]:
                    bad.append(f"{rel}:{node.lineno} imports {name} ({part} -> {dep})")
    assert checked > 40
    assert bad == []
