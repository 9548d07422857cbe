"""Run ``walship minicluster start`` as a child process (demo, tests, benchmarks)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import IO, Any

from walship.childproc import wait_or_kill
from walship.errors import MiniClusterError
from walship_testing.ports import steady_port

__all__ = ["MiniClusterProcess"]


def _last_error(log_file: Path) -> str | None:
    """The last ``walship: ...`` error line the child wrote to its log, if any."""
    try:
        lines = log_file.read_text(errors="replace").splitlines()
    except OSError:
        return None
    for line in reversed(lines[-50:]):
        if line.startswith("walship: "):
            return line.removeprefix("walship: ")
    return None


class MiniClusterProcess:
    """A minicluster in its own process; :meth:`start` returns once it serves.

    Example::

        with MiniClusterProcess("A", data_dir, zk="127.0.0.1:2181", znode_parent="/hbase-a") as a:
            happybase.Connection(*a.thrift)
    """

    def __init__(
        self,
        name: str,
        data_dir: Path,
        *,
        zk: str,
        znode_parent: str,
        regionservers: int = 3,
        wal_roll_size: int | None = None,
        thrift_port: int = 0,
        admin_port: int = 0,
        thrift2_port: int | None = 0,
        master_port: int = 0,
        thrift_transport: str | None = None,
        thrift_protocol: str | None = None,
        thrift_ssl_cert: str | Path | None = None,
        thrift_ssl_key: str | Path | None = None,
        roll_order: str | None = None,
        wal_groups: int = 0,
        wal_checksums: bool = False,
        wal_compression: bool = False,
        wal_tag_compression: bool = False,
        wal_value_compression: str | None = None,
        queue_claims: str = "master",
        claim_delay: float = 0.0,
    ) -> None:
        """Ports given as 0 are picked free when the cluster first starts, below the kernel's
        ephemeral range (:func:`~walship_testing.ports.steady_port`), and kept: a restart, or a
        Thrift server stopped and started again, finds them free, not taken by some client's
        connection meanwhile.

        :param thrift2_port: serve Thrift2 (``THBaseService``) on this port (0: a free
            one, the default; ``None``: no Thrift2 server).
        :param master_port: serve the master's RPC (HBase's ``MasterService``) on this port
            (0: a free one, the default); it registers in ``<parent>/master``.
        :param thrift_transport: ``buffered`` or ``framed``: the only transport the Thrift
            ports accept (default: both).
        :param thrift_protocol: ``binary`` or ``compact``: the only protocol it accepts
            (default: both).
        :param thrift_ssl_cert: serve TLS on the Thrift port with this certificate (PEM).
        :param thrift_ssl_key: the certificate's private key (PEM).
        :param wal_groups: multiwal with this many WAL groups per region server (0: one WAL).
        :param wal_checksums: Hadoop's ``.<name>.crc`` beside each closed WAL.
        :param wal_compression: compressed WALs (``--wal-compression``); with it
            ``wal_tag_compression`` and ``wal_value_compression`` (a type such as ``gz``).
        :param queue_claims: who claims a crashed server's queues: ``master`` (HBase 2.5+'s,
            after ``claim_delay`` seconds) or ``walship`` (see
            :mod:`walship_testing.minicluster.queueclaims`).
        """
        self.name = name
        self.data_dir = Path(data_dir)
        self.zk = zk
        self.znode_parent = znode_parent
        self.regionservers = regionservers
        self.wal_roll_size = wal_roll_size
        self.roll_order = roll_order
        self.wal_groups = wal_groups
        self.wal_checksums = wal_checksums
        self.wal_compression = wal_compression
        self.wal_tag_compression = wal_tag_compression
        self.wal_value_compression = wal_value_compression
        self.queue_claims = queue_claims
        self.claim_delay = claim_delay
        self.thrift_port = thrift_port
        self.admin_port = admin_port
        self.thrift2_port = thrift2_port
        self.master_port = master_port
        self.thrift_transport = thrift_transport
        self.thrift_protocol = thrift_protocol
        self.thrift_ssl_cert = thrift_ssl_cert
        self.thrift_ssl_key = thrift_ssl_key
        self.proc: subprocess.Popen[str] | None = None
        self.ready: dict[str, Any] = {}
        self._log: IO[str] | None = None

    @property
    def thrift(self) -> tuple[str, int]:
        host, port = self.ready["thrift"].rsplit(":", 1)
        return host, int(port)

    @property
    def thrift2(self) -> tuple[str, int]:
        """The Thrift2 server's host and port.

        :raises MiniClusterError: the cluster serves no Thrift2 (started with ``thrift2_port=None``).
        """
        address = self.ready.get("thrift2")
        if not address:
            raise MiniClusterError(f"minicluster {self.name} serves no Thrift2 (started with thrift2_port=None)")
        host, port = str(address).rsplit(":", 1)
        return host, int(port)

    @property
    def wal_root(self) -> str:
        """Where walship reads this cluster's WALs (its data dir holds ``WALs/`` and ``oldWALs/``)."""
        return str(self.data_dir)

    @property
    def admin(self) -> str:
        return str(self.ready["admin"])

    @property
    def master(self) -> str:
        """The master's RPC address, ``host:port`` (what ``<parent>/master`` names)."""
        return str(self.ready["master"])

    @property
    def cluster_id(self) -> str:
        return str(self.ready["cluster_id"])

    def start(self, timeout: float = 60.0) -> MiniClusterProcess:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        for port in ("thrift_port", "thrift2_port", "admin_port", "master_port"):
            if getattr(self, port) == 0:
                setattr(self, port, steady_port())
        cmd = [
            sys.executable, "-m", "walship.cli", "minicluster", "start",
            "--name", self.name, "--data-dir", str(self.data_dir), "--zk", self.zk,
            "--znode-parent", self.znode_parent, "--thrift-port", str(self.thrift_port),
            "--admin-port", str(self.admin_port), "--regionservers", str(self.regionservers),
            "--master-port", str(self.master_port),
        ]  # fmt: skip
        if self.thrift2_port is not None:
            cmd += ["--thrift2-port", str(self.thrift2_port)]
        if self.wal_roll_size:
            cmd += ["--wal-roll-size", str(self.wal_roll_size)]
        if self.roll_order:
            cmd += ["--roll-order", self.roll_order]
        if self.wal_groups:
            cmd += ["--wal-groups", str(self.wal_groups)]
        if self.wal_checksums:
            cmd += ["--wal-checksums"]
        if self.wal_compression:
            cmd += ["--wal-compression"]
        if self.wal_tag_compression:
            cmd += ["--wal-tag-compression"]
        if self.wal_value_compression:
            cmd += ["--wal-value-compression", self.wal_value_compression]
        if self.queue_claims != "master" or self.claim_delay:
            cmd += ["--queue-claims", self.queue_claims, "--claim-delay", str(self.claim_delay)]
        if self.thrift_transport:
            cmd += ["--thrift-transport", self.thrift_transport]
        if self.thrift_protocol:
            cmd += ["--thrift-protocol", self.thrift_protocol]
        if self.thrift_ssl_cert:
            cmd += ["--thrift-ssl-cert", str(self.thrift_ssl_cert)]
        if self.thrift_ssl_key:
            cmd += ["--thrift-ssl-key", str(self.thrift_ssl_key)]
        self._log = open(self.data_dir.parent / f"{self.name}.minicluster.log", "a")  # noqa: SIM115
        self.proc = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=self._log, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"}
        )
        line: list[str] = []
        reader = threading.Thread(
            target=lambda: line.append(self.proc.stdout.readline() if self.proc and self.proc.stdout else "")
        )
        reader.start()
        reader.join(timeout)
        if not line or not line[0].strip():
            log_name = self._log.name
            self.kill()
            reason = _last_error(Path(log_name))
            raise MiniClusterError(
                f"minicluster {self.name} did not start{': ' + reason if reason else ''}; see {log_name}"
            )
        self.ready = json.loads(line[0])
        # the new ports are fixed from now on: a restart on this data dir reuses them
        self.thrift_port = self.thrift[1]
        if self.thrift2_port is not None:
            self.thrift2_port = self.thrift2[1]
        self.admin_port = int(self.admin.rsplit(":", 1)[1])
        self.master_port = int(self.master.rsplit(":", 1)[1])
        return self

    def stop(self, timeout: float = 60.0) -> int:
        """SIGTERM and wait: a clean shutdown. Returns the exit code."""
        if self.proc is None:
            return 0
        self.proc.send_signal(signal.SIGTERM)
        code = wait_or_kill(self.proc, timeout)
        self._close()
        return code

    def kill(self) -> None:
        """SIGKILL: a crash."""
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
        self._close()

    def _close(self) -> None:
        if self.proc is not None and self.proc.stdout is not None:
            self.proc.stdout.close()
        self.proc = None
        if self._log is not None:
            self._log.close()
            self._log = None

    def __enter__(self) -> MiniClusterProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
