"""A throw-away MIT Kerberos KDC (Debian's ``krb5-kdc``) for tests: its database, ``kdc.conf``
and a client ``krb5.conf`` in a directory of ours, listening on a free TCP port of 127.0.0.1.

The system's ``/etc/krb5.conf`` is never read or written: the KDC's tools run with
``KRB5_CONFIG`` and ``KRB5_KDC_PROFILE`` naming our files, and clients are pointed at
:attr:`MitKdc.krb5_conf` (``KRB5_CONFIG`` for Python, ``-Djava.security.krb5.conf`` for Java).

Example::

    with MitKdc(tmp / "kdc") as kdc:
        keytab = kdc.add_principal("walship")
        kdc.add_principal("hbase/localhost", tmp / "hbase.keytab")
        env = {**os.environ, **kdc.client_env(keytab)}
"""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
import socket
import subprocess
import time
from pathlib import Path

from walship.childproc import terminate
from walship.errors import HarnessError

__all__ = ["MitKdc"]

log = logging.getLogger(__name__)

KRB5KDC = "/usr/sbin/krb5kdc"
KDB5_UTIL = "/usr/sbin/kdb5_util"
KADMIN_LOCAL = "/usr/sbin/kadmin.local"
#: Encryption types every client here speaks (MIT's libkrb5, Java 17's JGSS).
ENCTYPES = "aes256-cts-hmac-sha1-96:normal aes128-cts-hmac-sha1-96:normal"


