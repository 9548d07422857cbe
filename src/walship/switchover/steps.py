"""A switchover's steps: the writers' cluster moved from the source to a peer's cluster, losing
nothing, each step a unit that can be run again and that checks its own precondition.

* ``preflight``: both clusters answer, the peer is walship's and shipping, its scope and
  dead letters clean, the tables writable on both sides (:mod:`walship.switchover.checks`);
  the record of the switchover written (:mod:`walship.switchover.record`).
* ``fence``: the source's tables refuse writes (their descriptors' ``READONLY`` through the
  master, or disabled), each table's state before recorded first, so that it can be undone.
* ``drain``: a cut of the peer's queues taken after the fence, and waited for
  (``walship wait-drained``): every write the source accepted is on the peer.
* ``verify``: the tables compared row by row (``walship verify``): no bad row, or stop
  (skipped when the fence disabled them: a disabled table cannot be scanned).
* ``reverse``: a managed peer back to the source added through the peer cluster's master, its
  walship switch off: every write on the peer's cluster from now on is queued for the source.
* ``switch``: the fence checked still in place, and the moment clients may write to the peer's
  cluster recorded and reported. No rollback after it.
* ``unfence``: the source's tables as they were before the fence, and the reverse peer's
  switch on: walship ships the writes back from the peer cluster's WALs.
* ``rollback``: before ``switch``, the reverse peer removed (or its switch as it was) and the
  source unfenced; nothing else on the peer's cluster was changed.

With ``reverse`` off, ``reverse`` and ``unfence`` are skipped: the source stays fenced (a
migration). Failback is a switchover from the peer's cluster with the reverse peer.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from walship.errors import SwitchoverError, TableNotFoundError
from walship.peer import MANAGED_KEY, PeerConfig
from walship.sinks.base import SINK_PROTOCOL_KEY, SINK_THRIFT2_KEY
from walship.status.drain import Cut, take_cut, wait_drained
from walship.switchover.checks import Check, preflight_problems
from walship.switchover.record import ROLLBACK, SwitchoverRecord, SwitchoverRequest, SwitchoverStore, now_ms
from walship.switchover.sides import Sides, same_cluster

__all__ = ["Steps", "drained_message"]

log = logging.getLogger(__name__)


class Steps:
    """What each step of a switchover to ``sides.peer`` does, given the record so far; each
    returns its message (``skipped: ...`` when it had nothing to do) and records at once what it
    changed. :class:`~walship.switchover.runner.Switchover` checks their preconditions and
    records their states.

    :param say: where each step's lines go as it runs.
    :param checks: more preflight checks: each returns ``None``, or what is wrong.
    :param pump: called while the drain waits (the command ships the peer's queues itself).
    """

    def __init__(
        self,
        sides: Sides,
        request: SwitchoverRequest,
        store: SwitchoverStore,
        *,
        say: Callable[[str], None],
        checks: Sequence[Check],
        pump: Callable[[], None] | None,
    ) -> None:
        self.sides = sides
        self.request = request
        self.store = store
        self.say = say
        self.checks = checks
        self.pump = pump

    @property
    def peer_id(self) -> str:
        return self.request.peer_id

    def by_name(self) -> dict[str, Callable[[SwitchoverRecord], str]]:
        """Each step's body, by its name."""
        return {
            "preflight": self.preflight,
            "fence": self.fence,
            "drain": self.drain,
            "verify": self.verify,
            "reverse": self.reverse,
            "switch": self.switch,
            "unfence": self.unfence,
            ROLLBACK: self.rollback,
        }

    def changed(self, step: str, line: str) -> None:
        """Record at once what the step changed (a failure later in the step keeps it)."""
        self.say(f"  {line}")
        self.store.add_change(self.peer_id, step, line)

    def preflight(self, record: SwitchoverRecord) -> str:
        problems = preflight_problems(self.sides, self.request, record, self.checks)
        if problems:
            raise SwitchoverError(
                f"preflight: {len(problems)} problem(s) for the switchover to peer {self.peer_id}: "
                + "; ".join(problems)
            )
        return (
            f"both clusters answer; peer {self.peer_id} is walship's and shipping; "
            f"{', '.join(record.tables)} writable on both sides"
        )

    def fence_one(self, step: str, table: str, wanted: dict[str, bool]) -> None:
        """Bring one table of the source to ``wanted`` (``read_only``, ``enabled``), recording
        each change."""
        tables = self.sides.source.tables
        if "enabled" in wanted and tables.table_enabled(table) != wanted["enabled"]:
            (tables.enable_table if wanted["enabled"] else tables.disable_table)(table)
            self.changed(step, f"table {table}: {'enabled' if wanted['enabled'] else 'disabled'}")
        if "read_only" in wanted and tables.is_read_only(table) != wanted["read_only"]:
            tables.set_read_only(table, wanted["read_only"])
            before = str(not wanted["read_only"]).lower()
            self.changed(step, f"table {table}: READONLY {before} -> {str(wanted['read_only']).lower()}")

    def fence(self, record: SwitchoverRecord) -> str:
        tables = self.sides.source.tables
        for table in record.tables:
            before = record.fenced.get(table)
            if before is None:
                before = {"read_only": tables.is_read_only(table), "enabled": tables.table_enabled(table)}
                record = self.store.keep_fenced(self.peer_id, table, before)
            self.fence_one("fence", table, {"read_only": True} if record.fence == "read_only" else {"enabled": False})
        how = "read-only" if record.fence == "read_only" else "disabled"
        return f"{', '.join(record.tables)} {how} on the source: writes to them are refused"

    def cut(self, record: SwitchoverRecord) -> Cut:
        """The drain's cut: taken once, after the fence, and kept in the record."""
        if record.cut is not None:
            return Cut.from_json(record.cut)
        sides = self.sides
        cut = take_cut(sides.source.client, sides.source.layout, sides.walstore, self.peer_id)
        self.store.set(self.peer_id, cut=cut.to_json())
        return cut

    def drain(self, record: SwitchoverRecord) -> str:
        source = self.sides.source
        cut = self.cut(record)
        self.say(f"  waiting for {len(cut.points)} WAL(s) of the cut to be shipped")
        result = wait_drained(
            source.client,
            source.layout,
            cut,
            timeout=self.request.drain_timeout,
            poll=self.request.poll,
            before_each=self.pump,
        )
        if not result.drained:
            raise SwitchoverError(f"drain: {result.message()}")
        return drained_message(cut)

    def verify(self, record: SwitchoverRecord) -> str:
        from walship.verify.plan import VerifyJob
        from walship.verify.run import verify

        if record.fence == "disable":
            return "skipped: the source's tables are disabled (fence disable), so they cannot be scanned"

        site = self.sides.site
        job = VerifyJob(
            zk=site.zk,
            znode_parent=site.znode_parent,
            wal_root=site.wal_root or "",
            zk_auth=site.auth,
            source_thrift2=self.request.source_thrift2,
            peer_id=self.peer_id,
            tables=tuple(record.tables),
        )
        result = verify(job)
        summary = result.to_json()
        self.store.set(
            self.peer_id, verify={k: summary[k] for k in ("counters", "bad_rows", "rows_scanned", "seconds")}
        )
        if not result.ok:
            shown = ", ".join(result.bad_keys[:10])
            raise SwitchoverError(
                f"verify: {result.counters.bad} bad row(s) between the source and peer {self.peer_id} "
                f"({shown}): stopped before the switch; roll back, repair (walship verify --repair), then run again"
            )
        return f"{result.rows_scanned} row(s) of {', '.join(record.tables)} equal on both sides"

    def reverse_config(self, record: SwitchoverRecord) -> PeerConfig:
        """The peer back to the source, added on the peer's cluster: managed, switched off, the
        switchover's tables (with the families the peer takes), written to the source's Thrift2."""
        table_cfs = self.sides.peer.table_cfs or {}
        return PeerConfig(
            record.reverse_peer_id,
            record.source_cluster_key,
            enabled=False,
            table_cfs={t: table_cfs.get(t) for t in record.tables},
            configuration={
                MANAGED_KEY: "true",
                SINK_PROTOCOL_KEY: "thrift2",
                SINK_THRIFT2_KEY: self.request.source_thrift2,
            },
        )

    def reverse(self, record: SwitchoverRecord) -> str:
        if not record.reverse:
            return "skipped: no peer back to the source (reverse is off)"
        target = self.sides.target
        back = record.reverse_peer_id
        existing = target.find_peer(back)
        if record.reverse_peer is None:
            seen = {"added": existing is None, "switch_before": existing.enabled if existing is not None else None}
            record = self.store.set(self.peer_id, reverse_peer=seen)
        if existing is None:
            target.peers.add(self.reverse_config(record))
            self.changed("reverse", f"peer {back} added on {target.label}: managed, walship's switch off")
        else:
            if not same_cluster(existing.cluster_key, record.source_cluster_key) or not existing.managed:
                raise SwitchoverError(
                    f"reverse: peer {back} of {target.label} exists, "
                    + ("to another cluster" if existing.managed else "shipped by HBase itself")
                    + f" ({existing.cluster_key}): give another reverse peer id"
                )
            if existing.enabled:
                target.store.set_switch(back, False)
                self.changed("reverse", f"peer {back} on {target.label}: walship's switch on -> off")
        return f"peer {back} on {target.label} queues every write there for the source"

    def switch(self, record: SwitchoverRecord) -> str:
        tables = self.sides.source.tables
        for table in record.tables:
            fenced = tables.is_read_only(table) if record.fence == "read_only" else not tables.table_enabled(table)
            if not fenced:
                raise SwitchoverError(
                    f"switch: table {table} of the source takes writes again (someone lifted the fence): roll back"
                )
        self.store.set(self.peer_id, switched_at=now_ms())
        return f"clients may write to {', '.join(record.tables)} on peer {self.peer_id}'s cluster ({record.peer_cluster_key}) now"

    def unfence(self, record: SwitchoverRecord) -> str:
        if not record.reverse:
            return "skipped: the source stays fenced (reverse is off)"
        for table, before in record.fenced.items():
            self.fence_one("unfence", table, before)
        back, target = record.reverse_peer_id, self.sides.target
        if not target.store.get(back).enabled:
            target.store.set_switch(back, True)
            self.changed("unfence", f"peer {back} on {target.label}: walship's switch off -> on")
        return f"the source takes writes again; walship ships {target.label}'s writes back through peer {back}"

    def rollback(self, record: SwitchoverRecord) -> str:
        target, seen = self.sides.target, record.reverse_peer
        if seen is not None:
            back = record.reverse_peer_id
            existing = target.find_peer(back)
            if seen["added"] and existing is not None:
                target.peers.remove(back)
                self.changed(ROLLBACK, f"peer {back} removed from {target.label}")
            elif not seen["added"] and existing is not None and existing.enabled != seen["switch_before"]:
                target.store.set_switch(back, bool(seen["switch_before"]))
                self.changed(
                    ROLLBACK, f"peer {back} on {target.label}: walship's switch back to {seen['switch_before']}"
                )
        for table, before in record.fenced.items():
            try:
                self.fence_one(ROLLBACK, table, before)
            except TableNotFoundError:
                self.changed(ROLLBACK, f"table {table} no longer exists on the source: nothing to undo")
        return "the source takes writes as before; nothing of the switchover is left on the peer's cluster"


def drained_message(cut: Cut) -> str:
    """The drain step's message once its cut is reached."""
    return f"every edit the source accepted before the fence is on the peer ({len(cut.points)} WAL(s))"
