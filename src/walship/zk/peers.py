"""Replication peers (:class:`walship.peer.PeerConfig`), stored as HBase 2.x stores them.

A peer is ``<parent>/replication/peers/<id>`` holding ``PBUF`` + ReplicationPeer, with a
``peer-state`` child holding ``PBUF`` + ReplicationState. walship-specific settings travel in
the peer's configuration map (the sink's settings, see :mod:`walship.sinks`), which HBase
keeps and ignores; this module checks only that keys are not empty.

Managed peers. A peer added by walship carries ``walship.managed=true`` in its configuration
and is written with HBase's peer-state DISABLED: HBase 2.x's replication source then reads
nothing for it, yet still enqueues every new WAL on roll and its log cleaner keeps every queued
WAL. walship keeps its own switch beside it, ``<parent>/replication/walship/peers/<id>/state``
(the same PBUF ReplicationState encoding), and ``enable``/``disable`` flip that switch only.
A managed peer whose HBase peer-state is ENABLED would be shipped twice (by HBase and by
walship): :meth:`PeerConfig.check_ownership` refuses it. Peers written by HBase or by earlier
versions of walship (no ``walship.managed``) keep working on HBase's peer-state; ``adopt``
turns one into a managed peer.

Example::

    peers = ReplicationPeers(client, ZnodeLayout("/hbase"))
    peers.add(PeerConfig("1", "zk1,zk2:2181:/hbase-b", configuration={"walship.sink.thrift": "b:9090"}))
    peers.disable("1")
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

from walship.errors import InvalidPeerConfigError, PeerError, PeerExistsError, PeerNotFoundError
from walship.peer import MANAGED_KEY, PeerConfig, check_update, validate_peer_id
from walship.protos import Replication_pb2
from walship.zk.client import translated
from walship.zk.encoding import decode_peer, decode_peer_state, encode_peer, encode_peer_state
from walship.zk.lastpushed import LastPushedIds
from walship.zk.layout import ZnodeLayout
from walship.zk.queues import ReplicationQueues
from walship.zk.records import ProgressStore

__all__ = ["ReplicationPeers"]

log = logging.getLogger(__name__)


@translated("replication peers")
class ReplicationPeers:
    """Add, remove, enable, disable, update and list peers.

    Every change is one ZooKeeper write or one multi, so concurrent tools see a peer either
    whole or not at all; updates are versioned compare-and-set writes.
    """

    #: with ``--offline`` no master sets a serial peer's start: the command does (see
    #: :mod:`walship.replicate.serialstart`)
    starts_serial = True

    def __init__(self, client: KazooClient, layout: ZnodeLayout) -> None:
        self.client = client
        self.layout = layout

    def add(self, config: PeerConfig) -> None:
        """Create the peer and its state in one multi.

        :raises PeerExistsError: a peer with that id exists.
        """
        path = self.layout.peer(config.peer_id)
        self.client.ensure_path(self.layout.peers)
        tx = self.client.transaction()
        tx.create(path, encode_peer(config))
        if config.managed:
            # HBase keeps the peer's queues but never ships it; walship's switch says whether we do
            self.client.ensure_path(self.layout.walship_peer(config.peer_id))
            tx.create(self.layout.peer_state(config.peer_id), encode_peer_state(False))
            tx.create(self.layout.walship_peer_state(config.peer_id), encode_peer_state(config.enabled))
        else:
            tx.create(self.layout.peer_state(config.peer_id), encode_peer_state(config.enabled))
        results = tx.commit()
        for result in results:
            if isinstance(result, NodeExistsError):
                raise PeerExistsError(f"peer {config.peer_id} exists already ({path})")
            if isinstance(result, Exception):
                raise result
        log.info("added peer %s -> %s", config.peer_id, config.cluster_key)

    def get(self, peer_id: str) -> PeerConfig:
        """:raises PeerNotFoundError: no such peer."""
        validate_peer_id(peer_id)
        path = self.layout.peer(peer_id)
        try:
            data, _ = self.client.get(path)
        except NoNodeError:
            raise PeerNotFoundError(f"peer {peer_id} does not exist ({path})") from None
        return self._config(peer_id, decode_peer(data, path))

    def _config(self, peer_id: str, pb: Replication_pb2.ReplicationPeer) -> PeerConfig:
        hbase_enabled = self._enabled(peer_id)
        config = PeerConfig.from_proto(peer_id, pb, enabled=hbase_enabled, hbase_enabled=hbase_enabled)
        if not config.managed:
            return config
        return replace(config, enabled=self._walship_enabled(peer_id))

    def _enabled(self, peer_id: str) -> bool:
        path = self.layout.peer_state(peer_id)
        try:
            data, _ = self.client.get(path)
        except NoNodeError:
            return True  # HBase 1.x peers created before peer-state existed are enabled
        return decode_peer_state(data, path)

    def _walship_enabled(self, peer_id: str) -> bool:
        path = self.layout.walship_peer_state(peer_id)
        try:
            data, _ = self.client.get(path)
        except NoNodeError:
            log.warning("managed peer %s has no walship switch (%s): taken as DISABLED", peer_id, path)
            return False
        return decode_peer_state(data, path)

    def ids(self) -> list[str]:
        try:
            return sorted(self.client.get_children(self.layout.peers))
        except NoNodeError:
            return []

    def list(self) -> list[PeerConfig]:
        out = []
        for peer_id in self.ids():
            try:
                out.append(self.get(peer_id))
            except PeerNotFoundError:
                continue  # removed while we listed
        return out

    def exists(self, peer_id: str) -> bool:
        return self.client.exists(self.layout.peer(validate_peer_id(peer_id))) is not None

    def set_enabled(self, peer_id: str, enabled: bool) -> None:
        """Enable or disable a peer: for a managed peer walship's own switch (HBase's
        peer-state stays DISABLED); otherwise the peer-state znode, as HBase's enable_peer
        writes it."""
        peer = self.get(peer_id)
        path = self.layout.walship_peer_state(peer_id) if peer.managed else self.layout.peer_state(peer_id)
        self._put_state(path, enabled)
        log.info("%s %speer %s", "enabled" if enabled else "disabled", "managed " if peer.managed else "", peer_id)

    def adopt(self, peer_id: str) -> PeerConfig:
        """Turn a peer HBase ships into a walship-managed one, in one multi: ``walship.managed``
        in its configuration, HBase's peer-state DISABLED, walship's switch set to the state
        the peer had (an enabled peer stays enabled, now shipped by walship only).

        :raises PeerError: the peer is managed already, or changed while adopting (retry).
        """
        path = self.layout.peer(validate_peer_id(peer_id))
        try:
            data, stat = self.client.get(path)
        except NoNodeError:
            raise PeerNotFoundError(f"peer {peer_id} does not exist ({path})") from None
        pb = decode_peer(data, path)
        hbase_enabled = self._enabled(peer_id)
        marked = PeerConfig.from_proto(peer_id, pb, enabled=False, hbase_enabled=hbase_enabled)
        if marked.managed and self.client.exists(self.layout.walship_peer_state(peer_id)) is None:
            return self._complete_adoption(marked)
        current = self._config(peer_id, pb)
        if current.managed:
            raise PeerError(f"peer {peer_id} is managed by walship already")
        adopted = replace(current, configuration={**current.configuration, MANAGED_KEY: "true"})
        state_path = self.layout.peer_state(peer_id)
        self.client.ensure_path(self.layout.walship_peer(peer_id))
        tx = self.client.transaction()
        tx.set_data(path, encode_peer(adopted), version=stat.version)
        if self.client.exists(state_path) is None:
            tx.create(state_path, encode_peer_state(False))
        else:
            tx.set_data(state_path, encode_peer_state(False))
        tx.create(self.layout.walship_peer_state(peer_id), encode_peer_state(current.enabled))
        results = tx.commit()
        failed = [r for r in results if isinstance(r, Exception)]
        if failed:
            raise PeerError(f"peer {peer_id} changed while it was adopted ({type(failed[0]).__name__}); try again")
        log.info("adopted peer %s: managed by walship, HBase peer-state DISABLED", peer_id)
        return self.get(peer_id)

    def _complete_adoption(self, current: PeerConfig) -> PeerConfig:
        """A peer that carries ``walship.managed`` already: one added through HBase's own
        Admin (``add_peer ... STATE => DISABLED, CONFIG => {'walship.managed' => 'true', ...}``),
        which a running HBase 2.x learns through its master, with no restart. Adopting it
        creates walship's switch, ENABLED; the peer znode is left as HBase's master wrote it.

        :raises DoubleShippingError: its HBase peer-state is ENABLED.
        :raises PeerError: walship's switch was created meanwhile: it is managed by walship already.
        """
        current.check_ownership()
        try:
            self.client.create(self.layout.walship_peer_state(current.peer_id), encode_peer_state(True), makepath=True)
        except NodeExistsError:
            raise PeerError(f"peer {current.peer_id} is managed by walship already") from None
        log.info("adopted peer %s (marked managed in HBase's configuration): walship's switch ENABLED", current.peer_id)
        return self.get(current.peer_id)

    def enable(self, peer_id: str) -> None:
        self.set_enabled(peer_id, True)

    def disable(self, peer_id: str) -> None:
        self.set_enabled(peer_id, False)

    def update(
        self, peer_id: str, *, validate: Callable[[PeerConfig], None] | None = None, **changes: Any
    ) -> PeerConfig:
        """Change fields of a peer's configuration with a versioned write (retried on a race).

        ``enabled`` is changed with :meth:`set_enabled`, not here.

        :param validate: called with the merged configuration before each write attempt (see
            :meth:`modify`).
        """
        if "peer_id" in changes or "enabled" in changes:
            raise InvalidPeerConfigError("update cannot change 'peer_id' or 'enabled'")
        return self.modify(peer_id, lambda current: replace(current, **changes), validate=validate)[1]

    def modify(
        self,
        peer_id: str,
        change: Callable[[PeerConfig], PeerConfig],
        *,
        validate: Callable[[PeerConfig], None] | None = None,
    ) -> tuple[PeerConfig, PeerConfig]:
        """Rewrite the peer's znode as ``change`` makes it from the peer read now: one versioned
        write (ZooKeeper set with the version read), retried from a fresh read on a race.

        ``change`` and ``validate`` run on every attempt, inside the loop, so a writer racing
        this one cannot make the write skip them; either may raise to write nothing. What
        ``change`` returns went through PeerConfig's own checks already (its constructor).

        :returns: the peer before and after the write.
        :raises PeerNotFoundError: no such peer.
        :raises InvalidPeerConfigError: ``change`` altered the peer id, its state or
            ``walship.managed`` (``peer adopt`` owns that), or ``validate`` refused the result.
        """
        path = self.layout.peer(validate_peer_id(peer_id))
        while True:
            try:
                data, stat = self.client.get(path)
            except NoNodeError:
                raise PeerNotFoundError(f"peer {peer_id} does not exist ({path})") from None
            current = self._config(peer_id, decode_peer(data, path))
            updated = change(current)
            check_update(current, updated)
            if validate is not None:
                validate(updated)
            try:
                self.client.set(path, encode_peer(updated), version=stat.version)
            except BadVersionError:
                log.debug("peer %s changed since it was read (version %d); reading it again", peer_id, stat.version)
                continue
            except NoNodeError:
                raise PeerNotFoundError(f"peer {peer_id} does not exist ({path})") from None
            log.info("updated peer %s (znode version %d -> %d)", peer_id, stat.version, stat.version + 1)
            return current, updated

    # -- what HBase's master writes: its procedures' znode changes, for the minicluster's master
    # -- (which answers HBase's admin calls) and for a cluster that is down (``--offline``)

    def create(self, config: PeerConfig, *, hbase_enabled: bool) -> None:
        """HBase's AddPeerProcedure's znodes: the peer and its peer-state, in one multi.

        :raises PeerExistsError: a peer with that id exists.
        """
        path = self.layout.peer(config.peer_id)
        self.client.ensure_path(self.layout.peers)
        tx = self.client.transaction()
        tx.create(path, encode_peer(config))
        tx.create(self.layout.peer_state(config.peer_id), encode_peer_state(hbase_enabled))
        for result in tx.commit():
            if isinstance(result, NodeExistsError):
                raise PeerExistsError(f"peer {config.peer_id} exists already ({path})")
            if isinstance(result, Exception):
                raise result

    def message(self, peer_id: str) -> Replication_pb2.ReplicationPeer:
        """The peer znode's ReplicationPeer message as it is stored (what HBase's master serves
        for ``getReplicationPeerConfig``).

        :raises PeerNotFoundError: no such peer."""
        path = self.layout.peer(validate_peer_id(peer_id))
        try:
            data, _ = self.client.get(path)
        except NoNodeError:
            raise PeerNotFoundError(f"peer {peer_id} does not exist ({path})") from None
        return decode_peer(data, path)

    def hbase_enabled(self, peer_id: str) -> bool:
        """HBase's peer-state of the peer.

        :raises PeerNotFoundError: no such peer."""
        if not self.exists(peer_id):
            raise PeerNotFoundError(f"peer {peer_id} does not exist ({self.layout.peer(peer_id)})")
        return self._enabled(peer_id)

    def set_hbase_state(self, peer_id: str, enabled: bool) -> None:
        """HBase's Enable/DisablePeerProcedure's write: the peer-state znode.

        :raises PeerNotFoundError: no such peer."""
        path = self.layout.peer_state(validate_peer_id(peer_id))
        if not self.exists(peer_id):
            raise PeerNotFoundError(f"peer {peer_id} does not exist ({self.layout.peer(peer_id)})")
        self._put_state(path, enabled, makepath=False)

    def write_config(self, peer_id: str, config: PeerConfig) -> None:
        """HBase's UpdatePeerConfigProcedure's write: the peer znode holds ``config``.

        :raises PeerNotFoundError: no such peer."""
        path = self.layout.peer(validate_peer_id(peer_id))
        try:
            self.client.set(path, encode_peer(config))
        except NoNodeError:
            raise PeerNotFoundError(f"peer {peer_id} does not exist ({path})") from None

    def delete(self, peer_id: str) -> int:
        """HBase's RemovePeerProcedure's znode changes: the peer, then every queue of it (so its
        WALs stop being held for it) and its last pushed ids; returns how many queues went.

        :raises PeerNotFoundError: no such peer."""
        path = self.layout.peer(validate_peer_id(peer_id))
        if self.client.exists(path) is None:
            raise PeerNotFoundError(f"peer {peer_id} does not exist ({path})")
        self.client.delete(path, recursive=True)
        removed = ReplicationQueues(self.client, self.layout).remove_peer_queues(peer_id)
        ids = LastPushedIds(self.client, self.layout).remove_peer(peer_id)
        log.info("removed peer %s, %d of its queues and %d last pushed ids", peer_id, removed, ids)
        return removed

    # -- walship's own znodes of a peer

    def check_switch_writable(self, peer_id: str) -> None:
        """That this session may create the peer's switch, checked before the master adds the
        peer: a probe znode created and deleted in one transaction (nothing stays) under the
        nearest znode of the switch's path that exists, where the switch's creation starts.
        Nothing is created on the way: HBase's master creates its ``replication`` znode with
        its own ACLs.

        :raises ZkAuthError: the znodes' ACL does not let this session write them.
        """
        folder = self.layout.walship_peer(validate_peer_id(peer_id)).rsplit("/", 1)[0]
        while folder.count("/") > 1 and self.client.exists(folder) is None:
            folder = folder.rsplit("/", 1)[0]
        probe = f"{folder}/.walship-write-check-{peer_id}"
        transaction = self.client.transaction()
        transaction.create(probe)
        transaction.delete(probe)
        for result in transaction.commit():
            if isinstance(result, Exception) and not isinstance(result, NodeExistsError):
                raise result

    def set_switch(self, peer_id: str, enabled: bool) -> None:
        """walship's enabled switch of a managed peer, created if missing."""
        self._put_state(self.layout.walship_peer_state(validate_peer_id(peer_id)), enabled)

    def _put_state(self, path: str, enabled: bool, *, makepath: bool = True) -> None:
        """A ReplicationState znode set to ``enabled``, created if missing."""
        data = encode_peer_state(enabled)
        try:
            self.client.set(path, data)
        except NoNodeError:
            self.client.create(path, data, makepath=makepath)

    def close(self) -> None:
        """Nothing to close (the ZooKeeper client is the caller's); as :class:`walship.rpc.peers.MasterPeers`."""

    def switch(self, peer_id: str) -> bool:
        """walship's switch of a managed peer (DISABLED when it has none, with a warning)."""
        return self._walship_enabled(validate_peer_id(peer_id))

    def has_switch(self, peer_id: str) -> bool:
        return self.client.exists(self.layout.walship_peer_state(validate_peer_id(peer_id))) is not None

    def forget(self, peer_id: str) -> None:
        """walship's znodes of a removed peer: its switch, its progress records."""
        if self.client.exists(self.layout.walship_peer(validate_peer_id(peer_id))) is not None:
            self.client.delete(self.layout.walship_peer(peer_id), recursive=True)
        ProgressStore(self.client, self.layout).remove_peer(peer_id)

    def remove(self, peer_id: str) -> None:
        """Remove the peer as HBase's RemovePeerProcedure does (:meth:`delete`), then walship's
        znodes of it (:meth:`forget`)."""
        self.delete(peer_id)
        self.forget(peer_id)
