"""Airflow's production topology for the tests, from Debian's and PyPI's packages (CI has no
container runtime): PostgreSQL (the metadata DB and Celery's result backend), Redis or Valkey
(Celery's broker) and Airflow 3.3 with the CeleryExecutor and FAB's auth manager, as one
process group each on loopback and free ports: the API server, the scheduler, the DAG
processor, the triggerer and N Celery workers, sharing one ``AIRFLOW_HOME`` and one
environment under a temporary directory.

The test process's own ``os.environ`` (which ``airflow_env`` sets up for the in-process tests)
is never changed, and none of its ``AIRFLOW*`` variables reach the topology: its components get
their configuration from :class:`Airflow`'s environment only, plus the ``env`` a test passes
(connections as ``AIRFLOW_CONN_*``, ``[walship]`` settings as ``AIRFLOW__WALSHIP__*``).

Example::

    with Topology(tmp_path, dags_folder=dags, workers=("w1", "w2")) as topo:
        topo.airflow.wait_for_dag("my_dag")
        topo.airflow.unpause("my_dag")
        run_id = topo.airflow.trigger("my_dag")
        assert topo.airflow.wait_run("my_dag", run_id, timeout=120) == "success", topo.describe()

Each component's output goes to a log file of its own (:meth:`Topology.logs`,
:meth:`Topology.describe` for a failure message); Airflow's task logs stay under
``AIRFLOW_HOME/logs``, which the API server reads directly: the workers and the triggerer
run no log server (Airflow's binds every interface), so only the API server (``--host
127.0.0.1``), PostgreSQL and Redis listen, each on 127.0.0.1 only.
"""

from __future__ import annotations

import base64
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import IO, Any, Self
from urllib.parse import quote

import httpx
from waiting import wait_until

from walship.zk.localserver import free_port

__all__ = ["Airflow", "Component", "PostgresServer", "RedisServer", "Topology", "descendants", "group_members"]

ROOT = Path(__file__).resolve().parents[1]

#: FAB's auth manager, as the official docker-compose configures it
FAB_AUTH_MANAGER = "airflow.providers.fab.auth_manager.fab_auth_manager.FabAuthManager"

#: the module each Celery worker's tasks name their host with (``[core] hostname_callable``):
#: every worker runs on this one machine, so the FQDN would not tell them apart
_HOSTNAME_MODULE = '''"""The Celery worker's name (the topology's ``[core] hostname_callable``)."""

import os


def hostname() -> str:
    return os.environ["WALSHIP_TOPOLOGY_HOSTNAME"]
'''


def _processes() -> dict[int, tuple[str, int, int]]:
    """Every process's (state, parent, process group), read from ``/proc``."""
    out = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:  # gone meanwhile
            continue
        # pid (comm) state ppid pgrp ...: comm may hold spaces and parentheses
        fields = text[text.rindex(")") + 2 :].split()
        out[int(stat.parent.name)] = (fields[0], int(fields[1]), int(fields[2]))
    return out


def group_members(pgid: int) -> list[int]:
    """The live (not zombie) processes of process group ``pgid``."""
    return [pid for pid, (state, _, group) in _processes().items() if group == pgid and state not in ("Z", "X")]


def descendants(pid: int) -> list[int]:
    """Every live process started under ``pid`` (children, theirs, ...), whatever their group:
    Airflow's task processes may run in sessions of their own."""
    procs = _processes()
    children: dict[int, list[int]] = {}
    for child, (_, parent, _) in procs.items():
        children.setdefault(parent, []).append(child)
    out, todo = [], list(children.get(pid, ()))
    while todo:
        child = todo.pop()
        if procs[child][0] not in ("Z", "X"):
            out.append(child)
        todo.extend(children.get(child, ()))
    return out


