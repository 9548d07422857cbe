"""The Thrift1 API as happybase uses it, served with thriftpy2 from happybase's own
``Hbase.thrift``.

One port serves the buffered and the framed transport, with the binary or the compact
protocol: the first bytes of a connection tell which (a binary message starts ``0x80``, a
compact one ``0x82``; a frame starts with its length). Like HBase's Thrift server started with
``-f`` (framed) or ``-c`` (compact), a server may accept only one transport or one protocol:
other connections are closed, with a warning naming what they spoke. With a certificate it
serves TLS (HBase's ``hbase.thrift.ssl.enabled``); the transport and the protocol are then
told from the decrypted stream.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import logging
import socket
import ssl
import struct
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

from thriftpy2.protocol import TCompactProtocolFactory, TCyBinaryProtocolFactory
from thriftpy2.thrift import TProcessor
from thriftpy2.transport import TCyBufferedTransportFactory, TCyFramedTransportFactory, TSocket, TTransportException

from walship.errors import (
    BadRequestError,
    ConfigError,
    MiniClusterError,
    TableExistsError,
)
from walship.minicluster.cluster import LATEST_TIMESTAMP, MiniCluster, RowMutation
from walship.minicluster.filters import FilterSyntaxError, parse_filter
from walship.minicluster.store import Family, VisibleCell
from walship.thrift import PROTOCOLS, TRANSPORTS
from walship.thrift.hbase1 import Hbase_thrift

__all__ = ["PROTOCOLS", "TRANSPORTS", "HbaseHandler", "ThriftServer", "server_tls_context"]

log = logging.getLogger(__name__)

F = TypeVar("F", bound=Callable[..., Any])


def _thrift_errors(func: F) -> F:
    """Turn walship's errors into the exceptions HBase's Thrift server raises."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except TableExistsError as exc:
            raise Hbase_thrift.AlreadyExists(message=str(exc)) from None
        except BadRequestError as exc:
            if getattr(func, "_illegal_argument", False):
                raise Hbase_thrift.IllegalArgument(message=str(exc)) from None
            raise Hbase_thrift.IOError(message=str(exc)) from None
        except (MiniClusterError, FilterSyntaxError) as exc:
            raise Hbase_thrift.IOError(message=f"{type(exc).__name__}: {exc}") from None

    return wrapper  # type: ignore[return-value]


def _illegal_argument(func: F) -> F:
    """Mark a call whose Thrift signature declares IllegalArgument for bad arguments."""
    func._illegal_argument = True  # type: ignore[attr-defined]
    return func


def parse_columns(columns: Sequence[bytes] | None) -> dict[bytes, set[bytes] | None] | None:
    """Thrift column specs as HBase's ``CellUtil.parseColumn``: ``f`` is the whole family,
    ``f:q`` one column (``f:`` the empty qualifier)."""
    if not columns:
        return None
    out: dict[bytes, set[bytes] | None] = {}
    for col in columns:
        fam, sep, qual = col.partition(b":")
        if not fam:
            raise BadRequestError(f"invalid column {col!r}")
        if not sep:
            out[fam] = None
        elif fam not in out:
            out[fam] = {qual}
        else:
            quals = out[fam]
            if quals is not None:
                quals.add(qual)
    return out


def _cell(c: VisibleCell) -> Any:
    return Hbase_thrift.TCell(value=c.value, timestamp=c.timestamp)


def _row_result(row: bytes, cells: Sequence[VisibleCell], sort_columns: bool) -> Any:
    if sort_columns:
        return Hbase_thrift.TRowResult(
            row=row,
            sortedColumns=[
                Hbase_thrift.TColumn(columnName=c.family + b":" + c.qualifier, cell=_cell(c)) for c in cells
            ],
        )
    columns: dict[bytes, Any] = {}
    for c in cells:
        columns.setdefault(c.family + b":" + c.qualifier, _cell(c))  # newest version wins
    return Hbase_thrift.TRowResult(row=row, columns=columns)


def _ts(timestamp: int) -> int | None:
    return None if timestamp == LATEST_TIMESTAMP else timestamp


