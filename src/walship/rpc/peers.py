"""Peer changes on a running cluster: HBase's znodes change only through its master, walship's
own znodes (a managed peer's switch, its progress records) stay walship's to write.

:class:`MasterPeers` has the methods of :class:`walship.zk.ReplicationPeers` (``add``,
``get``, ``list``, ``exists``, ``modify``, ``adopt``, ``enable``, ``disable``, ``remove``),
so a command takes either: :func:`peer_admin` gives the master's for a running cluster and the
znode writer for one that is down (``offline``), refusing each where it does not belong.

A managed peer (``walship.managed=true``) is added through the master with HBase's peer-state
DISABLED: HBase queues and keeps its WALs but never ships it; walship's switch says whether
walship does. Adopting a peer HBase ships marks it managed, then disables it through the
master, which refreshes every region server before it returns: HBase's sources have stopped
for it when ``adopt`` returns, and walship ships from their positions on.

Example::

    peers = peer_admin(client, ZnodeLayout("/hbase"))           # MasterPeers: a master is registered
    peers.add(PeerConfig("1", "zk-b:2181:/hbase", configuration={MANAGED_KEY: "true", ...}))
    peers.modify("1", lambda p: replace(p, bandwidth=10_000_000))
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import replace

from kazoo.client import KazooClient

from walship.errors import (
    InvalidPeerConfigError,
    MasterNotFoundError,
    MasterRunningError,
    PeerError,
    PeerNotFoundError,
    RemoteHBaseError,
)
from walship.peer import MANAGED_KEY, PeerConfig, check_update, validate_peer_id
from walship.protos import Replication_pb2
from walship.rpc.auth import Authentication
from walship.rpc.master import MasterAdmin
from walship.zk.layout import ZnodeLayout
from walship.zk.master import read_master
from walship.zk.peers import ReplicationPeers

__all__ = ["NOT_FOUND", "MasterPeers", "PeerAdmin", "peer_admin"]

log = logging.getLogger(__name__)

#: HBase's exception for a peer that does not exist.
NOT_FOUND = "org.apache.hadoop.hbase.ReplicationPeerNotFoundException"


class MasterPeers:
    """Peers of a running cluster, changed through its master (:class:`MasterAdmin`) and read
    through it too; walship's switch and progress records in ZooKeeper beside them."""

    #: the master sets a serial peer's start (its regions' last pushed ids) itself, as
    #: AddPeerProcedure and UpdatePeerConfigProcedure do
    starts_serial = False

    def __init__(self, client: KazooClient, layout: ZnodeLayout, admin: MasterAdmin) -> None:
        self.client = client
        self.layout = layout
        self.admin = admin
        self.store = ReplicationPeers(client, layout)

    def _not_found(self, peer_id: str, exc: RemoteHBaseError) -> PeerNotFoundError | RemoteHBaseError:
        if exc.exception_class == NOT_FOUND:
            return PeerNotFoundError(f"peer {peer_id} does not exist (HBase's master: {exc.short_class})")
        return exc

    def _config(self, peer_id: str, pb: Replication_pb2.ReplicationPeer, hbase_enabled: bool) -> PeerConfig:
        config = PeerConfig.from_proto(peer_id, pb, enabled=hbase_enabled, hbase_enabled=hbase_enabled)
        if not config.managed:
            return config
        return replace(config, enabled=self.store.switch(peer_id))

    def get(self, peer_id: str) -> PeerConfig:
        """The peer as the master has it (and walship's switch, for a managed peer).

        :raises PeerNotFoundError: the master has no such peer."""
        validate_peer_id(peer_id)
        try:
            pb = self.admin.get_peer_config(peer_id)
            enabled = self.admin.is_peer_enabled(peer_id)
        except RemoteHBaseError as exc:
            raise self._not_found(peer_id, exc) from None
        return self._config(peer_id, pb, enabled)

    def ids(self) -> list[str]:
        return sorted(d.peer_id for d in self.admin.list_peers())

    def list(self) -> list[PeerConfig]:
        return sorted(
            (self._config(d.peer_id, d.config, d.enabled) for d in self.admin.list_peers()), key=lambda p: p.peer_id
        )

    def exists(self, peer_id: str) -> bool:
        validate_peer_id(peer_id)
        return peer_id in self.ids()

    def add(self, config: PeerConfig) -> None:
        """Add the peer through the master; a managed one DISABLED in HBase, then walship's
        switch set to ``config.enabled``. A peer the master refuses writes nothing.

        :raises RemoteHBaseError: the master refused it (a peer with that id exists, a bad cluster
            key or table-cfs: HBase's ``DoNotRetryIOException``, naming why).
        """
        hbase_enabled = config.enabled and not config.managed
        if config.managed:
            # HBase 2.6 checks a peer change's ADMIN permission inside its procedure, where the
            # caller is the master itself: a refused switch must not come after HBase's peer
            self.store.check_switch_writable(config.peer_id)
        self.admin.add_peer(config.peer_id, config.to_proto(), enabled=hbase_enabled)
        if config.managed:
            self.store.set_switch(config.peer_id, config.enabled)
        log.info("added peer %s -> %s through the master", config.peer_id, config.cluster_key)

    def modify(
        self,
        peer_id: str,
        change: Callable[[PeerConfig], PeerConfig],
        *,
        validate: Callable[[PeerConfig], None] | None = None,
    ) -> tuple[PeerConfig, PeerConfig]:
        """Change the peer's configuration: read it from the master, make the change, send the
        whole configuration back in one UpdateReplicationPeerConfig (as HBase's Admin does for
        each ``set_peer_*`` command); what another client changed since the read is kept only
        if ``change`` leaves that field alone, as with HBase's own shell.

        :returns: the peer before and after.
        :raises InvalidPeerConfigError: ``change`` altered the id, the state or
            ``walship.managed``, or ``validate`` refused the result.
        """
        current = self.get(peer_id)
        updated = change(current)
        check_update(current, updated)
        removed = sorted(set(current.configuration) - set(updated.configuration))
        if removed:
            # UpdatePeerConfigProcedure merges the old configuration map into the new one
            raise InvalidPeerConfigError(
                f"peer {peer_id}: HBase's master keeps every configuration key on an update (it merges the old "
                f"map into the new one), so {', '.join(removed)} cannot be removed on a running cluster; "
                "set it to another value, or remove it with --offline while the cluster is down"
            )
        if validate is not None:
            validate(updated)
        if updated.to_proto() != current.to_proto():
            self.admin.update_peer_config(peer_id, updated.to_proto())
        return current, updated

    def set_enabled(self, peer_id: str, enabled: bool) -> None:
        """Enable or disable a peer: a managed peer's walship switch (HBase's peer-state stays
        DISABLED); any other peer through the master, as HBase's enable_peer does."""
        peer = self.get(peer_id)
        if peer.managed:
            self.store.set_switch(peer_id, enabled)
        elif peer.hbase_state_enabled != enabled:
            if enabled:
                self.admin.enable_peer(peer_id)
            else:
                self.admin.disable_peer(peer_id)
        log.info("%s %speer %s", "enabled" if enabled else "disabled", "managed " if peer.managed else "", peer_id)

    def enable(self, peer_id: str) -> None:
        self.set_enabled(peer_id, True)

    def disable(self, peer_id: str) -> None:
        self.set_enabled(peer_id, False)

    def adopt(self, peer_id: str) -> PeerConfig:
        """Make a peer HBase ships a walship-managed one, HBase's sources stopped first.

        Steps, each safe to run again after a failure: walship's switch takes the state HBase
        had (unless it exists); the configuration gains ``walship.managed`` through the master
        (from here a peer HBase still ships is refused by walship's shippers, never shipped
        twice); the peer is disabled through the master, which returns once every region
        server's source for it has stopped.

        :raises PeerError: the peer is managed by walship already.
        """
        current = self.get(peer_id)
        switched = self.store.has_switch(peer_id)
        if current.managed and switched and not current.hbase_state_enabled:
            raise PeerError(f"peer {peer_id} is managed by walship already")
        if not switched:
            # a peer marked managed in HBase's shell (add_peer ... CONFIG => {'walship.managed' => 'true'})
            # is walship's to ship; an unmarked one keeps the state HBase had
            self.store.set_switch(peer_id, True if current.managed else current.hbase_state_enabled)
        if not current.managed:
            marked = replace(current, configuration={**current.configuration, MANAGED_KEY: "true"})
            self.admin.update_peer_config(peer_id, marked.to_proto())
        if current.hbase_state_enabled:
            self.admin.disable_peer(peer_id)
        adopted = self.get(peer_id)
        log.info("adopted peer %s: managed by walship (%s), HBase peer-state DISABLED", peer_id, adopted.enabled)
        return adopted

    def close(self) -> None:
        """Close the connection to the master."""
        self.admin.close()

    def remove(self, peer_id: str) -> None:
        """Remove the peer through the master (which removes its queues and last pushed ids),
        then walship's znodes of it."""
        try:
            self.admin.remove_peer(peer_id)
        except RemoteHBaseError as exc:
            raise self._not_found(peer_id, exc) from None
        self.store.forget(peer_id)


