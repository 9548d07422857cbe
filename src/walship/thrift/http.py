"""Thrift over HTTP, as HBase's Thrift servers speak it with ``hbase.regionserver.thrift.http``:
each call is one ``POST`` (``Content-Type: application/x-thrift``, the binary protocol) and its
answer the response's body. With walship logged in to Kerberos every request carries
``Authorization: Negotiate`` (SPNEGO, as the server's ``ThriftHttpServlet`` asks of each
request), a token of :func:`walship.security.sasl.spnego_auth`'s for the server's HTTP principal.

thriftpy2's own ``thriftpy2.http.THttpClient`` (http.client, no authentication hook beyond
fixed headers, no TLS settings beyond a context factory) is not used: requests carries the
connections (kept alive), TLS and the SPNEGO exchange.
"""

from __future__ import annotations

import logging
import re
import ssl
from typing import Any

import requests
from requests.adapters import HTTPAdapter
from thriftpy2.transport import TTransportException

from walship.errors import SaslAuthError
from walship.security.kerberos import KerberosIdentity, server_name
from walship.thrift.options import (
    ENV_SOURCE_HTTP,
    THRIFT_HTTP_KEY,
    THRIFT_QOP_KEY,
    THRIFT_SPNEGO_PRINCIPAL_KEY,
    ThriftOptions,
)
from walship.thrift.probe import answers_thrift, sasl_refusal
from walship.thrift.sasl import Reopen, SecurityMismatchError

__all__ = ["HttpTransport"]

log = logging.getLogger(__name__)

CONTENT_TYPE = "application/x-thrift"
#: urllib3 names its connection objects in its messages
_OBJECT_REPR = re.compile(r"<[^>]*object at 0x[0-9a-fA-F]+>:\s*")


class _TlsAdapter(HTTPAdapter):
    """HTTPS with a CA file of one's own and, when asked, no check of the certificate's host."""

    def __init__(self, context: ssl.SSLContext, check_host: bool) -> None:
        self._context = context
        self._check_host = check_host
        super().__init__()

    def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
        kwargs["ssl_context"] = self._context
        if not self._check_host:
            kwargs["assert_hostname"] = False
        super().init_poolmanager(*args, **kwargs)