def _bytes_increment(prefix: bytes) -> bytes:
    stripped = prefix.rstrip(b"\xff")
    return stripped[:-1] + bytes([stripped[-1] + 1]) if stripped else b""


class HbaseHandler:
    """The ``Hbase`` service's calls, on a :class:`MiniCluster`."""

    def __init__(self, cluster: MiniCluster) -> None:
        self.cluster = cluster
        self._scanners: dict[int, tuple[Iterator[Any], threading.Lock]] = {}
        self._ids = itertools.count(1)
        self._scanner_lock = threading.Lock()

    # -- tables ----------------------------------------------------------------------------------

    @_thrift_errors
    def getTableNames(self) -> list[bytes]:
        assert self.cluster.store is not None
        return self.cluster.store.table_names()

    @_thrift_errors
    def isTableEnabled(self, tableName: bytes) -> bool:
        self.cluster.table_families(tableName)
        assert self.cluster.store is not None
        return bool(self.cluster.store.table_enabled(tableName))

    @_thrift_errors
    def enableTable(self, tableName: bytes) -> None:
        self.cluster.set_enabled(tableName, True)

    @_thrift_errors
    def disableTable(self, tableName: bytes) -> None:
        self.cluster.set_enabled(tableName, False)

    @_thrift_errors
    @_illegal_argument
    def createTable(self, tableName: bytes, columnFamilies: list[Any]) -> None:
        families = []
        for cd in columnFamilies or []:
            name = (cd.name or b"").rstrip(b":")
            descriptor = {
                "compression": cd.compression,
                "inMemory": cd.inMemory,
                "bloomFilterType": cd.bloomFilterType,
                "blockCacheEnabled": cd.blockCacheEnabled,
                "timeToLive": cd.timeToLive,
            }
            families.append(Family(name, cd.maxVersions if cd.maxVersions is not None else 3, 0, descriptor))
        self.cluster.create_table(tableName, families)

    @_thrift_errors
    def deleteTable(self, tableName: bytes) -> None:
        self.cluster.delete_table(tableName)

    @_thrift_errors
    def compact(self, tableNameOrRegionName: bytes) -> None:
        self.cluster.table_families(tableNameOrRegionName)

    @_thrift_errors
    def majorCompact(self, tableNameOrRegionName: bytes) -> None:
        self.cluster.table_families(tableNameOrRegionName)
        with self.cluster.lock:
            assert self.cluster.store is not None
            self.cluster.store.compact(tableNameOrRegionName)

    @_thrift_errors
    def getColumnDescriptors(self, tableName: bytes) -> dict[bytes, Any]:
        out = {}
        for f in self.cluster.table_families(tableName).values():
            d = f.descriptor
            out[f.name + b":"] = Hbase_thrift.ColumnDescriptor(
                name=f.name + b":",
                maxVersions=f.max_versions,
                compression=d.get("compression") or "NONE",
                inMemory=bool(d.get("inMemory")),
                bloomFilterType=d.get("bloomFilterType") or "NONE",
                blockCacheEnabled=bool(d.get("blockCacheEnabled")),
                timeToLive=int(d.get("timeToLive") or -1),  # type: ignore[call-overload]
            )
        return out

    @_thrift_errors
    def getTableRegions(self, tableName: bytes) -> list[Any]:
        self.cluster.table_families(tableName)
        assert self.cluster.store is not None
        out = []
        for r in self.cluster.store.regions(tableName):
            owner = self.cluster.owner.get(r.encoded)
            out.append(
                Hbase_thrift.TRegionInfo(
                    startKey=r.start_key,
                    endKey=r.end_key,
                    id=r.region_id,
                    name=b"%s,%s,%d.%s." % (r.table, r.start_key, r.region_id, r.encoded.encode()),
                    version=1,
                    serverName=owner.name.host.encode() if owner else b"",
                    port=owner.name.port if owner else 0,
                )
            )
        return out

    # -- reads -------------------------------------------------------------------------------------

    def _get_cells(self, table: bytes, row: bytes, column: bytes, versions: int, max_ts: int | None) -> list[Any]:
        if versions < 1:
            raise BadRequestError(f"numVersions must be >= 1, got {versions}")
        cells = self.cluster.read_row(table, row, parse_columns([column]), versions=versions, max_ts=max_ts)
        return [_cell(c) for c in cells]

    @_thrift_errors
    def get(self, tableName: bytes, row: bytes, column: bytes, attributes: dict[bytes, bytes]) -> list[Any]:
        return self._get_cells(tableName, row, column, 1, None)

    @_thrift_errors
    def getVer(self, tableName: bytes, row: bytes, column: bytes, numVersions: int, attributes: Any) -> list[Any]:
        return self._get_cells(tableName, row, column, numVersions, None)

    @_thrift_errors
    def getVerTs(
        self, tableName: bytes, row: bytes, column: bytes, timestamp: int, numVersions: int, attributes: Any
    ) -> list[Any]:
        return self._get_cells(tableName, row, column, numVersions, timestamp)

    def _rows(
        self, table: bytes, rows: Sequence[bytes], columns: Sequence[bytes] | None, max_ts: int | None
    ) -> list[Any]:
        spec = parse_columns(columns)
        out = []
        for row in rows:
            cells = self.cluster.read_row(table, row, spec, max_ts=max_ts)
            if cells:
                out.append(_row_result(row, cells, False))
        return out

    @_thrift_errors
    def getRow(self, tableName: bytes, row: bytes, attributes: Any) -> list[Any]:
        return self._rows(tableName, [row], None, None)

    @_thrift_errors
    def getRowWithColumns(self, tableName: bytes, row: bytes, columns: list[bytes], attributes: Any) -> list[Any]:
        return self._rows(tableName, [row], columns, None)

    @_thrift_errors
    def getRowTs(self, tableName: bytes, row: bytes, timestamp: int, attributes: Any) -> list[Any]:
        return self._rows(tableName, [row], None, timestamp)

    @_thrift_errors
    def getRowWithColumnsTs(
        self, tableName: bytes, row: bytes, columns: list[bytes], timestamp: int, attributes: Any
    ) -> list[Any]:
        return self._rows(tableName, [row], columns, timestamp)

    @_thrift_errors
    def getRows(self, tableName: bytes, rows: list[bytes], attributes: Any) -> list[Any]:
        return self._rows(tableName, rows, None, None)

    @_thrift_errors
    def getRowsWithColumns(
        self, tableName: bytes, rows: list[bytes], columns: list[bytes], attributes: Any
    ) -> list[Any]:
        return self._rows(tableName, rows, columns, None)

    @_thrift_errors
    def getRowsTs(self, tableName: bytes, rows: list[bytes], timestamp: int, attributes: Any) -> list[Any]:
        return self._rows(tableName, rows, None, timestamp)

    @_thrift_errors
    def getRowsWithColumnsTs(
        self, tableName: bytes, rows: list[bytes], columns: list[bytes], timestamp: int, attributes: Any
    ) -> list[Any]:
        return self._rows(tableName, rows, columns, timestamp)

    # -- writes ------------------------------------------------------------------------------------

    @staticmethod
    def _row_mutation(row: bytes, mutations: Sequence[Any]) -> RowMutation:
        rm = RowMutation(row)
        for m in mutations or []:
            fam, sep, qual = (m.column or b"").partition(b":")
            if not fam:
                raise BadRequestError(f"row {row!r}: invalid column {m.column!r}")
            if m.isDelete:
                rm.deletes.append((fam, qual if sep else None))
            elif not sep:
                raise BadRequestError(f"row {row!r}: a put needs family:qualifier, got {m.column!r}")
            else:
                rm.puts.append((fam, qual, m.value if m.value is not None else b""))
        return rm

    def _mutate(
        self,
        table: bytes,
        batches: Sequence[tuple[bytes, Sequence[Any]]],
        timestamp: int | None,
        attributes: dict[bytes, bytes] | None,
    ) -> None:
        rows = [self._row_mutation(row, muts) for row, muts in batches]
        self.cluster.mutate(table, rows, timestamp=timestamp, attributes=attributes or {})

    @_thrift_errors
    @_illegal_argument
    def mutateRow(self, tableName: bytes, row: bytes, mutations: list[Any], attributes: Any) -> None:
        self._mutate(tableName, [(row, mutations)], None, attributes)

    @_thrift_errors
    @_illegal_argument
    def mutateRowTs(self, tableName: bytes, row: bytes, mutations: list[Any], timestamp: int, attributes: Any) -> None:
        self._mutate(tableName, [(row, mutations)], _ts(timestamp), attributes)

    @_thrift_errors
    @_illegal_argument
    def mutateRows(self, tableName: bytes, rowBatches: list[Any], attributes: Any) -> None:
        self._mutate(tableName, [(b.row, b.mutations) for b in rowBatches or []], None, attributes)

    @_thrift_errors
    @_illegal_argument
    def mutateRowsTs(self, tableName: bytes, rowBatches: list[Any], timestamp: int, attributes: Any) -> None:
        self._mutate(tableName, [(b.row, b.mutations) for b in rowBatches or []], _ts(timestamp), attributes)

    @_thrift_errors
    def deleteAll(self, tableName: bytes, row: bytes, column: bytes, attributes: Any) -> None:
        self.deleteAllTs(tableName, row, column, LATEST_TIMESTAMP, attributes)

    @_thrift_errors
    def deleteAllTs(self, tableName: bytes, row: bytes, column: bytes, timestamp: int, attributes: Any) -> None:
        fam, sep, qual = column.partition(b":")
        rm = RowMutation(row, deletes=[(fam, qual if sep else None)])
        self.cluster.mutate(tableName, [rm], timestamp=_ts(timestamp), attributes=attributes or {})

    @_thrift_errors
    def deleteAllRow(self, tableName: bytes, row: bytes, attributes: Any) -> None:
        self.deleteAllRowTs(tableName, row, LATEST_TIMESTAMP, attributes)

    @_thrift_errors
    def deleteAllRowTs(self, tableName: bytes, row: bytes, timestamp: int, attributes: Any) -> None:
        families = self.cluster.table_families(tableName)
        rm = RowMutation(row, deletes=[(f, None) for f in families])
        self.cluster.mutate(tableName, [rm], timestamp=_ts(timestamp), attributes=attributes or {})

    @_thrift_errors
    @_illegal_argument
    def atomicIncrement(self, tableName: bytes, row: bytes, column: bytes, value: int) -> int:
        fam, sep, qual = column.partition(b":")
        if not fam or not sep:
            raise BadRequestError(f"atomicIncrement needs family:qualifier, got {column!r}")
        return self.cluster.increment(tableName, row, fam, qual, value)

    @_thrift_errors
    def increment(self, increment: Any) -> None:
        self.atomicIncrement(increment.table, increment.row, increment.column, increment.ammount)

    @_thrift_errors
    def incrementRows(self, increments: list[Any]) -> None:
        for inc in increments or []:
            self.increment(inc)

    # -- scanners ----------------------------------------------------------------------------------

    def _open(
        self,
        table: bytes,
        *,
        start: bytes = b"",
        stop: bytes = b"",
        columns: Sequence[bytes] | None = None,
        max_ts: int | None = None,
        filter_string: bytes | None = None,
        batch: int | None = None,
        sort_columns: bool = False,
        reverse: bool = False,
    ) -> int:
        row_filter = parse_filter(filter_string.decode("latin-1")) if filter_string else None
        if batch is not None and batch < 0:
            raise BadRequestError(f"TScan.batchSize must be >= 0, got {batch}")
        rows = self.cluster.scan(
            table,
            start=start,
            stop=stop,
            columns=parse_columns(columns),
            max_ts=max_ts,
            reverse=reverse,
            row_filter=row_filter,
        )

        def results() -> Iterator[Any]:
            for row, cells in rows:
                if batch:
                    for i in range(0, len(cells), batch):
                        yield _row_result(row, cells[i : i + batch], sort_columns)
                else:
                    yield _row_result(row, cells, sort_columns)

        with self._scanner_lock:
            sid = next(self._ids)
            self._scanners[sid] = (results(), threading.Lock())
        return sid

    @_thrift_errors
    def scannerOpenWithScan(self, tableName: bytes, scan: Any, attributes: Any) -> int:
        return self._open(
            tableName,
            start=scan.startRow or b"",
            stop=scan.stopRow or b"",
            columns=scan.columns,
            max_ts=scan.timestamp,
            filter_string=scan.filterString,
            batch=scan.batchSize,
            sort_columns=bool(scan.sortColumns),
            reverse=bool(scan.reversed),
        )

    @_thrift_errors
    def scannerOpen(self, tableName: bytes, startRow: bytes, columns: list[bytes], attributes: Any) -> int:
        return self._open(tableName, start=startRow or b"", columns=columns)

    @_thrift_errors
    def scannerOpenWithStop(
        self, tableName: bytes, startRow: bytes, stopRow: bytes, columns: list[bytes], attributes: Any
    ) -> int:
        return self._open(tableName, start=startRow or b"", stop=stopRow or b"", columns=columns)

    @_thrift_errors
    def scannerOpenWithPrefix(
        self, tableName: bytes, startAndPrefix: bytes, columns: list[bytes], attributes: Any
    ) -> int:
        return self._open(tableName, start=startAndPrefix, stop=_bytes_increment(startAndPrefix), columns=columns)

    @_thrift_errors
    def scannerOpenTs(
        self, tableName: bytes, startRow: bytes, columns: list[bytes], timestamp: int, attributes: Any
    ) -> int:
        return self._open(tableName, start=startRow or b"", columns=columns, max_ts=timestamp)

    @_thrift_errors
    def scannerOpenWithStopTs(
        self, tableName: bytes, startRow: bytes, stopRow: bytes, columns: list[bytes], timestamp: int, attributes: Any
    ) -> int:
        return self._open(tableName, start=startRow or b"", stop=stopRow or b"", columns=columns, max_ts=timestamp)

    def _scanner(self, sid: int) -> tuple[Iterator[Any], threading.Lock]:
        with self._scanner_lock:
            found = self._scanners.get(sid)
        if found is None:
            raise Hbase_thrift.IllegalArgument(message=f"scanner ID {sid} is invalid")
        return found

    @_thrift_errors
    def scannerGetList(self, id: int, nbRows: int) -> list[Any]:
        if nbRows < 0:
            raise Hbase_thrift.IllegalArgument(message=f"nbRows must be >= 0, got {nbRows}")
        it, lock = self._scanner(id)
        with lock:
            return list(itertools.islice(it, nbRows))

    @_thrift_errors
    def scannerGet(self, id: int) -> list[Any]:
        return self.scannerGetList(id, 1)

    @_thrift_errors
    def scannerClose(self, id: int) -> None:
        with self._scanner_lock:
            if self._scanners.pop(id, None) is None:
                raise Hbase_thrift.IllegalArgument(message=f"scanner ID {id} is invalid")

    # -- not offered -------------------------------------------------------------------------------

    def _unsupported(self, *args: Any, **kwargs: Any) -> Any:
        raise Hbase_thrift.IOError(message="not supported by the walship minicluster")

    getRowOrBefore = getRegionInfo = append = checkAndPut = _unsupported


