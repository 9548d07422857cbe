"""What a silent Thrift server speaks, asked on a connection of its own when a connection's
first answer does not come: a SASL server and a plain one each wait, unanswering, for more of
what they take when spoken to the other way.

* HBase 2.6's SASL server (Apache Thrift's ``TSaslServerTransport``) takes a call's first byte
  for a negotiation status, finds none (``NegotiationStatus.byValue`` throws), and neither
  answers nor closes; but to a ``START`` naming a mechanism it does not offer it answers at
  once ``BAD "Unsupported mechanism type ..."`` (:func:`sasl_refusal`).
* A plain Thrift server takes SASL's ``START`` for the start of a call (a 16 MB method name)
  and waits for the rest; but a call of a method no service has it answers at once with an
  ``EXCEPTION`` message (:func:`answers_thrift`).
"""

from __future__ import annotations

import contextlib
import logging
import struct
from collections.abc import Callable
from typing import Any

__all__ = ["PROBE_TIMEOUT_MS", "answers_thrift", "sasl_refusal"]

log = logging.getLogger(__name__)

#: how long a probe waits for its answer
PROBE_TIMEOUT_MS = 5_000
#: a mechanism no server offers
_MECHANISM = b"walship-probe"
_METHOD = b"walshipProbe"
_BAD = 3


def _call(protocol: str) -> bytes:
    """A call of :data:`_METHOD` without arguments (sequence id 0), as thriftpy2 writes it."""
    if protocol == "compact":  # protocol id, version 1 | CALL << 5, seqid, name, STOP
        return b"\x82\x21\x00" + bytes([len(_METHOD)]) + _METHOD + b"\x00"
    return b"\x80\x01\x00\x01" + struct.pack(">i", len(_METHOD)) + _METHOD + struct.pack(">i", 0) + b"\x00"


def _exchange(opener: Callable[[], Any], data: bytes, needed: Callable[[bytes], int]) -> bytes:
    """``data`` sent on a new connection, and the answer's first ``needed(answer so far)``
    bytes (fewer: none came in time, or the connection failed)."""
    try:
        sock = opener()
    except Exception as exc:  # the probe only tells more: its own failure tells nothing
        log.debug("probe: cannot connect: %s", exc)
        return b""
    out = b""
    try:
        sock.write(data)
        sock.flush()
        while len(out) < needed(out):
            out += sock.read(needed(out) - len(out))
    except Exception as exc:
        log.debug("probe: %s", exc)
    finally:
        with contextlib.suppress(Exception):
            sock.close()
    return out


def _sasl_needed(answer: bytes) -> int:
    """A negotiation message's header, then, for ``BAD``, its payload (its first 500 bytes)."""
    if len(answer) < 5 or answer[0] != _BAD:
        return 5
    (length,) = struct.unpack(">i", answer[1:5])
    return 5 + max(0, min(int(length), 500))


def sasl_refusal(opener: Callable[[], Any]) -> str | None:
    """The SASL server's refusal of an unknown mechanism, if the server is one; else ``None``.

    :param opener: a new connected thriftpy2 socket (TLS if the connection is).
    """
    answer = _exchange(opener, bytes([1]) + struct.pack(">i", len(_MECHANISM)) + _MECHANISM, _sasl_needed)
    if len(answer) < 5 or answer[0] != _BAD or len(answer) < _sasl_needed(answer):
        return None
    text = answer[5:].decode("utf-8", errors="replace")
    return text if "mechanism" in text.lower() else None


def answers_thrift(opener: Callable[[], Any], protocol: str) -> bool:
    """Whether the server answers a call of an unknown method in ``protocol`` (unframed), as a
    plain Thrift server does.

    :param opener: a new connected thriftpy2 socket (TLS if the connection is).
    """
    answer = _exchange(opener, _call(protocol), lambda _: 1)
    return answer[:1] in (b"\x80", b"\x82")
