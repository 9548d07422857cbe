"""Replication status for Airflow: read it from the source cluster of a ``walship``
connection, and record it as a compact sample, an event of the source's status asset
(:func:`status_asset`: :data:`STATUS_ASSET` for the default source, ``walship_status-SUFFIX``
/ ``walship://status/SUFFIX`` for another).

The ``walship_status`` DAG of each source records one sample a minute; the "Replication" page draws its
charts from them. A sample's ``extra``::

    {"generated_at": "2026-11-23T09:00:00.000Z",
     "peers": {"1": {"bytes_queued": 1234, "lag_s": 2.5, "drained": false, "queues": 2}}}
"""

from __future__ import annotations

from typing import Any

from airflow.sdk import Asset

from walship_airflow.hooks.source import WalshipHook
from walship_airflow.sources import Source

#: the asset whose events carry the samples
STATUS_ASSET_NAME = "walship_status"
STATUS_ASSET_URI = "walship://status"
STATUS_ASSET = Asset(name=STATUS_ASSET_NAME, uri=STATUS_ASSET_URI)


def status_asset(source: Source) -> Asset:
    """The asset whose events carry a source's samples."""
    if not source.suffix:
        return STATUS_ASSET
    return Asset(name=source.asset_name(STATUS_ASSET_NAME), uri=source.asset_uri(STATUS_ASSET_URI))


#: the per-peer totals a sample keeps
SAMPLE_FIELDS = ("bytes_queued", "lag_s", "drained", "queues")


def read_source_status(
    peer_id: str | None = None, conn_id: str = WalshipHook.default_conn_name, stuck_after: float | None = None
) -> dict[str, Any]:
    """``walship status --json`` of the connection's source cluster (one peer, or all).

    :raises walship.errors.PeerNotFoundError: ``peer_id`` names no peer.
    :raises walship.errors.WalshipError: ZooKeeper or the WALs cannot be read.
    :raises airflow.sdk.exceptions.AirflowException: the connection is missing or incomplete.
    """
    from walship.status import read_status

    source = WalshipHook(conn_id).get_source()
    extra = {} if stuck_after is None else {"stuck_after": stuck_after}
    return read_status(source.zk, source.znode_parent, source.wal_root, peer_id=peer_id, auth=source.auth, **extra)


def stuck_after_default() -> float:
    """``[walship] stuck_after``: seconds a queue with a backlog may make no progress."""
    from airflow.sdk import conf

    from walship.defaults import STUCK_AFTER

    return conf.getfloat("walship", "stuck_after", fallback=STUCK_AFTER)


def check_stuck(source: Source, stuck_after: float) -> dict[str, Any]:
    """The ``check`` task of ``walship_status``: fails naming every queue of the source with a
    backlog and no progress for ``stuck_after`` seconds (so the DAG's failure notifier fires).
    It reads the status afresh rather than taking ``record``'s: clearing this task alone, once
    a queue was mended, looks again.

    :raises AirflowException: a queue is stuck (a retry looks again).
    """
    from airflow.sdk.exceptions import AirflowException

    from walship.status import stuck_queues

    stuck = stuck_queues(read_source_status(conn_id=source.conn_id, stuck_after=stuck_after))
    if stuck:
        raise AirflowException(
            f"{len(stuck)} stuck queue(s) of {source.conn_id}: " + "; ".join(s.message for s in stuck)
        )
    return {"conn_id": source.conn_id, "stuck_after": stuck_after, "stuck": 0}


def compact_sample(status: dict[str, Any]) -> dict[str, Any]:
    """The sample of a status: its time and, per peer, the totals in :data:`SAMPLE_FIELDS`."""
    return {
        "generated_at": status["generated_at"],
        "peers": {
            str(peer["peer_id"]): {key: peer["totals"][key] for key in SAMPLE_FIELDS} for peer in status["peers"]
        },
    }


def record_sample(context: Any, source: Source | None = None) -> dict[str, Any]:
    """Read a source's status (the default source's without one) and record it as the extra of
    the task's event of its :func:`status_asset`."""
    source = source or Source()
    sample = compact_sample(read_source_status(conn_id=source.conn_id))
    context["outlet_events"][status_asset(source)].extra.update(sample)
    return sample
