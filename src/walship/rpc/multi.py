"""Mutations written straight into a region server: ``ClientService.Multi``, as HBase's own client
sends it, with no Thrift server between.

One call carries the mutations of one region: a ``MutationProto`` per row (a put, or a delete),
each naming how many cells it has, and every cell in the call's cell block, in
``KeyValueCodec`` (the four-byte length, then the KeyValue, as a WAL holds a cell without tags).
Cells keep their own timestamp and type, so each kind of delete reaches the peer as written. A
mutation can carry ``_cs.id``, the cluster ids the edit has passed through, which the region
server writes into its own WAL (so replication never sends the edit back).

The answer names every mutation that failed, with HBase's exception class: a region that is not
on the server (``NotServingRegionException``, ``RegionMovedException``) fails all of them.

Example::

    with RegionServerClient("rs1", 16020, SimpleAuth()) as rs:
        failed = rs.multi(b"t,,1700000000000.0123456789abcdef0123456789abcdef.",
                          [RowMutation(b"row", False, cells)])
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import NamedTuple, TypeVar

from google.protobuf.message import DecodeError, Message

from walship.protos import Client_pb2, HBase_pb2
from walship.rpc.auth import Authentication
from walship.rpc.cellblock import keyvalue
from walship.rpc.connection import DEFAULT_TIMEOUT, RpcConnection
from walship.rpc.wire import RpcProtocolError
from walship.wal.model import Cell

__all__ = [
    "CONSUMED_CLUSTER_IDS",
    "KEYVALUE_CODEC",
    "ActionFailure",
    "RegionServerClient",
    "RowMutation",
    "failures",
    "multi_call",
    "short_class",
]

log = logging.getLogger(__name__)

M = TypeVar("M", bound=Message)

#: The cell block codec of the calls (the client's ``hbase.client.rpc.codec`` when it has no tags).
KEYVALUE_CODEC = "org.apache.hadoop.hbase.codec.KeyValueCodec"
#: The attribute of a mutation that lists the clusters it has been through
#: (``Mutation.CONSUMED_CLUSTER_IDS``).
CONSUMED_CLUSTER_IDS = "_cs.id"
_PUT = Client_pb2.MutationProto.PUT
_DELETE = Client_pb2.MutationProto.DELETE
_REGION_NAME = HBase_pb2.RegionSpecifier.REGION_NAME


class RowMutation(NamedTuple):
    """The cells of one row, all puts or all deletes, in the order they are to be applied (a
    named tuple: the compiled encoder of sink hbase reads it by position)."""

    row: bytes
    delete: bool
    cells: Sequence[Cell]


@dataclass(frozen=True)
class ActionFailure:
    """A mutation the region server did not apply: its index in the call, HBase's exception
    class and the first line of its message."""

    index: int
    exception_class: str
    message: str

    @property
    def short_class(self) -> str:
        return short_class(self.exception_class)


def short_class(exception_class: str) -> str:
    """HBase's exception class without its package."""
    return exception_class.rsplit(".", 1)[-1]


def multi_call(
    region_name: bytes, mutations: Sequence[RowMutation], cluster_ids: bytes | None = None
) -> tuple[Client_pb2.MultiRequest, bytes]:
    """The ``MultiRequest`` of ``mutations`` to the region ``region_name`` and its cell block
    (tags are not sent: ``KeyValueCodec`` has none). ``cluster_ids`` is the ``_cs.id`` value
    every mutation carries (:func:`walship.clusterids.encode_cluster_ids`)."""
    request = Client_pb2.MultiRequest()
    action = request.regionAction.add()
    action.region.type = _REGION_NAME
    action.region.value = region_name
    block: list[bytes] = []
    for index, (row, delete, cells) in enumerate(mutations):  # (plain tuples too)
        proto = action.action.add(index=index).mutation
        proto.row = row
        proto.mutate_type = _DELETE if delete else _PUT
        proto.associated_cell_count = len(cells)
        if cluster_ids is not None:
            proto.attribute.add(name=CONSUMED_CLUSTER_IDS, value=cluster_ids)
        block += map(keyvalue, cells)
    return request, b"".join(block)


