"""HBase's own RPC, for the master's replication peer calls: the framing (:mod:`.wire`), how a
connection authenticates (:mod:`.auth`), one connection (:mod:`.connection`) and HBase's Admin
for peers (:mod:`.master`)."""

from __future__ import annotations

from walship.rpc.auth import Authentication, SimpleAuth
from walship.rpc.master import MasterAdmin, PeerDescription

__all__ = ["Authentication", "MasterAdmin", "PeerDescription", "SimpleAuth"]
