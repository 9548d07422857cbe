"""One shipper per queue: a kazoo Lock per queue, under walship's own znodes.

HBase gives each queue to one ReplicationSource thread; walship's shippers run in Spark
tasks and Airflow workers, so a queue's order is kept by a ZooKeeper lock instead. The lock's
znode holds who took it (:class:`Holder`: host, pid, since when, the Airflow run), so a
shipper that finds a queue busy says who has it. A killed holder's lock goes with its
ZooKeeper session, after the session timeout (:data:`walship.defaults.ZK_SESSION_TIMEOUT`).

Example::

    holder = Holder.here(owner="ship-3", run_id="scheduled__2026-01-01T00:00:00+00:00")
    with queue_lock(client, layout, server, queue_id, holder=holder) as lock:
        if lock.held:
            ship(...)
        else:
            print(f"busy: {lock.describe()}")
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import logging
import os
import socket
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import LockTimeout

from walship.zk.client import KAZOO_ERRORS, zk_call
from walship.zk.layout import ZnodeLayout

__all__ = ["Holder", "LockState", "queue_lock", "read_holder", "release_lock", "try_lock"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Holder:
    """Who ships a queue: written as JSON into the lock's znode."""

    host: str
    pid: int
    since: str  # ISO time the holder started
    owner: str = ""
    run_id: str | None = None

    @classmethod
    def here(cls, owner: str = "", run_id: str | None = None) -> Holder:
        """This process, now."""
        return cls(
            host=socket.gethostname(),
            pid=os.getpid(),
            since=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
            owner=owner,
            run_id=run_id or None,
        )

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    def encode(self) -> str:
        return json.dumps(self.to_json(), sort_keys=True)

    @classmethod
    def decode(cls, text: str) -> Holder:
        """A holder from lock data; data written by something else is kept as the owner."""
        try:
            data = json.loads(text)
            return cls(str(data["host"]), int(data["pid"]), str(data["since"]), str(data.get("owner", "")),
                       data.get("run_id"))  # fmt: skip
        except (ValueError, KeyError, TypeError):
            return cls(host="?", pid=0, since="?", owner=text)

    def describe(self) -> str:
        run = f", Airflow run {self.run_id}" if self.run_id else ""
        return f"{self.host} pid {self.pid} since {self.since}{run}"


@dataclass(frozen=True)
class LockState:
    """Whether we hold the lock, and if not, who does (when it could be read)."""

    held: bool
    holder: Holder | None = None

    def describe(self) -> str:
        return self.holder.describe() if self.holder else "another shipper (holder unknown)"


@zk_call("queue locks")
def read_holder(client: KazooClient, layout: ZnodeLayout, server: str, queue_id: str) -> Holder | None:
    """Who holds the queue's lock now, or ``None`` when nobody does."""
    lock = client.Lock(layout.queue_lock(server, queue_id))
    try:
        contenders = lock.contenders()
    except KAZOO_ERRORS:
        return None
    return Holder.decode(contenders[0]) if contenders else None


@contextlib.contextmanager
@zk_call("queue locks")
def queue_lock(
    client: KazooClient,
    layout: ZnodeLayout,
    server: str,
    queue_id: str,
    *,
    holder: Holder | None = None,
    timeout: float | None = 0.0,
) -> Iterator[LockState]:
    """Hold the queue's lock for the ``with`` block; yields whether it was acquired, and
    otherwise who holds it.

    :param timeout: seconds to wait; ``0`` tries once, ``None`` waits for ever.
    """
    me = holder or Holder.here()
    lock = client.Lock(layout.queue_lock(server, queue_id), identifier=me.encode())
    try:
        acquired = lock.acquire(blocking=False) if timeout == 0 else lock.acquire(blocking=True, timeout=timeout)
    except LockTimeout:
        acquired = False
    state = LockState(True, me)
    if not acquired:
        state = LockState(False, read_holder(client, layout, server, queue_id))
        log.info("queue %s/%s is being shipped by %s; skipping it", server, queue_id, state.describe())
    try:
        yield state
    finally:
        if acquired:
            with contextlib.suppress(*KAZOO_ERRORS):
                lock.release()  # a lost session has released it already


@zk_call("queue locks")
def try_lock(client: KazooClient, layout: ZnodeLayout, server: str, queue_id: str, holder: Holder) -> Any | None:
    """Take the queue's lock without waiting, to hold beyond a ``with`` block (a tailer holds
    its queues for its whole run); the lock, or ``None`` when another holds it. Release it with
    :func:`release_lock`."""
    lock = client.Lock(layout.queue_lock(server, queue_id), identifier=holder.encode())
    return lock if lock.acquire(blocking=False) else None


def release_lock(lock: Any) -> None:
    """Release a lock of :func:`try_lock`; a lost session has released it already."""
    with contextlib.suppress(*KAZOO_ERRORS):
        lock.release()
