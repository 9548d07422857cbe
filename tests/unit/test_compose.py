"""docker-compose.yml, the production stack: Compose accepts it, with either profile (the
existing HBase of .env, or the bundled HBase clusters) and with Flower, and its structure keeps
what the stack promises (images built or pinned, code mounted, one JWT secret, the
CeleryExecutor with its broker and result backend, scalable Celery and Spark workers, FAB's auth
manager, the source and its Hadoop configuration taken from .env, connections naming real
services, healthy dependencies, the WAL volume writable only where HBase writes it and the
cleaner's worker cleans it, dead letters and change logs on volumes of their own, rotated logs,
the metrics service). Also the images: HBase's download check and configuration, HBase and
Airflow as different users sharing the WALs' group, walship's pinned Hadoop client; and
airflow-init's admin and Spark pool.

Needs neither a Docker daemon nor any image. With Debian's ``docker-compose`` (scripts/setup.sh
installs it) or ``docker compose`` the checks read Compose's own rendering of the file
(``config``: variables, anchors and paths resolved); without either they read the file itself
and the Compose-only tests are skipped.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import uuid
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
COMPOSE_FILE = REPO / "docker-compose.yml"
HBASE_DIR = REPO / "docker" / "hbase"
WALSHIP_DOCKERFILE = REPO / "Dockerfile"
DOCKERFILES = (WALSHIP_DOCKERFILE, HBASE_DIR / "Dockerfile")
AIRFLOW_INIT = REPO / "docker" / "airflow" / "init.sh"
#: What docker-compose.yml mounts at /etc/hadoop/conf when .env names no HADOOP_CONF_DIR.
DEFAULT_HADOOP_CONF = REPO / "docker" / "airflow" / "hadoop-conf"
HADOOP_CONF = "/etc/hadoop/conf"

#: Every secret the stack reads; each must come from the environment (.env), never a default.
SECRETS = {
    "POSTGRES_PASSWORD": "test-postgres-password",
    "AIRFLOW_FERNET_KEY": "test-fernet-key",
    "AIRFLOW_JWT_SECRET": "test-jwt-secret",
    "AIRFLOW_API_SECRET_KEY": "test-api-secret-key",
    "AIRFLOW_ADMIN_PASSWORD": "test-admin-password",
}
AIRFLOW_SERVICES = (
    "airflow-init",
    "airflow-api-server",
    "airflow-scheduler",
    "airflow-dag-processor",
    "airflow-triggerer",
    "airflow-worker",
    "airflow-worker-cleaner",
)
FAB_AUTH_MANAGER = "airflow.providers.fab.auth_manager.fab_auth_manager.FabAuthManager"
#: The Celery workers: the scalable one of the queue ``default``, and the cleaner's.
WORKER = "airflow-worker"
CLEANER = "airflow-worker-cleaner"
CELERY_WORKERS = (WORKER, CLEANER)
#: The Celery queue of walship_clean's tasks ([walship] cleaner_queue), consumed by CLEANER only.
CLEANER_QUEUE = "walship_clean"
#: The profiles: where the source runs (one of the two), and Flower.
BUNDLED_PROFILE = "bundled-hbase"
EXISTING_PROFILE = "existing-hbase"
FLOWER_PROFILE = "flower"
PROFILES = (BUNDLED_PROFILE, EXISTING_PROFILE, FLOWER_PROFILE)
#: The bundled ZooKeeper and HBase clusters, only in BUNDLED_PROFILE.
BUNDLED = ("zookeeper", "hbase-a", "hbase-b")
HBASE_SERVICES = ("hbase-a", "hbase-b")
#: The stack itself, under either profile.
CORE = (
    "postgres",
    "valkey",
    "spark-master",
    "spark-worker",
    *AIRFLOW_SERVICES,
    "walship-metrics",
)
#: What writes the WAL volume: the source cluster itself, and the cleaner's worker, which runs
#: walship_clean (the one walship task that deletes archived WALs).
WAL_WRITERS = ("hbase-a", CLEANER)
#: What only reads the WALs or their sizes: the tasks of the queue ``default`` (tail runs,
#: replays), the deferred sensor's trigger, the Spark executors, the API server's Replication
#: page and the metrics service.
WAL_READERS = (WORKER, "airflow-triggerer", "spark-worker", "airflow-api-server", "walship-metrics")
#: What reads a WAL root through walship, and so needs the Hadoop client's configuration.
HADOOP_CLIENTS = (*WAL_READERS, CLEANER)
#: What ships, and so writes dead letters and Parquet change logs.
SHIPPERS = (WORKER, "spark-worker")
#: The walship command's source, in every container that runs walship.
SOURCE_ENV = ("WALSHIP_ZK", "WALSHIP_ZNODE_PARENT", "WALSHIP_WAL_ROOT", "WALSHIP_SOURCE_THRIFT2", "WALSHIP_ZK_AUTH")
WALSHIP_SERVICES = (*AIRFLOW_SERVICES, "spark-worker", "walship-metrics")
#: An existing HBase, as an operator names it in .env.
EXISTING_SOURCE = {
    "WALSHIP_SOURCE_ZK": "zk1.example:2181,zk2.example:2181,zk3.example:2181",
    "WALSHIP_SOURCE_ZNODE_PARENT": "/hbase-prod",
    "WALSHIP_SOURCE_WAL_ROOT": "hdfs://nn.example:8020/hbase",
    "WALSHIP_SOURCE_THRIFT2": "thrift-a.example:9090,thrift-b.example:9090",
    "WALSHIP_SOURCE_ZK_AUTH": "digest:walship:zk-test-credential",
    "WALSHIP_SOURCE_PRINCIPAL": "walship/etl.example@EXAMPLE.COM",
    "WALSHIP_SOURCE_KEYTAB": "/etc/security/keytabs/walship.keytab",
    "HADOOP_CONF_DIR": "/etc/hadoop/conf.prod",
}
#: Settings that must be one value across all Airflow components.
SHARED_AIRFLOW_SETTINGS = (
    "AIRFLOW__CORE__EXECUTOR",
    "AIRFLOW__CELERY__BROKER_URL",
    "AIRFLOW__CELERY__RESULT_BACKEND",
    "AIRFLOW__CORE__AUTH_MANAGER",
    "AIRFLOW__WALSHIP__CLEANER_QUEUE",
    "AIRFLOW__API_AUTH__JWT_SECRET",
    "AIRFLOW__CORE__FERNET_KEY",
    "AIRFLOW__API__SECRET_KEY",
    "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN",
    "AIRFLOW__CORE__EXECUTION_API_SERVER_URL",
    "AIRFLOW_CONN_WALSHIP_SOURCE",
    "AIRFLOW_CONN_SPARK_DEFAULT",
    "WALSHIP_ZK",
    "WALSHIP_ZNODE_PARENT",
    "WALSHIP_WAL_ROOT",
    "WALSHIP_SOURCE_THRIFT2",
    "WALSHIP_SPARK_POOL",
    "WALSHIP_KEEP_DAYS",
)
CODE_DIRS = {"dags": "/opt/airflow/dags", "plugins": "/opt/airflow/plugins", "spark_jobs": "/opt/airflow/spark_jobs"}
CONDITIONS = {"service_started", "service_healthy", "service_completed_successfully"}
#: A version tag: digits and dots first (3.9.4, 17.6-bookworm, 17.0.15_6-jre-noble, 0.1.0).
VERSION_TAG = re.compile(r"^v?\d+(\.\d+)+([._-][A-Za-z0-9._-]+)?$")


# ---- reading the file ----------------------------------------------------------------------


def compose_command() -> list[str] | None:
    """Debian's ``docker-compose``, else the Docker CLI's ``compose`` plugin, else None."""
    if path := shutil.which("docker-compose"):
        return [path]
    docker = shutil.which("docker")
    if docker and subprocess.run([docker, "compose", "version"], capture_output=True, check=False).returncode == 0:
        return [docker, "compose"]
    return None


COMPOSE = compose_command()
needs_compose = pytest.mark.skipif(
    COMPOSE is None,
    reason="neither docker-compose nor `docker compose` found; scripts/setup.sh installs docker-compose",
)


def run_compose(args: list[str], env_file: Path, home: Path) -> subprocess.CompletedProcess[str]:
    """Compose on this file, with only ``env_file`` as its variables: nothing from the caller's
    shell and no .env of the working tree can fill a secret in."""
    assert COMPOSE is not None
    return subprocess.run(
        [*COMPOSE, "--env-file", str(env_file), "-f", str(COMPOSE_FILE), *args],
        cwd=REPO,
        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home), "DOCKER_CONFIG": str(home)},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def write_env(path: Path, values: dict[str, str]) -> Path:
    path.write_text("".join(f"{k}={v}\n" for k, v in values.items()))
    return path


_VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?[-?])([^}]*))?\}")


def interpolate(value: Any, env: dict[str, str]) -> Any:
    """Compose's ``${NAME}``, ``${NAME:-default}`` and ``${NAME:?error}``, for reading the file
    without Compose."""
    if isinstance(value, dict):
        return {k: interpolate(v, env) for k, v in value.items()}
    if isinstance(value, list):
        return [interpolate(v, env) for v in value]
    if not isinstance(value, str):
        return value

    def substitute(m: re.Match[str]) -> str:
        name, op, arg = m.group(1), m.group(2) or "", m.group(3) or ""
        found = env.get(name)
        if op.endswith("?"):
            if not found:
                raise ValueError(f"{name}: {arg}")
            return found
        if op.endswith("-"):
            return found if found else arg
        return found or ""

    return _VARIABLE.sub(substitute, value.replace("$$", "\0")).replace("\0", "$")


def profile_args(profiles: Iterable[str]) -> list[str]:
    return [arg for name in profiles for arg in ("--profile", name)]


def render(env: dict[str, str], home: Path) -> dict[str, Any]:
    """The file with every profile enabled, as Compose renders it with only ``env`` as its
    variables (or as read and interpolated here, without Compose)."""
    if COMPOSE is None:
        loaded = yaml.safe_load(COMPOSE_FILE.read_text())
        return dict(interpolate({k: v for k, v in loaded.items() if not k.startswith("x-")}, env))
    args = profile_args(PROFILES)
    done = run_compose([*args, "config"], write_env(home / "compose.env", env), home)
    if done.returncode != 0:
        pytest.fail(f"`{' '.join([*COMPOSE, *args])} config` failed (exit {done.returncode}):\n{done.stderr}")
    rendered = yaml.safe_load(done.stdout)
    assert isinstance(rendered, dict) and rendered.get("services"), f"no services in:\n{done.stdout[:2000]}"
    return rendered


@pytest.fixture(scope="module")
def config(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The file as Compose renders it with the secrets only (every other setting its default)."""
    return render(SECRETS, tmp_path_factory.mktemp("compose-home"))


