"""docker-compose.yml, the production stack: Compose accepts it, with and without the profile
of the bundled HBase clusters, and its structure keeps what the stack promises (images built or
pinned, code mounted, one JWT secret, the source taken from .env, connections naming real
services, healthy dependencies, the WAL volume writable only where HBase writes it and walship
cleans it, dead letters and change logs on volumes of their own, scalable Spark workers, rotated
logs, the metrics service). Also the HBase image's download check and configuration, and
airflow-init's Spark pool.

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
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
COMPOSE_FILE = REPO / "docker-compose.yml"
HBASE_DIR = REPO / "docker" / "hbase"
DOCKERFILES = (REPO / "Dockerfile", HBASE_DIR / "Dockerfile")
AIRFLOW_INIT = REPO / "docker" / "airflow" / "init.sh"

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
#: The profile of the bundled ZooKeeper and HBase clusters, and its services.
PROFILE = "bundled-hbase"
BUNDLED = ("zookeeper", "hbase-a", "hbase-b")
HBASE_SERVICES = ("hbase-a", "hbase-b")
#: What writes the WAL volume: the source cluster itself, and the scheduler, whose
#: LocalExecutor runs walship_clean (the one walship process that deletes archived WALs).
WAL_WRITERS = ("hbase-a", "airflow-scheduler")
#: What only reads the WALs or their sizes: the deferred sensor's trigger, the Spark executors,
#: the API server's Replication page and the metrics service.
WAL_READERS = ("airflow-triggerer", "spark-worker", "airflow-api-server", "walship-metrics")
#: What ships, and so writes dead letters and Parquet change logs.
SHIPPERS = ("airflow-scheduler", "spark-worker")
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
}
#: Settings that must be one value across all Airflow components.
SHARED_AIRFLOW_SETTINGS = (
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


def render(env: dict[str, str], home: Path) -> dict[str, Any]:
    """The file with every profile enabled, as Compose renders it with only ``env`` as its
    variables (or as read and interpolated here, without Compose)."""
    if COMPOSE is None:
        loaded = yaml.safe_load(COMPOSE_FILE.read_text())
        return dict(interpolate({k: v for k, v in loaded.items() if not k.startswith("x-")}, env))
    done = run_compose(["--profile", PROFILE, "config"], write_env(home / "compose.env", env), home)
    if done.returncode != 0:
        pytest.fail(f"`{' '.join(COMPOSE)} --profile {PROFILE} config` failed (exit {done.returncode}):\n{done.stderr}")
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
@pytest.mark.parametrize("profiles", [(), (PROFILE,)], ids=["existing-hbase", PROFILE])
def test_compose_accepts_the_file(tmp_path: Path, profiles: tuple[str, ...]) -> None:
    args = [arg for name in profiles for arg in ("--profile", name)]
    done = run_compose([*args, "config", "-q"], write_env(tmp_path / "secrets.env", SECRETS), tmp_path)
    assert done.returncode == 0, (
        f"`{' '.join([*(COMPOSE or []), *args])} config -q` exit {done.returncode}:\n{done.stderr}"
    )


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


def hbase_download_script() -> str:
    """The HBase image's download step, from its start to the unpacking: fetch the tarball and
    its published SHA-512, check it (and the pin)."""
    instructions: list[list[str]] = []
    for line in (HBASE_DIR / "Dockerfile").read_text().splitlines():
        if instructions and instructions[-1][-1].endswith("\\"):
            instructions[-1].append(line)
        elif line and not line[0].isspace() and not line.startswith("#"):
            instructions.append([line])
    run = next(i for i in instructions if i[0].startswith("RUN ") and any("sha512sum -c" in line for line in i))
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


# ---- the bundled clusters and an existing HBase ---------------------------------------------


def test_bundled_clusters_are_an_opt_in_profile_labelled_non_durable(services: dict[str, dict[str, Any]]) -> None:
    bad = []
    for name, service in sorted(services.items()):
        profiles = list(service.get("profiles") or [])
        if name in BUNDLED:
            if profiles != [PROFILE]:
                bad.append(f"{name}: profiles {profiles}, not [{PROFILE!r}]")
            durability = labels(service).get("walship.durability", "")
            if not durability.startswith("non-durable"):
                bad.append(f"{name}: no label walship.durability saying it is non-durable ({durability!r})")
        elif profiles:
            # the stack must run without any profile, against the HBase of .env
            bad.append(f"{name}: in profiles {profiles}")
    assert not bad, "\n".join(bad)


def test_no_service_outside_the_profile_depends_on_it(services: dict[str, dict[str, Any]]) -> None:
    # a service of a disabled profile cannot be a dependency: walship's tasks retry instead
    bad = [
        f"{name} depends on {target} (profile {services[target]['profiles']})"
        for name, service in sorted(services.items())
        if not service.get("profiles")
        for target in depends_on(service)
        if target in services and services[target].get("profiles")
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


def test_wal_volume_is_shared_by_hbase_a_airflow_spark_and_metrics(
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


def run_airflow_init(tmp_path: Path, **env: str) -> tuple[subprocess.CompletedProcess[str], list[list[str]]]:
    """docker/airflow/init.sh with a stand-in ``airflow`` that records its arguments."""
    calls = tmp_path / "airflow-calls.jsonl"
    stubs = tmp_path / "bin"
    stubs.mkdir(exist_ok=True)
    record = tmp_path / "record.py"
    record.write_text(
        f"import json, sys\nwith open({str(calls)!r}, 'a') as f:\n    f.write(json.dumps(sys.argv[1:]) + '\\n')\n"
    )
    python = shlex.quote(sys.executable)
    for name, run in (("airflow", f"{python} {shlex.quote(str(record))}"), ("python", python)):
        (stubs / name).write_text(f'#!/bin/sh\nexec {run} "$@"\n')
        (stubs / name).chmod(0o755)
    calls.write_text("")
    done = subprocess.run(
        ["bash", str(AIRFLOW_INIT)],
        env={
            "PATH": f"{stubs}:{os.environ.get('PATH', '/usr/bin:/bin')}",
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": "postgresql+psycopg2://airflow:x@postgres:5432/airflow",
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(tmp_path / "passwords.json"),
            "AIRFLOW_ADMIN_PASSWORD": "test-admin-password",
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