_HANDSHAKE_TIMEOUT = 30.0
_HEADER_TIMEOUT = 5.0
_TLS_RECORD_HANDSHAKE = 0x16


def server_tls_context(cert: str | Path | None, key: str | Path | None) -> ssl.SSLContext | None:
    """The TLS context of a Thrift server from PEM files (``None`` without a certificate).

    The key may be inside the certificate file (then ``key`` is ``None``).

    :raises ConfigError: a key without a certificate, a missing or unreadable file, a key that
        does not match the certificate; the message names the flag.
    """
    if cert is None:
        if key is not None:
            raise ConfigError("--thrift-ssl-key needs --thrift-ssl-cert (the server's certificate, PEM)")
        return None
    for flag, path in (("--thrift-ssl-cert", cert), ("--thrift-ssl-key", key)):
        if path is not None and not Path(path).is_file():
            raise ConfigError(f"{flag}: no such file: {path}")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        context.load_cert_chain(str(cert), str(key) if key is not None else None)
    except (ssl.SSLError, OSError) as exc:
        flags = "--thrift-ssl-cert/--thrift-ssl-key" if key is not None else "--thrift-ssl-cert"
        raise ConfigError(f"{flags}: cannot load the certificate and its key ({cert}): {exc}") from None
    return context


def _check_mode(name: str, value: str | None, allowed: Sequence[str]) -> str | None:
    if value is not None and value not in allowed:
        raise ConfigError(f"--thrift-{name} must be one of {', '.join(allowed)}, got {value!r}")
    return value


