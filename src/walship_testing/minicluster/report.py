"""What the minicluster reports about itself: the admin API's ``/info``."""

from __future__ import annotations

from typing import Any

from walship_testing.minicluster.store import Store
from walship_testing.minicluster.view import ClusterView

__all__ = ["cluster_info"]


def cluster_info(cluster: ClusterView, store: Store) -> dict[str, Any]:
    """The cluster's identity and endpoints, its region servers with their WAL and regions,
    its tables, and the WAL files under ``WALs/`` and ``oldWALs/``.

    :param store: the cluster's (running) store.
    """
    return {
        "name": cluster.name,
        "cluster_id": str(cluster.cluster_id),
        "zk": cluster.zk_hosts,
        "znode_parent": cluster.layout.parent,
        "data_dir": str(cluster.data_dir),
        "endpoints": dict(cluster.endpoints),
        "regionservers": [
            {
                "name": str(rs.name),
                "alive": rs.alive,
                "wal": rs.wal_name if rs.alive else None,
                "wals": rs.wal_names if rs.alive else [],
                "wal_bytes": rs.wal_bytes,
                "regions": sorted(e for e, o in cluster.owner.items() if o is rs),
            }
            for rs in cluster.servers
        ],
        "tables": [
            {
                "name": t.decode(errors="replace"),
                "enabled": bool(store.table_enabled(t)),
                "families": {
                    f.name.decode(errors="replace"): {"scope": f.scope, "max_versions": f.max_versions}
                    for f in store.families(t).values()
                },
                "regions": [r.encoded for r in store.regions(t)],
            }
            for t in store.table_names()
        ],
        "wals": cluster.wal_files(),
        "old_wals": sorted(p.name for p in cluster.old_wals_dir.iterdir()),
    }
