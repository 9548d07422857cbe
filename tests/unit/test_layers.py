"""The library never imports Airflow (nor Spark, outside the modules where Spark is the point),
nor the embedded cluster and harness beside it (walship_testing)."""

from __future__ import annotations

import pkgutil
import subprocess
import sys
from pathlib import Path

import walship


def test_library_imports_no_airflow() -> None:
    modules = [m.name for m in pkgutil.walk_packages(walship.__path__, "walship.")]
    assert "walship.wal.reader" in modules
    code = (
        "import importlib, sys\n"
        f"for m in {modules!r}: importlib.import_module(m)\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('airflow', 'pyspark', 'walship_testing'))\n"
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
    "security": {"errors"},
    "files": {"errors", "security"},
    "childproc": set(),
    "entrypoints": set(),
    "defaults": {"errors"},
    "meter": set(),
    "jobdesc": {"errors"},
    "servername": {"errors"},
    "clusterids": {"errors"},
    "protos": set(),
    "peer": {"errors", "protos"},
    "thrift": {"errors", "peer", "security"},
    "wal": {"errors", "protos", "servername"},
    "zk": {"errors", "defaults", "protos", "servername", "wal", "peer", "security"},
    "hbaseshell": {"peer"},
    # HBase's RPC (the master's replication calls): beside zk, whose znodes name the master
    "rpc": {"errors", "protos", "zk", "peer", "security", "wal"},
    "serial": {"errors", "thrift", "wal", "zk", "peer"},
    "sep": {"errors", "defaults", "entrypoints", "files", "wal", "zk", "rpc", "servername", "peer"},
    "sinks": {
        "errors",
        "defaults",
        "entrypoints",
        "files",
        "clusterids",
        "thrift",
        "wal",
        "servername",
        "sep",
        "peer",
        "protos",
        "rpc",
        "zk",
    },
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
        "meter",
        "thrift",
        "serial",
    },
    "status": {"errors", "defaults", "replicate", "sinks", "wal", "zk", "servername", "peer"},
    "scope": {"errors", "defaults", "thrift", "sinks", "zk", "replicate", "wal", "peer"},
    "verify": {
        "errors",
        "rpc",
        "jobdesc",
        "files",
        "defaults",
        "thrift",
        "sinks",
        "zk",
        "replicate",
        "wal",
        "status",
        "scope",
        "peer",
        "meter",
    },
    "copy": {"errors", "verify", "meter", "sinks", "rpc", "clusterids", "thrift", "wal", "zk"},
    # a switchover: the master's table calls, the drain's cut, the verify, the scope audit
    "switchover": {"errors", "peer", "replicate", "rpc", "scope", "sinks", "status", "verify", "wal", "zk"},
    "spark": {
        "errors",
        "defaults",
        "jobdesc",
        "replicate",
        "sinks",
        "zk",
        "wal",
        "verify",
        "copy",
        "peer",
        "security",
        "files",
    },
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
        "spark",
        "status",
        "scope",
        "verify",
        "peer",
        "copy",
        "meter",
        "hbaseshell",
        "rpc",
        "security",
        "switchover",
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


REPO = Path(__file__).resolve().parents[2]


def _imports(path: Path, *, top_level_only: bool = False) -> list[tuple[int, str]]:
    """(line, module) of each import in ``path`` (``from a.b import c`` gives ``a.b.c`` and
    ``a.b``); only the module's own statements with ``top_level_only``."""
    import ast

    tree = ast.parse(path.read_text())
    nodes = tree.body if top_level_only else list(ast.walk(tree))
    out: list[tuple[int, str]] = []
    for node in nodes:
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.append((node.lineno, node.module))
            out += [(node.lineno, f"{node.module}.{a.name}") for a in node.names]
    return out


def test_spark_jobs_import_the_library_and_never_airflow() -> None:
    bad = [
        f"spark_jobs/{path.name}:{line} imports {name}"
        for path in sorted((REPO / "spark_jobs").glob("*.py"))
        for line, name in _imports(path)
        if name.split(".")[0] in ("airflow", "walship_airflow")
    ]
    assert bad == []


#: What a DAG file may import when it is parsed (its module-level statements): Airflow, its
#: plugins, walship's defaults; the rest only inside the tasks that run.
DAG_TOP_LEVEL = ("__future__", "os", "datetime", "pathlib", "typing", "pendulum", "airflow", "walship_airflow")