class _PrefixedSocket:
    """A socket whose first reads return bytes already read (the bytes that told the
    transport and the protocol), for :class:`TSocket`, which only calls these methods."""

    def __init__(self, sock: socket.socket, prefix: bytes) -> None:
        self.sock = sock
        self.prefix = prefix

    def recv(self, size: int) -> bytes:
        if self.prefix:
            out, self.prefix = self.prefix[:size], self.prefix[size:]
            return out
        return self.sock.recv(size)

    def sendall(self, data: bytes) -> None:
        self.sock.sendall(data)

    def settimeout(self, timeout: float | None) -> None:
        self.sock.settimeout(timeout)

    def shutdown(self, how: int) -> None:
        self.sock.shutdown(how)

    def close(self) -> None:
        self.sock.close()


def _read_up_to(sock: socket.socket, size: int) -> bytes:
    """Up to ``size`` bytes: fewer only at the end of the stream or on a timeout."""
    out = b""
    while len(out) < size:
        try:
            chunk = sock.recv(size - len(out))
        except TimeoutError:
            break
        if not chunk:
            break
        out += chunk
    return out


class ThriftServer:
    """A threaded Thrift server on one port.

    :param transport: accept only this transport (``buffered`` or ``framed``, as HBase's
        ``-f``); ``None`` accepts both.
    :param protocol: accept only this protocol (``binary`` or ``compact``, as HBase's ``-c``);
        ``None`` accepts both.
    :param tls: serve TLS with this server context (see :func:`server_tls_context`); the
        transport and the protocol are then told from the decrypted stream.
    """

    def __init__(
        self,
        handler: HbaseHandler,
        host: str,
        port: int,
        *,
        transport: str | None = None,
        protocol: str | None = None,
        tls: ssl.SSLContext | None = None,
    ) -> None:
        self.transport, self.protocol = self.check_modes(transport, protocol)
        self.tls = tls
        self.processor = TProcessor(Hbase_thrift.Hbase, handler)
        self.sock = socket.create_server((host, port), backlog=128, reuse_port=False)
        self.address = self.sock.getsockname()[:2]
        self._stopping = threading.Event()
        self._clients: set[socket.socket] = set()
        self._clients_lock = threading.Lock()
        self._thread: threading.Thread | None = None

    @staticmethod
    def check_modes(transport: str | None, protocol: str | None) -> tuple[str | None, str | None]:
        """:raises ConfigError: a transport or protocol the server does not know (names the flag)."""
        return _check_mode("transport", transport, TRANSPORTS), _check_mode("protocol", protocol, PROTOCOLS)

    @property
    def modes(self) -> str:
        """What the server accepts, e.g. ``framed/compact`` or ``buffered|framed/binary|compact``."""
        return f"{self.transport or '|'.join(TRANSPORTS)}/{self.protocol or '|'.join(PROTOCOLS)}"

    def start(self) -> None:
        self._thread = threading.Thread(target=self._accept_loop, name="thrift-accept", daemon=True)
        self._thread.start()

    def _accept_loop(self) -> None:
        while not self._stopping.is_set():
            try:
                conn, addr = self.sock.accept()
            except OSError:
                return
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            with self._clients_lock:
                self._clients.add(conn)
            threading.Thread(target=self._serve, args=(conn, addr), name="thrift-client", daemon=True).start()

    def _track(self, old: socket.socket, new: socket.socket) -> None:
        with self._clients_lock:
            self._clients.discard(old)
            self._clients.add(new)

    def _handshake(self, conn: socket.socket, peer: str) -> socket.socket | None:
        """The TLS socket over ``conn`` once the handshake is done (``None`` when it failed)."""
        assert self.tls is not None
        tls = self.tls.wrap_socket(conn, server_side=True, do_handshake_on_connect=False)
        self._track(conn, tls)  # wrap_socket detached conn: stop() must shut the TLS socket
        tls.settimeout(_HANDSHAKE_TIMEOUT)
        try:
            tls.do_handshake()
        except ssl.SSLError as exc:
            hint = " (a client speaking plain Thrift to this TLS port?)" if "WRONG_VERSION" in str(exc).upper() else ""
            log.warning("Thrift connection from %s: TLS handshake failed: %s%s", peer, exc, hint)
            self._untrack_and_close(tls)
            return None
        except (OSError, ValueError) as exc:
            log.info("Thrift connection from %s: TLS handshake failed: %s", peer, exc)
            self._untrack_and_close(tls)
            return None
        tls.settimeout(None)
        return tls

    def _untrack_and_close(self, sock: socket.socket) -> None:
        with self._clients_lock:
            self._clients.discard(sock)
        with contextlib.suppress(OSError):
            sock.close()

    def _serve(self, conn: socket.socket, addr: Any) -> None:
        peer = f"{addr[0]}:{addr[1]}" if isinstance(addr, tuple) and len(addr) >= 2 else str(addr)
        sock: socket.socket | None = conn
        try:
            if self.tls is not None:
                sock = self._handshake(conn, peer)
            if sock is not None:
                self._serve_stream(sock, peer)
        except (TTransportException, ConnectionError, OSError, struct.error):
            pass
        except Exception:
            log.exception("Thrift connection from %s failed", peer)
        finally:
            with self._clients_lock:
                self._clients.discard(conn)
                if sock is not None:
                    self._clients.discard(sock)
            for s in (sock, conn):
                if s is not None:
                    with contextlib.suppress(OSError):
                        s.close()

    def _serve_stream(self, sock: socket.socket, peer: str) -> None:
        """Tell the transport and the protocol from the first bytes, then serve calls."""
        head = _read_up_to(sock, 1)
        if not head:
            return
        if self.tls is None and head[0] == _TLS_RECORD_HANDSHAKE:
            log.warning(
                "Thrift connection from %s refused: it starts a TLS handshake; this port serves plain Thrift", peer
            )
            return
        framed = head[0] not in (0x80, 0x82)
        proto_byte = head[0]
        if framed:  # the protocol's first byte follows the 4-byte frame length
            sock.settimeout(_HEADER_TIMEOUT)
            head += _read_up_to(sock, 4)
            sock.settimeout(None)
            proto_byte = head[4] if len(head) >= 5 else 0x80
        seen_transport = "framed" if framed else "buffered"
        seen_protocol = "compact" if proto_byte == 0x82 else "binary"
        if (self.transport and seen_transport != self.transport) or (self.protocol and seen_protocol != self.protocol):
            log.warning(
                "Thrift connection from %s refused: it speaks %s/%s; this server accepts only %s",
                peer,
                seen_transport,
                seen_protocol,
                self.modes,
            )
            return
        tsock = TSocket(sock=_PrefixedSocket(sock, head))
        trans = (TCyFramedTransportFactory() if framed else TCyBufferedTransportFactory()).get_transport(tsock)
        proto_factory = TCompactProtocolFactory() if seen_protocol == "compact" else TCyBinaryProtocolFactory()
        iprot = proto_factory.get_protocol(trans)
        oprot = proto_factory.get_protocol(trans)
        while not self._stopping.is_set():
            self.processor.process(iprot, oprot)

    def stop(self) -> None:
        self._stopping.set()
        with contextlib.suppress(OSError):
            self.sock.close()
        with self._clients_lock:
            clients = list(self._clients)
        for c in clients:
            try:
                c.shutdown(socket.SHUT_RDWR)
                c.close()
            except OSError:
                pass
