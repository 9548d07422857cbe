"""Writes to a READONLY table, refused as HBase 2.6 refuses them and reported as its Thrift
servers report them.

A table whose descriptor holds the value ``READONLY`` = "true" (in any case:
``TableDescriptorBuilder.isReadOnly`` reads it with ``Boolean.valueOf``) has read-only
regions: ``HRegion.checkReadOnly`` refuses every put, delete, increment, row mutation and
check-and-mutate with ``DoNotRetryIOException: region is read only``, before it looks at
anything else of the mutation (its families, a check's condition). Reads go on.

What a Thrift client sees is what HBase's client made of the region server's answer, whose
message is the server's stack trace (the first line ``<class>: <message>``, then the frames):

* a mutation sent alone (Thrift2 ``put``, ``deleteSingle``; Thrift1 ``mutateRow(Ts)``,
  ``deleteAll*``, ``atomicIncrement``, ``increment``): that exception. Thrift2's ``TIOError``
  carries its message (``DoNotRetryIOException: region is read only`` and the server's
  frames); Thrift1's ``IOError`` the client's whole Java stack trace
  (``Throwables.getStackTraceAsString``), caused by the ``RemoteWithExtrasException`` it was
  unwrapped from.
* a batch (Thrift2 ``putMultiple``, ``deleteMultiple``, ``mutateRow``, ``checkAndMutate``;
  Thrift1 ``mutateRows(Ts)``): ``RetriesExhaustedWithDetailsException``, ``Failed <n>
  action(s): <the server's message>: <n> time(s), servers with issues: <server names>``, where
  n counts every mutation of the batch (those of a row mutation or a check-and-mutate too).

The messages here are HBase's with the Java stack frames left out (the lines that start with
a tab): the minicluster has none to show.

Example::

    thrift2_message(ReadOnlyTableError(b"t", 2, ["h,16020,1"]), "putMultiple")
    # 'Failed 2 actions: org.apache.hadoop.hbase.DoNotRetryIOException: region is read only\\n'
    # ': 2 times, servers with issues: h,16020,1'
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from walship.errors import ReadOnlyTableError

__all__ = ["READ_ONLY", "SERVER_TRACE", "batch_message", "is_read_only", "thrift1_message", "thrift2_message"]

#: The table value that makes a table read-only (``TableDescriptorBuilder.READONLY``).
READ_ONLY = "READONLY"

_DNRIOE = "org.apache.hadoop.hbase.DoNotRetryIOException"
_REMOTE = "org.apache.hadoop.hbase.ipc.RemoteWithExtrasException"
_RETRIES_EXHAUSTED = "org.apache.hadoop.hbase.client.RetriesExhaustedWithDetailsException"
#: The region server's exception as its client reads it: its stack trace, without the frames.
SERVER_TRACE = f"{_DNRIOE}: region is read only\n"

#: Thrift2 calls that send one mutation alone (the others send a batch).
_THRIFT2_SINGLE = frozenset({"put", "deleteSingle"})
#: Thrift1 calls that send a batch (the others send one mutation at a time).
_THRIFT1_BATCH = frozenset({"mutateRows", "mutateRowsTs"})


def is_read_only(descriptor: Mapping[str, object]) -> bool:
    """The table's descriptor (as :meth:`Store.table_descriptor
    <walship_testing.minicluster.store.Store.table_descriptor>` keeps it) says READONLY."""
    attributes = descriptor.get("attributes")
    value = attributes.get(READ_ONLY) if isinstance(attributes, dict) else None
    # Boolean.valueOf: "true" ignoring case; bytes.lower changes ASCII letters only, as Java does here
    return isinstance(value, str) and value.encode("latin-1").lower() == b"true"


def _plural(n: int) -> str:
    return "" if n == 1 else "s"


def batch_message(actions: int, servers: Sequence[str]) -> str:
    """``RetriesExhaustedWithDetailsException``'s message for ``actions`` refused mutations."""
    return (
        f"Failed {actions} action{_plural(actions)}: {SERVER_TRACE}: {actions} time{_plural(actions)}, "
        f"servers with issues: {', '.join(servers)}"
    )


def thrift2_message(error: ReadOnlyTableError, call: str) -> str:
    """The message of the ``TIOError`` HBase's Thrift2 server answers ``call`` with."""
    if call in _THRIFT2_SINGLE:
        return SERVER_TRACE
    return batch_message(error.actions, error.servers)


def thrift1_message(error: ReadOnlyTableError, call: str) -> str:
    """The message of the ``IOError`` HBase's Thrift1 server answers ``call`` with."""
    if call in _THRIFT1_BATCH:
        return f"{_RETRIES_EXHAUSTED}: {batch_message(error.actions, error.servers)}\n"
    return f"{_DNRIOE}: {SERVER_TRACE}\nCaused by: {_REMOTE}({_DNRIOE}): {SERVER_TRACE}\n"