class Component:
    """One server of the topology: a process group of its own (so that stopping or killing it
    takes its children too), its output in one log file.

    :param stop_signal: what asks it to stop (PostgreSQL's fast shutdown is SIGINT)
    :param user: the system user to run it as (only when this process is root)
    """

    def __init__(
        self,
        name: str,
        argv: Sequence[str],
        *,
        env: Mapping[str, str],
        log: Path,
        cwd: Path | None = None,
        stop_signal: signal.Signals = signal.SIGTERM,
        user: str | None = None,
    ) -> None:
        self.name = name
        self.argv = list(argv)
        self.env = dict(env)
        self.log = log
        self.cwd = cwd
        self.stop_signal = stop_signal
        self.user = user
        self.proc: subprocess.Popen[bytes] | None = None
        self.killed = False  # on purpose (:meth:`kill`): :meth:`check` does not mind its exit
        self._out: IO[bytes] | None = None

    def start(self) -> Component:
        self.log.parent.mkdir(parents=True, exist_ok=True)
        self._out = self.log.open("ab")
        self.proc = subprocess.Popen(
            self.argv,
            stdin=subprocess.DEVNULL,
            stdout=self._out,
            stderr=subprocess.STDOUT,
            env=self.env,
            cwd=self.cwd,
            start_new_session=True,
            user=self.user,
            group=self.user,
            extra_groups=[] if self.user else None,  # none of root's groups
        )
        return self

    @property
    def pid(self) -> int:
        assert self.proc is not None, f"{self.name} was not started"
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def check(self) -> None:
        """:raises RuntimeError: it exited, unless it was killed on purpose; the message has its
        exit code and the end of its log."""
        if self.proc is not None and not self.killed and self.proc.poll() is not None:
            raise RuntimeError(f"{self.name} exited with {self.proc.returncode}:\n{self.tail()}")

    def tail(self, chars: int = 4000) -> str:
        """The end of its log."""
        try:
            with self.log.open("rb") as f:
                f.seek(max(0, f.seek(0, os.SEEK_END) - chars))
                return f.read().decode(errors="replace")
        except FileNotFoundError:
            return "(no log)"

    def logged(self, text: str) -> bool:
        """Whether its log has ``text`` (raises as :meth:`check` does once it exited)."""
        self.check()
        try:
            return text in self.log.read_text(errors="replace")
        except FileNotFoundError:
            return False

    def signal(self, sig: signal.Signals) -> None:
        """Send ``sig`` to its whole process group (nothing if it is gone)."""
        if self.proc is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, sig)

    def kill(self, timeout: float = 30.0, also: Iterable[int] = ()) -> None:
        """SIGKILL its whole process group and every process under it (a task process in a
        session of its own too), as a machine failure would, and reap it. ``also``: processes
        seen under it before, which may have been handed to init since (their parent gone)."""
        self.killed = True
        under = [*(descendants(self.proc.pid) if self.proc is not None else []), *also]
        self.signal(signal.SIGKILL)
        for pid in under:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        self._reap(timeout)
        # a JVM of many threads takes a moment to die after its SIGKILL: until it is gone or a zombie
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            procs = _processes()
            if all(procs.get(pid, ("X",))[0] in ("Z", "X") for pid in under):
                break
            time.sleep(0.05)

    def stop(self, timeout: float = 20.0) -> None:
        """Ask it to stop, SIGKILL what is left of its group after ``timeout`` seconds."""
        if self.proc is None:
            return
        self.signal(self.stop_signal)
        self.wait_stopped(timeout)

    def wait_stopped(self, timeout: float) -> None:
        """After :meth:`signal`: wait for the group to end; SIGKILL it after ``timeout`` seconds."""
        if self.proc is None:
            return
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout)
        self.signal(signal.SIGKILL)  # and whatever the leader left behind in its group
        self._reap(10.0)

    def _reap(self, timeout: float) -> None:
        assert self.proc is not None
        self.proc.wait(timeout)
        wait_until(lambda: not group_members(self.proc.pid) if self.proc else True, timeout=timeout,
                   interval=0.1, what=f"the processes of {self.name} to end")  # fmt: skip
        if self._out is not None:
            self._out.close()
            self._out = None


