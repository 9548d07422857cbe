"""kazoo's threading handler with a ``poll`` wait: what its connection thread asks of
``select`` (ready to read, to write, a timeout, a hang-up seen as readable, a closed socket
refused), answered on real sockets; ZooKeeper itself runs through it in every other test."""

from __future__ import annotations

import os
import socket
import time

import pytest

from walship.zk.handler import PollingHandler


def test_a_socket_is_readable_once_written_to_and_writable_at_once() -> None:
    handler = PollingHandler()
    a, b = socket.socketpair()
    with a, b:
        assert handler.select([a, b], [], [], 0) == ([], [], [])
        b.send(b"x")
        assert handler.select([a, b], [], [], 1.0) == ([a], [], [])
        assert handler.select([a], [a, b], [], 0) == ([a], [a, b], [])
        assert handler.select([a.fileno()], [], [], 0) == ([a.fileno()], [], [])  # descriptors too


def test_a_wait_ends_at_its_timeout_with_nothing_ready() -> None:
    handler = PollingHandler()
    a, b = socket.socketpair()
    with a, b:
        started = time.monotonic()
        assert handler.select([a], [], [], 0.05) == ([], [], [])
        assert time.monotonic() - started >= 0.05
        with pytest.raises(ValueError, match="non-negative"):
            handler.select([a], [], [], -1)


def test_a_hang_up_is_readable_and_a_closed_socket_refused() -> None:
    handler = PollingHandler()
    a, b = socket.socketpair()
    with a:
        b.close()
        assert handler.select([a], [], [], 1.0) == ([a], [], [])  # the read then sees the end
        assert a.recv(1) == b""
    fd = a.fileno()
    assert fd == -1
    with pytest.raises(ValueError, match="invalid file descriptor"):
        handler.select([a], [], [], 0)
    r, w = os.pipe()
    os.close(r)
    os.close(w)
    with pytest.raises(ValueError, match=f"invalid file descriptor: {r} \\(closed\\)"):
        handler.select([r], [], [], 0)  # a number no longer open: poll says so, as select would
