"""Take the ZooKeeper locks of a group of queues over the same WALs, before its pass.

A group's queues are locked in one order (server, then queue id), so two shippers that want
the same queues never wait on each other. A queue whose lock another shipper holds is
reported busy, naming that holder; a queue whose lock cannot be taken (ZooKeeper fails) is
reported failed in its summary and its progress record. Neither is waited for past the lock
wait, and neither stops the group's other queues.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Sequence

from kazoo.client import KazooClient

from walship.errors import ZkError
from walship.replicate.batcher.member import Feed
from walship.replicate.progressbook import ProgressBook
from walship.replicate.summary import QueueSummary
from walship.zk import ZnodeLayout, queue_lock
from walship.zk.locks import Holder

__all__ = ["lock_group"]

log = logging.getLogger(__name__)


def lock_group(
    stack: contextlib.ExitStack,
    client: KazooClient,
    layout: ZnodeLayout,
    feeds: Sequence[Feed],
    *,
    holder: Holder,
    timeout: float,
    book: ProgressBook,
) -> tuple[list[int], dict[int, QueueSummary]]:
    """Lock the feeds' queues for as long as ``stack`` is open: the indexes (into ``feeds``,
    in lock order) of the queues now held, and the summaries of the others, by index."""
    held: list[int] = []
    left: dict[int, QueueSummary] = {}
    for i in sorted(range(len(feeds)), key=lambda i: (feeds[i].server, feeds[i].queue_id)):
        feed = feeds[i]
        try:
            lock = stack.enter_context(
                queue_lock(client, layout, feed.server, feed.queue_id, holder=holder, timeout=timeout)
            )
        except ZkError as exc:
            left[i] = book.failed(feed.peer.peer_id, QueueSummary(feed.server, feed.queue_id), exc)
            continue
        if lock.held:
            held.append(i)
        else:
            left[i] = QueueSummary(
                feed.server,
                feed.queue_id,
                status="busy",
                holder=lock.holder.to_json() if lock.holder else None,
                message=f"queue {feed.server}/{feed.queue_id} is busy: being shipped by {lock.describe()}",
            )
    log.debug("group of %d queue(s): %d held, %d busy or failed", len(feeds), len(held), len(left))
    return held, left
