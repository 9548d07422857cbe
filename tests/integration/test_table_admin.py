"""HBase's Admin table calls through the master's RPC (:class:`walship.rpc.MasterAdmin`), made to
real HBase 2.6 and to the minicluster alike and their answers compared: a table's descriptor;
READONLY set and removed (the regions then refuse every write over Thrift1 and Thrift2 with
HBase's own message, reads go on, and the round trip leaves the rest of the descriptor as it
was); disable and enable with the table's state; HBase's refusals (an unknown table, disabling
a disabled table, enabling an enabled one); and the same calls as an HBase 2.x client makes
them, with nonces. Real HBase is the reference: every assert holds for both."""

from __future__ import annotations

import socket
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from typing import Any, TypeVar

import pytest
from google.protobuf.message import Message
from real_hbase import thrift2_client, unique
from thriftpy2.rpc import make_client
from waiting import wait_until

from walship.errors import RemoteHBaseError, TableNotFoundError
from walship.protos import HBase_pb2, Master_pb2, RPC_pb2
from walship.rpc import MasterAdmin, SimpleAuth
from walship.rpc.tables import MasterTables
from walship.rpc.wire import connection_header, read_frame, request_frame, split_response
from walship.thrift.hbase1 import Hbase_thrift
from walship.thrift.hbase2 import hbase2 as T
from walship.zk import ZnodeLayout, connect
from walship.zk.master import read_master
from walship_testing.harness import HBaseProcess
from walship_testing.minicluster import AdminClient
from walship_testing.minicluster.process import MiniClusterProcess

pytestmark = pytest.mark.integration

R = TypeVar("R")
M = TypeVar("M", bound=Message)
#: What HBase's region refuses a write to a READONLY table with (its first line).
READ_ONLY = "org.apache.hadoop.hbase.DoNotRetryIOException: region is read only"
ANSWERED = (T.TIOError, Hbase_thrift.IOError)


@dataclass
class Side:
    """One cluster as the tests reach it: its master's table calls (walship's Admin), Thrift2
    and Thrift1 clients, its region servers' names and its master's address."""

    label: str
    tables: MasterTables
    t2: Any
    t1: Any
    servers: list[str]
    master: tuple[str, int]


@pytest.fixture
def sides(real_hbase: tuple[HBaseProcess, HBaseProcess], minicluster: MiniClusterProcess) -> Iterator[list[Side]]:
    """Real HBase (cluster B of the harness, which no test ships from) and the test's minicluster."""
    real = real_hbase[1]
    with ExitStack() as stack:
        out = []
        for label, mc in (("HBase", real), ("minicluster", minicluster)):
            client = connect(mc.zk)
            stack.callback(client.close)
            stack.callback(client.stop)
            layout = ZnodeLayout(mc.znode_parent)
            admin = stack.enter_context(MasterAdmin(client, layout, auth=SimpleAuth(), timeout=60.0))
            if isinstance(mc, HBaseProcess):
                t2, servers = thrift2_client(mc), mc.servers()
            else:
                t2 = make_client(T.THBaseService, *mc.thrift2, timeout=60000)
                servers = [rs["name"] for rs in AdminClient(mc.admin).info()["regionservers"]]
            t1 = make_client(Hbase_thrift.Hbase, *mc.thrift, timeout=60000)
            stack.callback(t2.close)
            stack.callback(t1.close)
            found = read_master(client, layout)
            assert found is not None, f"{label}: no master registered"
            out.append(Side(label, MasterTables(admin), t2, t1, servers, (found.host, found.port)))
        yield out


def same(sides: list[Side], call: Callable[[Side], R]) -> R:
    """``call``'s answer on both clusters, once they are equal."""
    real, mini = (call(s) for s in sides)
    assert mini == real, f"HBase {real!r}, minicluster {mini!r}"
    return real


def refused(sides: list[Side], call: Callable[[Side], object], error: type[BaseException]) -> list[Any]:
    """The ``error`` each cluster refuses ``call`` with."""
    out = []
    for s in sides:
        with pytest.raises(error) as caught:
            call(s)
        out.append(caught.value)
    return out