def _pg_bin(name: str) -> Path:
    """``name`` from the newest PostgreSQL server Debian installed (``/usr/lib/postgresql/<ver>/bin``)."""
    found = sorted(Path("/usr/lib/postgresql").glob(f"*/bin/{name}"), key=lambda p: int(p.parts[-3]))
    if not found:
        raise FileNotFoundError(
            f"no PostgreSQL server binary {name!r} under /usr/lib/postgresql (Debian's postgresql-NN)"
        )
    return found[-1]


class _Server:
    """A server of the topology: ``with`` starts it and waits until it answers (stopping what
    started if either fails), then stops it."""

    def start(self) -> None:
        raise NotImplementedError

    def wait_ready(self, timeout: float = 30.0) -> None:
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        try:
            self.start()
            self.wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


class PostgresServer(_Server):
    """A throw-away PostgreSQL server from Debian's binaries (``initdb``, ``postgres``) on a
    free port of 127.0.0.1, with database ``database`` owned by login ``user`` (password auth
    over TCP). As root it runs as the ``postgres`` system user (PostgreSQL refuses root), in a
    directory of its own that user may enter; it is removed on exit.

    Durability is off (``fsync``, ``full_page_writes``, ``synchronous_commit``): a test's DB.
    """

    def __init__(self, base: Path, *, user: str = "airflow", database: str = "airflow") -> None:
        self.user = user
        self.database = database
        self.password = os.urandom(12).hex()
        self.port = free_port()
        self.log = base / "logs" / "postgres.log"
        self._run_as = "postgres" if os.geteuid() == 0 else None
        self._dir: Path | None = None
        self.server: Component | None = None

    def url(self, driver: str = "postgresql+psycopg2") -> str:
        """The SQLAlchemy URL of its database (``db+postgresql+psycopg2`` for Celery's result backend)."""
        return f"{driver}://{self.user}:{self.password}@127.0.0.1:{self.port}/{self.database}"

    def start(self) -> None:
        """Create the cluster and start the server (returns at once; :meth:`wait_ready` waits)."""
        self._dir = Path(tempfile.mkdtemp(prefix="walship-postgres-"))
        data, sockets, pwfile = self._dir / "data", self._dir / "run", self._dir / "superuser-password"
        sockets.mkdir()
        pwfile.write_text(os.urandom(12).hex() + "\n")
        if self._run_as:
            for path in (self._dir, sockets, pwfile):
                shutil.chown(path, self._run_as, self._run_as)
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8"}
        self.log.parent.mkdir(parents=True, exist_ok=True)
        with self.log.open("ab") as out:
            done = subprocess.run(
                [str(_pg_bin("initdb")), "-D", str(data), "-U", "postgres", "-E", "UTF8", "--locale=C",
                 "--auth-local=trust", "--auth-host=scram-sha-256", f"--pwfile={pwfile}", "--no-sync"],
                stdout=out, stderr=subprocess.STDOUT, env=env, cwd=self._dir, check=False, timeout=120,
                user=self._run_as, group=self._run_as, extra_groups=[] if self._run_as else None,
            )  # fmt: skip
        if done.returncode != 0:
            raise RuntimeError(f"initdb failed ({done.returncode}):\n{self.log.read_text(errors='replace')[-4000:]}")
        self.server = Component(
            "postgres",
            [str(_pg_bin("postgres")), "-D", str(data), "-p", str(self.port), "-k", str(sockets),
             "-c", "listen_addresses=127.0.0.1", "-c", "max_connections=200", "-c", "fsync=off",
             "-c", "full_page_writes=off", "-c", "synchronous_commit=off"],
            env=env, log=self.log, cwd=self._dir, stop_signal=signal.SIGINT, user=self._run_as,
        ).start()  # fmt: skip
        self._sockets = sockets

    def wait_ready(self, timeout: float = 60.0) -> None:
        """Wait until it accepts connections, then create the role and the database."""
        assert self.server is not None
        server = self.server
        wait_until(lambda: server.logged("database system is ready to accept connections"), timeout=timeout,
                   interval=0.1, what=f"PostgreSQL on port {self.port} (log: {self.log})")  # fmt: skip
        sql = [
            f"CREATE ROLE {self.user} LOGIN PASSWORD '{self.password}'",
            f"CREATE DATABASE {self.database} OWNER {self.user}",
        ]
        psql = [str(_pg_bin("psql")), "-h", str(self._sockets), "-p", str(self.port), "-U", "postgres",
                "-d", "postgres", "-v", "ON_ERROR_STOP=1", "-q"]  # fmt: skip
        done = subprocess.run(
            [*psql, *(arg for s in sql for arg in ("-c", s))], capture_output=True, text=True, timeout=60,
            env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")}, check=False,
        )  # fmt: skip
        if done.returncode != 0:
            raise RuntimeError(f"creating the Airflow database failed: {done.stderr}\n{server.tail()}")

    def stop(self) -> None:
        if self.server is not None:
            self.server.stop()
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None


