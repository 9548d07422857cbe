"""The exceptions walship raises.

Every error walship raises on purpose derives from :class:`WalshipError`, so a caller can
catch the whole family in one place and let programming errors through::

    WalshipError
    ├── WalError                     a write-ahead log cannot be read as HBase wrote it
    │   ├── CorruptWalError          bytes that are all present but do not parse (file, offset)
    │   ├── UnsupportedWalError      a header walship refuses: compression, encryption, codec
    │   └── InvalidWalNameError      a file name that is not an HBase WAL name
    ├── ConfigError                  invalid configuration or command-line input
    │   ├── SinkNotFoundError        a peer names a sink protocol no sink is registered for
    │   ├── WalRootError             a WAL root whose file system cannot be opened (names the
    │   │                            URL and what it needs: libhdfs for ``hdfs://``)
    │   ├── SparkSetupError          a Spark submit that cannot run as configured: a YARN queue
    │   │   │                        that does not exist, a packed environment (``archive``)
    │   │   │                        that is missing (names the queue or archive, and the
    │   │   │                        connection)
    │   │   └── YarnUnavailableError the ResourceManager does not answer (names its address)
    │   └── FilterSyntaxError        a Thrift filter string that does not parse (minicluster)
    ├── ZooKeeperServerError         the local ZooKeeper server could not be started or stopped
    ├── HarnessError                 the real-HBase harness is not built, did not start, or
    │                                refused a command (names the cluster and the command)
    ├── MiniClusterError             the embedded cluster refused a request: TableNotFoundError,
    │   │                            TableExistsError, TableDisabledError, ReadOnlyTableError,
    │   │                            NoSuchFamilyError, BadRequestError (also a ValueError)
    │   └── MasterCallError          its master answers a call with one of HBase's exceptions
    │                                (names HBase's class, its message and the cause it chains)
    ├── ReplicationError             shipping failed: WalMissingError, SinkError
    │   │                            (SinkUnavailableError, SubscriberError), IncompatibleEditError,
    │   │                            DeadLetterError, ReplayGapError, TailError
    │   └── BarrierReadError         the replication barriers in the source's hbase:meta cannot be
    │       │                        read or parsed (names the Thrift2 server, table, region, row
    │       │                        and column)
    │       └── BarrierUnavailableError  the source's Thrift2 server does not answer
    ├── ScopeError                   the scope policy cannot be read or enforced (names the
    │   │                            cluster, peer, table and family)
    │   └── ScopeUnavailableError    a Thrift server of the source or of a peer does not answer
    ├── ChangeLogError               the Parquet change log cannot be written, read or compacted
    │                                (names the URL, partition, file or flag)
    ├── VerifyError                  `walship verify` cannot compare a peer with the source (names
    │   │                            the peer, table, family or flag)
    │   └── VerifyUnavailableError   a Thrift2 server of the source or of the peer does not answer
    ├── KerberosError                Kerberos: a login or a server's authentication failed (names
    │   │                            the principal, and the keytab or the server)
    │   ├── KeytabError              the keytab is missing, unreadable or not a keytab
    │   ├── KerberosLoginError       the KDC gives the principal no ticket (unknown principal,
    │   │                            no key for it, an expired ticket and no keytab)
    │   ├── SaslAuthError            a server refused the principal in SASL or SPNEGO (names it)
    │   └── FileAccessError          a file system (HDFS, WebHDFS) refused walship's user or
    │                                principal a listing, read or delete (names URL and principal)
    ├── MasterError                  HBase's master (its RPC, walship.rpc) refused or failed a call
    │   ├── MasterNotFoundError      no active master is registered in ZooKeeper (names the znode)
    │   ├── MasterUnavailableError   the registered master does not answer (names its address)
    │   ├── RemoteHBaseError         the master answered with one of HBase's exceptions (names
    │   │                            its class: ReplicationException, DoNotRetryIOException, ...)
    │   ├── ProcedureFailedError     the procedure a call started failed (names it and its error)
    │   ├── TableNotFoundError       the master knows no such table (names it; also a
    │   │                            MiniClusterError: the minicluster raises it too)
    │   └── MasterRunningError       a change for a cluster that is down (--offline) refused while
    │                                a master is registered (names it)
    └── ZkError                      replication state in ZooKeeper
        ├── ZkUnavailableError       ZooKeeper cannot be reached (or the session was lost)
        ├── ZkAuthError              ZooKeeper refused: no or wrong credentials for a znode
        ├── ZkDataError              a znode holds data HBase would not write (names the path)
        ├── PeerError                peers: PeerNotFoundError, PeerExistsError,
        │                            InvalidPeerConfigError (also a ConfigError),
        │                            DoubleShippingError
        └── QueueError               queues: QueueNotFoundError, PositionBackwardsError,
                                     InvalidQueueIdError (also a ConfigError)

Messages name the thing that is wrong and where it is (file and byte offset, flag, znode
path, peer id), so that an operator can find it without reading code.

A queue's failed shipping pass is counted by kind (:data:`ERROR_KINDS`, from
:func:`error_kind`): a closed set, so the ``walship_ship_errors_total{peer,kind}`` series are
few and known in advance.
"""

