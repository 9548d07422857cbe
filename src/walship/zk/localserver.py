"""A local, single-node ZooKeeper server from Debian's ``zookeeper`` package, for the demo
and the tests: bound to a loopback address, its data and log in a directory of ours, stopped
by its pid.

Example::

    server = LocalZooKeeper(Path(".zk"), port=2181)
    server.start()
    ...
    server.stop()
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from walship.errors import ZooKeeperServerError

__all__ = ["DEFAULT_JAR", "LocalZooKeeper", "ZooKeeperKerberos", "ZooKeeperServerError", "free_port"]

log = logging.getLogger(__name__)

DEFAULT_JAR = "/usr/share/java/zookeeper.jar"
_PID_FILE = "zookeeper.pid"


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nobody listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def four_letter_word(host: str, port: int, word: str = "ruok", timeout: float = 1.0) -> str:
    """Send a ZooKeeper four-letter command; return the answer ('' when nobody answers)."""
    try:
        with socket.create_connection((host, port), timeout=timeout) as s:
            s.sendall(word.encode())
            s.shutdown(socket.SHUT_WR)
            chunks = []
            while chunk := s.recv(4096):
                chunks.append(chunk)
            return b"".join(chunks).decode(errors="replace")
    except OSError:
        return ""


@dataclass(frozen=True)
class ZooKeeperKerberos:
    """The server side of SASL GSSAPI (Kerberos) logins to a :class:`LocalZooKeeper`.

    :param principal: the server's principal (``zookeeper/localhost@EXAMPLE.COM``). A client asks
        its KDC for ``zookeeper/<host as it names the server>`` and Java's acceptor takes tickets
        for this one principal only, so clients must name the server by its host (:attr:`host`;
        Java clients canonicalize ``127.0.0.1`` to ``localhost``, kazoo does not).
    :param keytab: holds the principal's key.
    :param krb5_conf: the Kerberos client configuration naming the realm's KDC.
    """

    principal: str
    keytab: Path
    krb5_conf: Path

    @property
    def host(self) -> str:
        """The host part of :attr:`principal` (``localhost``)."""
        return self.principal.split("@", 1)[0].partition("/")[2] or "localhost"


class LocalZooKeeper:
    """One ZooKeeper server process.

    :param data_dir: holds ``zoo.cfg``, the snapshots, ``zookeeper.log`` and the pid file.
    :param port: client port on ``host``.
    :param sasl_users: SASL DIGEST-MD5 users (name -> password).
    :param kerberos: SASL GSSAPI logins: the server's principal and keytab. A client's
        authenticated id is its principal's first part (``hbase/localhost@EXAMPLE.COM`` and
        ``hbase@EXAMPLE.COM`` are both ``sasl:hbase``), as a secure HBase expects.
    """

    def __init__(
        self,
        data_dir: Path,
        port: int,
        *,
        host: str = "127.0.0.1",
        jar: str | None = None,
        java: str | None = None,
        sasl_users: Mapping[str, str] | None = None,
        kerberos: ZooKeeperKerberos | None = None,
    ) -> None:
        self.data_dir = Path(data_dir).resolve()
        self.port = port
        self.host = host
        self.jar = jar or os.environ.get("WALSHIP_ZOOKEEPER_JAR", DEFAULT_JAR)
        self.java = java or shutil.which("java") or "java"
        self.sasl_users = dict(sasl_users or {})
        self.kerberos = kerberos
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def hosts(self) -> str:
        """The connect string, ``host:port``; with :attr:`kerberos`, the host is the one of the
        server's principal (``localhost:port``), the name Kerberos clients must use."""
        return f"{self.kerberos.host if self.kerberos else self.host}:{self.port}"

    @property
    def pid_file(self) -> Path:
        return self.data_dir / _PID_FILE

    def _write_config(self) -> Path:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        cfg = self.data_dir / "zoo.cfg"
        cfg.write_text(
            "\n".join(
                [
                    "tickTime=500",
                    f"dataDir={self.data_dir / 'data'}",
                    f"clientPort={self.port}",
                    f"clientPortAddress={self.host}",
                    "admin.enableServer=false",
                    "minSessionTimeout=1000",
                    "maxSessionTimeout=60000",
                    "maxClientCnxns=0",
                    "4lw.commands.whitelist=ruok,srvr,stat,mntr",
                    *(
                        ["authProvider.1=org.apache.zookeeper.server.auth.SASLAuthenticationProvider"]
                        if self.sasl_users or self.kerberos
                        else []
                    ),
                    *(
                        ["kerberos.removeHostFromPrincipal=true", "kerberos.removeRealmFromPrincipal=true"]
                        if self.kerberos
                        else []
                    ),
                    "",
                ]
            )
        )
        return cfg

    def _jaas(self) -> list[str]:
        """JVM flags for SASL DIGEST-MD5 logins of :attr:`sasl_users` and Kerberos logins
        (:attr:`kerberos`); none without either."""
        if not self.sasl_users and not self.kerberos:
            return []
        jaas = self.data_dir / "jaas.conf"
        modules = []
        if self.sasl_users:
            users = " ".join(f'user_{name}="{password}"' for name, password in self.sasl_users.items())
            modules.append(f"  org.apache.zookeeper.server.auth.DigestLoginModule required {users};")
        flags = []
        if self.kerberos:
            k = self.kerberos
            modules.append(
                "  com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true storeKey=true"
                f' useTicketCache=false isInitiator=false keyTab="{k.keytab}" principal="{k.principal}";'
            )
            flags = [f"-Djava.security.krb5.conf={k.krb5_conf}", "-Dsun.security.krb5.debug=false"]
        jaas.write_text("Server {\n" + "\n".join(modules) + "\n};\n")
        jaas.chmod(0o600)
        return [f"-Djava.security.auth.login.config={jaas}", *flags]

    def is_running(self) -> bool:
        return four_letter_word(self.host, self.port) == "imok"

    def start(self, *, timeout: float = 60.0) -> None:
        """Start the server and wait until it answers ``ruok``.

        :raises ZooKeeperServerError: no jar, no Java, the port is taken, or no answer in time.
        """
        if not Path(self.jar).is_file():
            raise ZooKeeperServerError(
                f"ZooKeeper jar {self.jar} not found: install Debian's zookeeper package (make setup)"
            )
        if self.is_running():
            raise ZooKeeperServerError(f"something already answers on {self.hosts}")
        cfg = self._write_config()
        log_path = self.data_dir / "zookeeper.log"
        with open(log_path, "ab") as log_file:
            self._proc = subprocess.Popen(
                [
                    self.java,
                    "-Xmx256m",
                    f"-Dzookeeper.log.dir={self.data_dir}",
                    *self._jaas(),
                    "-cp",
                    self.jar,
                    "org.apache.zookeeper.server.ZooKeeperServerMain",
                    str(cfg),
                ],
                stdout=log_file,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        self.pid_file.write_text(str(self._proc.pid))
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.is_running():
                log.info("ZooKeeper %s up (pid %d, data %s)", self.hosts, self._proc.pid, self.data_dir)
                return
            if self._proc.poll() is not None:
                tail = log_path.read_text(errors="replace")[-2000:]
                raise ZooKeeperServerError(f"ZooKeeper on {self.hosts} exited with {self._proc.returncode}: {tail}")
            time.sleep(0.1)
        self.stop()
        raise ZooKeeperServerError(f"ZooKeeper on {self.hosts} did not answer within {timeout:g} s")

    def stop(self, *, timeout: float = 15.0) -> bool:
        """Stop the server by its pid (ours, or the one in the pid file); True if one ran."""
        pid = self._proc.pid if self._proc else None
        if pid is None and self.pid_file.exists():
            with contextlib.suppress(ValueError):
                pid = int(self.pid_file.read_text().strip())
        if pid is None:
            return False
        stopped = _terminate(pid, timeout)
        if self._proc is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._proc.wait(timeout=1)
            self._proc = None
        self.pid_file.unlink(missing_ok=True)
        return stopped


def _terminate(pid: int, timeout: float) -> bool:
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return False
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)
        time.sleep(0.05)
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    return True