class RedisServer(_Server):
    """A throw-away Valkey (if installed) or Redis server on a free port of 127.0.0.1, without
    persistence: Celery's broker."""

    def __init__(self, base: Path) -> None:
        binary = shutil.which("valkey-server") or shutil.which("redis-server")
        if binary is None:
            raise FileNotFoundError("neither valkey-server nor redis-server is installed (Debian's redis-server)")
        self.port = free_port()
        self.log = base / "logs" / "redis.log"
        self._dir = base / "redis"
        self.server = Component(
            Path(binary).name,
            [binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
             "--dir", str(self._dir)],
            env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")}, log=self.log, cwd=self._dir,
        )  # fmt: skip

    @property
    def url(self) -> str:
        """Celery's broker URL (database 0)."""
        return f"redis://127.0.0.1:{self.port}/0"

    def ping(self) -> bool:
        self.server.check()
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=1) as s:
                s.sendall(b"PING\r\n")
                return s.recv(16).startswith(b"+PONG")
        except OSError:
            return False

    def start(self) -> None:
        self._dir.mkdir(parents=True, exist_ok=True)
        self.server.start()

    def wait_ready(self, timeout: float = 30.0) -> None:
        wait_until(self.ping, timeout=timeout, interval=0.05, what=f"{self.server.name} on port {self.port}")

    def stop(self) -> None:
        self.server.stop()