from __future__ import annotations


class WalshipError(Exception):
    """Root of every error walship raises on purpose."""


class ConfigError(WalshipError, ValueError):
    """Invalid configuration or command-line input."""


class SinkNotFoundError(ConfigError):
    """A peer's ``walship.sink.protocol`` names no registered sink."""


class FilterSyntaxError(ConfigError):
    """A filter string that does not parse; the message names the position."""


class WalRootError(ConfigError):
    """A WAL root whose file system cannot be opened (an ``hdfs://`` root without libhdfs,
    Java or the Hadoop client jars); the message names the URL and what it needs."""


class SparkSetupError(ConfigError):
    """A Spark submit that cannot run as configured: the YARN queue does not exist, the packed
    environment (``--archives``) is missing, the ResourceManager does not answer, or an
    environment cannot be packed. The message names the queue, archive or address."""


class YarnUnavailableError(SparkSetupError):
    """The YARN ResourceManager does not answer (trying again later may help)."""


class ZooKeeperServerError(WalshipError):
    """The local ZooKeeper server could not be started or stopped."""


class WalError(WalshipError):
    """A write-ahead log cannot be read as HBase wrote it.

    :param path: the file, as the caller named it.
    :param offset: the byte offset the problem starts at, or ``None`` when not about a byte.
    """

    def __init__(self, path: str, offset: int | None, reason: str) -> None:
        where = path if offset is None else f"{path} at byte offset {offset}"
        super().__init__(f"{where}: {reason}")
        self.path = path
        self.offset = offset
        self.reason = reason


class CorruptWalError(WalError):
    """Bytes that are all present in the file but do not parse as a WAL entry."""


class UnsupportedWalError(WalError):
    """A WAL walship will not read: compressed, value-compressed, encrypted, or an unknown
    writer or cell codec. The reason says which."""


class InvalidWalNameError(WalshipError, ValueError):
    """A file name that is not an HBase WAL name."""

    def __init__(self, name: str, reason: str) -> None:
        super().__init__(f"not a WAL file name: {name!r}: {reason}")
        self.name = name


class ZkError(WalshipError):
    """Replication state in ZooKeeper cannot be read or changed as asked."""


class ZkUnavailableError(ZkError):
    """ZooKeeper cannot be reached (connection refused, timed out, session lost)."""


class ZkAuthError(ZkError):
    """ZooKeeper refused an operation on a znode for want of the right credentials."""


class ZkDataError(ZkError):
    """A znode holds data that is not what HBase writes there.

    :param path: the znode path.
    """

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"znode {path}: {reason}")
        self.path = path
        self.reason = reason


class PeerError(ZkError):
    """A replication peer operation failed: the message names the peer id."""


class PeerNotFoundError(PeerError):
    """No peer with that id exists."""


class PeerExistsError(PeerError):
    """A peer with that id exists already."""


class InvalidPeerConfigError(PeerError, ConfigError):
    """A peer id, cluster key, table-cfs spec or configuration entry is invalid."""


