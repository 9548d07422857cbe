"""A subscription's settings, read from its peer's configuration map.

=============================  ==================================================================
``walship.sink.protocol``      ``sep``
``walship.subscription``       ``true``: the peer is a subscription
``walship.sep.listener``       the listener: an entry-point name or ``module:Class``
``walship.sep.threads``        workers rows are hashed over (default 1)
``walship.sep.start-time``     epoch ms: entries written before it are not delivered
``walship.sep.payload-column`` ``family:qualifier`` whose value becomes the event's payload
``walship.sep.filter``         ``module:callable`` keeping the events it returns truthy for
=============================  ==================================================================
"""

from __future__ import annotations

from dataclasses import dataclass

from walship.errors import ConfigError, InvalidPeerConfigError
from walship.zk.peers import PeerConfig

__all__ = [
    "FILTER_KEY",
    "LISTENER_KEY",
    "MAX_THREADS",
    "PAYLOAD_COLUMN_KEY",
    "PROTOCOL",
    "START_TIME_KEY",
    "THREADS_KEY",
    "SepSettings",
    "parse_payload_column",
]

PROTOCOL = "sep"
LISTENER_KEY = "walship.sep.listener"
THREADS_KEY = "walship.sep.threads"
START_TIME_KEY = "walship.sep.start-time"
PAYLOAD_COLUMN_KEY = "walship.sep.payload-column"
FILTER_KEY = "walship.sep.filter"
MAX_THREADS = 256


def parse_payload_column(text: str) -> tuple[bytes, bytes]:
    """``family:qualifier`` (the qualifier may be empty, the family may not).

    :raises ConfigError: not of that form.
    """
    family, sep, qualifier = text.partition(":")
    if not sep or not family or not family.isprintable() or not qualifier.isprintable():
        raise ConfigError(f"{text!r} is not family:qualifier")
    return family.encode(), qualifier.encode()


@dataclass(frozen=True)
class SepSettings:
    """A subscription's settings, checked."""

    name: str
    listener: str
    threads: int = 1
    start_time: int | None = None
    payload_column: tuple[bytes, bytes] | None = None
    filter: str | None = None

    @classmethod
    def of(cls, peer: PeerConfig) -> SepSettings:
        """:raises InvalidPeerConfigError: a setting is missing or malformed (the message names
        the key and the subscription)."""
        conf = peer.configuration

        def bad(key: str, why: str) -> InvalidPeerConfigError:
            return InvalidPeerConfigError(f"subscription {peer.peer_id}: {key}: {why}")

        listener = conf.get(LISTENER_KEY, "").strip()
        if not listener:
            raise bad(LISTENER_KEY, "not set: name the listener (an entry-point name or module:Class)")
        threads_text = conf.get(THREADS_KEY, "1").strip()
        try:
            threads = int(threads_text)
        except ValueError:
            raise bad(THREADS_KEY, f"not an integer: {threads_text!r}") from None
        if not 1 <= threads <= MAX_THREADS:
            raise bad(THREADS_KEY, f"must be between 1 and {MAX_THREADS}, got {threads}")
        start_time: int | None = None
        start_text = conf.get(START_TIME_KEY, "").strip()
        if start_text:
            try:
                start_time = int(start_text)
            except ValueError:
                raise bad(START_TIME_KEY, f"not epoch milliseconds: {start_text!r}") from None
            if start_time < 0:
                raise bad(START_TIME_KEY, f"must be >= 0, got {start_time}")
        payload: tuple[bytes, bytes] | None = None
        payload_text = conf.get(PAYLOAD_COLUMN_KEY, "").strip()
        if payload_text:
            try:
                payload = parse_payload_column(payload_text)
            except ConfigError as exc:
                raise bad(PAYLOAD_COLUMN_KEY, str(exc)) from None
        hook = conf.get(FILTER_KEY, "").strip() or None
        return cls(peer.peer_id, listener, threads, start_time, payload, hook)