def described(schema: HBase_pb2.TableSchema) -> dict[str, Any]:
    """A descriptor as a client reads it: values and families by name (HBase keeps them in
    hash maps, in no order a client relies on)."""
    return {
        "name": (schema.table_name.namespace, schema.table_name.qualifier),
        "values": {a.first: a.second for a in schema.attributes},
        "families": {
            f.name: ({a.first: a.second for a in f.attributes}, {c.name: c.value for c in f.configuration})
            for f in schema.column_families
        },
    }


def shape(side: Side, message: str) -> str:
    """A refusal's message without Java's stack frames (the lines starting with a tab, which
    only HBase has) and with the cluster's server names as ``<server>``."""
    text = "\n".join(line for line in message.split("\n") if not line.startswith("\t"))
    for server in side.servers:
        text = text.replace(server, "<server>")
    return text


def create(sides: list[Side], prefix: str) -> str:
    """A table of the test's own on both: family f keeps 3 versions and is replicated, g is as
    HBase makes a family by default; one row r0."""
    table = unique(prefix)
    columns = [T.TColumnFamilyDescriptor(name=b"f", maxVersions=3, scope=1), T.TColumnFamilyDescriptor(name=b"g")]
    for s in sides:
        s.t2.createTable(T.TTableDescriptor(tableName=T.TTableName(qualifier=table.encode()), columns=columns), None)
        put(s, table, b"r0", b"v0")
    return table


def put(side: Side, table: str, row: bytes, value: bytes) -> None:
    side.t2.put(table.encode(), T.TPut(row=row, columnValues=[T.TColumnValue(b"f", b"q", value)]))


def value(side: Side, table: str, row: bytes) -> bytes | None:
    got = side.t2.get(table.encode(), T.TGet(row=row, columns=[T.TColumn(b"f", b"q")]))
    return got.columnValues[0].value if got.columnValues else None


def writes(table: str) -> dict[str, Callable[[Side], object]]:
    """A write of each kind, by the Thrift call that makes it."""
    name = table.encode()

    def tput(row: bytes) -> Any:
        return T.TPut(row=row, columnValues=[T.TColumnValue(b"f", b"q", b"w")])

    mutations = T.TRowMutations(
        row=b"r0", mutations=[T.TMutation(put=tput(b"r0")), T.TMutation(deleteSingle=T.TDelete(row=b"r0"))]
    )
    return {
        "Thrift2 put": lambda s: s.t2.put(name, tput(b"r1")),
        "Thrift2 putMultiple": lambda s: s.t2.putMultiple(name, [tput(b"a"), tput(b"b"), tput(b"c")]),
        "Thrift2 deleteSingle": lambda s: s.t2.deleteSingle(name, T.TDelete(row=b"r0")),
        "Thrift2 deleteMultiple": lambda s: s.t2.deleteMultiple(name, [T.TDelete(row=b"r0")]),
        "Thrift2 mutateRow": lambda s: s.t2.mutateRow(name, mutations),
        # the condition does not hold, and the family does not exist: the region refuses first
        "Thrift2 checkAndMutate": lambda s: s.t2.checkAndMutate(
            name, b"r0", b"zz", b"q", T.TCompareOperator.EQUAL, b"nope", mutations
        ),
        "Thrift1 mutateRow": lambda s: s.t1.mutateRow(
            name, b"r1", [Hbase_thrift.Mutation(column=b"f:q", value=b"w")], {}
        ),
        "Thrift1 mutateRows": lambda s: s.t1.mutateRows(
            name,
            [
                Hbase_thrift.BatchMutation(row=b"a", mutations=[Hbase_thrift.Mutation(column=b"f:q", value=b"w")]),
                Hbase_thrift.BatchMutation(row=b"b", mutations=[Hbase_thrift.Mutation(column=b"f:q", value=b"w")]),
            ],
            {},
        ),
        "Thrift1 deleteAllRow": lambda s: s.t1.deleteAllRow(name, b"r0", {}),
        "Thrift1 atomicIncrement": lambda s: s.t1.atomicIncrement(name, b"r0", b"f:n", 1),
    }