class Airflow:
    """Airflow 3.3 with the CeleryExecutor and FAB's auth manager on ``db`` and ``broker``:
    ``airflow db migrate`` (FAB's tables too: the FAB provider's DB manager is found by
    ``db migrate`` itself), an admin user, then the API server, scheduler, DAG processor,
    triggerer and one Celery worker per name in ``workers``, in parallel.

    :param dags_folder: ``[core] dags_folder``
    :param workers: the Celery workers' names: ``-H <name>@%h``, and what their task instances
        report as ``hostname`` (a ``[core] hostname_callable`` of the topology's own)
    :param queues: the queues every worker consumes (comma-separated), or one entry per worker
    :param concurrency: each worker's task slots
    :param env: more environment for every component (connections, ``AIRFLOW__SECTION__KEY``
        settings); it overrides the topology's own settings
    :param airflow: the ``airflow`` command (the test interpreter's venv's by default)
    """

    USER = "admin"

    def __init__(
        self,
        base: Path,
        *,
        db: PostgresServer,
        broker: RedisServer,
        dags_folder: Path = ROOT / "dags",
        workers: Sequence[str] = ("worker1", "worker2"),
        queues: str | Mapping[str, str] = "default",
        concurrency: int = 2,
        env: Mapping[str, str] | None = None,
        airflow: Path | None = None,
    ) -> None:
        self.base = base
        self.home = base / "airflow-home"
        self.airflow = str(airflow or Path(sys.executable).parent / "airflow")
        self.password = os.urandom(9).hex()
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.workers = list(workers)
        self.queues = {w: queues if isinstance(queues, str) else queues[w] for w in self.workers}
        self.concurrency = concurrency
        hooks = base / "pythonpath"
        inherited = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW")}
        self.env: dict[str, str] = {
            **inherited,
            "PATH": f"{Path(self.airflow).parent}:{os.environ.get('PATH', '')}",
            "PYTHONPATH": os.pathsep.join(p for p in (str(hooks), os.environ.get("PYTHONPATH", "")) if p),
            "AIRFLOW_HOME": str(self.home),
            "AIRFLOW__CORE__DAGS_FOLDER": str(dags_folder),
            "AIRFLOW__CORE__PLUGINS_FOLDER": str(self.home / "plugins"),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__CORE__EXECUTOR": "CeleryExecutor",
            "AIRFLOW__CORE__AUTH_MANAGER": FAB_AUTH_MANAGER,
            "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "True",
            "AIRFLOW__CORE__FERNET_KEY": base64.urlsafe_b64encode(os.urandom(32)).decode(),
            "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"{self.url}/execution/",
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": db.url("postgresql+psycopg2"),
            "AIRFLOW__CELERY__BROKER_URL": broker.url,
            # SQLAlchemy 2.1's plain ``postgresql`` means psycopg 3: name the driver
            "AIRFLOW__CELERY__RESULT_BACKEND": db.url("db+postgresql+psycopg2"),
            "AIRFLOW__CELERY__WORKER_CONCURRENCY": str(concurrency),
            "AIRFLOW__API__HOST": "127.0.0.1",
            "AIRFLOW__API__PORT": str(self.port),
            "AIRFLOW__API__BASE_URL": self.url,
            "AIRFLOW__API__WORKERS": "1",
            # one JWT secret (and one Flask secret) for every component: the API server signs
            # the workers' task tokens and the REST API's user tokens with it
            "AIRFLOW__API_AUTH__JWT_SECRET": os.urandom(32).hex(),
            "AIRFLOW__API__SECRET_KEY": os.urandom(32).hex(),
            "AIRFLOW__DAG_PROCESSOR__PARSING_PROCESSES": "1",
            **(env or {}),
        }
        self._hooks = hooks
        logs = base / "logs"
        self.migrate_log = logs / "db-migrate.log"
        self.users_log = logs / "users-create.log"
        self.components: dict[str, Component] = {
            "api-server": Component(
                "api-server", [self.airflow, "api-server", "--host", "127.0.0.1", "--port", str(self.port)],
                env=self.env, log=logs / "api-server.log", cwd=base,
            ),
            "scheduler": Component("scheduler", [self.airflow, "scheduler"], env=self.env,
                                   log=logs / "scheduler.log", cwd=base),
            "dag-processor": Component("dag-processor", [self.airflow, "dag-processor"], env=self.env,
                                       log=logs / "dag-processor.log", cwd=base),
            "triggerer": Component("triggerer", [self.airflow, "triggerer", "--skip-serve-logs"], env=self.env,
                                   log=logs / "triggerer.log", cwd=base),
        }  # fmt: skip
        for name in self.workers:
            self.components[name] = Component(
                name,
                [self.airflow, "celery", "worker", "-H", f"{name}@%h", "--queues", self.queues[name],
                 "--concurrency", str(concurrency), "--skip-serve-logs", "--without-mingle", "--without-gossip"],
                env={**self.env, "AIRFLOW__CORE__HOSTNAME_CALLABLE": "walship_topology_hostname.hostname",
                     "WALSHIP_TOPOLOGY_HOSTNAME": name},
                log=logs / f"{name}.log", cwd=base,
            )  # fmt: skip
        self._token: str | None = None
        self._http = httpx.Client(base_url=self.url, timeout=30)

    # -- start and stop ------------------------------------------------------------------

    def _run(self, argv: Sequence[str], log: Path, timeout: float) -> None:
        with log.open("ab") as out:
            done = subprocess.run(argv, stdout=out, stderr=subprocess.STDOUT, env=self.env, cwd=self.base,
                                  timeout=timeout, check=False)  # fmt: skip
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(argv[1:])} failed ({done.returncode}):\n{log.read_text()[-4000:]}")

    def start(self) -> None:
        """Migrate the DB and create the admin user (before the API server: both write FAB's
        roles and permissions, and at once they can collide), then start every component
        (returns without waiting for them: :meth:`wait_healthy`)."""
        (self.home / "plugins").mkdir(parents=True, exist_ok=True)
        (self.base / "logs").mkdir(parents=True, exist_ok=True)
        self._hooks.mkdir(parents=True, exist_ok=True)
        (self._hooks / "walship_topology_hostname.py").write_text(_HOSTNAME_MODULE)
        self._run([self.airflow, "db", "migrate"], self.migrate_log, timeout=600)
        self._run(
            [self.airflow, "users", "create", "--username", self.USER, "--password", self.password,
             "--firstname", "Wal", "--lastname", "Ship", "--email", "admin@example.org", "--role", "Admin"],
            self.users_log, timeout=300,
        )  # fmt: skip
        for component in self.components.values():
            component.start()

    def check(self) -> None:
        """:raises RuntimeError: a component exited that was not killed on purpose."""
        for component in self.components.values():
            component.check()

    def api_health(self) -> dict[str, Any] | None:
        """``GET /api/v2/monitor/health`` (no token needed); ``None`` while nobody answers."""
        try:
            r = self._http.get("/api/v2/monitor/health")
        except httpx.TransportError:
            return None
        return dict(r.json()) if r.status_code == 200 else None

    def healthy(self) -> bool:
        """The API server answers, and the scheduler's, triggerer's and DAG processor's
        heartbeats in its health answer are recent; every worker logged that it is ready."""
        self.check()
        health = self.api_health()
        if health is None or any(
            health.get(part, {}).get("status") != "healthy"
            for part in ("metadatabase", "scheduler", "triggerer", "dag_processor")
        ):
            return False
        return all(self.worker_ready(name) for name in self.workers)

    def worker_ready(self, name: str) -> bool:
        """Whether worker ``name`` logged Celery's ``<name>@<host> ready.`` (it consumes its queues then)."""
        worker = self.components[name]
        worker.check()
        return any(f"{name}@" in line and " ready." in line for line in worker.tail(1 << 20).splitlines())

    def wait_healthy(self, timeout: float = 300.0) -> None:
        wait_until(self.healthy, timeout=timeout, interval=0.5, what=f"every Airflow component\n{self.describe()}")

    def stop(self, timeout: float = 20.0) -> None:
        """Stop every component at once (SIGTERM, SIGKILL after ``timeout`` s), nothing left."""
        self._http.close()
        started = [c for c in self.components.values() if c.proc is not None]
        for component in started:
            component.signal(component.stop_signal)
        with ThreadPoolExecutor(max_workers=max(1, len(started))) as pool:
            list(pool.map(lambda c: c.wait_stopped(timeout), started))

    def kill_worker(self, name: str, also: Iterable[int] = ()) -> None:
        """SIGKILL Celery worker ``name`` with every process of its group (its pool and the
        tasks it runs) and ``also`` (processes seen under it before), as a lost machine would be."""
        self.components[name].kill(also=also)

    # -- logs ----------------------------------------------------------------------------

    def logs(self) -> dict[str, Path]:
        """Each component's log (and the migration's and the user creation's)."""
        return {
            "db-migrate": self.migrate_log,
            "users-create": self.users_log,
            **{name: c.log for name, c in self.components.items()},
        }

    def log(self, name: str) -> Path:
        """The log of one component (a worker's name, ``api-server``, ``db-migrate``, ...)."""
        return self.logs()[name]

    def describe(self, chars: int = 1500) -> str:
        """The state of every component and the end of its log, for a failure message."""
        parts = []
        for name, c in self.components.items():
            state = "running" if c.alive() else f"exited {None if c.proc is None else c.proc.returncode}"
            parts.append(f"--- {name} ({state}, {c.log}):\n{c.tail(chars)}")
        return "\n".join(parts)

    # -- the REST API --------------------------------------------------------------------

    def token(self) -> str:
        """A JWT for the admin user from FAB's ``POST /auth/token`` (201)."""
        if self._token is None:
            r = self._http.post("/auth/token", json={"username": self.USER, "password": self.password})
            if r.status_code != 201:
                raise RuntimeError(f"POST /auth/token answered {r.status_code}: {r.text[:500]}")
            self._token = str(r.json()["access_token"])
        return self._token

    def api(self, method: str, path: str, *, expect: Iterable[int] = (200,), **kwargs: Any) -> Any:
        """Call ``/api/v2`` + ``path`` as the admin user; return the JSON answer.

        :raises AssertionError: the status is not one of ``expect``
        """
        r = self._http.request(method, f"/api/v2{path}", headers={"Authorization": f"Bearer {self.token()}"},
                               **kwargs)  # fmt: skip
        assert r.status_code in tuple(expect), f"{method} {path}: {r.status_code} {r.text[:1000]}"
        return r.json() if r.content else None

    def dag(self, dag_id: str) -> dict[str, Any] | None:
        """``GET /dags/{dag_id}``, ``None`` while the DAG processor has not stored it."""
        r = self.api("GET", f"/dags/{quote(dag_id)}", expect=(200, 404))
        return None if r is None or "dag_id" not in r else dict(r)

    def import_errors(self) -> list[dict[str, Any]]:
        return list(self.api("GET", "/importErrors")["import_errors"])

    def wait_for_dag(self, dag_id: str, timeout: float = 120.0) -> dict[str, Any]:
        """Wait until the DAG processor parsed and stored ``dag_id``; fail at once on an import error."""

        def parsed() -> dict[str, Any] | None:
            self.check()
            errors = self.import_errors()
            assert not errors, f"import errors in the DAGs folder: {errors}"
            return self.dag(dag_id)

        dag = wait_until(parsed, timeout=timeout, interval=0.5, what=f"DAG {dag_id} to be parsed")
        assert dag is not None
        return dag

    def unpause(self, dag_id: str) -> None:
        self.api("PATCH", f"/dags/{quote(dag_id)}", json={"is_paused": False})

    def trigger(self, dag_id: str, conf: Mapping[str, Any] | None = None, run_id: str | None = None) -> str:
        """Trigger a run (``logical_date`` null, as a manual trigger); return its run id."""
        body: dict[str, Any] = {"logical_date": None, "conf": dict(conf or {})}
        if run_id is not None:
            body["dag_run_id"] = run_id
        return str(self.api("POST", f"/dags/{quote(dag_id)}/dagRuns", json=body)["dag_run_id"])

    def dag_runs(self, dag_id: str) -> list[dict[str, Any]]:
        """The DAG's runs (up to 100), the newest first."""
        page = self.api("GET", f"/dags/{quote(dag_id)}/dagRuns", params={"limit": 100, "order_by": "-run_after"})
        return list(page["dag_runs"])

    def dag_run(self, dag_id: str, run_id: str) -> dict[str, Any]:
        return dict(self.api("GET", f"/dags/{quote(dag_id)}/dagRuns/{quote(run_id)}"))

    def task_instances(self, dag_id: str, run_id: str) -> list[dict[str, Any]]:
        """Every task instance of the run (each map index its own), all pages."""
        out: list[dict[str, Any]] = []
        while True:
            page = self.api("GET", f"/dags/{quote(dag_id)}/dagRuns/{quote(run_id)}/taskInstances",
                            params={"limit": 100, "offset": len(out)})  # fmt: skip
            out.extend(page["task_instances"])
            if not page["task_instances"] or len(out) >= page["total_entries"]:
                return out

    def task_instance(self, dag_id: str, run_id: str, task_id: str) -> dict[str, Any] | None:
        """The task instance as it is now (its current try), ``None`` while it does not exist."""
        path = f"/dags/{quote(dag_id)}/dagRuns/{quote(run_id)}/taskInstances/{quote(task_id)}"
        answer = self.api("GET", path, expect=(200, 404))
        return dict(answer) if answer and "task_id" in answer else None

    def tries(self, dag_id: str, run_id: str, task_id: str, map_index: int = -1) -> list[dict[str, Any]]:
        """Every try of one task instance, the first first (each with its state and hostname);
        none while the task instance does not exist."""
        path = f"/dags/{quote(dag_id)}/dagRuns/{quote(run_id)}/taskInstances/{quote(task_id)}"
        if map_index >= 0:
            path += f"/{map_index}"
        answer = self.api("GET", f"{path}/tries", expect=(200, 404))
        tries = list(answer.get("task_instances", ())) if answer else []
        return sorted(tries, key=lambda t: int(t["try_number"]))

    def wait_run(self, dag_id: str, run_id: str, timeout: float = 300.0,
                 states: Iterable[str] = ("success", "failed")) -> str:  # fmt: skip
        """Wait until the run is in one of ``states``; return that state."""

        def done() -> str | None:
            self.check()
            state = str(self.dag_run(dag_id, run_id)["state"])
            return state if state in tuple(states) else None

        state = wait_until(done, timeout=timeout, interval=0.5, what=f"run {run_id} of {dag_id} to end")
        assert state is not None
        return state


