"""One shipper per queue: a kazoo Lock per queue, under walship's own znodes.

HBase gives each queue to one ReplicationSource thread; walship's shippers run in Spark
tasks and Airflow workers, so a queue's order is kept by a ZooKeeper lock instead. A
shipper that cannot take the lock at once skips the queue and says so.

Example::

    with queue_lock(client, layout, server, queue_id, owner="ship-3") as held:
        if held:
            ship(...)
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator

from kazoo.client import KazooClient
from kazoo.exceptions import LockTimeout

from walship.zk.layout import ZnodeLayout

__all__ = ["queue_lock"]

log = logging.getLogger(__name__)


@contextlib.contextmanager
def queue_lock(
    client: KazooClient,
    layout: ZnodeLayout,
    server: str,
    queue_id: str,
    *,
    owner: str = "",
    timeout: float | None = 0.0,
) -> Iterator[bool]:
    """Hold the queue's lock for the ``with`` block; yields whether it was acquired.

    :param timeout: seconds to wait; ``0`` tries once, ``None`` waits for ever.
    """
    lock = client.Lock(layout.queue_lock(server, queue_id), identifier=owner)
    try:
        acquired = lock.acquire(blocking=False) if timeout == 0 else lock.acquire(blocking=True, timeout=timeout)
    except LockTimeout:
        acquired = False
    if not acquired:
        holders = lock.contenders()
        log.info("queue %s/%s is being shipped by %s; skipping it", server, queue_id, holders or "another shipper")
    try:
        yield acquired
    finally:
        if acquired:
            lock.release()