class HttpTransport:
    """thriftpy2's transport interface over HTTP ``POST`` to ``host:port``: what is written
    until a flush is one request, whose response body the reads then take.

    :param identity: who to authenticate as with SPNEGO (``None``: no ``Authorization``).
    :param reopen: a socket to the server, to ask what it speaks when a request gets no HTTP
        answer (:mod:`walship.thrift.probe`).
    :raises ConfigError: the SPNEGO principal is not one.
    """

    def __init__(
        self,
        host: str,
        port: int,
        options: ThriftOptions,
        timeout_ms: int,
        identity: KerberosIdentity | None,
        reopen: Reopen | None = None,
    ) -> None:
        self.host = host
        self._reopen = reopen
        self._protocol = options.protocol
        self.server = f"{host}:{port}"
        self.url = f"{'https' if options.ssl else 'http'}://{host}:{port}/"
        self.identity = identity
        self.target = "/".join(server_name(options.spnego_principal, host))
        self._timeout = timeout_ms / 1000 if timeout_ms else None
        self._session: requests.Session | None = requests.Session()
        self._session.headers.update({"Content-Type": CONTENT_TYPE, "Accept": CONTENT_TYPE})
        if options.ssl:
            context = ssl.create_default_context(cafile=options.ca)
            context.check_hostname = options.verify
            self._session.mount("https://", _TlsAdapter(context, options.verify))
        self._auth: Any = None
        if identity is not None:
            from walship.security.sasl import spnego_auth  # gssapi loads libkrb5: only with Kerberos

            self._auth = spnego_auth(identity, options.spnego_principal, host)
        self._wbuf = bytearray()
        self._rbuf = b""
        self._rpos = 0

    def describe_auth(self) -> str:
        return f"SPNEGO as {self.identity.principal} to {self.target}" if self.identity else "no authentication"

    # -- thriftpy2's transport ---------------------------------------------------------------

    def is_open(self) -> bool:
        return self._session is not None

    def open(self) -> None:
        if self._session is None:
            raise TTransportException(type=TTransportException.NOT_OPEN, message=f"HTTP to {self.server} is closed")

    def close(self) -> None:
        if self._session is not None:
            self._session.close()
            self._session = None

    def write(self, data: bytes) -> None:
        self._wbuf += data

    def read(self, size: int) -> bytes:
        """Up to ``size`` bytes of the last response (none past its end: end of file)."""
        chunk = self._rbuf[self._rpos : self._rpos + size]
        self._rpos += len(chunk)
        return chunk

    def flush(self) -> None:
        """``POST`` what was written; the response body is what is read next.

        :raises SaslAuthError: the server refused the request's authentication (401, 403), or
            no SPNEGO token could be made for its principal.
        :raises SecurityMismatchError: the server answers what a Thrift HTTP server does not
            (another status than 200 or 5xx, or SASL's refusal of what is not SASL).
        :raises TTransportException: the server cannot be reached, timed out, or failed (5xx).
        """
        if not self._wbuf:
            return
        if self._session is None:
            self.open()
        assert self._session is not None
        data, self._wbuf = bytes(self._wbuf), bytearray()
        headers = {"Authorization": self._token()} if self._auth is not None else {}
        try:
            response = self._session.post(self.url, data=data, headers=headers, timeout=self._timeout)
        except requests.Timeout:
            self._not_http()
            raise TTransportException(
                type=TTransportException.TIMED_OUT,
                message=f"Thrift HTTP server {self.server} did not answer within {self._timeout:g} s",
            ) from None
        except requests.RequestException as exc:
            raise self._unreachable(exc) from None
        self._check(response)
        self._rbuf, self._rpos = response.content, 0

    def _token(self) -> str:
        """A fresh ``Negotiate`` header for the server's principal."""
        from requests_gssapi.exceptions import SPNEGOExchangeError

        try:
            header: str = self._auth.generate_request_header(None, self.host, is_preemptive=True)
        except SPNEGOExchangeError as exc:
            raise SaslAuthError(
                f"SPNEGO as {self._principal()} to {self.target} for Thrift HTTP server {self.server} failed: "
                f"{' '.join(str(exc).split())} (is {self.target} the server's HTTP principal? {THRIFT_SPNEGO_PRINCIPAL_KEY})"
            ) from None
        return header

    def _principal(self) -> str:
        return self.identity.principal if self.identity else "nobody"

    def _check(self, response: requests.Response) -> None:
        status = response.status_code
        if status == 200:
            mutual = self._auth is not None and "negotiate" in response.headers.get("www-authenticate", "").lower()
            if mutual and not self._auth.authenticate_server(response):
                raise SaslAuthError(
                    f"Thrift HTTP server {self.server} did not prove to be {self.target} (SPNEGO mutual "
                    f"authentication as {self._principal()} failed)"
                )
            return
        reason = " ".join((response.reason or "").split())
        if status in (401, 403):
            if self.identity is None:
                raise SaslAuthError(
                    f"Thrift HTTP server {self.server} asks for Kerberos (SPNEGO; HTTP {status} {reason}): log in with "
                    "--principal (and --keytab), or set WALSHIP_PRINCIPAL"
                )
            raise SaslAuthError(
                f"Thrift HTTP server {self.server} refused SPNEGO as {self.identity.principal} to {self.target} "
                f"(HTTP {status} {reason}): is {self.target} the server's HTTP principal "
                f"({THRIFT_SPNEGO_PRINCIPAL_KEY}, hbase.thrift.spnego.principal), and may the principal call it?"
            )
        if status >= 500:
            raise TTransportException(
                type=TTransportException.UNKNOWN,
                message=f"Thrift HTTP server {self.server} failed: HTTP {status} {reason}",
            )
        raise SecurityMismatchError(
            f"{self.server} answered a Thrift call over HTTP with HTTP {status} {reason}: is it a Thrift server in HTTP "
            f"mode (hbase.regionserver.thrift.http, {THRIFT_HTTP_KEY})?"
        )

    def _not_http(self) -> None:
        """:raises SecurityMismatchError: the server answers SASL, or a plain Thrift call."""
        if self._reopen is None:
            return
        if sasl_refusal(self._reopen) is not None:
            raise SecurityMismatchError(
                f"Thrift server {self.server} speaks SASL, not HTTP (it answered SASL negotiation): set "
                f"{THRIFT_QOP_KEY} and remove {THRIFT_HTTP_KEY}"
            )
        if answers_thrift(self._reopen, self._protocol):
            raise SecurityMismatchError(
                f"Thrift server {self.server} speaks Thrift without HTTP (it answered a call on the socket): remove "
                f"{THRIFT_HTTP_KEY} (for the source, {ENV_SOURCE_HTTP})"
            )

    def _unreachable(self, exc: requests.RequestException) -> TTransportException:
        """A request that got no HTTP answer, in one line; a server that speaks SASL or plain
        Thrift instead: :class:`SecurityMismatchError`."""
        text = str(exc)
        if isinstance(exc, requests.ConnectionError) and "refused" not in text.lower():
            try:
                self._not_http()
            except SecurityMismatchError as mismatch:
                return mismatch
        inner = exc.args[0] if exc.args else exc
        why = _OBJECT_REPR.sub("", str(getattr(inner, "reason", inner)))
        hint = (
            ""
            if "refused" in text.lower()
            else f" (is it in HTTP mode? hbase.regionserver.thrift.http, {THRIFT_HTTP_KEY})"
        )
        return TTransportException(
            type=TTransportException.NOT_OPEN,
            message=f"Thrift HTTP server {self.server}: {' '.join(why.split())[:300]}{hint}",
        )
