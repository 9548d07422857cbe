"""kazoo's threading handler, waiting on its sockets with ``poll(2)``.

kazoo's connection thread waits for its socket (and its wake-up pipe) before every request and
every reply. Its threading handler builds a new ``selectors`` selector for each wait (an epoll
instance created, registered and closed: five system calls and a dozen Python objects), which
is most of what a ZooKeeper round trip costs a walship process, a tailer's commits among them.
:class:`PollingHandler` answers the same question with one ``poll`` call, which has no limit on
descriptor numbers either (unlike ``select(2)``, which kazoo's selector wait replaced).

Example::

    KazooClient(hosts, handler=PollingHandler())
"""

from __future__ import annotations

import logging
import math
import select
from collections.abc import Sequence
from typing import Any

from kazoo.handlers.threading import SequentialThreadingHandler

__all__ = ["PollingHandler"]

log = logging.getLogger(__name__)

_READABLE = select.POLLIN | select.POLLPRI | select.POLLHUP | select.POLLERR
_WRITABLE = select.POLLOUT | select.POLLHUP | select.POLLERR


def _fd(obj: Any) -> int:
    fd = obj if isinstance(obj, int) else int(obj.fileno())
    if fd < 0:
        raise ValueError(f"invalid file descriptor: {fd}")
    return fd


class PollingHandler(SequentialThreadingHandler):  # type: ignore[misc]  # kazoo is untyped
    """:class:`~kazoo.handlers.threading.SequentialThreadingHandler` whose ``select`` is one
    ``poll``: the same answer (the objects ready to read, to write; never exceptional ones), a
    hang-up or error reported as ready, as ``select`` does, so the reader sees it."""

    def select(
        self, rlist: Sequence[Any], wlist: Sequence[Any], xlist: Sequence[Any], timeout: float | None = None
    ) -> tuple[list[Any], list[Any], list[Any]]:
        if timeout is not None and timeout < 0:
            raise ValueError("timeout must be non-negative")
        wanted: dict[int, int] = {}
        for objs, mask in ((rlist, select.POLLIN | select.POLLPRI), (wlist, select.POLLOUT)):
            for obj in objs:
                fd = _fd(obj)
                wanted[fd] = wanted.get(fd, 0) | mask
        poller = select.poll()
        for fd, mask in wanted.items():
            poller.register(fd, mask)
        # poll counts milliseconds: round up, or a wait under 1 ms would spin
        ready = dict(poller.poll(None if timeout is None else math.ceil(timeout * 1000)))
        for fd, events in ready.items():
            if events & select.POLLNVAL:
                raise ValueError(f"invalid file descriptor: {fd} (closed)")
        readable = [obj for obj in rlist if ready.get(_fd(obj), 0) & _READABLE]
        writable = [obj for obj in wlist if ready.get(_fd(obj), 0) & _WRITABLE]
        return readable, writable, []