class Topology(_Server):
    """PostgreSQL, Redis (or Valkey) and :class:`Airflow` on them, started as fast as the
    machine allows: the two servers side by side, then the migration, then every Airflow
    component at once. ``start_seconds`` is how long it took until all were healthy.

    Keyword arguments go to :class:`Airflow` (``dags_folder``, ``workers``, ``queues``,
    ``concurrency``, ``env``, ``airflow``).
    """

    def __init__(self, base: Path, **airflow: Any) -> None:
        base.mkdir(parents=True, exist_ok=True)
        self.base = base
        self.db = PostgresServer(base)
        self.broker = RedisServer(base)
        self.airflow = Airflow(base, db=self.db, broker=self.broker, **airflow)
        self.start_seconds: float | None = None
        #: seconds of each phase of starting: ``servers``, ``migrate``, ``components``
        self.timings: dict[str, float] = {}
        self._began = 0.0

    def start(self) -> None:
        """The servers, then Airflow's migration and components (:meth:`wait_ready` waits for them)."""
        self._began = time.monotonic()
        self.broker.start()
        self.db.start()
        self.broker.wait_ready()
        self.db.wait_ready()
        self.timings["servers"] = time.monotonic() - self._began
        self.airflow.start()
        self.timings["migrate"] = time.monotonic() - self._began - self.timings["servers"]

    def wait_ready(self, timeout: float = 300.0) -> None:
        self.airflow.wait_healthy(timeout)
        self.start_seconds = time.monotonic() - self._began
        self.timings["components"] = self.start_seconds - self.timings["servers"] - self.timings["migrate"]

    def stop(self) -> None:
        """Airflow first (its components still talk to both servers), then the servers."""
        try:
            self.airflow.stop()
        finally:
            self.broker.stop()
            self.db.stop()

    def logs(self) -> dict[str, Path]:
        """Every component's log by name (``postgres``, ``redis`` and :meth:`Airflow.logs`)."""
        return {"postgres": self.db.log, "redis": self.broker.log, **self.airflow.logs()}

    def leftovers(self) -> dict[str, list[int]]:
        """The processes still alive in each started component's process group (none once stopped)."""
        servers = [c for c in (self.db.server, self.broker.server) if c is not None]
        started = [c for c in (*servers, *self.airflow.components.values()) if c.proc is not None]
        return {c.name: pids for c in started if (pids := group_members(c.pid))}

    def describe(self) -> str:
        return self.airflow.describe()