@pytest.fixture(scope="module")
def services(config: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return dict(config["services"])


@dataclass(frozen=True)
class Mount:
    source: str  # a named volume, or an absolute host path for a bind mount ("" if anonymous)
    target: str
    read_only: bool
    bind: bool


def mounts(service: dict[str, Any]) -> list[Mount]:
    """A service's volumes in one form, from the short syntax (``src:dst:ro``) or the long one."""
    out = []
    for v in service.get("volumes") or []:
        if isinstance(v, str):
            parts = v.split(":")
            source, target = ("", parts[0]) if len(parts) == 1 else (parts[0], parts[1])
            read_only = len(parts) > 2 and "ro" in parts[2].split(",")
        else:
            source, target, read_only = str(v.get("source") or ""), str(v["target"]), bool(v.get("read_only"))
        bind = source.startswith((".", "/", "~"))
        if bind:
            source = str((REPO / source).resolve())
        out.append(Mount(source, target, read_only, bind))
    return out


def environment(service: dict[str, Any]) -> dict[str, str]:
    env = service.get("environment") or {}
    if isinstance(env, list):
        env = dict(item.split("=", 1) if "=" in item else (item, "") for item in env)
    return {str(k): "" if v is None else str(v) for k, v in env.items()}


def depends_on(service: dict[str, Any]) -> dict[str, str]:
    deps = service.get("depends_on") or {}
    if isinstance(deps, list):
        return dict.fromkeys(deps, "service_started")
    return {name: str((spec or {}).get("condition", "service_started")) for name, spec in deps.items()}


def labels(service: dict[str, Any]) -> dict[str, str]:
    found = service.get("labels") or {}
    if isinstance(found, list):
        found = dict(item.split("=", 1) if "=" in item else (item, "") for item in found)
    return {str(k): str(v) for k, v in found.items()}


def published_ports(service: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(host address, host port, container port) of each port a service publishes."""
    out = []
    for p in service.get("ports") or []:
        if isinstance(p, dict):
            out.append((str(p.get("host_ip") or ""), str(p.get("published") or ""), str(p["target"])))
            continue
        parts = str(p).partition("/")[0].rsplit(":", 2)
        parts = [""] * (3 - len(parts)) + parts
        out.append((parts[0], parts[1], parts[2]))
    return out


#: What the scheduler and the Celery workers run before their own command (``sh -c "CHECK && exec CMD"``).
BROKER_CHECK = "python -m walship_airflow.checks broker"


def _shell(service: dict[str, Any]) -> tuple[str, list[str]] | None:
    """``(check, command)`` of a ``sh -c "check && exec command"`` service, else ``None``."""
    cmd = service.get("command") or []
    if isinstance(cmd, list) and len(cmd) == 3 and cmd[:2] == ["sh", "-c"]:
        check, sep, main = str(cmd[2]).partition(" && exec ")
        if sep:
            return check, shlex.split(main)
    return None


def command(service: dict[str, Any]) -> list[str]:
    """The service's command (after its pre-start check, if it runs one)."""
    shell = _shell(service)
    if shell is not None:
        return shell[1]
    cmd = service.get("command") or []
    return cmd.split() if isinstance(cmd, str) else [str(c) for c in cmd]


def test_the_scheduler_and_the_workers_check_the_broker_before_they_start(services: dict[str, dict[str, Any]]) -> None:
    """A broker that does not answer is one line and a restart, not a worker retrying in silence."""
    for name in ("airflow-scheduler", *CELERY_WORKERS):
        shell = _shell(services[name])
        assert shell is not None and shell[0] == BROKER_CHECK, (name, services[name].get("command"))


def has_healthcheck(service: dict[str, Any]) -> bool:
    check = service.get("healthcheck") or {}
    return bool(check.get("test")) and not check.get("disable") and check.get("test") != ["NONE"]


def healthcheck_text(service: dict[str, Any]) -> str:
    """A service's healthcheck as one string, with Compose's ``$$`` (which ``config`` may print
    escaped or not) as the ``$`` the container's shell sees."""
    test = (service.get("healthcheck") or {}).get("test") or []
    return " ".join(test if isinstance(test, list) else [test]).replace("$$", "$")


def active(services: dict[str, dict[str, Any]], profiles: Iterable[str]) -> set[str]:
    """The services Compose starts with ``profiles`` enabled: those in no profile, and those in
    one of them."""
    enabled = set(profiles)
    return {name for name, s in services.items() if not s.get("profiles") or enabled & set(s["profiles"])}


def option(cmd: list[str], name: str) -> str | None:
    """The value of ``name`` on a command line (``--name value`` or ``--name=value``)."""
    for i, arg in enumerate(cmd):
        if arg == name and i + 1 < len(cmd):
            return cmd[i + 1]
        if arg.startswith(f"{name}="):
            return arg.partition("=")[2]
    return None


def airflow_services(services: dict[str, dict[str, Any]]) -> Iterator[tuple[str, dict[str, Any]]]:
    missing = [name for name in AIRFLOW_SERVICES if name not in services]
    assert not missing, f"Airflow services missing from docker-compose.yml: {missing}"
    for name, service in sorted(services.items()):
        if name.startswith("airflow-"):
            yield name, service


def connection(
    services: dict[str, dict[str, Any]], variable: str, service: str = "airflow-scheduler"
) -> dict[str, Any]:
    value = environment(services[service]).get(variable)
    assert value, f"{service} has no {variable}"
    try:
        conn = json.loads(value)
    except json.JSONDecodeError as exc:
        pytest.fail(f"{variable} is not JSON ({exc}): {value!r}")
    assert isinstance(conn, dict), f"{variable} is not a JSON object: {value!r}"
    return conn


# ---- Compose itself --------------------------------------------------------------------------


@needs_compose
@pytest.mark.parametrize(
    "profiles",
    [(EXISTING_PROFILE,), (BUNDLED_PROFILE,), (EXISTING_PROFILE, FLOWER_PROFILE), ()],
    ids=[EXISTING_PROFILE, BUNDLED_PROFILE, f"{EXISTING_PROFILE},{FLOWER_PROFILE}", "no-profile"],
)
def test_compose_accepts_the_file(tmp_path: Path, profiles: tuple[str, ...]) -> None:
    args = profile_args(profiles)
    done = run_compose([*args, "config", "-q"], write_env(tmp_path / "secrets.env", SECRETS), tmp_path)
    assert done.returncode == 0, (
        f"`{' '.join([*(COMPOSE or []), *args])} config -q` exit {done.returncode}:\n{done.stderr}"
    )


@needs_compose
def test_compose_accepts_an_existing_hbase_of_env(tmp_path: Path) -> None:
    env = write_env(tmp_path / "existing.env", {**SECRETS, **EXISTING_SOURCE})
    done = run_compose([*profile_args([EXISTING_PROFILE]), "config", "-q"], env, tmp_path)
    assert done.returncode == 0, f"`config -q` with an existing HBase in .env: exit {done.returncode}:\n{done.stderr}"


@needs_compose
def test_compose_refuses_to_start_without_the_secrets(tmp_path: Path) -> None:
    done = run_compose(["config", "-q"], write_env(tmp_path / "empty.env", {}), tmp_path)
    assert done.returncode != 0, "docker-compose.yml renders without any secret set: some secret has a default"
    named = [name for name in SECRETS if name in done.stderr]
    assert named, f"Compose failed, but without naming a missing secret:\n{done.stderr}"
    assert ".env" in done.stderr, f"the error does not say where secrets go:\n{done.stderr}"


def test_every_secret_is_required_and_has_no_default() -> None:
    uses = [m for m in _VARIABLE.finditer(COMPOSE_FILE.read_text()) if m.group(1) in SECRETS]
    unused = sorted(set(SECRETS) - {m.group(1) for m in uses})
    assert not unused, f"secrets docker-compose.yml never reads: {unused}"
    lax = [m.group(0) for m in uses if m.group(2) != ":?" or not m.group(3)]
    assert not lax, f"secrets must be written ${{NAME:?message}} (required, no default): {lax}"


# ---- images --------------------------------------------------------------------------------


def test_every_service_is_built_or_pinned_by_version(services: dict[str, dict[str, Any]]) -> None:
    bad = []
    for name, service in sorted(services.items()):
        image = str(service.get("image") or "")
        if "@sha256:" in image:
            continue
        tag = image.rsplit("/", 1)[-1].partition(":")[2]
        if "build" in service:
            if image and (not tag or tag == "latest"):
                bad.append(f"{name}: built image tagged {image!r} (give it a version tag)")
        elif not image:
            bad.append(f"{name}: neither build nor image")
        elif not tag or tag == "latest" or not VERSION_TAG.match(tag):
            bad.append(f"{name}: image {image!r} is not pinned to a version tag")
    assert not bad, "\n".join(bad)


def test_each_built_image_is_built_by_one_service(services: dict[str, dict[str, Any]]) -> None:
    # Compose builds services in parallel: two services building one tag race to export it
    # ("image ... already exists"); the others use the image the one builds.
    builders: dict[str, list[str]] = {}
    for name, service in sorted(services.items()):
        if "build" in service:
            assert service.get("image"), f"{name}: builds an image without naming it (image: name:version)"
            builders.setdefault(str(service["image"]), []).append(name)
    twice = {image: names for image, names in builders.items() if len(names) > 1}
    assert not twice, f"images built by more than one service: {twice}"
    built = {image.rpartition(":")[0]: image for image in builders}
    stale = [
        f"{name} uses {image}, but {built[repo]} is what is built"
        for name, service in sorted(services.items())
        if (repo := (image := str(service.get("image") or "")).rpartition(":")[0]) in built and image != built[repo]
    ]
    assert not stale, "\n".join(stale)


def from_images(dockerfile: Path) -> list[str]:
    """The base images of a Dockerfile's stages, with ARG defaults filled in; not other stages."""
    args: dict[str, str] = {}
    stages: set[str] = set()
    images = []
    for raw in dockerfile.read_text().splitlines():
        line = raw.strip()
        if m := re.match(r"ARG\s+([A-Za-z_][A-Za-z0-9_]*)=(\S+)", line):
            args.setdefault(m.group(1), m.group(2))
        elif m := re.match(r"FROM\s+(?:--platform=\S+\s+)?(\S+)(?:\s+AS\s+(\S+))?", line, re.IGNORECASE):
            image = re.sub(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?", lambda v: args.get(v.group(1), v.group(0)), m.group(1))
            if image not in stages:
                images.append(image)
            if m.group(2):
                stages.add(m.group(2))
    return images


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda p: str(p.relative_to(REPO)))
def test_base_images_of_the_built_services_are_pinned(dockerfile: Path) -> None:
    images = from_images(dockerfile)
    assert images, f"{dockerfile}: no FROM"
    bad = [i for i in images if "@sha256:" not in i and not VERSION_TAG.match(i.rsplit("/", 1)[-1].partition(":")[2])]
    assert not bad, f"{dockerfile.relative_to(REPO)}: base images not pinned to a version tag: {bad}"


def test_build_contexts_hold_their_dockerfiles(services: dict[str, dict[str, Any]]) -> None:
    for name, service in sorted(services.items()):
        build = service.get("build")
        if build is None:
            continue
        context, dockerfile = (
            (build, "Dockerfile")
            if isinstance(build, str)
            else (build["context"], build.get("dockerfile", "Dockerfile"))
        )
        path = (REPO / context / dockerfile).resolve()
        assert path.is_file(), f"{name}: builds from {path}, which does not exist"


def test_hbase_release_is_the_hadoop3_build_checked_against_its_published_sha512() -> None:
    text = (HBASE_DIR / "Dockerfile").read_text()
    version = re.search(r"ARG HBASE_VERSION=(\S+)", text)
    assert version and re.fullmatch(r"2\.\d+\.\d+", version.group(1)), "HBASE_VERSION must pin an HBase 2.x.y release"
    assert re.search(r"hbase-\$\{HBASE_VERSION\}-hadoop3-bin\.tar\.gz", text), (
        "the HBase release must be its -hadoop3-bin tarball (JDK 17 is tested with Hadoop 3 only)"
    )
    assert re.search(r"curl\b[^\n]*\.sha512\b", text), "the SHA-512 Apache publishes beside the tarball is not fetched"
    assert text.count("sha512sum -c") >= 2, "the tarball must be checked against the published digest and the pin"
    pin = re.search(r"^ARG HBASE_SHA512=(\S*)$", text, re.MULTILINE)
    assert pin, "no build argument HBASE_SHA512 to pin the digest"
    assert pin.group(1) == "" or re.fullmatch(r"[0-9a-f]{128}", pin.group(1)), (
        "HBASE_SHA512 is empty or a SHA-512 (128 hex digits)"
    )
    assert re.search(r'-n "\$\{?HBASE_SHA512\}?"', text), "a non-empty HBASE_SHA512 is never checked"


def instructions(dockerfile: Path) -> list[list[str]]:
    """A Dockerfile's instructions, each as its lines (continuation lines included)."""
    found: list[list[str]] = []
    for line in dockerfile.read_text().splitlines():
        if found and found[-1][-1].endswith("\\"):
            found[-1].append(line)
        elif line and not line[0].isspace() and not line.startswith("#"):
            found.append([line])
    return found


def run_script(dockerfile: Path, marker: str) -> str:
    """The shell script of the RUN instruction of ``dockerfile`` that contains ``marker`` (its
    continuation lines as the shell reads them too)."""
    run = next(i for i in instructions(dockerfile) if i[0].startswith("RUN ") and any(marker in x for x in i))
    return "\n".join([run[0].removeprefix("RUN "), *run[1:]])


def dockerfile_args(dockerfile: Path) -> dict[str, str]:
    """The defaults of a Dockerfile's build arguments (the first default of each)."""
    args: dict[str, str] = {}
    for i in instructions(dockerfile):
        if m := re.match(r"ARG\s+([A-Za-z_][A-Za-z0-9_]*)=(\S*)$", i[0]):
            args.setdefault(m.group(1), m.group(2))
    return args


def final_stage(dockerfile: Path) -> list[str]:
    """The instructions of a Dockerfile's last stage, each joined into one line."""
    joined = [" ".join(x.removesuffix("\\").strip() for x in i) for i in instructions(dockerfile)]
    last = max(n for n, i in enumerate(joined) if i.upper().startswith("FROM "))
    return joined[last:]


def image_env(dockerfile: Path) -> dict[str, str]:
    """The ENV of a Dockerfile's last stage, its build arguments' defaults filled in."""
    args = dockerfile_args(dockerfile)
    env: dict[str, str] = {}
    for line in final_stage(dockerfile):
        if line.startswith("ENV "):
            for token in line.removeprefix("ENV ").split():
                key, _, value = token.partition("=")
                value = re.sub(
                    r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}",
                    lambda v: env.get(v.group(1), args.get(v.group(1), v.group(0))),
                    value,
                )
                env[key] = value
    return env


def hbase_download_script() -> str:
    """The HBase image's download step, from its start to the unpacking: fetch the tarball and
    its published SHA-512, check it (and the pin)."""
    run = next(
        i
        for i in instructions(HBASE_DIR / "Dockerfile")
        if i[0].startswith("RUN ") and any("sha512sum -c" in line for line in i)
    )
    steps = []
    for line in run:
        if "/opt/hbase" in line:
            break
        steps.append(line.removesuffix("\\"))
    steps[0] = steps[0].removeprefix("RUN ")
    return "\n".join(steps)


@pytest.mark.skipif(not (shutil.which("bash") and shutil.which("sha512sum")), reason="needs bash and sha512sum")
def test_hbase_download_reads_both_forms_of_the_published_sha512(tmp_path: Path) -> None:
    script = hbase_download_script()
    version = f"0.0.0-test{uuid.uuid4().hex[:12]}"
    tarball = f"hbase-{version}-hadoop3-bin.tar.gz"
    content = os.urandom(4096)
    digest = hashlib.sha512(content).hexdigest()
    wrapped = " ".join(digest.upper()[i : i + 8] for i in range(0, 128, 8))
    published = {
        "sha512sum": f"{digest}  {tarball}\n",
        "gpg": f"{tarball}: {wrapped[:80]}\n{' ' * len(tarball)}  {wrapped[81:]}\n",
    }
    served = tmp_path / "served"
    served.mkdir()
    stubs = tmp_path / "bin"
    stubs.mkdir()
    # curl -fsSL --retry 5 -o FILE URL, answered from `served`
    (stubs / "curl").write_text(
        "#!/bin/sh\nout=; url=\n"
        'while [ $# -gt 0 ]; do case "$1" in -o|--retry) [ "$1" = -o ] && out=$2; shift 2;; '
        '-*) shift;; *) url=$1; shift;; esac; done\ncp "$SERVED/${url##*/}" "$out"\n'
    )
    (stubs / "curl").chmod(0o755)

    def build(sums: str, pin: str = "", body: bytes = content) -> subprocess.CompletedProcess[str]:
        (served / tarball).write_bytes(body)
        (served / f"{tarball}.sha512").write_text(sums)
        env = {
            "PATH": f"{stubs}:{os.environ.get('PATH', '/usr/bin:/bin')}",
            "SERVED": str(served),
            "HBASE_VERSION": version,
            "HBASE_SHA512": pin,
            "APACHE_DIST": "https://dist.invalid",
        }
        try:
            return subprocess.run(
                ["bash", "-o", "pipefail", "-c", script], env=env, capture_output=True, text=True, check=False
            )
        finally:
            for leftover in (Path("/tmp") / tarball, Path("/tmp") / f"{tarball}.sha512"):
                leftover.unlink(missing_ok=True)

    for form, sums in published.items():
        done = build(sums)
        assert done.returncode == 0, f"{form}: a good tarball is refused:\n{done.stderr}"
        done = build(sums, pin=digest.upper())
        assert done.returncode == 0, f"{form}: a good tarball with its pin is refused:\n{done.stderr}"
        assert build(sums, body=content + b"x").returncode != 0, f"{form}: a tampered tarball is accepted"
        assert build(sums, pin="0" * 128).returncode != 0, f"{form}: a tarball that is not the pinned one is accepted"
    assert build(f"{tarball}: not a digest\n").returncode != 0, "a .sha512 without a digest is accepted"


def render_hbase_site(tmp_path: Path, **env: str) -> dict[str, str]:
    """hbase-site.xml as the HBase image's entrypoint renders it from ``env``: name -> value."""
    conf = tmp_path / "conf"
    conf.mkdir(exist_ok=True)
    (conf / "hbase-site.xml.template").write_text((HBASE_DIR / "hbase-site.xml").read_text())
    done = subprocess.run(
        ["bash", str(HBASE_DIR / "entrypoint.sh"), "true"],
        env={
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HBASE_CONF_DIR": str(conf),
            "HBASE_TMP_DIR": str(tmp_path / "tmp"),
            "HBASE_LOG_DIR": str(tmp_path / "logs"),
            "HBASE_ZNODE_PARENT": "/hbase-a",
            **env,
        },
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, f"the entrypoint did not render hbase-site.xml:\n{done.stderr}"
    root = ET.parse(conf / "hbase-site.xml").getroot()
    return {str(p.findtext("name")): str(p.findtext("value")) for p in root.iter("property")}


@pytest.mark.skipif(not shutil.which("bash"), reason="needs bash")
def test_hbase_keeps_archived_wals_a_day_and_has_no_removed_settings(tmp_path: Path) -> None:
    site = render_hbase_site(tmp_path)
    # gone since HBase 2.0: replication is always on
    assert "hbase.replication" not in site
    # longer than walship_replay's hourly windows and a day's backfill, which read oldWALs/
    assert site.get("hbase.master.logcleaner.ttl") == "86400000"
    assert render_hbase_site(tmp_path, HBASE_LOGCLEANER_TTL_MS="172800000")["hbase.master.logcleaner.ttl"] == (
        "172800000"
    )


def test_hbase_daemons_may_open_many_files(services: dict[str, dict[str, Any]]) -> None:
    bad = []
    for name in HBASE_SERVICES:
        nofile = (services[name].get("ulimits") or {}).get("nofile")
        limits = (nofile.get("soft"), nofile.get("hard")) if isinstance(nofile, dict) else (nofile, nofile)
        if any(limit is None or int(limit) < 65536 for limit in limits):
            bad.append(f"{name}: nofile {nofile!r} (HBase asks for a high limit; 65536 here)")
    assert not bad, "\n".join(bad)


@pytest.mark.skipif(not shutil.which("bash"), reason="needs bash")
def test_hbase_writes_wals_that_its_group_may_read_and_clean(tmp_path: Path) -> None:
    # walship runs as another user in HBase's group: it reads every WAL and deletes archived
    # ones (oldWALs/ must be group-writable); others get nothing
    site = render_hbase_site(tmp_path)
    umask = site.get("fs.permissions.umask-mode", "")
    assert re.fullmatch(r"0?[0-7]{3}", umask), f"fs.permissions.umask-mode is not an octal umask: {umask!r}"
    assert int(umask, 8) & 0o070 == 0, f"umask {umask} takes rights from HBase's group (walship reads and cleans)"
    assert int(umask, 8) & 0o007 == 0o007, f"umask {umask} leaves the WALs to other users"
    perms = site.get("hbase.wal.dir.perms", "")
    assert re.fullmatch(r"0?[0-7]{3}", perms), f"hbase.wal.dir.perms is not octal: {perms!r}"
    assert int(perms, 8) & 0o070 == 0o070 and int(perms, 8) & 0o007 == 0, (
        f"hbase.wal.dir.perms {perms}: the group needs rwx on WALs/ and oldWALs/, others nothing"
    )


def useradd(dockerfile: Path, user: str) -> str:
    """The ``useradd`` command of ``dockerfile`` that creates ``user``."""
    for line in final_stage(dockerfile):
        for command_ in line.split("&&"):
            words = command_.split()
            if "useradd" in words and words[-1] == user:
                return " ".join(words[words.index("useradd") :])
    pytest.fail(f"{dockerfile.relative_to(REPO)}: no useradd of {user!r}")


def last_user(dockerfile: Path) -> str:
    users = [line.split()[1] for line in final_stage(dockerfile) if line.startswith("USER ")]
    assert users, f"{dockerfile.relative_to(REPO)}: no USER: the image runs as root"
    return users[-1]


def test_hbase_and_airflow_run_as_different_users_in_the_wals_group(services: dict[str, dict[str, Any]]) -> None:
    walship, hbase = WALSHIP_DOCKERFILE, HBASE_DIR / "Dockerfile"
    walship_args, hbase_args = dockerfile_args(walship), dockerfile_args(hbase)
    airflow_uid, hbase_uid = walship_args.get("AIRFLOW_UID"), hbase_args.get("HBASE_UID")
    assert airflow_uid and hbase_uid and airflow_uid != hbase_uid, (
        f"walship's user (uid {airflow_uid}) and HBase's (uid {hbase_uid}) must differ"
    )
    gid = walship_args.get("HADOOP_GID")
    assert gid and gid == hbase_args.get("HADOOP_GID"), (
        f"the WALs' group: gid {gid} in walship's image, {hbase_args.get('HADOOP_GID')} in HBase's"
    )
    for dockerfile in (walship, hbase):
        assert any(
            re.search(r'groupadd --gid "?\$\{HADOOP_GID\}"? hadoop\b', line) for line in final_stage(dockerfile)
        ), f"{dockerfile.relative_to(REPO)}: no group hadoop with gid HADOOP_GID"
    airflow = useradd(walship, "airflow")
    assert re.search(r'--uid "?\$\{AIRFLOW_UID\}"?', airflow) and re.search(r"--groups \S*\bhadoop\b", airflow), (
        f"walship's user is not airflow (AIRFLOW_UID) in the group hadoop: {airflow}"
    )
    hbase_user = useradd(hbase, "hbase")
    assert re.search(r'--uid "?\$\{HBASE_UID\}"?', hbase_user) and re.search(r"--gid hadoop\b", hbase_user), (
        f"HBase's user is not hbase (HBASE_UID) with the group hadoop: {hbase_user}"
    )
    assert last_user(walship) in ("airflow", "${AIRFLOW_UID}"), f"walship's image runs as {last_user(walship)}"
    assert last_user(hbase) in ("hbase", "${HBASE_UID}"), f"HBase's image runs as {last_user(hbase)}"
    # the WAL volume's mount point, alike in both images (whichever mounts it first fills it):
    # the group hadoop, setgid, nothing for others
    for dockerfile in (walship, hbase):
        stage = " ".join(final_stage(dockerfile))
        assert re.search(r"chmod 2770 /wal\b", stage), f"{dockerfile.relative_to(REPO)}: /wal is not 2770"
        assert re.search(r'chown (-R )?"?\$\{[A-Z_]+\}:hadoop"?[^&]* /wal\b', stage), (
            f"{dockerfile.relative_to(REPO)}: /wal is not the group hadoop's"
        )
    overridden = sorted(name for name, s in services.items() if s.get("user"))
    assert not overridden, f"services that run as another user than their image's: {overridden}"


#: A jar the walship image fetches: its SHA-256, then its path on Maven Central.
PINNED_JAR = re.compile(r'"([0-9a-f]{64}) ([A-Za-z0-9_./${}-]+\.jar)"')


def hadoop_jars() -> list[tuple[str, str]]:
    """(SHA-256, path on Maven Central) of each jar of the image's Hadoop client."""
    version = dockerfile_args(WALSHIP_DOCKERFILE).get("HADOOP_VERSION", "")
    script = run_script(WALSHIP_DOCKERFILE, "sha256sum -c")
    return [(sha, path.replace("${HADOOP_VERSION}", version)) for sha, path in PINNED_JAR.findall(script)]


def test_the_images_hadoop_client_is_pinned() -> None:
    text = WALSHIP_DOCKERFILE.read_text()
    version = dockerfile_args(WALSHIP_DOCKERFILE).get("HADOOP_VERSION", "")
    assert re.fullmatch(r"3\.\d+\.\d+", version), f"HADOOP_VERSION must pin a Hadoop 3.x.y release: {version!r}"
    jars = hadoop_jars()
    names = [path.rsplit("/", 1)[-1] for _, path in jars]
    for artifact in ("hadoop-client-api", "hadoop-client-runtime"):
        assert f"{artifact}-{version}.jar" in names, f"{artifact} {version} is not among the pinned jars: {names}"
    bad = []
    for _, path in jars:
        *_, artifact, jar_version, file = path.split("/")
        if file != f"{artifact}-{jar_version}.jar" or not re.fullmatch(r"\d+(\.\d+)+", jar_version):
            bad.append(f"{path}: not a released artifact's Maven path (group/artifact/version/artifact-version.jar)")
    assert not bad, "\n".join(bad)
    assert len(set(names)) == len(names), f"a jar is fetched twice: {names}"
    script = run_script(WALSHIP_DOCKERFILE, "sha256sum -c")
    assert re.search(r"curl\b[^\n]*\$\{MAVEN_CENTRAL\}", script), "the jars are not fetched from MAVEN_CENTRAL"
    assert dockerfile_args(WALSHIP_DOCKERFILE).get("MAVEN_CENTRAL") == "https://repo1.maven.org/maven2"

    env = image_env(WALSHIP_DOCKERFILE)
    classpath = env.get("CLASSPATH", "").split(":")
    assert classpath[0] == HADOOP_CONF, f"CLASSPATH must start with the Hadoop configuration: {classpath[:2]}"
    assert sorted(entry.rsplit("/", 1)[-1] for entry in classpath[1:]) == sorted(names), (
        f"CLASSPATH's jars are not the pinned ones:\n{classpath[1:]}\n{names}"
    )
    assert env.get("HADOOP_CONF_DIR") == HADOOP_CONF and env.get("YARN_CONF_DIR") == HADOOP_CONF, (
        f"HADOOP_CONF_DIR / YARN_CONF_DIR: {env.get('HADOOP_CONF_DIR')!r} / {env.get('YARN_CONF_DIR')!r}"
    )
    assert env.get("JAVA_HOME", "").startswith("/usr/lib/jvm/"), f"JAVA_HOME: {env.get('JAVA_HOME')!r}"
    libhdfs_dir = env.get("ARROW_LIBHDFS_DIR", "")
    assert libhdfs_dir and re.search(rf"scripts/libhdfs\.sh {re.escape(libhdfs_dir)}\b", text), (
        f"ARROW_LIBHDFS_DIR {libhdfs_dir!r} is not where scripts/libhdfs.sh builds libhdfs.so"
    )
    # Spark's own Hadoop client is the same version, and the image starts libhdfs's JVM once
    spark_check = re.search(r'test -f "?\$\{(\w+)\}/hadoop-client-api-\$\{HADOOP_VERSION\}\.jar', text)
    assert spark_check and re.search(rf"{spark_check.group(1)}=[^\n]*pyspark[^\n]*\"jars\"", text), (
        "the build does not check that pyspark's Hadoop client is HADOOP_VERSION"
    )
    assert "HadoopFileSystem(" in text, "the build does not start pyarrow's HDFS client"
    assert '".[spark,airflow,celery]"' in text, "walship is not installed with the extras spark, airflow and celery"


def test_pyspark_bundles_the_images_hadoop_version() -> None:
    # the image's check, against the pyspark that constraints.txt pins
    pyspark = pytest.importorskip("pyspark")
    version = dockerfile_args(WALSHIP_DOCKERFILE)["HADOOP_VERSION"]
    jars = Path(pyspark.__file__).parent / "jars"
    bundled = sorted(p.name for p in jars.glob("hadoop-client-api-*.jar"))
    assert f"hadoop-client-api-{version}.jar" in bundled, f"pyspark bundles {bundled}, the image pins {version}"


def test_the_hadoop_client_pins_are_the_published_jars() -> None:
    # pyspark bundles Maven Central's hadoop-client-api and hadoop-client-runtime byte for byte;
    # the other jars are checked where a local Maven repository holds them
    pyspark = pytest.importorskip("pyspark")
    spark_jars = Path(pyspark.__file__).parent / "jars"
    m2 = Path.home() / ".m2" / "repository"
    checked, bad = [], []
    for sha, path in hadoop_jars():
        name = path.rsplit("/", 1)[-1]
        found = next((f for f in (spark_jars / name, m2 / path) if f.is_file()), None)
        if found is None:
            continue
        checked.append(name)
        if hashlib.sha256(found.read_bytes()).hexdigest() != sha:
            bad.append(f"{name}: pinned {sha}, but {found} is {hashlib.sha256(found.read_bytes()).hexdigest()}")
    assert not bad, "\n".join(bad)
    assert any(n.startswith("hadoop-client-api-") for n in checked), f"pyspark's Hadoop client not checked: {checked}"


@pytest.mark.skipif(not (shutil.which("bash") and shutil.which("sha256sum")), reason="needs bash and sha256sum")
def test_each_hadoop_jar_is_checked_against_its_pin(tmp_path: Path) -> None:
    jars = hadoop_jars()
    assert jars, "no pinned jars"
    central = "https://central.invalid/maven2"
    version = dockerfile_args(WALSHIP_DOCKERFILE)["HADOOP_VERSION"]
    dest = tmp_path / "hadoop"
    served = tmp_path / "served"
    stubs = tmp_path / "bin"
    stubs.mkdir()
    # curl -fsSL --retry 5 -o FILE URL, answered from `served`
    (stubs / "curl").write_text(
        "#!/bin/sh\nout=; url=\n"
        'while [ $# -gt 0 ]; do case "$1" in -o|--retry) [ "$1" = -o ] && out=$2; shift 2;; '
        f'-*) shift;; *) url=$1; shift;; esac; done\ncp "$SERVED/${{url#{central}/}}" "$out"\n'
    )
    (stubs / "curl").chmod(0o755)
    contents = {path: os.urandom(1024) for _, path in jars}
    script = run_script(WALSHIP_DOCKERFILE, "sha256sum -c").replace("/opt/hadoop", str(dest))

    def build(script: str, tampered: str | None = None) -> subprocess.CompletedProcess[str]:
        shutil.rmtree(served, ignore_errors=True)
        shutil.rmtree(dest, ignore_errors=True)
        for path, body in contents.items():
            (served / path).parent.mkdir(parents=True, exist_ok=True)
            (served / path).write_bytes(body + b"x" if path == tampered else body)
        env = {
            "PATH": f"{stubs}:{os.environ.get('PATH', '/usr/bin:/bin')}",
            "SERVED": str(served),
            "HADOOP_VERSION": version,
            "MAVEN_CENTRAL": central,
        }
        return subprocess.run(
            ["bash", "-o", "pipefail", "-c", script], env=env, capture_output=True, text=True, check=False
        )

    # the pins are real jars' digests: random bytes must not pass them
    assert build(script).returncode != 0, "jars that are not the pinned ones are accepted"
    # with pins of the served bytes, the same steps take every jar, and refuse any one changed
    repinned = script
    for sha, path in jars:
        repinned = repinned.replace(sha, hashlib.sha256(contents[path]).hexdigest())
    done = build(repinned)
    assert done.returncode == 0, f"jars matching their pins are refused:\n{done.stderr[-2000:]}"
    client = dest / "share" / "hadoop" / "client"
    for path, body in contents.items():
        jar = client / path.rsplit("/", 1)[-1]
        assert jar.is_file() and jar.read_bytes() == body, f"{jar.name} is not where CLASSPATH names it"
    for _, path in jars:
        assert build(repinned, tampered=path).returncode != 0, f"a tampered {path.rsplit('/', 1)[-1]} is accepted"


def log4j_properties(path: Path) -> dict[str, str]:
    props = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith(("#", "!")):
            key, _, value = line.partition("=")
            props[key.strip()] = value.strip()
    return props


def test_the_default_hadoop_configuration_logs_to_stderr_only() -> None:
    # walship's commands print JSON on stdout; libhdfs's JVM must not log there. No
    # core-site.xml: one would hide the one walship adds for Kerberos (walship.files).
    assert not (DEFAULT_HADOOP_CONF / "core-site.xml").exists(), "the default Hadoop configuration has a core-site.xml"
    props = log4j_properties(DEFAULT_HADOOP_CONF / "log4j.properties")
    level, *appenders = [x.strip() for x in props.get("log4j.rootLogger", "").split(",")]
    assert level in ("WARN", "ERROR") and appenders, f"log4j.rootLogger: {props.get('log4j.rootLogger')!r}"
    for appender in appenders:
        target = props.get(f"log4j.appender.{appender}.target")
        assert target == "System.err", f"appender {appender} writes to {target!r}, not System.err"
    assert re.search(rf"COPY docker/airflow/hadoop-conf/ {HADOOP_CONF}/", WALSHIP_DOCKERFILE.read_text()), (
        f"the image's {HADOOP_CONF} is not docker/airflow/hadoop-conf"
    )


# ---- Airflow ---------------------------------------------------------------------------------


def test_code_is_mounted_into_every_airflow_service(services: dict[str, dict[str, Any]]) -> None:
    bad = []
    for name, service in airflow_services(services):
        found = {(m.source, m.target) for m in mounts(service) if m.bind}
        for folder, target in CODE_DIRS.items():
            if (str(REPO / folder), target) not in found:
                bad.append(f"{name}: ./{folder} is not mounted at {target}")
        env = environment(service)
        if env.get("AIRFLOW__CORE__DAGS_FOLDER", CODE_DIRS["dags"]) != CODE_DIRS["dags"]:
            bad.append(
                f"{name}: AIRFLOW__CORE__DAGS_FOLDER is {env['AIRFLOW__CORE__DAGS_FOLDER']}, not the mounted dags"
            )
    assert not bad, "\n".join(bad)


def test_spark_workers_see_spark_jobs_where_airflow_does(services: dict[str, dict[str, Any]]) -> None:
    # cluster deploy mode runs spark_jobs/ship.py (through pyrunner.jar) on a worker, at the
    # path the scheduler's DAG computed
    found = {(m.source, m.target) for m in mounts(services["spark-worker"]) if m.bind}
    assert (str(REPO / "spark_jobs"), CODE_DIRS["spark_jobs"]) in found, "spark-worker: ./spark_jobs not mounted"


@pytest.mark.parametrize("setting", SHARED_AIRFLOW_SETTINGS)
def test_airflow_services_share_one_value(services: dict[str, dict[str, Any]], setting: str) -> None:
    values = {name: environment(service).get(setting) for name, service in airflow_services(services)}
    missing = sorted(name for name, value in values.items() if not value)
    assert not missing, f"{setting} is not set in {missing}"
    groups: dict[str, list[str]] = {}
    for name, value in sorted(values.items()):
        groups.setdefault(str(value), []).append(name)
    assert len(groups) == 1, f"{setting} differs between Airflow services: {' | '.join(map(str, groups.values()))}"


def test_airflow_uses_postgres_and_the_celery_executor(services: dict[str, dict[str, Any]]) -> None:
    env = environment(services["airflow-scheduler"])
    url = urlsplit(env.get("AIRFLOW__DATABASE__SQL_ALCHEMY_CONN", ""))
    assert url.scheme.startswith("postgresql"), f"metadata database is {url.scheme!r}, not Postgres"
    assert url.hostname in services, f"the metadata database host {url.hostname!r} is no service"
    executors = {name: environment(s).get("AIRFLOW__CORE__EXECUTOR") for name, s in airflow_services(services)}
    assert set(executors.values()) == {"CeleryExecutor"}, f"executors: {executors}"
    api = urlsplit(env.get("AIRFLOW__CORE__EXECUTION_API_SERVER_URL", ""))
    assert api.hostname == "airflow-api-server" and api.path.rstrip("/") == "/execution", (
        f"AIRFLOW__CORE__EXECUTION_API_SERVER_URL must point at the api-server's /execution/: {api.geturl()!r}"
    )
    assert "api-server" in command(services["airflow-api-server"]), (
        "airflow-api-server does not run `airflow api-server`"
    )


def test_connections_name_services_that_exist(services: dict[str, dict[str, Any]]) -> None:
    source = connection(services, "AIRFLOW_CONN_WALSHIP_SOURCE")
    assert source.get("conn_type") == "walship", f"walship_source has conn_type {source.get('conn_type')!r}"
    hosts = [h.strip().partition(":")[0] for h in str(source.get("host") or "").split(",") if h.strip()]
    assert hosts, "walship_source has no host (the source's ZooKeeper)"
    unknown = [h for h in hosts if h not in services]
    assert not unknown, f"walship_source names hosts that are no service: {unknown}"
    hbase_a = environment(services["hbase-a"])
    extra = source.get("extra") or {}
    assert extra.get("znode_parent") == hbase_a.get("HBASE_ZNODE_PARENT"), (
        f"walship_source's znode_parent {extra.get('znode_parent')!r} is not hbase-a's {hbase_a.get('HBASE_ZNODE_PARENT')!r}"
    )
    thrift2 = [h.strip().partition(":") for h in str(extra.get("thrift2") or "").split(",") if h.strip()]
    assert thrift2, "walship_source has no extra thrift2 (the source's Thrift2 server)"
    hbase_a_thrift2 = hbase_a.get("HBASE_THRIFT2_PORT", "9091")
    assert all(host == "hbase-a" and port == hbase_a_thrift2 for host, _, port in thrift2), (
        f"walship_source's thrift2 {extra.get('thrift2')!r} is not hbase-a's Thrift2 server (hbase-a:{hbase_a_thrift2})"
    )

    spark = connection(services, "AIRFLOW_CONN_SPARK_DEFAULT")
    host = str(spark.get("host") or "")
    master = urlsplit(host if "://" in host else f"spark://{host}")
    assert master.scheme == "spark", f"spark_default is not a standalone master: {host!r}"
    assert master.hostname in services, f"spark_default names {master.hostname!r}, which is no service"
    port = str(spark.get("port") or master.port or "")
    master_cmd = command(services[str(master.hostname)])
    assert "--port" in master_cmd and master_cmd[master_cmd.index("--port") + 1] == port, (
        f"spark_default's port {port} is not the one {master.hostname} listens on: {master_cmd}"
    )
    spark_extra = spark.get("extra") or {}
    assert str(spark_extra.get("pyspark_python", "")).startswith("/"), "spark_default needs extra pyspark_python"
    assert spark_extra.get("deploy-mode", "client") in ("client", "cluster")
    worker_cmd = command(services["spark-worker"])
    assert f"spark://{master.hostname}:{port}" in worker_cmd, f"spark-worker does not join {master.hostname}:{port}"


# ---- Celery ------------------------------------------------------------------------------------


def test_celery_has_valkey_for_broker_and_postgres_for_results(services: dict[str, dict[str, Any]]) -> None:
    env = environment(services["airflow-scheduler"])
    broker = urlsplit(env.get("AIRFLOW__CELERY__BROKER_URL", ""))
    assert (broker.scheme, broker.hostname, broker.port, broker.path) == ("redis", "valkey", 6379, "/0"), (
        f"the broker is {broker.geturl()!r}, not redis://valkey:6379/0"
    )
    valkey = services["valkey"]
    image = str(valkey.get("image", ""))
    assert image.startswith("valkey/valkey:") and VERSION_TAG.match(image.partition(":")[2]), (
        f"valkey is not the official image pinned by version: {image!r}"
    )
    health = healthcheck_text(valkey)
    assert "valkey-cli" in health and "ping" in health, f"valkey's healthcheck does not ping it: {health!r}"
    assert not published_ports(valkey), "valkey publishes a port: the broker is for the Compose network only"
    assert valkey.get("restart") == "unless-stopped"

    results = urlsplit(env.get("AIRFLOW__CELERY__RESULT_BACKEND", ""))
    metadata = urlsplit(env.get("AIRFLOW__DATABASE__SQL_ALCHEMY_CONN", ""))
    assert results.scheme.startswith("db+postgresql"), f"the result backend is {results.scheme!r}, not Postgres"
    assert (results.hostname, results.port, results.username, results.password, results.path) == (
        metadata.hostname,
        metadata.port,
        metadata.username,
        metadata.password,
        metadata.path,
    ), "Celery's results are not kept in the metadata database"


@pytest.mark.parametrize("name", CELERY_WORKERS)
def test_celery_workers_can_be_scaled_and_report_their_health(services: dict[str, dict[str, Any]], name: str) -> None:
    # `docker compose up -d --scale airflow-worker=N`: each replica is its own Celery node
    worker = services[name]
    bad = [f"{name} has a fixed {key}" for key in ("container_name", "hostname") if worker.get(key)]
    if published_ports(worker):
        bad.append(f"{name} publishes host ports (replicas would collide): {worker['ports']}")
    if "SPARK_LOCAL_HOSTNAME" in environment(worker):
        bad.append(f"{name} sets SPARK_LOCAL_HOSTNAME (the drivers of every replica would claim one name)")
    cmd = command(worker)
    if cmd[:3] != ["airflow", "celery", "worker"]:
        bad.append(f"{name} does not run `airflow celery worker`: {cmd}")
    health = healthcheck_text(worker)
    if "celery --app airflow.providers.celery.executors.celery_executor.app inspect ping" not in health:
        bad.append(f"{name}'s healthcheck does not ping its Celery node: {health!r}")
    elif not re.search(r"-d \"?celery@\$\{?HOSTNAME\}?", health):
        bad.append(f"{name}'s healthcheck pings another node than celery@$HOSTNAME: {health!r}")
    if worker.get("restart") != "unless-stopped":
        bad.append(f"{name} restart: {worker.get('restart')!r}")
    if depends_on(worker).get("valkey") != "service_healthy":
        bad.append(f"{name} does not wait for the broker to be healthy")
    assert not bad, "\n".join(bad)


def celery_queues(service: dict[str, Any]) -> list[str] | None:
    """The queues an ``airflow celery worker`` consumes (Airflow's default: ``default``), or None
    for another command."""
    cmd = command(service)
    if cmd[:3] != ["airflow", "celery", "worker"]:
        return None
    return [q.strip() for q in (option(cmd, "--queues") or option(cmd, "-q") or "default").split(",")]


def test_only_the_cleaners_worker_takes_the_cleaner_queue(services: dict[str, dict[str, Any]]) -> None:
    queues = {name: q for name, s in sorted(services.items()) if (q := celery_queues(s)) is not None}
    assert set(queues) == set(CELERY_WORKERS), f"Celery workers: {sorted(queues)}"
    assert queues[CLEANER] == [CLEANER_QUEUE], f"{CLEANER} consumes {queues[CLEANER]}, not only {CLEANER_QUEUE!r}"
    assert "default" in queues[WORKER], f"{WORKER} does not consume the queue default: {queues[WORKER]}"
    others = [name for name, q in queues.items() if name != CLEANER and CLEANER_QUEUE in q]
    assert not others, f"workers besides {CLEANER} take walship_clean's tasks: {others}"
    wired = {name: environment(s).get("AIRFLOW__WALSHIP__CLEANER_QUEUE") for name, s in airflow_services(services)}
    assert set(wired.values()) == {CLEANER_QUEUE}, f"[walship] cleaner_queue: {wired}"


def test_the_worker_of_the_default_queue_runs_the_spark_drivers(services: dict[str, dict[str, Any]]) -> None:
    # what the LocalExecutor's scheduler used to give the tasks: Spark's master, its connection,
    # the pool, dead letters (the shippers' tests), the WALs (the volumes' tests)
    worker = services[WORKER]
    assert depends_on(worker).get("spark-master") == "service_healthy", f"{WORKER} does not wait for spark-master"
    env = environment(worker)
    for key in ("AIRFLOW_CONN_SPARK_DEFAULT", "WALSHIP_SPARK_POOL", "WALSHIP_DEADLETTER_DIR", *SOURCE_ENV[:3]):
        assert env.get(key), f"{WORKER} has no {key}"
    scheduler = services["airflow-scheduler"]
    runs_tasks = [m.target for m in mounts(scheduler) if m.target in ("/wal", "/deadletters", "/changelogs")]
    assert not runs_tasks, f"the scheduler runs no task, yet mounts {runs_tasks}"


def test_flower_is_optional_and_on_localhost(services: dict[str, dict[str, Any]]) -> None:
    flower = services["flower"]
    assert list(flower.get("profiles") or []) == [FLOWER_PROFILE], f"flower's profiles: {flower.get('profiles')}"
    assert command(flower) == ["airflow", "celery", "flower"], command(flower)
    assert published_ports(flower) == [("127.0.0.1", "5555", "5555")], published_ports(flower)
    env, scheduler = environment(flower), environment(services["airflow-scheduler"])
    for key in ("AIRFLOW__CELERY__BROKER_URL", "AIRFLOW__CELERY__RESULT_BACKEND", "AIRFLOW__CORE__EXECUTOR"):
        assert env.get(key) == scheduler.get(key), f"flower's {key} is not the scheduler's"
    assert depends_on(flower).get("valkey") == "service_healthy"


# ---- FAB's auth manager ----------------------------------------------------------------------


def test_airflow_authenticates_with_fab_and_no_simple_auth_manager_is_left(
    config: dict[str, Any], services: dict[str, dict[str, Any]]
) -> None:
    managers = {name: environment(s).get("AIRFLOW__CORE__AUTH_MANAGER") for name, s in airflow_services(services)}
    managers["flower"] = environment(services["flower"]).get("AIRFLOW__CORE__AUTH_MANAGER")
    assert set(managers.values()) == {FAB_AUTH_MANAGER}, f"auth managers: {managers}"
    left = sorted(
        f"{name}: {key}" for name, s in services.items() for key in environment(s) if "SIMPLE_AUTH_MANAGER" in key
    )
    assert not left, f"settings of the simple auth manager: {left}"
    assert "airflow-auth" not in (config.get("volumes") or {}), "the volume airflow-auth is still declared"
    auth = sorted(name for name, s in services.items() for m in mounts(s) if m.target == "/opt/airflow/auth")
    assert not auth, f"services mounting /opt/airflow/auth: {auth}"
    init = environment(services["airflow-init"])
    assert init.get("AIRFLOW_ADMIN_PASSWORD") == SECRETS["AIRFLOW_ADMIN_PASSWORD"], "the admin's password is not .env's"
    assert command(services["airflow-init"]) == ["walship-airflow-init"]


# ---- dependencies and health -----------------------------------------------------------------


def test_depends_on_targets_exist_and_can_be_waited_for(services: dict[str, dict[str, Any]]) -> None:
    bad = []
    for name, service in sorted(services.items()):
        for target, condition in depends_on(service).items():
            if target not in services:
                bad.append(f"{name} depends on {target}, which is no service")
            elif condition not in CONDITIONS:
                bad.append(f"{name} waits for {target} with the unknown condition {condition!r}")
            elif condition == "service_healthy" and not has_healthcheck(services[target]):
                bad.append(f"{name} waits for {target} to be healthy, but {target} has no healthcheck")
            elif condition == "service_completed_successfully" and services[target].get("restart", "no") != "no":
                bad.append(
                    f"{name} waits for {target} to complete, but {target} restarts ({services[target]['restart']})"
                )
    assert not bad, "\n".join(bad)


def test_long_running_services_have_healthchecks(services: dict[str, dict[str, Any]]) -> None:
    missing = [
        name for name, s in sorted(services.items()) if s.get("restart", "no") != "no" and not has_healthcheck(s)
    ]
    assert not missing, f"services without a healthcheck: {missing}"


def test_airflow_waits_for_its_database_broker_and_init(services: dict[str, dict[str, Any]]) -> None:
    bad = []
    for name, service in airflow_services(services):
        deps = depends_on(service)
        if deps.get("postgres") != "service_healthy":
            bad.append(f"{name} does not wait for postgres to be healthy")
        if name != "airflow-init" and deps.get("airflow-init") != "service_completed_successfully":
            bad.append(f"{name} does not wait for airflow-init to complete")
        if name in ("airflow-scheduler", *CELERY_WORKERS) and deps.get("valkey") != "service_healthy":
            bad.append(f"{name} does not wait for the broker (valkey) to be healthy")
    assert not bad, "\n".join(bad)


# ---- the bundled clusters and an existing HBase ---------------------------------------------


def test_bundled_clusters_are_an_opt_in_profile_labelled_non_durable(services: dict[str, dict[str, Any]]) -> None:
    bad = []
    for name, service in sorted(services.items()):
        profiles = list(service.get("profiles") or [])
        if name in BUNDLED:
            if profiles != [BUNDLED_PROFILE]:
                bad.append(f"{name}: profiles {profiles}, not [{BUNDLED_PROFILE!r}]")
            durability = labels(service).get("walship.durability", "")
            if not durability.startswith("non-durable"):
                bad.append(f"{name}: no label walship.durability saying it is non-durable ({durability!r})")
        elif name == "flower":
            continue
        elif profiles:
            # the stack runs under either profile, and without one
            bad.append(f"{name}: in profiles {profiles}")
    assert not bad, "\n".join(bad)


def test_the_existing_hbase_profile_is_the_stack_without_hbase(services: dict[str, dict[str, Any]]) -> None:
    existing = active(services, [EXISTING_PROFILE])
    hbase = sorted(
        name
        for name in existing
        if name in BUNDLED or str(services[name].get("image", "")).partition(":")[0] in ("walship-hbase", "zookeeper")
    )
    assert not hbase, f"{EXISTING_PROFILE} runs HBase or its ZooKeeper: {hbase}"
    missing = sorted(set(CORE) - existing)
    assert not missing, f"{EXISTING_PROFILE} lacks {missing}"
    bundled = active(services, [BUNDLED_PROFILE])
    assert bundled == existing | set(BUNDLED), (
        f"{BUNDLED_PROFILE} is not the same stack plus {BUNDLED}: {sorted(bundled)}"
    )
    assert "flower" not in existing and "flower" in active(services, [EXISTING_PROFILE, FLOWER_PROFILE])


@pytest.mark.parametrize(
    "profiles",
    [(EXISTING_PROFILE,), (BUNDLED_PROFILE,), (EXISTING_PROFILE, FLOWER_PROFILE), (BUNDLED_PROFILE, FLOWER_PROFILE)],
    ids=",".join,
)
def test_every_dependency_runs_under_the_same_profiles(
    services: dict[str, dict[str, Any]], profiles: tuple[str, ...]
) -> None:
    # a service of a disabled profile cannot be a dependency: walship's tasks retry instead of
    # waiting for the bundled clusters
    running = active(services, profiles)
    bad = [
        f"{name} depends on {target}, which does not run with {', '.join(profiles)}"
        for name in sorted(running)
        for target in depends_on(services[name])
        if target not in running
    ]
    assert not bad, "\n".join(bad)


def test_the_source_is_the_bundled_hbase_a_by_default(services: dict[str, dict[str, Any]]) -> None:
    expected = {
        "WALSHIP_ZK": "zookeeper:2181",
        "WALSHIP_ZNODE_PARENT": "/hbase-a",
        "WALSHIP_WAL_ROOT": "/wal/hbase-a",
        "WALSHIP_SOURCE_THRIFT2": "hbase-a:9091",
        "WALSHIP_ZK_AUTH": "",
    }
    bad = []
    for name in WALSHIP_SERVICES:
        env = environment(services[name])
        bad += [f"{name}: {k}={env.get(k)!r}, not {v!r}" for k, v in expected.items() if env.get(k) != v]
    assert not bad, "\n".join(bad)


def test_an_existing_hbase_is_named_in_env(tmp_path: Path) -> None:
    rendered = dict(render({**SECRETS, **EXISTING_SOURCE}, tmp_path)["services"])
    expected_env = {
        "WALSHIP_ZK": EXISTING_SOURCE["WALSHIP_SOURCE_ZK"],
        "WALSHIP_ZNODE_PARENT": EXISTING_SOURCE["WALSHIP_SOURCE_ZNODE_PARENT"],
        "WALSHIP_WAL_ROOT": EXISTING_SOURCE["WALSHIP_SOURCE_WAL_ROOT"],
        "WALSHIP_SOURCE_THRIFT2": EXISTING_SOURCE["WALSHIP_SOURCE_THRIFT2"],
        "WALSHIP_ZK_AUTH": EXISTING_SOURCE["WALSHIP_SOURCE_ZK_AUTH"],
        "WALSHIP_PRINCIPAL": EXISTING_SOURCE["WALSHIP_SOURCE_PRINCIPAL"],
        "WALSHIP_KEYTAB": EXISTING_SOURCE["WALSHIP_SOURCE_KEYTAB"],
    }
    expected_conn = {
        "conn_type": "walship",
        "host": EXISTING_SOURCE["WALSHIP_SOURCE_ZK"],
        "extra": {
            "znode_parent": EXISTING_SOURCE["WALSHIP_SOURCE_ZNODE_PARENT"],
            "wal_root": EXISTING_SOURCE["WALSHIP_SOURCE_WAL_ROOT"],
            "thrift2": EXISTING_SOURCE["WALSHIP_SOURCE_THRIFT2"],
            "zk_auth": EXISTING_SOURCE["WALSHIP_SOURCE_ZK_AUTH"],
            "principal": EXISTING_SOURCE["WALSHIP_SOURCE_PRINCIPAL"],
            "keytab": EXISTING_SOURCE["WALSHIP_SOURCE_KEYTAB"],
        },
    }
    bad = []
    for name in WALSHIP_SERVICES:
        env = environment(rendered[name])
        bad += [f"{name}: {k}={env.get(k)!r}, not {v!r}" for k, v in expected_env.items() if env.get(k) != v]
    for name, _ in airflow_services(rendered):
        conn = connection(rendered, "AIRFLOW_CONN_WALSHIP_SOURCE", name)
        if conn != expected_conn:
            bad.append(f"{name}: walship_source is {conn}, not {expected_conn}")
    for name in HADOOP_CLIENTS:
        conf = [m for m in mounts(rendered[name]) if m.target == HADOOP_CONF]
        if [m.source for m in conf] != [EXISTING_SOURCE["HADOOP_CONF_DIR"]]:
            bad.append(f"{name}: {HADOOP_CONF} is {conf}, not .env's HADOOP_CONF_DIR")
    assert not bad, "\n".join(bad)


def test_wal_readers_mount_the_hadoop_configuration_read_only(services: dict[str, dict[str, Any]]) -> None:
    # by default docker/airflow/hadoop-conf (Hadoop's defaults); .env's HADOOP_CONF_DIR names the
    # cluster's (test_an_existing_hbase_is_named_in_env)
    bad = []
    for name in HADOOP_CLIENTS:
        conf = [m for m in mounts(services[name]) if m.target == HADOOP_CONF]
        if len(conf) != 1 or not conf[0].bind or conf[0].source != str(DEFAULT_HADOOP_CONF):
            bad.append(f"{name}: {HADOOP_CONF} is {conf}, not {DEFAULT_HADOOP_CONF.relative_to(REPO)}")
        elif not conf[0].read_only:
            bad.append(f"{name}: {HADOOP_CONF} mounted writable")
    assert not bad, "\n".join(bad)


def test_zookeeper_credentials_reach_spark_only_through_the_environment(tmp_path: Path) -> None:
    credential = EXISTING_SOURCE["WALSHIP_SOURCE_ZK_AUTH"]
    rendered = dict(render({**SECRETS, **EXISTING_SOURCE}, tmp_path)["services"])
    bad = []
    for name in ("spark-worker", *AIRFLOW_SERVICES):
        if environment(rendered[name]).get("WALSHIP_ZK_AUTH") != credential:
            bad.append(f"{name}: WALSHIP_ZK_AUTH is not the source's credential")
    for name, service in sorted(rendered.items()):
        if any(credential in arg or "ZK_AUTH" in arg for arg in command(service)):
            bad.append(f"{name}: ZooKeeper credentials on its command line")
    spark = connection(rendered, "AIRFLOW_CONN_SPARK_DEFAULT")
    if credential in json.dumps(spark):
        bad.append("spark_default carries ZooKeeper credentials (they become spark-submit arguments)")
    assert not bad, "\n".join(bad)


# ---- volumes ---------------------------------------------------------------------------------


def wal_volume(config: dict[str, Any], services: dict[str, dict[str, Any]]) -> Mount:
    """The named volume hbase-a writes its WALs to, as hbase-a mounts it."""
    wal_dir = environment(services["hbase-a"]).get("HBASE_WAL_DIR", "")
    assert wal_dir.startswith("file:///"), (
        f"hbase-a's HBASE_WAL_DIR must be a local directory (file:///...): {wal_dir!r}"
    )
    wal_root = PurePosixPath(urlsplit(wal_dir).path)
    holding = [m for m in mounts(services["hbase-a"]) if not m.bind and wal_root.is_relative_to(m.target)]
    assert holding, f"hbase-a writes WALs to {wal_root}, which is on no named volume"
    volume = max(holding, key=lambda m: len(m.target))
    assert volume.source in (config.get("volumes") or {}), f"volume {volume.source!r} is not declared"
    return volume


def test_wal_volume_is_shared_by_hbase_a_the_workers_spark_and_metrics(
    config: dict[str, Any], services: dict[str, dict[str, Any]]
) -> None:
    volume = wal_volume(config, services)
    wal_root = PurePosixPath(urlsplit(environment(services["hbase-a"])["HBASE_WAL_DIR"]).path)
    source = connection(services, "AIRFLOW_CONN_WALSHIP_SOURCE")
    assert (source.get("extra") or {}).get("wal_root") == str(wal_root), (
        f"walship_source's wal_root {(source.get('extra') or {}).get('wal_root')!r} is not hbase-a's WAL directory {str(wal_root)!r}"
    )
    bad = []
    for name in (*WAL_WRITERS, *WAL_READERS):
        same = [m for m in mounts(services[name]) if m.source == volume.source and m.target == volume.target]
        if not same:
            bad.append(f"{name}: volume {volume.source!r} not mounted at {volume.target}")
        elif name in WAL_WRITERS and any(m.read_only for m in same):
            bad.append(f"{name}: volume {volume.source!r} mounted read-only (it writes WALs or cleans them)")
        elif name in WAL_READERS and not all(m.read_only for m in same):
            bad.append(f"{name}: volume {volume.source!r} mounted writable (it only reads WALs)")
    assert not bad, "\n".join(bad)


def test_only_hbase_a_and_the_cleaner_can_write_wals(
    config: dict[str, Any], services: dict[str, dict[str, Any]]
) -> None:
    volume = wal_volume(config, services)
    writable = sorted(
        name
        for name, service in services.items()
        if any(m.source == volume.source and not m.read_only for m in mounts(service))
    )
    assert writable == sorted(WAL_WRITERS), f"volume {volume.source!r} is writable in {writable}"


@pytest.mark.parametrize(
    ("volume", "target"), [("walship-deadletters", "/deadletters"), ("walship-changelogs", "/changelogs")]
)
def test_dead_letters_and_change_logs_have_volumes_of_their_own(
    config: dict[str, Any], services: dict[str, dict[str, Any]], volume: str, target: str
) -> None:
    assert volume in (config.get("volumes") or {}), f"volume {volume!r} is not declared"
    assert volume != wal_volume(config, services).source
    bad = []
    for name in SHIPPERS:
        found = [m for m in mounts(services[name]) if m.target == target]
        if not found or found[0].source != volume or found[0].bind:
            bad.append(f"{name}: {target} is not the volume {volume!r}: {found}")
        elif found[0].read_only:
            bad.append(f"{name}: volume {volume!r} mounted read-only (it ships, and so writes it)")
    for name, service in sorted(services.items()):
        if name not in SHIPPERS and any(m.source == volume and not m.read_only for m in mounts(service)):
            bad.append(f"{name}: mounts {volume!r} writable but ships nothing")
    assert not bad, "\n".join(bad)


def test_shippers_write_dead_letters_to_their_volume(services: dict[str, dict[str, Any]]) -> None:
    wrong = {
        name: environment(services[name]).get("WALSHIP_DEADLETTER_DIR")
        for name in SHIPPERS
        if environment(services[name]).get("WALSHIP_DEADLETTER_DIR") != "/deadletters"
    }
    assert not wrong, f"WALSHIP_DEADLETTER_DIR is not /deadletters: {wrong}"


# ---- Spark -------------------------------------------------------------------------------------


def test_spark_workers_can_be_scaled(services: dict[str, dict[str, Any]]) -> None:
    # `docker compose up -d --scale spark-worker=N`: each replica registers under its own name
    worker = services["spark-worker"]
    bad = [f"spark-worker has a fixed {key}" for key in ("hostname", "container_name") if worker.get(key)]
    if published_ports(worker):
        bad.append(f"spark-worker publishes host ports (replicas would collide): {worker['ports']}")
    cmd = command(worker)
    if "--host" in cmd or "-h" in cmd:
        bad.append(f"spark-worker's command fixes its host: {cmd}")
    if "SPARK_LOCAL_HOSTNAME" in environment(worker):
        bad.append("spark-worker sets SPARK_LOCAL_HOSTNAME")
    assert not bad, "\n".join(bad)


def test_spark_workers_clean_up_finished_applications(services: dict[str, dict[str, Any]]) -> None:
    opts = environment(services["spark-worker"]).get("SPARK_WORKER_OPTS", "").split()
    for flag in (
        "-Dspark.worker.cleanup.enabled=true",
        "-Dspark.worker.cleanup.interval=1800",
        "-Dspark.worker.cleanup.appDataTtl=86400",
    ):
        assert flag in opts, f"SPARK_WORKER_OPTS lacks {flag}: {opts}"


def test_spark_jobs_run_in_a_pool_of_the_workers_cores(services: dict[str, dict[str, Any]]) -> None:
    pools = {name: environment(service).get("WALSHIP_SPARK_POOL") for name, service in airflow_services(services)}
    assert set(pools.values()) == {"walship_spark"}, f"WALSHIP_SPARK_POOL: {pools}"
    worker_cmd = command(services["spark-worker"])
    cores = worker_cmd[worker_cmd.index("--cores") + 1]
    slots = environment(services["airflow-init"]).get("SPARK_POOL_SLOTS")
    assert slots == cores, f"SPARK_POOL_SLOTS defaults to {slots!r}, not the default worker's {cores} cores"


#: A stand-in for ``airflow``: records its arguments; ``users create`` answers as FAB's CLI does,
#: for the users of $STUB_USERS as existing ones.
AIRFLOW_STUB = """import json, os, sys
with open(os.environ["STUB_CALLS"], "a") as f:
    f.write(json.dumps(sys.argv[1:]) + "\\n")
args = sys.argv[1:]
if args[:2] == ["users", "create"]:
    user = args[args.index("--username") + 1]
    if user in os.environ.get("STUB_USERS", "").split(","):
        print(f"{user} already exist in the db")
    else:
        print(f'User "{user}" created with role "Admin"')
"""


def run_airflow_init(tmp_path: Path, **env: str) -> tuple[subprocess.CompletedProcess[str], list[list[str]]]:
    """docker/airflow/init.sh with a stand-in ``airflow`` that records its arguments."""
    calls = tmp_path / "airflow-calls.jsonl"
    stubs = tmp_path / "bin"
    stubs.mkdir(exist_ok=True)
    record = tmp_path / "record.py"
    record.write_text(AIRFLOW_STUB)
    python = shlex.quote(sys.executable)
    for name, run in (("airflow", f"{python} {shlex.quote(str(record))}"), ("python", python)):
        (stubs / name).write_text(f'#!/bin/sh\nexec {run} "$@"\n')
        (stubs / name).chmod(0o755)
    calls.write_text("")
    done = subprocess.run(
        ["bash", str(AIRFLOW_INIT)],
        env={
            "PATH": f"{stubs}:{os.environ.get('PATH', '/usr/bin:/bin')}",
            "STUB_CALLS": str(calls),
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": "postgresql+psycopg2://airflow:x@postgres:5432/airflow",
            "AIRFLOW__CORE__AUTH_MANAGER": FAB_AUTH_MANAGER,
            "AIRFLOW_ADMIN_PASSWORD": SECRETS["AIRFLOW_ADMIN_PASSWORD"],
            **env,
        },
        capture_output=True,
        text=True,
        check=False,
    )
    return done, [json.loads(line) for line in calls.read_text().splitlines()]


@pytest.mark.skipif(not shutil.which("bash"), reason="needs bash")
def test_airflow_init_sizes_the_spark_pool(tmp_path: Path, services: dict[str, dict[str, Any]]) -> None:
    env = environment(services["airflow-init"])
    done, calls = run_airflow_init(
        tmp_path, WALSHIP_SPARK_POOL=env["WALSHIP_SPARK_POOL"], SPARK_POOL_SLOTS=env["SPARK_POOL_SLOTS"]
    )
    assert done.returncode == 0, done.stderr
    pools = [c for c in calls if c[:2] == ["pools", "set"]]
    assert len(pools) == 1 and pools[0][2:4] == ["walship_spark", env["SPARK_POOL_SLOTS"]], calls
    assert calls.index(["db", "migrate"]) < calls.index(pools[0]), f"the pool is set before the migration: {calls}"


def admin_calls(calls: list[list[str]]) -> tuple[list[list[str]], list[list[str]]]:
    """``airflow users create`` and ``airflow users reset-password`` calls."""
    return [c for c in calls if c[:2] == ["users", "create"]], [
        c for c in calls if c[:2] == ["users", "reset-password"]
    ]


@pytest.mark.skipif(not shutil.which("bash"), reason="needs bash")
def test_airflow_init_creates_the_admin_with_fabs_cli(tmp_path: Path, services: dict[str, dict[str, Any]]) -> None:
    env = environment(services["airflow-init"])
    keys = ("AIRFLOW__CORE__AUTH_MANAGER", "AIRFLOW_ADMIN_USER", "AIRFLOW_ADMIN_PASSWORD", "AIRFLOW_ADMIN_EMAIL")
    done, calls = run_airflow_init(tmp_path, **{k: env[k] for k in keys if k in env})
    assert done.returncode == 0, done.stderr
    created, reset = admin_calls(calls)
    assert len(created) == 1, f"the admin is not created once with `airflow users create`: {calls}"
    (create,) = created
    assert option(create, "--username") == "admin" and option(create, "--role") == "Admin", create
    assert option(create, "--password") == SECRETS["AIRFLOW_ADMIN_PASSWORD"], "the admin's password is not .env's"
    for required in ("--email", "--firstname", "--lastname"):
        assert option(create, required), f"`airflow users create` lacks {required} (FAB requires it): {create}"
    assert calls.index(["db", "migrate"]) < calls.index(create), f"the admin is created before the migration: {calls}"
    assert not reset, f"a new admin's password is set again: {reset}"
    assert SECRETS["AIRFLOW_ADMIN_PASSWORD"] not in done.stdout + done.stderr, "airflow-init prints the password"


@pytest.mark.skipif(not shutil.which("bash"), reason="needs bash")
def test_airflow_init_sets_an_existing_admins_password_from_env(tmp_path: Path) -> None:
    done, calls = run_airflow_init(tmp_path, AIRFLOW_ADMIN_USER="ops", STUB_USERS="ops")
    assert done.returncode == 0, done.stderr
    created, reset = admin_calls(calls)
    assert [option(c, "--username") for c in created] == ["ops"], calls
    assert len(reset) == 1, f"an existing admin's password is not set from .env: {calls}"
    assert option(reset[0], "--username") == "ops"
    assert option(reset[0], "--password") == SECRETS["AIRFLOW_ADMIN_PASSWORD"]
    assert SECRETS["AIRFLOW_ADMIN_PASSWORD"] not in done.stdout + done.stderr, "airflow-init prints the password"


@pytest.mark.skipif(not shutil.which("bash"), reason="needs bash")
def test_airflow_init_refuses_another_auth_manager(tmp_path: Path) -> None:
    simple = "airflow.api_fastapi.auth.managers.simple.simple_auth_manager.SimpleAuthManager"
    done, calls = run_airflow_init(tmp_path, AIRFLOW__CORE__AUTH_MANAGER=simple)
    assert done.returncode != 0, "airflow-init goes on without FAB's auth manager (whose CLI creates the admin)"
    assert "AIRFLOW__CORE__AUTH_MANAGER" in done.stdout + done.stderr, done.stdout + done.stderr
    assert not calls, f"airflow ran before the settings were checked: {calls}"


@pytest.mark.skipif(not shutil.which("bash"), reason="needs bash")
def test_airflow_init_refuses_a_pool_without_slots(tmp_path: Path) -> None:
    done, calls = run_airflow_init(tmp_path, SPARK_POOL_SLOTS="0")
    assert done.returncode != 0, "SPARK_POOL_SLOTS=0 is accepted"
    assert "SPARK_POOL_SLOTS" in done.stdout + done.stderr, f"the error does not name SPARK_POOL_SLOTS:\n{done.stdout}"
    assert not calls, f"airflow ran before the settings were checked: {calls}"


# ---- housekeeping and metrics ----------------------------------------------------------------


def test_every_service_rotates_its_docker_log(services: dict[str, dict[str, Any]]) -> None:
    bad = []
    for name, service in sorted(services.items()):
        logging = service.get("logging") or {}
        options = logging.get("options") or {}
        if logging.get("driver") != "json-file" or not options.get("max-size") or not options.get("max-file"):
            bad.append(f"{name}: logging {logging}")
    assert not bad, "services whose Docker log grows without bound:\n" + "\n".join(bad)


def test_airflow_services_know_how_long_task_logs_are_kept(services: dict[str, dict[str, Any]]) -> None:
    # Airflow deletes no task logs itself; the walship_maintenance DAG prunes them
    days = {name: environment(service).get("WALSHIP_KEEP_DAYS") for name, service in airflow_services(services)}
    assert set(days.values()) == {"30"}, f"WALSHIP_KEEP_DAYS: {days}"


def test_published_ports_are_on_localhost_only(services: dict[str, dict[str, Any]]) -> None:
    bad = [
        f"{name}: {host_ip or '*'}:{published}->{target}"
        for name, service in sorted(services.items())
        for host_ip, published, target in published_ports(service)
        if host_ip != "127.0.0.1"
    ]
    assert not bad, "ports published beyond localhost:\n" + "\n".join(bad)


def test_walship_metrics_serves_prometheus(services: dict[str, dict[str, Any]]) -> None:
    metrics = services["walship-metrics"]
    assert metrics.get("image") == services["airflow-scheduler"].get("image"), "walship-metrics is not walship's image"
    assert command(metrics) == ["walship", "metrics", "serve", "--host", "0.0.0.0", "--port", "9108"]
    assert ("127.0.0.1", "9108", "9108") in published_ports(metrics), published_ports(metrics)
    assert metrics.get("restart") == "unless-stopped"
    test = metrics.get("healthcheck", {}).get("test") or []
    assert "http://127.0.0.1:9108/metrics" in " ".join(test if isinstance(test, list) else [test]), test
    scheduler = environment(services["airflow-scheduler"])
    env = environment(metrics)
    differ = [k for k in SOURCE_ENV if env.get(k) != scheduler.get(k)]
    assert not differ, f"walship-metrics reads another source than the scheduler: {differ}"