# -- READONLY ------------------------------------------------------------------------------------


def test_a_read_only_table_refuses_every_write_with_hbases_message_and_reads_go_on(
    sides: list[Side], monkeypatch: pytest.MonkeyPatch
) -> None:
    table = create(sides, "ro")
    before = same(sides, lambda s: described(s.tables.table_descriptor(table)))
    f_values = before["families"][b"f"][0]
    assert (f_values[b"VERSIONS"], f_values[b"REPLICATION_SCOPE"]) == (b"3", b"1")
    assert b"READONLY" not in before["values"]
    assert same(sides, lambda s: s.tables.is_read_only(table)) is False

    assert same(sides, lambda s: s.tables.set_read_only(table, True)) is False  # what it was
    assert same(sides, lambda s: s.tables.is_read_only(table)) is True
    read_only = same(sides, lambda s: described(s.tables.table_descriptor(table)))
    assert read_only["values"] == {**before["values"], b"READONLY": b"true"}
    assert read_only["families"] == before["families"]

    for what, call in writes(table).items():
        real, mini = refused(sides, call, ANSWERED)
        assert type(mini) is type(real), f"{what}: HBase {real!r}, minicluster {mini!r}"
        real_shape, mini_shape = (shape(s, e.message) for s, e in zip(sides, (real, mini), strict=True))
        assert mini_shape == real_shape, f"{what}:\n  HBase       {real_shape!r}\n  minicluster {mini_shape!r}"
        assert READ_ONLY in real_shape, f"{what}: {real.message}"
    # reads go on, and nothing of the refused writes is there
    assert same(sides, lambda s: (value(s, table, b"r0"), value(s, table, b"r1"), value(s, table, b"a"))) == (
        b"v0",
        None,
        None,
    )
    assert same(sides, lambda s: [r.row for r in s.t2.getScannerResults(table.encode(), T.TScan(), 10)]) == [b"r0"]

    # already so: no change is asked of the master
    for s in sides:
        monkeypatch.setattr(s.tables.admin, "procedure", lambda *a, **k: pytest.fail("a change was asked for"))
    assert same(sides, lambda s: s.tables.set_read_only(table, True)) is True
    monkeypatch.undo()

    assert same(sides, lambda s: s.tables.set_read_only(table, False)) is True
    assert same(sides, lambda s: s.tables.is_read_only(table)) is False
    assert same(sides, lambda s: described(s.tables.table_descriptor(table))) == before  # the round trip
    for s in sides:
        put(s, table, b"r1", b"v1")  # writes are taken again
    assert same(sides, lambda s: value(s, table, b"r1")) == b"v1"


# -- disable and enable -------------------------------------------------------------------------


def test_disable_and_enable_change_the_state_and_refuse_as_hbase(sides: list[Side]) -> None:
    table = create(sides, "de")
    assert same(sides, lambda s: s.tables.table_enabled(table)) is True

    for s in sides:
        s.tables.disable_table(table)
    assert same(sides, lambda s: s.tables.table_enabled(table)) is False
    refused(sides, lambda s: put(s, table, b"r1", b"v"), T.TIOError)  # a disabled table takes no write
    real, mini = refused(sides, lambda s: s.tables.disable_table(table), RemoteHBaseError)
    for e in (real, mini):
        assert (e.short_class, e.remote_message, e.do_not_retry) == ("TableNotEnabledException", table, True), e
        assert str(e).startswith(f"table {table}: ") and "TableNotEnabledException" in str(e), e
    assert same(sides, lambda s: s.tables.table_enabled(table)) is False  # nothing changed

    for s in sides:
        s.tables.enable_table(table)
    assert same(sides, lambda s: s.tables.table_enabled(table)) is True
    real, mini = refused(sides, lambda s: s.tables.enable_table(table), RemoteHBaseError)
    for e in (real, mini):
        assert (e.short_class, e.remote_message) == (
            "TableNotDisabledException",
            f"tableName={table}, state=ENABLED",
        ), e
    for s in sides:
        put(s, table, b"r1", b"v1")
    assert same(sides, lambda s: value(s, table, b"r1")) == b"v1"


