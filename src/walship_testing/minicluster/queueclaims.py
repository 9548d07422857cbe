"""Who claims a crashed region server's replication queues in the embedded cluster.

With ``queue_claims="master"`` (the default) it does what HBase 2.5+ does: its master's
ServerCrashProcedure runs a ClaimReplicationQueuesProcedure, and each queue of the dead server
moves under a live region server as the recovered queue ``<peer>-<dead server>`` in one
ZooKeeper multi (HBase's ``ZKReplicationQueueStorage.claimQueue``), spread over the live
servers; a queue of a removed peer is deleted, then the dead server's replicator znode. The
region servers announce the HBase version they emulate in their znodes (RegionServerInfo), as
HBase's do, so walship leaves the claim to this master as it does on a real cluster.

With ``queue_claims="walship"`` nobody here claims and the region servers announce no version:
a cluster where walship claims (its own claim, as on a cluster whose region servers have no
replication source).

``claim_delay`` is HBase's ``replication.sleep.before.failover``: the claim comes that many
seconds after the crash (0: before the abort returns), and walship ships the dead server's
queue where it is meanwhile.
"""

from __future__ import annotations

import logging
import random
import threading

from kazoo.client import KazooClient

from walship.errors import BadRequestError, WalshipError
from walship.zk import ReplicationQueues, ZnodeLayout
from walship.zk.encoding import encode_server_info

__all__ = ["CLAIMERS", "EMULATED_VERSION", "MasterClaims", "server_info"]

log = logging.getLogger(__name__)

#: Who claims a crashed server's queues: HBase 2.5+'s master, or walship.
CLAIMERS = ("master", "walship")
#: The HBase version the region servers announce when the master claims (the harness's HBase).
EMULATED_VERSION = "2.6.1"


def check_claims(queue_claims: str, claim_delay: float) -> None:
    """:raises BadRequestError: an unknown claimer, or a negative delay."""
    if queue_claims not in CLAIMERS:
        raise BadRequestError(f"'queue_claims' must be one of {', '.join(CLAIMERS)}, got {queue_claims!r}")
    if claim_delay < 0:
        raise BadRequestError(f"'claim_delay' must be >= 0 seconds, got {claim_delay}")


def server_info(queue_claims: str) -> bytes:
    """What a region server's znode holds: the emulated version where the master claims."""
    return encode_server_info(EMULATED_VERSION) if queue_claims == "master" else b""


class MasterClaims:
    """The master's claims of crashed servers' queues (nothing when walship claims)."""

    def __init__(self, queue_claims: str, claim_delay: float) -> None:
        check_claims(queue_claims, claim_delay)
        self.queue_claims = queue_claims
        self.delay = claim_delay
        self._timers: list[threading.Timer] = []

    def after_crash(self, client: KazooClient, layout: ZnodeLayout, dead: str, live: list[str]) -> None:
        """The ServerCrashProcedure of ``dead`` reached its claim: now, or after the delay."""
        if self.queue_claims != "master":
            return
        if self.delay <= 0:
            self.claim(client, layout, dead, live)
            return
        timer = threading.Timer(self.delay, self._claim_logged, (client, layout, dead, live))
        timer.daemon = True
        self._timers.append(timer)
        timer.start()

    def stop(self) -> None:
        """Claims not made yet are not made (the cluster is going down)."""
        for timer in self._timers:
            timer.cancel()
        self._timers.clear()

    def claim(self, client: KazooClient, layout: ZnodeLayout, dead: str, live: list[str]) -> list[tuple[str, str]]:
        """Move every queue of ``dead`` under the ``live`` servers (one queue to each in turn,
        from a shuffled list, as HBase's procedure does); returns (old id, new id) of each
        queue moved here, not those another claimer took first."""
        moved = ReplicationQueues(client, layout).claim_all(dead, random.sample(live, len(live)))
        log.info("master claimed the queues of crashed region server %s: %s", dead, moved)
        return moved

    def _claim_logged(self, client: KazooClient, layout: ZnodeLayout, dead: str, live: list[str]) -> None:
        try:
            self.claim(client, layout, dead, live)
        except WalshipError as exc:  # HBase's procedure retries; so does a later abort here
            log.error("the master's claim of the queues of %s failed: %s", dead, exc)
