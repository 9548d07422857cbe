"""walship's defaults, defined once: the CLI, the Spark job, the DAG Params and the library
take them from here."""

from __future__ import annotations

import os

__all__ = [
    "BATCH_BYTES",
    "BATCH_ENTRIES",
    "CLEAN_TTL",
    "LINGER",
    "LOCK_WAIT",
    "MAX_PARALLEL_GROUPS",
    "MAX_PARALLEL_JOBS",
    "PARALLEL_GROUPS",
    "STUCK_AFTER",
    "TAIL_DURATION",
    "TAIL_GATHER",
    "TAIL_GATHER_ENTRIES",
    "TAIL_IDLE_SLEEP",
    "TAIL_PROBED_IDLE_SLEEP",
    "TAIL_REDISCOVER",
    "TOTAL_BUFFER_QUOTA",
    "ZK_SESSION_TIMEOUT",
    "zk_session_timeout",
]

#: A batch is cut at this many bytes of WAL entries ...
BATCH_BYTES = 64 * 1024 * 1024
#: ... or at this many entries, whichever comes first (HBase: 64 MiB / 25,000 entries).
BATCH_ENTRIES = 25_000
#: Bytes a process's batches applied in the background may hold at once (HBase's
#: ``replication.total.buffer.quota``, 256 MB): see :mod:`walship.replicate.quota`.
TOTAL_BUFFER_QUOTA = 256 * 1024 * 1024
#: Seconds to wait for a queue another shipper holds (0: skip it and say who holds it).
LOCK_WAIT = 0.0
#: Seconds a ``walship_replicate`` run's Spark job goes on shipping new edits after its first
#: pass (its start-up, about 14 s on two cores, is then paid once for more edits); it ends
#: early once no new edits came for 10 s.
LINGER = 30.0
#: Spark jobs a ``walship_replicate`` run starts at most (one per group of queues).
MAX_PARALLEL_JOBS = 4
#: groups of queues (the queues of one server) a shipping pass ships at once, a thread each
PARALLEL_GROUPS = 4
MAX_PARALLEL_GROUPS = 64
#: Seconds a ``walship tail`` run lasts before it hands over.
TAIL_DURATION = 600.0
#: Seconds a tailer sleeps when no queue had anything new.
TAIL_IDLE_SLEEP = 0.1
#: The same where it probes its WAL folders (a local disk): a WAL that grows or appears ends
#: the wait at once, so the sleep is only the net for what a listing does not show (a WAL's
#: grace running out, a serial peer's barriers), and an idle tailer does not pass ten times a
#: second.
TAIL_PROBED_IDLE_SLEEP = 1.0
#: Seconds between a tailer's looks for new queues (and dead servers' queues to claim).
TAIL_REDISCOVER = 2.0
#: Seconds a tailer lets new edits gather after a pass that read fewer than
#: :data:`TAIL_GATHER_ENTRIES`: fewer, fuller passes (each has its ZooKeeper round trips and
#: file reads to pay), for at most this much more lag (``walship tail --gather``). At 5,000
#: edits a second, 0.1 s against 0.05: 5.1 against 8.8-10 us of the tailer's CPU an edit, p99
#: lag 0.12 against 0.07 s (``benchmarks/lag.py --sink thrift2``).
TAIL_GATHER = 0.1
TAIL_GATHER_ENTRIES = 1000
#: Seconds a queue of an enabled peer may have a backlog and make no progress before status
#: calls it stuck (``walship status --stuck-after``). A healthy queue moves at least once a
#: minute or two: ``walship_replicate`` runs every minute (a Spark job starts in about 14 s
#: and lingers :data:`LINGER`), a tailer ships continuously and hands over every
#: :data:`TAIL_DURATION`, and a shipper whose peer refuses batches backs off for seconds, not
#: minutes. Ten minutes is several missed runs, a tailer's hand-over and a peer's restart
#: together: long enough not to page for a hiccup, short enough that a queue nobody ships
#: (a paused DAG, a dead shipper) is noticed within minutes, not hours.
#: A peer whose bandwidth limit makes one batch take longer needs a larger threshold.
STUCK_AFTER = 600.0
#: Minimum age in seconds of an archived WAL the cleaner may delete (``walship clean --ttl``,
#: ``walship_clean``'s Param ``ttl``): a day, as the bundled HBase keeps them
#: (``hbase.master.logcleaner.ttl``), so that ``walship replay`` and ``walship_replay``'s
#: backfill reach a day back. A longer replay window needs a longer TTL on both cleaners.
CLEAN_TTL = 86400.0
#: ZooKeeper session timeout in seconds: a killed shipper's queue locks are free again after
#: about this long (the server may round it into [2, 20] ticks).
ZK_SESSION_TIMEOUT = 10.0


def zk_session_timeout() -> float:
    """The session timeout: ``WALSHIP_ZK_SESSION_TIMEOUT`` when set, else the default."""
    from walship.errors import ConfigError

    text = os.environ.get("WALSHIP_ZK_SESSION_TIMEOUT", "")
    if not text:
        return ZK_SESSION_TIMEOUT
    try:
        value = float(text)
    except ValueError:
        raise ConfigError(f"invalid WALSHIP_ZK_SESSION_TIMEOUT {text!r}: expected seconds") from None
    if not 1.0 <= value <= 600.0:
        raise ConfigError(f"invalid WALSHIP_ZK_SESSION_TIMEOUT {text!r}: must be between 1 and 600 seconds")
    return value
