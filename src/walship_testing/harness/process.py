"""Run one real HBase 2.6 cluster (the Maven project in ``harness/``: HBase's own test cluster
with its Thrift1 and Thrift2 servers) as a child JVM, and send it commands.

The JVM prints one JSON ready line, then answers one JSON line per command line it reads on
stdin. :class:`HBaseProcess` has the shape of
:class:`walship_testing.minicluster.process.MiniClusterProcess` (``start``, ``stop``, ``kill``,
``thrift``, ``thrift2``, ``cluster_id``, ``znode_parent``, ``wal_root``), so a test can run on
either backend.

Example::

    with HBaseProcess("A", data_dir, zk="127.0.0.1:2181", znode_parent="/hbase-a") as a:
        a.call("create_table", table="t", families={"r": {"scope": 1}})
        happybase.Connection(*a.thrift)

With ``secure=SecureHarness(...)`` the cluster runs Kerberized (the launcher's ``--secure``):
HBase's RPC, its ZooKeeper client (its znodes get ``sasl:`` ACLs), HDFS and WebHDFS (SPNEGO),
and its Thrift servers (SASL GSSAPI), plus a Thrift2 server over HTTP behind SPNEGO
(:attr:`HBaseProcess.thrift2_http`). Every service principal is ``<service>/<service_host>``
(the ready line's ``service_host``, ``localhost`` on an ordinary machine).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import queue
import shutil
import subprocess
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from walship.childproc import wait_or_kill
from walship.errors import ConfigError, HarnessError

__all__ = ["COLLECTORS", "HBaseProcess", "SecureHarness", "YarnInfo", "check_collector", "harness_dir", "java_command"]

log = logging.getLogger(__name__)

#: What HBase's ``bin/hbase`` passes a JDK 17 (and what HBase's netty needs).
JDK17_FLAGS = (
    "-Dorg.apache.hbase.thirdparty.io.netty.tryReflectionSetAccessible=true",
    "--add-modules", "jdk.unsupported",
    "--add-opens", "java.base/java.io=ALL-UNNAMED",
    "--add-opens", "java.base/java.nio=ALL-UNNAMED",
    "--add-opens", "java.base/sun.nio.ch=ALL-UNNAMED",
    "--add-opens", "java.base/java.lang=ALL-UNNAMED",
    "--add-opens", "java.base/jdk.internal.ref=ALL-UNNAMED",
    "--add-opens", "java.base/java.lang.reflect=ALL-UNNAMED",
    "--add-opens", "java.base/java.util=ALL-UNNAMED",
    "--add-opens", "java.base/java.util.concurrent=ALL-UNNAMED",
    "--add-exports", "java.base/jdk.internal.misc=ALL-UNNAMED",
    "--add-exports", "java.security.jgss/sun.security.krb5=ALL-UNNAMED",
    "--add-exports", "java.base/sun.net.dns=ALL-UNNAMED",
    "--add-exports", "java.base/sun.net.util=ALL-UNNAMED",
)  # fmt: skip

LAUNCHER = "walship.harness.Launcher"


def harness_dir() -> Path:
    """The harness's Maven project: ``$WALSHIP_HARNESS_DIR``, else ``harness/`` of this checkout."""
    env = os.environ.get("WALSHIP_HARNESS_DIR")
    return Path(env) if env else Path(__file__).resolve().parents[3] / "harness"


#: The garbage collectors a harness JVM may run: ``serial`` (one thread, the heap grown as
#: needed: the smallest footprint, for tests sharing a few cores) or ``parallel`` (the collector
#: on every core, so its pauses, which stop every writer, are shorter, and the heap at its size
#: from the start, as production region servers run theirs).
COLLECTORS: dict[str, str] = {"serial": "-XX:+UseSerialGC", "parallel": "-XX:+UseParallelGC"}


def check_collector(collector: str) -> str:
    """``collector`` if it is one of :data:`COLLECTORS`.

    :raises ConfigError: it is not (the message names them).
    """
    if collector not in COLLECTORS:
        raise ConfigError(f"the harness's collector must be one of {', '.join(COLLECTORS)}, got {collector!r}")
    return collector