def test_dag_files_stay_thin_at_parse_time() -> None:
    bad = []
    for path in sorted((REPO / "dags").glob("*.py")):
        for line, name in _imports(path, top_level_only=True):
            root = name.split(".")[0]
            if root in DAG_TOP_LEVEL or name in ("walship", "walship.defaults"):
                continue
            bad.append(f"dags/{path.name}:{line} imports {name} when parsed")
        bad += [
            f"dags/{path.name}:{line} imports {name}" for line, name in _imports(path) if name.startswith("pyspark")
        ]
    assert bad == []


def test_plugins_import_no_dag_file_spark_job_nor_spark() -> None:
    dag_modules = {p.stem for p in (REPO / "dags").glob("*.py")}
    job_modules = {p.stem for p in (REPO / "spark_jobs").glob("*.py")}
    bad = [
        f"plugins/{path.relative_to(REPO / 'plugins')}:{line} imports {name}"
        for path in sorted((REPO / "plugins").rglob("*.py"))
        for line, name in _imports(path)
        if name.split(".")[0] in ("pyspark", *dag_modules, *job_modules)
    ]
    assert bad == []


def test_no_import_circle_inside_a_package() -> None:
    """Within one part of the library, module imports form no circle (type-only imports count:
    a module that needs another's type takes a protocol of a lower module instead)."""
    root = Path(walship.__file__).parent
    modules = {
        ".".join(("walship", *p.relative_to(root).with_suffix("").parts)).removesuffix(".__init__"): p
        for p in root.rglob("*.py")
        if not p.name.endswith("_pb2.py")
    }
    import ast

    compiled = {
        ".".join(("walship", *p.relative_to(root).parent.parts, p.name.split(".")[0])) for p in root.rglob("*.so")
    }
    edges: dict[str, set[str]] = {m: set() for m in modules}
    for module, path in modules.items():
        package = module.split(".")[1] if module.count(".") >= 1 else ""
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                named = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                # ``from pkg import submodule`` imports the submodule, not what the package holds
                subs = [
                    f"{node.module}.{a.name}" for a in node.names if f"{node.module}.{a.name}" in (*modules, *compiled)
                ]
                named = subs if len(subs) == len(node.names) else [node.module, *subs]
            else:
                continue
            for name in named:
                if name in modules and name != module and name.split(".")[1:2] == [package]:
                    edges[module].add(name)
    circles = []
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(m: str) -> None:
        state[m] = 1
        stack.append(m)
        for n in sorted(edges[m]):
            if state.get(n) == 1:
                circles.append([*stack[stack.index(n) :], n])
            elif n not in state:
                visit(n)
        stack.pop()
        state[m] = 2

    for m in sorted(edges):
        if m not in state:
            visit(m)
    assert circles == []


#: What each part of walship_testing may import of the library; neither imports the other.
TESTING_LAYERS: dict[str, set[str] | None] = {
    "minicluster": None,  # any part of the library
    "harness": {"errors", "childproc", "security"},
}


def test_the_library_never_imports_the_embedded_cluster_nor_the_harness() -> None:
    """walship_testing sits beside the library as kazoo.testing beside kazoo: only the
    ``walship minicluster`` commands reach it, inside the functions that run them."""
    import walship_testing

    root = Path(walship.__file__).parent
    bad = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        lazy_allowed = rel == "cli/minicluster.py"
        top = {line for line, _ in _imports(path, top_level_only=True)}
        for line, name in _imports(path):
            if name.split(".")[0] == "walship_testing" and (not lazy_allowed or line in top):
                bad.append(f"src/walship/{rel}:{line} imports {name}")
    assert bad == []

    testing = Path(walship_testing.__file__).parent
    crossing = []
    for part, allowed in TESTING_LAYERS.items():
        for path in sorted((testing / part).rglob("*.py")):
            for line, name in _imports(path):
                top, *rest = name.split(".")
                other = f"walship_testing.{next(p for p in TESTING_LAYERS if p != part)}"
                if name.startswith(other) or (
                    top == "walship" and allowed is not None and rest and rest[0] not in allowed
                ):
                    crossing.append(f"{path.relative_to(testing)}:{line} imports {name}")
    assert crossing == []
