"""A packed Python environment for walship's Spark jobs on YARN (``walship spark pack``): a
fresh virtual environment with walship and its dependencies (never pyspark: Spark ships its
own ``pyspark.zip`` to every container), packed by venv-pack into one ``.tar.gz``. spark-submit
sends it with ``--archives <archive>#walship-env`` and the jobs run under
``./walship-env/bin/python``, as PySpark's documentation describes for virtualenvs.

As venv-pack documents, the environment's ``bin/python`` links to the interpreter it was made
with: every YARN node needs that Python at the same path (:attr:`PackedEnv.base_python`).

    pack(Path("walship-env.tar.gz"))                    # walship as installed here
    pack(out, wheel=Path("dist/walship-0.1.0-...whl"))  # a wheel of walship's
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from urllib.parse import unquote, urlsplit

from walship import __version__
from walship.errors import SparkSetupError

__all__ = ["PackedEnv", "pack", "walship_requirement"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PackedEnv:
    """A packed environment: its file, size, what was installed and the interpreter it needs."""

    path: Path
    size: int
    installed: tuple[str, ...]
    base_python: str
    python_version: str

    def to_json(self) -> dict[str, object]:
        return {
            "path": str(self.path),
            "size": self.size,
            "installed": list(self.installed),
            "base_python": self.base_python,
            "python_version": self.python_version,
        }

    def summary(self) -> str:
        return (
            f"packed {self.path} ({self.size / 2**20:.1f} MiB): {', '.join(self.installed)}; every YARN node "
            f"needs Python {self.python_version} at {self.base_python}"
        )


def _source_dir() -> Path | None:
    """The source tree walship is installed from (an editable or local-folder install), if any."""
    try:
        text = metadata.distribution("walship").read_text("direct_url.json")
    except metadata.PackageNotFoundError:
        return None
    if not text:
        return None
    try:
        info = json.loads(text)
    except ValueError:
        return None
    url = str(info.get("url", ""))
    if "dir_info" not in info or not url.startswith("file://"):
        return None
    return Path(unquote(urlsplit(url).path))


def _run(cmd: Sequence[str], what: str, cwd: Path | None = None) -> None:
    """Run ``cmd``; a failure is a :class:`SparkSetupError` with the end of its output."""
    log.info("%s: %s", what, " ".join(cmd))
    done = subprocess.run(list(cmd), capture_output=True, text=True, cwd=cwd, check=False)
    if done.returncode != 0:
        tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-15:])
        raise SparkSetupError(f"cannot pack the environment: {what} failed (exit {done.returncode}):\n{tail}")


def walship_requirement(work: Path, wheel: Path | None = None) -> str:
    """What to install as walship: ``wheel`` when given; else a wheel built from the source
    tree this walship is installed from; else ``walship==<version>`` from the package index.

    :raises SparkSetupError: the wheel is missing, or the source tree does not build.
    """
    if wheel is not None:
        if not wheel.is_file():
            raise SparkSetupError(f"--wheel {wheel}: no such file")
        return str(wheel.resolve())
    source = _source_dir()
    if source is None or not (source / "pyproject.toml").is_file():
        return f"walship=={__version__}"
    out = work / "wheels"
    _run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(out), str(source)],
        f"building walship's wheel from {source}",
    )
    built = sorted(out.glob("walship-*.whl"))
    if len(built) != 1:
        raise SparkSetupError(
            f"cannot pack the environment: building walship's wheel from {source} made {len(built)} wheels"
        )
    return str(built[0])


def pack(
    output: Path,
    *,
    wheel: Path | None = None,
    requirements: Sequence[str] = (),
    constraints: Path | None = None,
) -> PackedEnv:
    """Pack walship (see :func:`walship_requirement`) and ``requirements`` (sink plugins, say)
    into ``output`` (``.tar.gz``), replacing it.

    :raises SparkSetupError: a step failed (the message names it and ends with its output).
    """
    import venv_pack

    if constraints is not None and not constraints.is_file():
        raise SparkSetupError(f"--constraint {constraints}: no such file")
    output = output.resolve()
    output.parent.mkdir(parents=True, exist_ok=True)
    base = os.path.realpath(getattr(sys, "_base_executable", sys.executable))
    with tempfile.TemporaryDirectory(prefix="walship-pack-") as tmp:
        work = Path(tmp)
        env = work / "env"
        walship = walship_requirement(work, wheel)
        _run([base, "-m", "venv", str(env)], "creating the virtual environment")
        install = [
            str(env / "bin" / "python"),
            "-m",
            "pip",
            "install",
            "--no-input",
            "-q",
            "--disable-pip-version-check",
        ]
        if constraints is not None:
            install += ["-c", str(constraints.resolve())]
        _run([*install, walship, *requirements], "installing walship into it")
        tmp_out = output.with_name(output.name + ".part")
        try:
            venv_pack.pack(prefix=str(env), output=str(tmp_out), format="tar.gz", force=True)
        except venv_pack.VenvPackException as exc:
            raise SparkSetupError(f"cannot pack the environment: venv-pack: {exc}") from None
        os.replace(tmp_out, output)
    version = ".".join(str(v) for v in sys.version_info[:3])
    names = (Path(walship).name if walship.endswith(".whl") else walship, *requirements)
    return PackedEnv(output, output.stat().st_size, tuple(names), base, version)
