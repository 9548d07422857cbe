"""Thrift calls encoded ahead of sending, by the thread that built them.

A sink builds a call's objects in one thread while its sender thread waits for the call before
(:mod:`walship.sinks.inorder`). Encoding the call there too leaves the sender only a write and
a wait, both without the interpreter lock, so the peer gets the next call the moment it
answered the last. The bytes are those thriftpy2's own client writes for the call (its
message header, the argument struct, sequence id 0), in the protocol the connection speaks.
"""

from __future__ import annotations

import logging
import types
from collections.abc import Sequence
from typing import Any, Protocol

from thriftpy2.protocol import TBinaryProtocol, TCompactProtocol, TCyBinaryProtocol
from thriftpy2.thrift import TClient, TMessageType
from thriftpy2.transport import TCyMemoryBuffer, TMemoryBuffer

from walship.thrift.hbase2 import hbase2

try:
    from walship.thrift import _putencoder
except ImportError:  # an install without a C compiler: thriftpy2 encodes every call
    _putencoder = None  # type: ignore[assignment]

__all__ = [
    "EncodedCall",
    "EncodingClient",
    "encode_call",
    "encode_mutate_rows_ts",
    "encode_put_multiple",
    "put_encoder",
]

log = logging.getLogger(__name__)

#: The protocols' classes by name (the compiled binary one where thriftpy2 has it, as happybase's).
PROTOCOL_CLASSES: dict[str, Any] = {"binary": TBinaryProtocol, "compact": TCompactProtocol}


class EncodedCall:
    """One call of ``api``, encoded: what :meth:`EncodingClient.send_encoded` sends."""

    __slots__ = ("api", "data")

    def __init__(self, api: str, data: bytes) -> None:
        self.api = api
        self.data = data


def encode_call(service: types.ModuleType, protocol: str, api: str, **args: Any) -> EncodedCall:
    """``api(**args)`` of ``service`` as ``protocol`` (``binary`` or ``compact``) encodes it."""
    protocol_class = PROTOCOL_CLASSES[protocol]
    buffer = TCyMemoryBuffer() if protocol_class is TCyBinaryProtocol else TMemoryBuffer()  # type: ignore[no-untyped-call]
    proto = protocol_class(buffer, decode_response=False)
    proto.write_message_begin(api, TMessageType.CALL, 0)
    call_args = getattr(service, api + "_args")()
    for name, value in args.items():
        setattr(call_args, name, value)
    call_args.write(proto)
    proto.write_message_end()
    return EncodedCall(api, buffer.getvalue())


class Cell(Protocol):
    """A cell as a put takes it (walship's WAL cells are such tuples: row, family, qualifier,
    timestamp, type, value, tags)."""

    @property
    def type(self) -> int: ...
    @property
    def family(self) -> bytes: ...
    @property
    def qualifier(self) -> bytes: ...
    @property
    def value(self) -> bytes: ...
    @property
    def timestamp(self) -> int: ...


def put_encoder() -> str:
    """Which encoder :func:`encode_put_multiple` and :func:`encode_mutate_rows_ts` use for the
    binary protocol: ``c`` (the compiled one) or ``python`` (thriftpy2's, where it was not
    built)."""
    return "c" if _putencoder is not None else "python"


def encode_put_multiple(
    protocol: str, table: bytes, puts: list[tuple[bytes, Sequence[Cell]]], attributes: dict[bytes, bytes]
) -> EncodedCall:
    """THBaseService ``putMultiple(table, tputs)``, each ``(row, cells)`` of ``puts`` a TPut of
    the cells' column values (family, qualifier, value, timestamp) with ``attributes``: in the
    binary protocol straight from the cells by the compiled encoder (the same bytes), else
    through thriftpy2's objects."""
    if protocol == "binary" and _putencoder is not None:
        return EncodedCall("putMultiple", _putencoder.encode_put_multiple(table, puts, attributes))
    value, tput = hbase2.TColumnValue, hbase2.TPut
    tputs = [
        tput(row, [value(c.family, c.qualifier, c.value, c.timestamp) for c in cells], None, attributes)
        for row, cells in puts
    ]
    return encode_call(hbase2.THBaseService, protocol, "putMultiple", table=table, tputs=tputs)


#: a WAL cell's type codes (HBase's KeyValue.Type) of a Put and a DeleteFamily; a DeleteColumn
#: is the third a Thrift1 mutation carries
_PUT, _DELETE_FAMILY = 4, 14


def _mutation(cell: Cell) -> Any:
    """A Put, DeleteColumn or DeleteFamily cell as a Thrift1 ``Mutation``."""
    from walship.thrift.hbase1 import Hbase_thrift

    if cell.type == _PUT:
        return Hbase_thrift.Mutation(isDelete=False, column=cell.family + b":" + cell.qualifier, value=cell.value)
    if cell.type == _DELETE_FAMILY:
        return Hbase_thrift.Mutation(isDelete=True, column=cell.family)
    return Hbase_thrift.Mutation(isDelete=True, column=cell.family + b":" + cell.qualifier)  # DeleteColumn


def encode_mutate_rows_ts(
    protocol: str,
    table: bytes,
    rows: Sequence[tuple[bytes, Sequence[Cell]]],
    timestamp: int,
    attributes: dict[bytes, bytes],
) -> EncodedCall:
    """Hbase ``mutateRowsTs(table, rowBatches, timestamp, attributes)``, each ``(row, cells)`` of
    ``rows`` a BatchMutation of the cells as mutations (a Put sets family:qualifier, a
    DeleteColumn deletes it, a DeleteFamily deletes the family; the caller passes no other type):
    in the binary protocol straight from the cells by the compiled encoder (the same bytes),
    else through thriftpy2's objects."""
    if protocol == "binary" and _putencoder is not None:
        rows = rows if isinstance(rows, list) else list(rows)
        return EncodedCall("mutateRowsTs", _putencoder.encode_mutate_rows_ts(table, rows, timestamp, attributes))
    from walship.thrift.hbase1 import Hbase_thrift  # Thrift1's IDL, only where Thrift1 is spoken

    batch = [Hbase_thrift.BatchMutation(row=row, mutations=[_mutation(c) for c in cells]) for row, cells in rows]
    return encode_call(Hbase_thrift.Hbase, protocol, "mutateRowsTs", tableName=table, rowBatches=batch,
                       timestamp=timestamp, attributes=attributes)  # fmt: skip


class EncodingClient(TClient):
    """thriftpy2's client, which can also send a call encoded ahead (:func:`encode_call`).

    :param protocol: ``binary`` or ``compact``, as the connection speaks (the encoded calls
        must be encoded the same way).
    """

    def __init__(self, service: types.ModuleType, protocol: str, transport: Any) -> None:
        super().__init__(service, PROTOCOL_CLASSES[protocol](transport, decode_response=False))
        self.protocol = protocol

    def send_encoded(self, call: EncodedCall) -> Any:
        """Write the call, then read its answer as a call made here would.

        :raises TTransportException: the connection failed.
        :raises TApplicationException: the server could not run the call.
        """
        transport = self._oprot.trans
        transport.write(call.data)
        transport.flush()
        return self._recv(call.api)
