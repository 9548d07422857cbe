"""A subscription's settings, read from its peer's configuration map.

A subscription hands its events either to a listener (sink ``sep``) or to a Parquet change
log (sink ``changelog``, :mod:`walship.sep.parquetlog`):

=============================  ==================================================================
``walship.sink.protocol``      ``sep`` (a listener) or ``changelog`` (a Parquet change log)
``walship.subscription``       ``true``: the peer is a subscription
``walship.sep.listener``       ``sep``: the listener, an entry-point name or ``module:Class``
``walship.sep.threads``        ``sep``: workers rows are hashed over (default 1)
``walship.sep.payload-column`` ``sep``: ``family:qualifier`` whose value becomes the event's payload
``walship.changelog.url``      ``changelog``: the log's root, any fsspec URL
``walship.sep.start-time``     epoch ms: entries written before it are not delivered
``walship.sep.filter``         ``module:callable`` keeping the events it returns truthy for
=============================  ==================================================================
"""

from __future__ import annotations

from dataclasses import dataclass

from walship.errors import ConfigError, InvalidPeerConfigError
from walship.peer import PeerConfig

__all__ = [
    "CHANGELOG_PROTOCOL",
    "CHANGELOG_URL_KEY",
    "FILTER_KEY",
    "LISTENER_KEY",
    "MAX_THREADS",
    "PAYLOAD_COLUMN_KEY",
    "PROTOCOL",
    "PROTOCOL_KEY",
    "START_TIME_KEY",
    "THREADS_KEY",
    "SepSettings",
    "parse_payload_column",
]

#: the sink protocol key (as :mod:`walship.sinks.base` names it; this layer sits below sinks)
PROTOCOL_KEY = "walship.sink.protocol"
PROTOCOL = "sep"
CHANGELOG_PROTOCOL = "changelog"
LISTENER_KEY = "walship.sep.listener"
THREADS_KEY = "walship.sep.threads"
START_TIME_KEY = "walship.sep.start-time"
PAYLOAD_COLUMN_KEY = "walship.sep.payload-column"
FILTER_KEY = "walship.sep.filter"
CHANGELOG_URL_KEY = "walship.changelog.url"
MAX_THREADS = 256
#: the settings only a listener has
_LISTENER_ONLY = (LISTENER_KEY, THREADS_KEY, PAYLOAD_COLUMN_KEY)


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
    """A subscription's settings, checked: exactly one of ``listener`` and ``changelog_url``
    is set."""

    name: str
    listener: str | None = None
    threads: int = 1
    start_time: int | None = None
    payload_column: tuple[bytes, bytes] | None = None
    filter: str | None = None
    changelog_url: str | None = None

    @classmethod
    def of(cls, peer: PeerConfig) -> SepSettings:
        """:raises InvalidPeerConfigError: a setting is missing, malformed or of the other kind
        of subscription (the message names the key and the subscription)."""
        conf = peer.configuration

        def bad(key: str, why: str) -> InvalidPeerConfigError:
            return InvalidPeerConfigError(f"subscription {peer.peer_id}: {key}: {why}")

        start_time: int | None = None
        start_text = conf.get(START_TIME_KEY, "").strip()
        if start_text:
            try:
                start_time = int(start_text)
            except ValueError:
                raise bad(START_TIME_KEY, f"not epoch milliseconds: {start_text!r}") from None
            if start_time < 0:
                raise bad(START_TIME_KEY, f"must be >= 0, got {start_time}")
        hook = conf.get(FILTER_KEY, "").strip() or None
        url = conf.get(CHANGELOG_URL_KEY, "").strip()
        if conf.get(PROTOCOL_KEY, "").strip() == CHANGELOG_PROTOCOL:
            if not url:
                raise bad(CHANGELOG_URL_KEY, "not set: give the change log's URL (any fsspec URL, or a path)")
            for key in _LISTENER_ONLY:
                if conf.get(key, "").strip():
                    raise bad(key, f"does not apply to a change log ({PROTOCOL_KEY}={CHANGELOG_PROTOCOL})")
            return cls(peer.peer_id, None, 1, start_time, None, hook, url)
        if url:
            raise bad(CHANGELOG_URL_KEY, f"applies only to a change log ({PROTOCOL_KEY}={CHANGELOG_PROTOCOL})")
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
        payload: tuple[bytes, bytes] | None = None
        payload_text = conf.get(PAYLOAD_COLUMN_KEY, "").strip()
        if payload_text:
            try:
                payload = parse_payload_column(payload_text)
            except ConfigError as exc:
                raise bad(PAYLOAD_COLUMN_KEY, str(exc)) from None
        return cls(peer.peer_id, listener, threads, start_time, payload, hook)