def test_an_unknown_table_is_named_by_every_call(sides: list[Side]) -> None:
    calls: dict[str, Callable[[MasterTables, str], object]] = {
        "table_descriptor": lambda a, t: a.table_descriptor(t),
        "is_read_only": lambda a, t: a.is_read_only(t),
        "set_read_only": lambda a, t: a.set_read_only(t, True),
        "table_enabled": lambda a, t: a.table_enabled(t),
        "disable_table": lambda a, t: a.disable_table(t),
        "enable_table": lambda a, t: a.enable_table(t),
    }
    for table in (unique("nope"), f"{unique('ns')}:nope"):
        for what, call in calls.items():
            errors = refused(sides, lambda s, call=call, table=table: call(s.tables, table), TableNotFoundError)
            for s, e in zip(sides, errors, strict=True):
                assert str(e).startswith(f"table {table}: no such table"), f"{what} on {s.label}: {e}"


# -- as an HBase 2.x client makes the calls ----------------------------------------------------------


class RawMaster:
    """A MasterService connection naming HBase 2.6.1 as its client's version (walship's names
    none), for what walship's client never sends."""

    def __init__(self, address: tuple[str, int]) -> None:
        self.sock = socket.create_connection(address, timeout=30)
        self.sock.sendall(b"HBas\x00\x50")
        header = RPC_pb2.ConnectionHeader(service_name="MasterService")
        header.user_info.effective_user = "tester"
        version = HBase_pb2.VersionInfo(version="2.6.1", url="u", revision="r", user="u", date="d", src_checksum="c")
        header.version_info.CopyFrom(version)
        self.sock.sendall(connection_header(header))
        self.call_id = 0

    def call(self, method: str, request: Message, reply: type[M]) -> M | tuple[str, str]:
        """The answer, or HBase's exception: its class and its message's first line."""
        self.call_id += 1
        self.sock.sendall(
            request_frame(RPC_pb2.RequestHeader(call_id=self.call_id, method_name=method, request_param=True), request)
        )
        header, body = split_response(read_frame(self.sock, "the master"), "the master")
        assert header.call_id == self.call_id
        if header.HasField("exception"):
            first = header.exception.stack_trace.splitlines()[0]
            return header.exception.exception_class_name, first
        return reply.FromString(body or b"")

    def result(self, proc_id: int) -> tuple[str, str]:
        """The failure a finished procedure holds (class and message), waited for."""
        request = Master_pb2.GetProcedureResultRequest(proc_id=proc_id)
        done: list[Master_pb2.GetProcedureResultResponse] = []

        def finished() -> bool:
            answer = self.call("getProcedureResult", request, Master_pb2.GetProcedureResultResponse)
            assert isinstance(answer, Master_pb2.GetProcedureResultResponse), answer
            done[:] = [answer]
            return answer.state == Master_pb2.GetProcedureResultResponse.FINISHED

        wait_until(finished, what=f"procedure {proc_id} finished")
        generic = done[0].exception.generic_exception
        return generic.class_name, generic.message

    def close(self) -> None:
        self.sock.close()