def java_command(heap: str = "768m", collector: str = "serial") -> list[str]:
    """The ``java ...`` command line that runs the launcher (without its own arguments), its
    garbage collector one of :data:`COLLECTORS`.

    :raises HarnessError: the harness is not built (``make setup`` builds it) or there is no java.
    :raises ConfigError: no such collector.
    """
    check_collector(collector)
    root = harness_dir()
    classes = root / "target" / "classes"
    classpath_file = root / "target" / "classpath.txt"
    if not (classes / "walship" / "harness" / "Launcher.class").is_file() or not classpath_file.is_file():
        raise HarnessError(f"the real-HBase harness is not built in {root} (run `make setup`)")
    java_home = os.environ.get("JAVA_HOME")
    java = str(Path(java_home) / "bin" / "java") if java_home else shutil.which("java")
    if not java:
        raise HarnessError("no java on PATH (the real-HBase harness needs Java 17)")
    classpath = f"{classes}{os.pathsep}{classpath_file.read_text().strip()}"
    initial = "128m" if collector == "serial" else heap
    return [
        java, f"-Xmx{heap}", f"-Xms{initial}", COLLECTORS[collector], "-Djava.net.preferIPv4Stack=true",
        *JDK17_FLAGS, "-cp", classpath, LAUNCHER,
    ]  # fmt: skip


def _java_home() -> str | None:
    """``JAVA_HOME``, else the home of the ``java`` on ``PATH`` (YARN's containers start their
    JVMs from it)."""
    if os.environ.get("JAVA_HOME"):
        return os.environ["JAVA_HOME"]
    java = shutil.which("java")
    return str(Path(java).resolve().parents[1]) if java else None


def _jvm_env() -> dict[str, str]:
    """The harness JVM's environment, with ``JAVA_HOME`` set."""
    home = _java_home()
    return {**os.environ, "JAVA_HOME": home} if home else dict(os.environ)


@dataclass(frozen=True)
class YarnInfo:
    """The harness's YARN: where its clients' configuration is (``HADOOP_CONF_DIR``), the
    ResourceManager's RPC and web addresses, the file system's URL and the leaf queues."""

    conf_dir: Path
    resourcemanager: str
    webapp: str
    default_fs: str
    queues: tuple[str, ...]

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> YarnInfo:
        return cls(
            conf_dir=Path(data["conf_dir"]),
            resourcemanager=str(data["resourcemanager"]),
            webapp=str(data["webapp"]),
            default_fs=str(data["default_fs"]),
            queues=tuple(data["queues"]),
        )

    def client_env(self) -> dict[str, str]:
        """What a YARN client (spark-submit) needs in its environment."""
        env = {"HADOOP_CONF_DIR": str(self.conf_dir), "YARN_CONF_DIR": str(self.conf_dir)}
        home = _java_home()
        return {**env, "JAVA_HOME": home} if home else env


@dataclass(frozen=True)
class SecureHarness:
    """What a Kerberized harness cluster needs (the launcher's ``--secure`` file).

    :param krb5_conf: the Kerberos client configuration naming the realm's KDC.
    :param realm: the realm (``EXAMPLE.COM``).
    :param keytab: the keys of the service principal (``hbase/<host>``) for every host name
        the JVM may resolve for itself (``localhost``, ``127.0.0.1``, the machine's name), and
        by default of the SPNEGO principal (``HTTP/<host>``) too.
    :param superusers: HBase's extra superusers (``hbase.superuser``: its znodes grant them
        ``sasl:<user>`` ALL; on HDFS they are in the superuser group).
    :param principal: the service principal, ``_HOST`` the service host.
    :param spnego_principal: the SPNEGO principal of the HTTP Thrift server and WebHDFS.
    :param spnego_keytab: its keys (default ``keytab``).
    :param access_control: HBase's AccessController on the master and the region servers, so a
        principal that is not a superuser is refused what it has no grant for.
    """

    krb5_conf: Path
    realm: str
    keytab: Path
    superusers: tuple[str, ...] = ()
    principal: str | None = None
    spnego_principal: str | None = None
    spnego_keytab: Path | None = None
    access_control: bool = True

    def to_json(self) -> dict[str, Any]:
        """The launcher's ``--secure`` file's contents."""
        return {
            "krb5_conf": str(self.krb5_conf),
            "realm": self.realm,
            "keytab": str(self.keytab),
            "principal": self.principal or f"hbase/_HOST@{self.realm}",
            "spnego_principal": self.spnego_principal or f"HTTP/_HOST@{self.realm}",
            "spnego_keytab": str(self.spnego_keytab or self.keytab),
            "superusers": list(self.superusers),
            "access_control": self.access_control,
        }

    def jvm_flags(self) -> list[str]:
        """The JVM's own Kerberos settings (read before the launcher runs)."""
        return [f"-Djava.security.krb5.conf={self.krb5_conf}", "-Dsun.security.krb5.debug=false"]