class DoubleShippingError(PeerError):
    """A walship-managed peer whose HBase peer-state is ENABLED: HBase's own replication
    source would ship it too. The message names the peer and the fix."""


class QueueError(ZkError):
    """A replication queue operation failed: the message names the znode."""


class QueueNotFoundError(QueueError):
    """The queue or WAL znode does not exist (claimed by another server, or removed)."""


class PositionCarriedError(QueueNotFoundError):
    """The queue was claimed while a batch was applied: the batch's position was carried to
    where the queue went."""


class PositionBackwardsError(QueueError):
    """A position update would move a WAL's position backwards."""


class InvalidQueueIdError(QueueError, ConfigError):
    """A queue id that HBase's ReplicationQueueInfo would not parse."""


class HarnessError(WalshipError):
    """The real-HBase harness (``harness/``, HBase's own test cluster) is not built, did not
    start, or refused a command; the message names the cluster and the command."""


class MiniClusterError(WalshipError):
    """The embedded cluster refused a request; Thrift reports it as ``IOError``."""


class HandlerFailureError(MiniClusterError):
    """A request HBase 2.6's Thrift handler fails on inside (a NullPointerException): Thrift
    reports it as an internal error (``TApplicationException``), the message naming the thing."""


class TableExistsError(MiniClusterError):
    """The table exists already (Thrift ``AlreadyExists``)."""


class TableDisabledError(MiniClusterError):
    """The table is disabled (HBase's TableNotEnabledException)."""


class ReadOnlyTableError(MiniClusterError):
    """A write to a table whose descriptor says READONLY: HBase's region refuses it
    (``DoNotRetryIOException: region is read only``), and the Thrift servers answer as HBase's
    do (see :mod:`walship_testing.minicluster.readonly`).

    :param table: the table.
    :param actions: the mutations refused (HBase's client counts each one of a batch).
    :param servers: the region servers holding the rows' regions (``host,port,startcode``).
    """

    def __init__(self, table: bytes, actions: int, servers: list[str]) -> None:
        super().__init__(f"table {table.decode(errors='replace')} is read only: {actions} mutation(s) refused")
        self.table = table
        self.actions = actions
        self.servers = servers


class NoSuchFamilyError(MiniClusterError):
    """The table has no such column family (HBase's NoSuchColumnFamilyException)."""


class BadRequestError(MiniClusterError, ValueError):
    """An invalid argument (Thrift ``IllegalArgument``)."""


class MasterCallError(MiniClusterError):
    """The minicluster's master refusing or failing a call as HBase's master does: answered
    over HBase's RPC as HBase's exception, by its Java class name and message.

    :param exception_class: HBase's (or Java's) class, e.g.
        ``org.apache.hadoop.hbase.DoNotRetryIOException``.
    :param message: the exception's message (``None``: it has none, as Java allows).
    :param do_not_retry: HBase's ``ExceptionResponse.do_not_retry``: the class is a
        ``DoNotRetryIOException``.
    :param cause: the exception HBase chains to it (shown in the stack trace's ``Caused by:``).
    """

    def __init__(
        self,
        exception_class: str,
        message: str | None,
        *,
        do_not_retry: bool,
        cause: MasterCallError | None = None,
    ) -> None:
        text = exception_class if message is None else f"{exception_class}: {message}"
        super().__init__(text)
        self.exception_class = exception_class
        self.message = message
        self.do_not_retry = do_not_retry
        self.cause = cause

    @property
    def java_string(self) -> str:
        """Java's ``Throwable.toString()``: the class, then ``: message`` when it has one."""
        return self.exception_class if self.message is None else f"{self.exception_class}: {self.message}"

    @property
    def stack_trace(self) -> str:
        """What HBase's server puts in ``ExceptionResponse.stack_trace``
        (``StringUtils.stringifyException``): the exception, then each cause's line."""
        lines = [self.java_string]
        cause = self.cause
        while cause is not None:
            lines.append(f"Caused by: {cause.java_string}")
            cause = cause.cause
        return "\n".join(lines)


class ReplicationError(WalshipError):
    """Shipping a queue failed; the message names the peer, queue, WAL and offset."""