#: What a command that changes peers works through.
PeerAdmin = ReplicationPeers | MasterPeers


def peer_admin(
    client: KazooClient,
    layout: ZnodeLayout,
    *,
    offline: bool = False,
    auth: Authentication | None = None,
    timeout: float | None = None,
) -> PeerAdmin:
    """What changes the peers of the cluster at ``layout``: its master when one is registered;
    HBase's znodes directly only with ``offline`` (a cluster that is down).

    :param auth: how connections to the master authenticate (default
        :func:`~walship.rpc.auth.default_auth`: KERBEROS when the process logged in to
        Kerberos, else SIMPLE).

    :raises MasterNotFoundError: no master is registered and ``offline`` is not given.
    :raises MasterRunningError: ``offline`` while a master is registered (names it).
    """
    master = read_master(client, layout)
    if offline:
        if master is not None:
            raise MasterRunningError(
                f"--offline is for a cluster that is down, but a master is registered at {layout.master} "
                f"({master.address}): leave --offline out and the change goes through it"
            )
        return ReplicationPeers(client, layout)
    if master is None:
        raise MasterNotFoundError(
            f"no HBase master is registered at {layout.master}: peers of a running cluster change through its "
            "master; for a cluster that is down, pass --offline to write its peer znodes directly"
        )
    options = {} if timeout is None else {"timeout": timeout}
    return MasterPeers(client, layout, MasterAdmin(client, layout, auth=auth, **options))