class HBaseProcess:
    """One real HBase cluster in its own JVM; :meth:`start` returns once it serves.

    :param zk: an external ZooKeeper ``host:port`` (no chroot: HBase's cluster keys have
        none), or ``None`` for a MiniZooKeeperCluster of its own.
    :param wal_fs: ``local`` (``hbase.wal.dir`` is a local directory, read as a path) or
        ``hdfs`` (WALs on a MiniDFSCluster, read over WebHDFS).
    :param conf: any HBase settings, as ``--conf key=value``.
    :param collector: the JVM's garbage collector, one of :data:`COLLECTORS`.
    :param secure: run Kerberized (see :class:`SecureHarness`); ``zk`` is then a ZooKeeper with
        SASL Kerberos, named by the host of its principal (``localhost:port``).
    :param yarn_queues: with ``wal_fs="hdfs"``, also run a YARN (Hadoop's MiniYARNCluster, in
        the same JVM, on the cluster's HDFS) with these leaf queues; see :attr:`yarn`.
    """

    def __init__(
        self,
        name: str,
        data_dir: Path,
        *,
        zk: str | None = None,
        znode_parent: str = "/hbase",
        regionservers: int = 3,
        wal_fs: str = "local",
        conf: dict[str, str] | None = None,
        heap: str = "768m",
        collector: str = "serial",
        secure: SecureHarness | None = None,
        yarn_queues: tuple[str, ...] = (),
    ) -> None:
        if yarn_queues and wal_fs != "hdfs":
            raise ConfigError("the harness's YARN runs on the cluster's HDFS: yarn_queues needs wal_fs='hdfs'")
        self.name = name
        self.data_dir = Path(data_dir)
        self.zk = zk
        self.znode_parent = znode_parent
        self.regionservers = regionservers
        self.wal_fs = wal_fs
        self.conf = dict(conf or {})
        self.heap = heap
        self.collector = check_collector(collector)
        self.secure_config = secure
        self.yarn_queues = tuple(yarn_queues)
        self.proc: subprocess.Popen[str] | None = None
        self.ready: dict[str, Any] = {}
        self._lines: queue.Queue[str | None] = queue.Queue()
        self._lock = threading.Lock()
        self._log: IO[str] | None = None

    # -- the shape of MiniClusterProcess ----------------------------------------------------

    @property
    def thrift(self) -> tuple[str, int]:
        return _address(self.ready["thrift"])

    @property
    def thrift2(self) -> tuple[str, int]:
        return _address(self.ready["thrift2"])

    @property
    def thrift2_http(self) -> tuple[str, int] | None:
        """The Thrift2 server over HTTP behind SPNEGO (secure clusters only, else ``None``)."""
        value = self.ready.get("thrift2_http")
        return _address(value) if value else None

    @property
    def secure(self) -> bool:
        """Whether the running cluster is Kerberized (its ready line says so)."""
        return bool(self.ready.get("secure"))

    @property
    def service_host(self) -> str | None:
        """The host of the cluster's service principals (``hbase/<host>``, ``HTTP/<host>``), secure only."""
        value = self.ready.get("service_host")
        return str(value) if value else None

    @property
    def yarn(self) -> YarnInfo | None:
        """The YARN running beside the cluster (``yarn_queues``), else ``None``."""
        value = self.ready.get("yarn")
        return YarnInfo.from_json(value) if value else None

    @property
    def cluster_id(self) -> str:
        return str(self.ready["cluster_id"])

    @property
    def cluster_key(self) -> str:
        """HBase's cluster key of this cluster (``host:port:/parent``)."""
        return str(self.ready["cluster_key"])

    @property
    def zk_hosts(self) -> str:
        """The ZooKeeper connect string walship uses for this cluster."""
        return str(self.ready["zk"])

    @property
    def wal_root(self) -> str:
        """Where walship reads this cluster's WALs: the folder or URL holding ``WALs/`` and ``oldWALs/``."""
        return str(self.ready["wal_url"])

    @property
    def log_file(self) -> Path:
        return self.data_dir.parent / f"{self.name}.hbase.log"

    def servers(self) -> list[str]:
        """The live region servers' names, asked now."""
        return list(self.call("info")["regionservers"])

    # -- life cycle ---------------------------------------------------------------------------

    def command(self) -> list[str]:
        java = java_command(self.heap, self.collector)
        if self.secure_config is not None:
            java[1:1] = self.secure_config.jvm_flags()
        cmd = [*java, "--name", self.name, "--data-dir", str(self.data_dir)]
        cmd += ["--regionservers", str(self.regionservers), "--znode-parent", self.znode_parent]
        cmd += ["--wal-fs", self.wal_fs]
        if self.zk:
            cmd += ["--zk", self.zk]
        if self.secure_config is not None:
            cmd += ["--secure", str(self.data_dir / "secure.json")]
        if self.yarn_queues:
            cmd += ["--yarn", ",".join(self.yarn_queues)]
        for key, value in self.conf.items():
            cmd += ["--conf", f"{key}={value}"]
        return cmd

    def start(self, timeout: float = 300.0) -> HBaseProcess:
        """Start the JVM and wait for its ready line.

        :raises HarnessError: it exited or did not get ready in time (the message names its log).
        """
        self.data_dir.mkdir(parents=True, exist_ok=True)
        if self.secure_config is not None:
            (self.data_dir / "secure.json").write_text(json.dumps(self.secure_config.to_json(), indent=1))
        cmd = self.command()
        self._log = open(self.log_file, "a")  # noqa: SIM115
        self.proc = subprocess.Popen(
            cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._log, text=True, bufsize=1,
            cwd=self.data_dir, env=_jvm_env(),
        )  # fmt: skip
        threading.Thread(target=self._read, args=(self.proc.stdout,), daemon=True, name=f"hbase-{self.name}").start()
        try:
            first = self._next_line(timeout, "start")
        except HarnessError:
            self.kill()
            raise
        answer = json.loads(first)
        if not answer.get("ready"):
            self.kill()
            raise HarnessError(f"HBase cluster {self.name} did not start: {answer.get('error')}; see {self.log_file}")
        self.ready = answer
        log.info("HBase %s (%s) ready: %s", self.name, answer.get("hbase_version"), answer.get("regionservers"))
        return self

    def _read(self, stream: IO[str] | None) -> None:
        if stream is None:
            return
        for line in stream:
            self._lines.put(line)
        self._lines.put(None)

    def _next_line(self, timeout: float, what: str) -> str:
        try:
            line = self._lines.get(timeout=timeout)
        except queue.Empty:
            raise HarnessError(
                f"HBase cluster {self.name}: no answer to {what} within {timeout:.0f} s; see {self.log_file}"
            ) from None
        if line is None:
            self._lines.put(None)
            raise HarnessError(f"HBase cluster {self.name} exited during {what}; see {self.log_file}")
        return line

    def call(self, cmd: str, timeout: float = 180.0, **args: Any) -> Any:
        """Send one command and return its result.

        :raises HarnessError: HBase refused it (the message is HBase's exception), or the JVM is gone.
        """
        if self.proc is None or self.proc.stdin is None:
            raise HarnessError(f"HBase cluster {self.name} is not running ({cmd})")
        with self._lock:
            try:
                self.proc.stdin.write(json.dumps({"cmd": cmd, **args}) + "\n")
                self.proc.stdin.flush()
            except (BrokenPipeError, ValueError):
                raise HarnessError(f"HBase cluster {self.name} exited before {cmd}; see {self.log_file}") from None
            answer = json.loads(self._next_line(timeout, cmd))
        if not answer.get("ok"):
            raise HarnessError(f"HBase cluster {self.name}: {cmd} failed: {answer.get('error')}")
        return answer.get("result")

    def stop(self, timeout: float = 120.0) -> int:
        """Stop HBase cleanly (the ``stop`` command), killing the JVM if it lingers."""
        if self.proc is None:
            return 0
        try:
            self.call("stop", timeout=timeout)
        except HarnessError as e:
            log.warning("%s", e)
        if self.proc.stdin is not None:
            with contextlib.suppress(BrokenPipeError):  # the JVM is gone: nothing more reaches it
                self.proc.stdin.close()
        code = wait_or_kill(self.proc, timeout)
        self._close()
        return code

    def kill(self) -> None:
        """SIGKILL the whole JVM."""
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
        self._close()

    def _close(self) -> None:
        if self.proc is not None:
            for stream in (self.proc.stdin, self.proc.stdout):
                if stream is not None:
                    with contextlib.suppress(OSError):
                        stream.close()
        self.proc = None
        if self._log is not None:
            self._log.close()
            self._log = None

    def __enter__(self) -> HBaseProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _address(value: object) -> tuple[str, int]:
    host, port = str(value).rsplit(":", 1)
    return host, int(port)