def failures(response: Client_pb2.MultiResponse, actions: int) -> list[ActionFailure]:
    """The mutations of a one-region call that failed: every one of them when the region action
    failed as a whole, or an answer that does not account for each."""
    if len(response.regionActionResult) != 1:
        return [
            ActionFailure(i, "", f"the answer holds {len(response.regionActionResult)} region results, not 1")
            for i in range(actions)
        ]
    result = response.regionActionResult[0]
    if result.HasField("exception"):
        name, message = _exception(result.exception)
        return [ActionFailure(i, name, message) for i in range(actions)]
    out = []
    answered = set()
    for item in result.resultOrException:
        answered.add(item.index)
        if item.HasField("exception"):
            out.append(ActionFailure(item.index, *_exception(item.exception)))
    out += [
        ActionFailure(i, "", "the region server did not answer for it") for i in range(actions) if i not in answered
    ]
    return sorted(out, key=lambda f: f.index)


def _exception(pair: HBase_pb2.NameBytesPair) -> tuple[str, str]:
    """HBase's exception class and the first line of its stack trace, less the class name."""
    first = pair.value.decode("utf-8", "replace").strip().split("\n", 1)[0] if pair.value else ""
    message = first[len(pair.name) + 1 :].strip() if first.startswith(pair.name + ":") else first
    return pair.name, message


class RegionServerClient:
    """A connection to a region server's ``ClientService`` that writes mutations (one call at a
    time).

    :raises MasterUnavailableError: the server cannot be reached (the connection's error).
    """

    def __init__(self, host: str, port: int, auth: Authentication, *, timeout: float = DEFAULT_TIMEOUT) -> None:
        self.server = f"{host}:{port}"
        self._conn = RpcConnection(host, port, "ClientService", auth, timeout=timeout, cell_codec=KEYVALUE_CODEC)

    def multi(
        self, region_name: bytes, mutations: Sequence[RowMutation], cluster_ids: bytes | None = None
    ) -> list[ActionFailure]:
        """Apply ``mutations`` to the region ``region_name`` in one call; the ones that failed
        (empty when all were applied).

        :raises RemoteHBaseError: the server refused the call itself.
        :raises MasterUnavailableError: the connection broke.
        """
        request, block = multi_call(region_name, mutations, cluster_ids)
        return self.send(request, block, len(mutations))

    def send(self, request: Client_pb2.MultiRequest | bytes, block: bytes, actions: int) -> list[ActionFailure]:
        """Send a call :func:`multi_call` made (or its compiled twin, serialized) of ``actions``
        mutations; the mutations that failed.

        :raises RemoteHBaseError: the server refused the call itself.
        :raises MasterUnavailableError: the connection broke.
        """
        return self.failures_in(self.send_raw(request, block), actions)

    def send_raw(self, request: Client_pb2.MultiRequest | bytes, block: bytes) -> bytes:
        """:meth:`send`, its answer (a ``MultiResponse``) left unparsed.

        :raises RemoteHBaseError: the server refused the call itself.
        :raises MasterUnavailableError: the connection broke.
        """
        return self._conn.call_raw("Multi", request, cellblock=block)[0]

    def failures_in(self, body: bytes, actions: int) -> list[ActionFailure]:
        """The mutations that failed, by the answer :meth:`send_raw` returned for ``actions``.

        :raises RpcProtocolError: the answer is not a ``MultiResponse``.
        """
        response = Client_pb2.MultiResponse()
        try:
            response.ParseFromString(body)
        except DecodeError as exc:
            raise RpcProtocolError(f"Multi on {self.server}: the answer is not a MultiResponse: {exc}") from None
        failed = failures(response, actions)
        if failed:
            log.debug("%s: %d of %d mutations failed (%s)", self.server, len(failed), actions, failed[0])
        return failed

    def call(self, method: str, request: Message, response_type: type[M]) -> tuple[M, bytes]:
        """Any ``ClientService`` call: its answer and the answer's cell block."""
        return self._conn.call_cells(method, request, response_type)

    def close(self) -> None:
        self._conn.close()

    def __enter__(self) -> RegionServerClient:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
