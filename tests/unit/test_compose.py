"""docker-compose.yml, the production stack: Compose accepts it, and its structure keeps what the
stack promises (images built or pinned, code mounted, one JWT secret, connections naming real
services, healthy dependencies, one WAL volume shared by HBase, Airflow and Spark).

Needs neither a Docker daemon nor any image. With Debian's ``docker-compose`` (scripts/setup.sh
installs it) or ``docker compose`` the checks read Compose's own rendering of the file
(``config``: variables, anchors and paths resolved); without either they read the file itself
and the Compose-only tests are skipped.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
COMPOSE_FILE = REPO / "docker-compose.yml"
DOCKERFILES = (REPO / "Dockerfile", REPO / "docker" / "hbase" / "Dockerfile")

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
)
#: Where walship reads the source's WALs: the source cluster itself, the Airflow processes that
#: plan, sense and drive the ship jobs, and the Spark executors that read and ship.
WAL_USERS = ("hbase-a", "airflow-scheduler", "airflow-triggerer", "spark-worker")
#: Where walship only reads the WALs' sizes: the API server's Replication page.
WAL_READERS = ("airflow-api-server",)
#: Settings that must be one value across all Airflow components.
SHARED_AIRFLOW_SETTINGS = (
    "AIRFLOW__API_AUTH__JWT_SECRET",
    "AIRFLOW__CORE__FERNET_KEY",
    "AIRFLOW__API__SECRET_KEY",
    "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN",
    "AIRFLOW__CORE__EXECUTION_API_SERVER_URL",
    "AIRFLOW_CONN_WALSHIP_SOURCE",
    "AIRFLOW_CONN_SPARK_DEFAULT",
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


@pytest.fixture(scope="module")
def config(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The file as Compose renders it (or as read and interpolated here, without Compose)."""
    if COMPOSE is None:
        loaded = yaml.safe_load(COMPOSE_FILE.read_text())
        return dict(interpolate({k: v for k, v in loaded.items() if not k.startswith("x-")}, SECRETS))
    home = tmp_path_factory.mktemp("compose-home")
    done = run_compose(["config"], write_env(home / "secrets.env", SECRETS), home)
    if done.returncode != 0:
        pytest.fail(f"`{' '.join(COMPOSE)} config` failed (exit {done.returncode}):\n{done.stderr}")
    rendered = yaml.safe_load(done.stdout)
    assert isinstance(rendered, dict) and rendered.get("services"), f"no services in:\n{done.stdout[:2000]}"
    return rendered


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


def command(service: dict[str, Any]) -> list[str]:
    cmd = service.get("command") or []
    return cmd.split() if isinstance(cmd, str) else [str(c) for c in cmd]


def has_healthcheck(service: dict[str, Any]) -> bool:
    check = service.get("healthcheck") or {}
    return bool(check.get("test")) and not check.get("disable") and check.get("test") != ["NONE"]


def airflow_services(services: dict[str, dict[str, Any]]) -> Iterator[tuple[str, dict[str, Any]]]:
    missing = [name for name in AIRFLOW_SERVICES if name not in services]
    assert not missing, f"Airflow services missing from docker-compose.yml: {missing}"
    for name, service in sorted(services.items()):
        if name.startswith("airflow-"):
            yield name, service


def connection(services: dict[str, dict[str, Any]], variable: str) -> dict[str, Any]:
    value = environment(services["airflow-scheduler"]).get(variable)
    assert value, f"airflow-scheduler has no {variable}"
    try:
        conn = json.loads(value)
    except json.JSONDecodeError as exc:
        pytest.fail(f"{variable} is not JSON ({exc}): {value!r}")
    assert isinstance(conn, dict), f"{variable} is not a JSON object: {value!r}"
    return conn


# ---- Compose itself --------------------------------------------------------------------------


@needs_compose
def test_compose_accepts_the_file(tmp_path: Path) -> None:
    done = run_compose(["config", "-q"], write_env(tmp_path / "secrets.env", SECRETS), tmp_path)
    assert done.returncode == 0, f"`{' '.join(COMPOSE or [])} config -q` exit {done.returncode}:\n{done.stderr}"


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


def test_hbase_release_is_pinned_by_version_and_sha512() -> None:
    text = (REPO / "docker" / "hbase" / "Dockerfile").read_text()
    version = re.search(r"ARG HBASE_VERSION=(\S+)", text)
    assert version and re.fullmatch(r"2\.\d+\.\d+", version.group(1)), "HBASE_VERSION must pin an HBase 2.x.y release"
    digest = re.search(r"ARG HBASE_SHA512=(\S+)", text)
    assert digest and re.fullmatch(r"[0-9a-f]{128}", digest.group(1)), "HBASE_SHA512 must be a SHA-512 (128 hex digits)"
    assert "sha512sum -c" in text, "the HBase tarball's SHA-512 is never checked"


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


def test_airflow_uses_postgres_and_the_local_executor(services: dict[str, dict[str, Any]]) -> None:
    env = environment(services["airflow-scheduler"])
    url = urlsplit(env.get("AIRFLOW__DATABASE__SQL_ALCHEMY_CONN", ""))
    assert url.scheme.startswith("postgresql"), f"metadata database is {url.scheme!r}, not Postgres"
    assert url.hostname in services, f"the metadata database host {url.hostname!r} is no service"
    assert env.get("AIRFLOW__CORE__EXECUTOR") == "LocalExecutor"
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


def test_airflow_waits_for_its_database_and_init(services: dict[str, dict[str, Any]]) -> None:
    bad = []
    for name, service in airflow_services(services):
        deps = depends_on(service)
        if deps.get("postgres") != "service_healthy":
            bad.append(f"{name} does not wait for postgres to be healthy")
        if name != "airflow-init" and deps.get("airflow-init") != "service_completed_successfully":
            bad.append(f"{name} does not wait for airflow-init to complete")
    assert not bad, "\n".join(bad)


# ---- the WAL volume --------------------------------------------------------------------------


def test_wal_volume_is_shared_by_hbase_a_airflow_and_spark(
    config: dict[str, Any], services: dict[str, dict[str, Any]]
) -> None:
    wal_dir = environment(services["hbase-a"]).get("HBASE_WAL_DIR", "")
    assert wal_dir.startswith("file:///"), (
        f"hbase-a's HBASE_WAL_DIR must be a local directory (file:///...): {wal_dir!r}"
    )
    wal_root = PurePosixPath(urlsplit(wal_dir).path)
    source = connection(services, "AIRFLOW_CONN_WALSHIP_SOURCE")
    assert (source.get("extra") or {}).get("wal_root") == str(wal_root), (
        f"walship_source's wal_root {(source.get('extra') or {}).get('wal_root')!r} is not hbase-a's WAL directory {str(wal_root)!r}"
    )
    holding = [m for m in mounts(services["hbase-a"]) if not m.bind and wal_root.is_relative_to(m.target)]
    assert holding, f"hbase-a writes WALs to {wal_root}, which is on no named volume"
    volume = max(holding, key=lambda m: len(m.target))
    assert volume.source in (config.get("volumes") or {}), f"volume {volume.source!r} is not declared"
    bad = []
    for name in (*WAL_USERS, *WAL_READERS):
        same = [m for m in mounts(services[name]) if m.source == volume.source and m.target == volume.target]
        if not same:
            bad.append(f"{name}: volume {volume.source!r} not mounted at {volume.target}")
        elif name in WAL_USERS and any(m.read_only for m in same):
            bad.append(f"{name}: volume {volume.source!r} mounted read-only (walship writes dead letters and cleans)")
    assert not bad, "\n".join(bad)