class WalMissingError(ReplicationError):
    """A WAL named in a queue is in neither ``WALs/`` nor ``oldWALs/``."""


class SinkError(ReplicationError):
    """The peer refused or could not take a batch."""


class SinkUnavailableError(SinkError):
    """No Thrift server of the peer answered (after retries on every server)."""


class SubscriberError(SinkError):
    """A subscription's listener (or its change log) did not take a batch: the batch is
    delivered again, with back-off while tailing."""


class IncompatibleEditError(ReplicationError):
    """An edit the sink cannot express (Thrift1 has no single-version Delete nor
    DeleteFamilyVersion) under ``walship.incompatible=fail``."""


class ReplayGapError(ReplicationError):
    """The WALs that covered part of a replay window are gone; retrying will not bring them back."""


class DeadLetterError(ReplicationError):
    """A dead letter could not be written, read or replayed; the message names the file."""


class TailError(ReplicationError):
    """A tailing run ended with errors (each names its queue)."""


class ScopeError(WalshipError):
    """The scope policy (``walship scope``) cannot be read or enforced: a Thrift server
    refused, a table-cfs names a table the source lacks, a peer cannot be checked. The
    message names the cluster, the peer, the table and the family."""


class ScopeUnavailableError(ScopeError):
    """A Thrift server of the source (``--source-thrift2``) or of a peer does not answer."""


class VerifyError(WalshipError):
    """``walship verify`` cannot compare a peer with its source as asked: an unknown table or
    family, a family the peer does not replicate, a bad time range, a peer without Thrift2
    servers, a server that refused a scan. The message names the peer, table, family or flag."""


class VerifyUnavailableError(VerifyError):
    """A Thrift2 server of the source (``--source-thrift2``) or of the peer
    (``walship.sink.thrift2``) does not answer."""


class SwitchoverError(WalshipError):
    """A step of a switchover (``walship switchover``) cannot run or failed: a precondition not
    met, a cluster that does not answer, a drain that did not finish, rows that differ. The
    message names the step, the peer and the table; what the switchover changed so far is
    recorded, so that it can be resumed or rolled back."""


class SwitchoverStateError(SwitchoverError):
    """A step asked for out of turn: the step before it has not run, the switch was already
    reported (no rollback after it), or another switchover to the peer is unfinished."""


class ChangeLogError(WalshipError):
    """The Parquet change log (sink ``changelog``, ``walship changelog``) cannot be written,
    read or compacted: a URL that does not resolve or does not exist, a date that is not
    ``YYYY-MM-DD``, a file that is not Parquet or not of the log. The message names it."""


class BarrierReadError(ReplicationError):
    """The replication barriers of a region (serial replication: ``rep_barrier`` in the
    source's ``hbase:meta``) cannot be read, or hold bytes HBase would not write. The message
    names the Thrift2 server and the table and region, or the meta row and column."""


class BarrierUnavailableError(BarrierReadError):
    """The source's Thrift2 server does not answer (or a call to it failed on the way)."""


class KerberosError(WalshipError):
    """Kerberos refused walship's identity (names the principal, and the keytab or the server)."""


class KeytabError(KerberosError, ConfigError):
    """The keytab given is missing, unreadable or not a keytab."""


class KerberosLoginError(KerberosError):
    """The KDC gives the principal no ticket: unknown principal, no key for it in the keytab,
    an expired ticket and no keytab."""


class SaslAuthError(KerberosError):
    """A server (HBase's master, a Thrift server, WebHDFS) refused the principal during SASL or
    SPNEGO authentication, or the two sides agree on no protection level."""


class FileAccessError(KerberosError, PermissionError):
    """A file system refused walship (its Kerberos principal, or its user without one) a
    listing, a read or a delete: names the root URL, the path and the principal."""


class MasterError(WalshipError):
    """HBase's master refused or failed a call of its RPC (:mod:`walship.rpc`)."""


class MasterNotFoundError(MasterError):
    """No active master is registered in ZooKeeper; the message names the znode."""


class MasterUnavailableError(MasterError):
    """The registered master does not answer; the message names its address and the znode."""


