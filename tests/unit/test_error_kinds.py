"""The kinds shipping errors are counted by: a closed set, the most specific class winning."""

from __future__ import annotations

import pytest

from walship.errors import (
    ERROR_KINDS,
    BarrierUnavailableError,
    CorruptWalError,
    DeadLetterError,
    IncompatibleEditError,
    InvalidPeerConfigError,
    KeytabError,
    QueueError,
    ReplicationError,
    SinkError,
    SinkUnavailableError,
    SubscriberError,
    UnsupportedWalError,
    WalMissingError,
    ZkAuthError,
    ZkUnavailableError,
    error_kind,
)


@pytest.mark.parametrize(
    ("exc", "kind"),
    [
        (SinkUnavailableError("no Thrift server of peer 1 answered"), "peer-unavailable"),
        (SinkError("peer 1 refused the batch"), "peer-refused"),
        (SubscriberError("listener refused"), "peer-refused"),
        (IncompatibleEditError("Delete of one version"), "incompatible-edit"),
        (DeadLetterError("cannot write"), "dead-letter"),
        (WalMissingError("WAL w not found"), "wal-missing"),
        (CorruptWalError("w", 12, "bad bytes"), "wal-unreadable"),
        (UnsupportedWalError("w", None, "compressed"), "wal-unreadable"),
        (BarrierUnavailableError("Thrift2 server down"), "serial-barriers"),
        (KeytabError("no keytab"), "security"),  # also a ConfigError: security wins
        (ZkAuthError("refused"), "security"),
        (InvalidPeerConfigError("bad table-cfs"), "config"),  # also a ZkError: config wins
        (ZkUnavailableError("connection lost"), "zookeeper"),
        (QueueError("queue znode changed"), "zookeeper"),
        (ReplicationError("something else"), "other"),
        (RuntimeError("not walship's"), "other"),
    ],
)
def test_error_kind(exc: BaseException, kind: str) -> None:
    assert error_kind(exc) == kind
    assert kind in ERROR_KINDS


def test_the_kinds_are_few_and_distinct() -> None:
    assert len(ERROR_KINDS) == len(set(ERROR_KINDS)) == 11
