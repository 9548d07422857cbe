"""Many reads in one round trip: ZooKeeper's ``multiRead`` (3.6+) through kazoo.

kazoo sends one request per call and wakes its I/O thread for each, which costs about a
quarter of a millisecond per znode in Python; status reads thousands of WAL positions. A
``multiRead`` carries up to :data:`CHUNK` getData / getChildren reads in one request and
answers each on its own (a znode gone is ``None``, not a failed batch). Servers without it
(before 3.6) get the reads as kazoo's pipelined async calls instead, found out once per client.

Example::

    values = read_many(client, [("data", "/hbase/rs/x/1/wal"), ("children", "/hbase/rs/x")])
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import Sequence
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import (
    EXCEPTIONS,
    ConnectionLoss,
    MarshallingError,
    NoNodeError,
    RuntimeInconsistency,
    UnimplementedError,
)
from kazoo.interfaces import IAsyncResult
from kazoo.protocol.serialization import int_struct, multiheader_struct, read_buffer, read_string, stat_struct
from kazoo.protocol.states import ZnodeStat

from walship.zk.client import zk_call

__all__ = ["CHUNK", "read_many"]

log = logging.getLogger(__name__)

#: Reads per request: well inside ZooKeeper's 1 MiB packet limit for small znodes.
CHUNK = 500
_GET_DATA = 4
_GET_CHILDREN = 8
_ERROR = -1
_KINDS = {"data": _GET_DATA, "children": _GET_CHILDREN}
#: clients whose server refused a multiRead: they get the pipelined fallback
_unsupported: weakref.WeakSet[KazooClient] = weakref.WeakSet()


def _encode_path(path: str) -> bytes:
    raw = path.encode()
    return bytes(int_struct.pack(len(raw))) + raw


class _MultiRead:
    """The request, in the framing of ZooKeeper's MultiOperationRecord."""

    type = 22  # ZooDefs.OpCode.multiRead

    def __init__(self, ops: tuple[tuple[int, str], ...]) -> None:
        self.ops = ops

    def serialize(self) -> bytes:
        out = bytearray()
        for kind, path in self.ops:
            out += multiheader_struct.pack(kind, False, -1)
            out += _encode_path(path)
            out += b"\x00"  # no watch
        out += multiheader_struct.pack(-1, True, -1)
        return bytes(out)

    @classmethod
    def deserialize(cls, buf: bytes, offset: int) -> list[Any]:
        results: list[Any] = []
        while True:
            kind, done, _ = multiheader_struct.unpack_from(buf, offset)
            offset += multiheader_struct.size
            if done:
                return results
            if kind == _GET_DATA:
                data, offset = read_buffer(buf, offset)
                stat = ZnodeStat._make(stat_struct.unpack_from(buf, offset))
                offset += stat_struct.size
                results.append((data or b"", stat))
            elif kind == _GET_CHILDREN:
                count = int_struct.unpack_from(buf, offset)[0]
                offset += int_struct.size
                children = []
                for _ in range(max(count, 0)):
                    child, offset = read_string(buf, offset)
                    children.append(child)
                results.append(children)
            elif kind == _ERROR:
                code = int_struct.unpack_from(buf, offset)[0]
                offset += int_struct.size
                results.append(EXCEPTIONS[code]())
            else:
                raise MarshallingError(f"multiRead answer of unknown type {kind}")


def _value(result: IAsyncResult) -> Any:
    """The value of one of kazoo's async reads, or ``None`` when its znode is gone."""
    try:
        return result.get()
    except NoNodeError:
        return None


def _fallback(client: KazooClient, ops: Sequence[tuple[str, str]]) -> list[Any]:
    reads = [client.get_async(p) if kind == "data" else client.get_children_async(p) for kind, p in ops]
    return [_value(r) for r in reads]


@zk_call("reading znodes")
def read_many(client: KazooClient, ops: Sequence[tuple[str, str]]) -> list[Any]:
    """Read every ``(kind, path)`` (kind ``"data"`` or ``"children"``), in order: ``(data,
    stat)`` for data, a list of names for children, ``None`` for a znode that does not exist.

    :raises KazooException: any other failure of a read (as kazoo's own calls raise it).
    """
    for kind, _ in ops:
        if kind not in _KINDS:
            raise ValueError(f"unknown read kind {kind!r}")
    if client in _unsupported:
        return _fallback(client, ops)
    chroot = client.chroot or ""
    out: list[Any] = []
    for start in range(0, len(ops), CHUNK):
        chunk = ops[start : start + CHUNK]
        request = _MultiRead(tuple((_KINDS[kind], chroot + path) for kind, path in chunk))
        result = client.handler.async_result()
        client._call(request, result)  # kazoo's request path, as its own Transaction uses
        try:
            answers = result.get()
        except (UnimplementedError, MarshallingError, RuntimeInconsistency, ConnectionLoss) as exc:
            log.info("ZooKeeper answered a multiRead with %s: reading znode by znode", type(exc).__name__)
            _unsupported.add(client)
            return out + _fallback(client, ops[start:])
        for answer in answers:
            if isinstance(answer, NoNodeError):
                out.append(None)
            elif isinstance(answer, Exception):
                raise answer
            else:
                out.append(answer)
    return out