class MetaLocationMissingError(MasterUnavailableError):
    """A cluster's ZooKeeper holds no hbase:meta location (a cluster still starting, or one
    whose region servers serve no RPC); the message names the znode."""


class RemoteHBaseError(MasterError):
    """The master answered a call with one of HBase's exceptions.

    :ivar exception_class: HBase's exception class, e.g.
        ``org.apache.hadoop.hbase.replication.ReplicationException``.
    :ivar remote_message: the exception's message, as HBase wrote it.
    :ivar do_not_retry: HBase marked it final.
    """

    def __init__(self, message: str, *, exception_class: str, remote_message: str, do_not_retry: bool) -> None:
        super().__init__(message)
        self.exception_class = exception_class
        self.remote_message = remote_message
        self.do_not_retry = do_not_retry

    @property
    def short_class(self) -> str:
        """The class's simple name (``ReplicationException``)."""
        return self.exception_class.rsplit(".", 1)[-1]


class ProcedureFailedError(MasterError):
    """A procedure of the master's (AddPeerProcedure, ...) finished with an error."""


class MasterRunningError(MasterError):
    """A change meant for a cluster that is down (``--offline``) while a master is registered."""


class TableNotFoundError(MasterError, MiniClusterError):
    """No such table (HBase's TableNotFoundException); the message names it. Raised by
    :class:`~walship.rpc.MasterAdmin` for a table the master does not know (a
    :class:`MasterError`), and by the minicluster for a table it does not have (a
    :class:`MiniClusterError`, answered over Thrift as ``IOError``)."""


#: The kinds of a shipping error, as :func:`error_kind` names them: a closed set (the metric
#: ``walship_ship_errors_total`` has one series per peer and kind, each there from the start).
#:
#: - ``peer-unavailable``: no Thrift server of the peer answered (:class:`SinkUnavailableError`)
#: - ``peer-refused``: the peer (or a subscription's listener) refused a batch (:class:`SinkError`)
#: - ``incompatible-edit``: an edit the sink cannot express (:class:`IncompatibleEditError`)
#: - ``dead-letter``: a dead letter could not be written (:class:`DeadLetterError`)
#: - ``wal-missing``: a queued WAL is in neither ``WALs/`` nor ``oldWALs/`` (:class:`WalMissingError`)
#: - ``wal-unreadable``: a WAL does not parse or is of a kind walship refuses (:class:`WalError`)
#: - ``serial-barriers``: a serial peer's barriers could not be read (:class:`BarrierReadError`)
#: - ``security``: Kerberos or ZooKeeper refused walship's identity (:class:`KerberosError`,
#:   :class:`ZkAuthError`)
#: - ``config``: invalid configuration (:class:`ConfigError`)
#: - ``zookeeper``: replication state in ZooKeeper could not be read or changed (:class:`ZkError`)
#: - ``other``: anything else
ERROR_KINDS = (
    "peer-unavailable",
    "peer-refused",
    "incompatible-edit",
    "dead-letter",
    "wal-missing",
    "wal-unreadable",
    "serial-barriers",
    "security",
    "config",
    "zookeeper",
    "other",
)

#: Most specific first: the first class an error is an instance of names its kind.
_KIND_OF: tuple[tuple[type[BaseException], str], ...] = (
    (SinkUnavailableError, "peer-unavailable"),
    (SinkError, "peer-refused"),
    (IncompatibleEditError, "incompatible-edit"),
    (DeadLetterError, "dead-letter"),
    (WalMissingError, "wal-missing"),
    (WalError, "wal-unreadable"),
    (BarrierReadError, "serial-barriers"),
    (KerberosError, "security"),
    (ZkAuthError, "security"),
    (ConfigError, "config"),
    (ZkError, "zookeeper"),
)


def error_kind(exc: BaseException) -> str:
    """The kind of a shipping error, one of :data:`ERROR_KINDS`.

    Example::

        error_kind(SinkUnavailableError("no Thrift server of peer 1 answered"))  # "peer-unavailable"
    """
    for cls, kind in _KIND_OF:
        if isinstance(exc, cls):
            return kind
    return "other"