def _free_tcp_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class MitKdc:
    """One MIT KDC process for one realm.

    :param base_dir: holds the database, the stash, ``kdc.conf``, ``krb5.conf``, the keytabs
        :meth:`add_principal` writes by default and ``kdc.log``.
    """

    def __init__(self, base_dir: Path, realm: str = "EXAMPLE.COM") -> None:
        self.base_dir = Path(base_dir).resolve()
        self._realm = realm
        self._port = 0
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def realm(self) -> str:
        return self._realm

    @property
    def port(self) -> int:
        """The KDC's TCP port on 127.0.0.1 (0 before :meth:`start`)."""
        return self._port

    @property
    def krb5_conf(self) -> Path:
        """The client configuration: this realm, its KDC over TCP, no DNS."""
        return self.base_dir / "krb5.conf"

    @property
    def kdc_conf(self) -> Path:
        return self.base_dir / "kdc.conf"

    @property
    def log_file(self) -> Path:
        return self.base_dir / "kdc.log"

    def env(self) -> dict[str, str]:
        """The environment for the KDC's tools (and any MIT client): our two configuration files."""
        return {**os.environ, "KRB5_CONFIG": str(self.krb5_conf), "KRB5_KDC_PROFILE": str(self.kdc_conf)}

    def client_env(self, keytab: Path) -> dict[str, str]:
        """Variables that let an MIT/GSSAPI client log in from ``keytab`` without kinit
        (credentials in a per-process memory cache)."""
        return {
            "KRB5_CONFIG": str(self.krb5_conf),
            "KRB5_CLIENT_KTNAME": str(keytab),
            "KRB5CCNAME": f"MEMORY:walship-{secrets.token_hex(4)}",
        }

    # -- configuration ----------------------------------------------------------------------

    def _write_config(self) -> None:
        b = self.base_dir
        self.kdc_conf.write_text(
            f"""[kdcdefaults]
 kdc_listen = 127.0.0.1:{self._port}
 kdc_tcp_listen = 127.0.0.1:{self._port}

[realms]
 {self._realm} = {{
  database_name = {b / "principal"}
  key_stash_file = {b / "stash"}
  acl_file = {b / "kadm5.acl"}
  admin_keytab = FILE:{b / "kadm5.keytab"}
  kdc_listen = 127.0.0.1:{self._port}
  kdc_tcp_listen = 127.0.0.1:{self._port}
  max_life = 1d
  max_renewable_life = 7d
  master_key_type = aes256-cts-hmac-sha1-96
  supported_enctypes = {ENCTYPES}
 }}

[logging]
 kdc = FILE:{self.log_file}
 admin_server = FILE:{b / "kadmin.log"}
"""
        )
        (b / "kadm5.acl").write_text(f"*/admin@{self._realm} *\n")
        self.krb5_conf.write_text(
            f"""[libdefaults]
 default_realm = {self._realm}
 dns_lookup_kdc = false
 dns_lookup_realm = false
 dns_canonicalize_hostname = false
 rdns = false
 ignore_acceptor_hostname = true
 udp_preference_limit = 1
 forwardable = true
 renew_lifetime = 7d
 ticket_lifetime = 24h
 default_tkt_enctypes = aes256-cts-hmac-sha1-96 aes128-cts-hmac-sha1-96
 default_tgs_enctypes = aes256-cts-hmac-sha1-96 aes128-cts-hmac-sha1-96
 permitted_enctypes = aes256-cts-hmac-sha1-96 aes128-cts-hmac-sha1-96

[realms]
 {self._realm} = {{
  kdc = 127.0.0.1:{self._port}
  admin_server = 127.0.0.1:{self._port}
 }}

[domain_realm]
 localhost = {self._realm}
 .localdomain = {self._realm}
"""
        )

    def _run(self, *cmd: str, stdin: str | None = None) -> str:
        try:
            done = subprocess.run(
                cmd, input=stdin, capture_output=True, text=True, env=self.env(), timeout=60, check=False
            )
        except (OSError, subprocess.TimeoutExpired) as e:
            raise HarnessError(f"KDC command {' '.join(cmd)} failed: {e}") from e
        # kadmin.local reports most failures on stderr with exit status 0
        if done.returncode != 0 or "error" in done.stderr.lower() or "not found" in done.stderr.lower():
            raise HarnessError(
                f"KDC command {' '.join(cmd)} failed ({done.returncode}): {done.stderr.strip()}; see {self.log_file}"
            )
        return done.stdout

    def _kadmin(self, query: str) -> str:
        return self._run(KADMIN_LOCAL, "-r", self._realm, "-q", query)

    # -- life cycle ---------------------------------------------------------------------------

    def start(self, timeout: float = 30.0) -> MitKdc:
        """Create the realm's database (a fresh one) and start the KDC; returns once it answers on its port.

        :raises HarnessError: the KDC's programs are missing, a command failed, or it did not answer.
        """
        for tool in (KRB5KDC, KDB5_UTIL, KADMIN_LOCAL):
            if not Path(tool).is_file():
                raise HarnessError(f"{tool} not found: install krb5-kdc and krb5-admin-server (make setup)")
        self.base_dir.mkdir(parents=True, exist_ok=True)
        for old in [*self.base_dir.glob("principal*"), *self.base_dir.glob("*.keytab"), self.base_dir / "stash"]:
            old.unlink(missing_ok=True)  # a fresh realm (and keytabs) on every start
        self._port = _free_tcp_port()
        self._write_config()
        self._run(KDB5_UTIL, "create", "-s", "-r", self._realm, "-P", secrets.token_hex(16))
        with open(self.log_file, "ab") as out:
            self._proc = subprocess.Popen(
                [KRB5KDC, "-n", "-r", self._realm],
                env=self.env(),
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        deadline = time.monotonic() + timeout
        while not self._answers():
            if self._proc.poll() is not None:
                raise HarnessError(
                    f"{KRB5KDC} -n exited with {self._proc.returncode} on port {self._port}; see {self.log_file}"
                )
            if time.monotonic() > deadline:
                self.stop()
                raise HarnessError(f"{KRB5KDC} did not answer on 127.0.0.1:{self._port} within {timeout:g} s")
            time.sleep(0.05)
        log.info("KDC for %s on 127.0.0.1:%d (pid %d)", self._realm, self._port, self._proc.pid)
        return self

    def _answers(self) -> bool:
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", self._port), timeout=1):
            return True
        return False

    def stop(self) -> None:
        """Stop the KDC (its pid only)."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        terminate(proc, timeout=10)

    def __enter__(self) -> MitKdc:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- principals ---------------------------------------------------------------------------

    def add_principal(self, name: str, keytab: Path | None = None, maxlife: str | None = None) -> Path:
        """Create ``name`` (``walship``, ``hbase/localhost``; the realm is added) with a random key
        and export it to ``keytab`` (added to an existing one; default ``<base_dir>/<name>.keytab``).

        :param maxlife: a ticket lifetime for this principal only (``"20 seconds"``), also its
            longest renewable lifetime.
        :returns: the keytab.
        """
        principal = self._qualify(name)
        limits = f' -maxlife "{maxlife}" -maxrenewlife "{maxlife}"' if maxlife else ""
        self._kadmin(f"addprinc -randkey{limits} {principal}")
        path = Path(keytab) if keytab else self.base_dir / (name.replace("/", "_") + ".keytab")
        self._kadmin(f"ktadd -k {path} -norandkey {principal}")
        path.chmod(0o600)
        return path

    def delete_principal(self, name: str) -> None:
        """Remove ``name`` from the realm (its keytabs stay: a principal the KDC no longer knows)."""
        self._kadmin(f"delprinc -force {self._qualify(name)}")

    def _qualify(self, name: str) -> str:
        return name if "@" in name else f"{name}@{self._realm}"