def test_a_2x_client_gets_procedures_and_nonces_as_hbase_answers_them(sides: list[Side]) -> None:
    table = create(sides, "raw")
    name = HBase_pb2.TableName(namespace=b"default", qualifier=table.encode())
    raws = [RawMaster(s.master) for s in sides]

    def both(call: Callable[[RawMaster], R]) -> R:
        return same(sides, lambda s: call(raws[sides.index(s)]))

    def proc_ids(method: str, request: Message, reply: type[M]) -> list[int]:
        answers = [r.call(method, request, reply) for r in raws]
        assert all(not isinstance(a, tuple) for a in answers), answers
        return [a.proc_id for a in answers]  # type: ignore[union-attr]

    def failures(ids: list[int]) -> tuple[str, str]:
        return same(sides, lambda s: raws[sides.index(s)].result(ids[sides.index(s)]))

    try:
        # EnableTable of an enabled table: an id at once, the refusal in the procedure's result
        enable = Master_pb2.EnableTableRequest(table_name=name)
        ids = proc_ids("EnableTable", enable, Master_pb2.EnableTableResponse)
        assert failures(ids) == (
            "org.apache.hadoop.hbase.TableNotDisabledException",
            f"tableName={table}, state=ENABLED",
        )

        # the same nonce twice: one procedure
        disable = Master_pb2.DisableTableRequest(table_name=name, nonce_group=7, nonce=1001)
        first = proc_ids("DisableTable", disable, Master_pb2.DisableTableResponse)
        assert proc_ids("DisableTable", disable, Master_pb2.DisableTableResponse) == first
        wait_until(lambda: not any(s.tables.table_enabled(table) for s in sides), what=f"{table} disabled on both")
        # a refused call's nonce keeps its refusal: the call again gets a failed procedure's id
        refuse = Master_pb2.DisableTableRequest(table_name=name, nonce_group=7, nonce=1002)
        assert both(lambda r: r.call("DisableTable", refuse, Master_pb2.DisableTableResponse)) == (
            "org.apache.hadoop.hbase.TableNotEnabledException",
            f"org.apache.hadoop.hbase.TableNotEnabledException: {table}",
        )
        kept = proc_ids("DisableTable", refuse, Master_pb2.DisableTableResponse)
        assert failures(kept) == ("org.apache.hadoop.hbase.TableNotEnabledException", table)

        # READONLY as HBase reads it: "TRUE" is true (Boolean.valueOf), the call answered once it holds
        for s, r in zip(sides, raws, strict=True):
            s.tables.enable_table(table)
            schema = s.tables.table_descriptor(table)
            schema.attributes.add(first=b"READONLY", second=b"TRUE")
            modify = Master_pb2.ModifyTableRequest(table_name=name, table_schema=schema)
            assert isinstance(
                r.call("ModifyTable", modify, Master_pb2.ModifyTableResponse), Master_pb2.ModifyTableResponse
            )
        assert same(sides, lambda s: s.tables.is_read_only(table)) is True
        refused(sides, lambda s: put(s, table, b"r1", b"v"), T.TIOError)
        assert same(sides, lambda s: s.tables.set_read_only(table, False)) is True
        assert b"READONLY" not in same(sides, lambda s: described(s.tables.table_descriptor(table)))["values"]

        # the master's sanity check: a table without column families
        empty = Master_pb2.ModifyTableRequest(table_name=name, table_schema=HBase_pb2.TableSchema(table_name=name))
        refusal = both(lambda r: r.call("ModifyTable", empty, Master_pb2.ModifyTableResponse))
        assert isinstance(refusal, tuple) and refusal[0] == "org.apache.hadoop.hbase.DoNotRetryIOException"
        assert "at least one column family" in refusal[1], refusal

        # descriptors by pattern and by namespace
        def listed(request: Master_pb2.GetTableDescriptorsRequest) -> Callable[[RawMaster], object]:
            def call(r: RawMaster) -> object:
                answer = r.call("GetTableDescriptors", request, Master_pb2.GetTableDescriptorsResponse)
                return (
                    answer if isinstance(answer, tuple) else sorted(t.table_name.qualifier for t in answer.table_schema)
                )

            return call

        assert both(listed(Master_pb2.GetTableDescriptorsRequest(regex=f"default:{table}"))) == [table.encode()]
        ns = unique("ns")
        assert both(listed(Master_pb2.GetTableDescriptorsRequest(namespace=ns))) == (
            "org.apache.hadoop.hbase.NamespaceNotFoundException",
            f"org.apache.hadoop.hbase.NamespaceNotFoundException: {ns}",
        )
    finally:
        for r in raws:
            r.close()
