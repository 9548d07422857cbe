"""HBase's own RPC, for the master's calls: the framing (:mod:`.wire`), how a connection
authenticates (:mod:`.auth`; Kerberos in :mod:`.sasl`), one connection (:mod:`.connection`),
HBase's Admin for peers (:mod:`.master`) and for tables (:mod:`.tables`)."""

from __future__ import annotations

from walship.rpc.auth import Authentication, SimpleAuth, default_auth
from walship.rpc.master import MasterAdmin, PeerDescription
from walship.rpc.sasl import KerberosAuth

__all__ = ["Authentication", "KerberosAuth", "MasterAdmin", "PeerDescription", "SimpleAuth", "default_auth"]
