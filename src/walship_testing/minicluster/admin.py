"""The minicluster's admin endpoint: JSON over loopback HTTP, used by
``walship minicluster set-scope | roll | abort-rs | move | split | merge | info``.

Row keys travel as hex (``row``), so any bytes can."""

from __future__ import annotations

import json
import logging
import threading
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Protocol

from walship.errors import BadRequestError, MiniClusterError, WalshipError
from walship.wal import Cell, CellType
from walship_testing.minicluster.cluster import MiniCluster

__all__ = ["AdminClient", "AdminServer"]

log = logging.getLogger(__name__)


class ThriftControl(Protocol):
    """Starts and stops the cluster's Thrift servers (the runner's ``ThriftServers``)."""

    def start(self, service: str, port: int = 0) -> dict[str, Any]: ...

    def stop(self, address: str) -> dict[str, Any]: ...


class AdminServer:
    """Serves ``GET /info`` and ``POST /set-scope``, ``/roll``, ``/abort-rs``, ``/bulk-load``,
    ``/regions``, ``/move``, ``/split``, ``/merge``, ``/thrift/start``, ``/thrift/stop``."""

    def __init__(self, cluster: MiniCluster, host: str, port: int, *, servers: ThriftControl | None = None) -> None:
        self.cluster = cluster
        self.servers = servers
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                log.debug("admin: " + format, *args)

            def _reply(self, status: int, body: dict[str, Any]) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                if self.path == "/info":
                    self._reply(200, outer.cluster.info())
                else:
                    self._reply(404, {"error": f"no such endpoint {self.path}"})

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                try:
                    body = json.loads(self.rfile.read(length) or b"{}")
                    self._reply(200, outer.dispatch(self.path, body))
                except (MiniClusterError, WalshipError, ValueError, KeyError) as exc:
                    self._reply(400, {"error": str(exc)})

        self.httpd = ThreadingHTTPServer((host, port), Handler)
        self.address = self.httpd.server_address[:2]
        self._thread: threading.Thread | None = None

    def dispatch(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        c = self.cluster
        if path == "/set-scope":
            raw = body["scope"]
            if isinstance(raw, bool) or not isinstance(raw, int | str) or not str(raw).strip().isdigit():
                raise BadRequestError(
                    f"REPLICATION_SCOPE of {body['table']}:{body['family']} must be a number (0 or 1), got {raw!r}"
                )
            scope = int(raw)
            c.set_scope(body["table"].encode(), body["family"].encode(), scope)
            return {"table": body["table"], "family": body["family"], "scope": scope}
        if path == "/roll":
            return {"rolled": c.roll(body.get("server"))}
        if path == "/abort-rs":
            return c.abort_rs(body["server"])
        if path in _REGION_PATHS:
            return _regions(c, path, body)
        if path in ("/thrift/start", "/thrift/stop"):
            if self.servers is None:
                raise BadRequestError("this cluster's Thrift servers cannot be started or stopped here")
            if path == "/thrift/start":
                return self.servers.start(str(body["service"]), int(body.get("port") or 0))
            return self.servers.stop(str(body["address"]))
        if path == "/bulk-load":
            cells = [
                Cell(
                    bytes.fromhex(row), bytes.fromhex(fam), bytes.fromhex(qual), int(ts), CellType.Put, bytes.fromhex(v)
                )
                for fam, row, qual, v, ts in body["cells"]
            ]
            return c.bulk_load(str(body["table"]).encode(), cells)
        raise KeyError(f"no such endpoint {path}")

    def start(self) -> None:
        self._thread = threading.Thread(target=self.httpd.serve_forever, name="admin", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


_REGION_PATHS = ("/regions", "/move", "/split", "/merge")


def _text(body: dict[str, Any], key: str) -> str:
    value = body.get(key)
    if not isinstance(value, str) or not value:
        raise BadRequestError(f"{key!r} must be a non-empty string, got {value!r}")
    return value


def _regions(c: MiniCluster, path: str, body: dict[str, Any]) -> dict[str, Any]:
    """``/regions``, ``/move``, ``/split``, ``/merge`` (see :mod:`walship_testing.minicluster.regions`)."""
    table = _text(body, "table").encode()
    if path == "/regions":
        return {"regions": c.regions(table)}
    if path == "/move":
        to = body.get("to")
        return c.move_region(table, _text(body, "region"), _text(body, "to") if to is not None else None)
    if path == "/split":
        try:
            row = bytes.fromhex(_text(body, "row"))
        except ValueError:
            raise BadRequestError(f"'row' must be hex, got {body.get('row')!r}") from None
        region = body.get("region")
        return c.split_region(table, row, _text(body, "region") if region is not None else None)
    names = body.get("regions")
    if not isinstance(names, list) or not all(isinstance(n, str) and n for n in names):
        raise BadRequestError(f"'regions' must be a list of encoded region names, got {names!r}")
    return c.merge_regions(table, names)


class AdminClient:
    """Talks to a running minicluster's admin endpoint at ``host:port``."""

    def __init__(self, address: str, timeout: float = 30.0) -> None:
        host, sep, port = address.rpartition(":")
        if not sep or not host or len(host) > 253 or not port.isdigit() or not 0 < int(port) < 65536:
            shown = address if len(address) <= 60 else f"{address[:60]}... ({len(address):,} characters)"
            raise MiniClusterError(f"invalid minicluster admin address {shown!r}: expected HOST:PORT")
        self.base = f"http://{address}"
        self.timeout = timeout

    def _call(self, method: str, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
        data = json.dumps(body or {}).encode() if method == "POST" else None
        req = urllib.request.Request(
            self.base + path, data=data, method=method, headers={"Content-Type": "application/json"}
        )
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                result: dict[str, Any] = json.loads(resp.read())
                return result
        except urllib.error.HTTPError as exc:
            detail = json.loads(exc.read() or b"{}").get("error", exc.reason)
            raise MiniClusterError(f"minicluster at {self.base}: {detail}") from None
        except (urllib.error.URLError, OSError, UnicodeError, ValueError) as exc:
            raise MiniClusterError(f"no minicluster answers at {self.base}: {exc}") from None

    def info(self) -> dict[str, Any]:
        return self._call("GET", "/info")

    def set_scope(self, table: str, family: str, scope: int) -> dict[str, Any]:
        return self._call("POST", "/set-scope", {"table": table, "family": family, "scope": scope})

    def roll(self, server: str | None = None) -> dict[str, Any]:
        return self._call("POST", "/roll", {"server": server} if server else {})

    def abort_rs(self, server: str) -> dict[str, Any]:
        return self._call("POST", "/abort-rs", {"server": server})

    def start_thrift(self, service: str, port: int = 0) -> str:
        """Start one more ``thrift1`` or ``thrift2`` server of the cluster; its address."""
        return str(self._call("POST", "/thrift/start", {"service": service, "port": port})["address"])

    def stop_thrift(self, address: str) -> None:
        """Stop the cluster's Thrift server at ``address`` (its open connections dropped)."""
        self._call("POST", "/thrift/stop", {"address": address})

    def bulk_load(self, table: str, cells: list[tuple[bytes, bytes, bytes, bytes, int]]) -> dict[str, Any]:
        """Bulk-load ``(family, row, qualifier, value, timestamp)`` puts, as the harness's
        ``bulk_load`` does on real HBase (the cells bypass the WAL; it logs a marker)."""
        wire = [[f.hex(), r.hex(), q.hex(), v.hex(), ts] for f, r, q, v, ts in cells]
        return self._call("POST", "/bulk-load", {"table": table, "cells": wire})

    def regions(self, table: str) -> list[dict[str, Any]]:
        """The table's regions in key order, as the harness's ``regions`` lists them: each
        ``region`` (encoded name), ``start`` and ``end`` (hex), ``server``, ``region_id``."""
        return list(self._call("POST", "/regions", {"table": table})["regions"])

    def move(self, table: str, region: str, to: str | None = None) -> dict[str, Any]:
        """Move a region (by encoded name) to server ``to``, or to another live server."""
        return self._call("POST", "/move", {"table": table, "region": region, "to": to})

    def split_region(self, table: str, row: bytes, region: str | None = None) -> dict[str, Any]:
        """Split the region holding ``row`` (or ``region``, which must hold it) at ``row``."""
        return self._call("POST", "/split", {"table": table, "row": row.hex(), "region": region})

    def merge(self, table: str, regions: list[str]) -> dict[str, Any]:
        """Merge adjacent regions (by encoded name) into one."""
        return self._call("POST", "/merge", {"table": table, "regions": regions})
