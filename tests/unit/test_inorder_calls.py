"""A sink's calls, sent in order from one background thread while the next is built."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest

from walship.errors import SinkError
from walship.sinks.base import ApplyStats
from walship.sinks.inorder import Sender


class Peer:
    """What the sender's calls reach: each call is ``func(self)``; ``gate`` holds a call back."""

    def __init__(self) -> None:
        self.applied: list[int] = []
        self.running = 0
        self.most_at_once = 0
        self.lock = threading.Lock()
        self.gate = threading.Event()
        self.gate.set()

    def call(self, func: Callable[[Any], Any], what: str, stats: ApplyStats) -> Any:
        with self.lock:
            self.running += 1
            self.most_at_once = max(self.most_at_once, self.running)
        try:
            self.gate.wait(10)
            return func(self)
        finally:
            with self.lock:
                self.running -= 1


def apply(n: int) -> Callable[[Peer], None]:
    return lambda peer: peer.applied.append(n)


def refuse(n: int) -> Callable[[Peer], None]:
    def call(peer: Peer) -> None:
        raise SinkError(f"peer refused call {n}")

    return call


def test_calls_reach_the_peer_one_at_a_time_in_the_order_sent() -> None:
    peer, stats = Peer(), ApplyStats()
    sender = Sender(peer.call, "test")
    try:
        with sender.batch(stats) as calls:
            for n in range(200):
                calls.send(apply(n), f"call {n}")
        assert peer.applied == list(range(200))
        assert peer.most_at_once == 1 and stats.calls == 200
        with sender.batch(stats) as calls:  # the thread serves batch after batch
            calls.send(apply(200), "call 200")
        assert peer.applied[-1] == 200
    finally:
        sender.close()


def test_send_returns_while_the_call_is_at_the_peer_and_waits_only_when_too_far_ahead() -> None:
    peer, stats = Peer(), ApplyStats()
    sender = Sender(peer.call, "test")
    peer.gate.clear()  # the peer holds every call
    done = threading.Event()

    def build() -> None:
        with sender.batch(stats, ahead=2) as calls:
            for n in range(3):  # one at the peer, two waiting: none of these blocks
                calls.send(apply(n), f"call {n}")
            done.set()
            calls.send(apply(3), "call 3")  # a third waiting: blocks until the peer answers

    builder = threading.Thread(target=build)
    builder.start()
    try:
        assert done.wait(10)
        builder.join(0.2)
        assert builder.is_alive() and peer.applied == []
    finally:
        peer.gate.set()
        builder.join(10)
        sender.close()
    assert peer.applied == [0, 1, 2, 3]


def test_nothing_after_a_failed_call_reaches_the_peer_and_its_error_is_raised() -> None:
    peer, stats = Peer(), ApplyStats()
    sender = Sender(peer.call, "test")
    try:
        with pytest.raises(SinkError, match="peer refused call 2"), sender.batch(stats) as calls:
            for n in range(10):
                calls.send(refuse(n) if n == 2 else apply(n), f"call {n}")
        assert peer.applied == [0, 1]
    finally:
        sender.close()


def test_a_builder_that_fails_waits_for_the_call_at_the_peer_and_sends_nothing_more() -> None:
    peer, stats = Peer(), ApplyStats()
    sender = Sender(peer.call, "test")
    peer.gate.clear()
    released = threading.Timer(0.2, peer.gate.set)
    released.start()
    try:
        with pytest.raises(ValueError, match="bad cell"), sender.batch(stats) as calls:
            calls.send(apply(0), "call 0")
            calls.send(apply(1), "call 1")
            raise ValueError("bad cell")
        # the block ended only after the call at the peer did: nothing runs on the connection now
        assert peer.running == 0
        assert peer.applied in ([0], [])  # the queued call was cancelled or skipped, never sent
        assert 1 not in peer.applied
    finally:
        released.cancel()
        peer.gate.set()
        sender.close()
