"""
### walship_switchover

Moves the writers of some tables from a source cluster (the `source` connection) to the
cluster of one of its walship peers, losing nothing; a second run from the peer's connection,
with the peer back, moves them home again (failback). Each step is a task that checks its own
precondition and can be cleared and run again alone; the Replication page shows them live:

1. **preflight** — both clusters' masters answer; the peer is walship's, enabled and shipping
   (no queue stuck); its scope audit finds nothing that loses data in the tables; no dead letter
   is pending; the tables take writes on both clusters; the peer's cluster is a source of this
   Airflow (`peer_source`, or found by its cluster key), whose `walship_replicate` ships back.
2. **fence** — the tables on the source refuse writes: their descriptors' `READONLY` through
   the source's master (`fence=disable`: disabled), each table's state recorded first.
3. **drain** — a cut of the peer's queues taken after the fence, waited for in the triggerer
   (`drain_timeout`): every write the source accepted is on the peer. The source's
   `walship_replicate` ships it.
4. **verify** — the tables compared row by row: a bad row stops the run.
5. **reverse** — the peer back to the source (`reverse_peer_id`, by default the same id) added
   through the peer cluster's master, walship's switch off: every write there is queued.
6. **switch** — the fence checked still in place; the moment clients may write to the peer's
   cluster. No rollback after it.
7. **unfence** — the source's tables as before the fence and the peer back switched on: the peer
   cluster's `walship_replicate` ships the writes back.

**rollback** runs when a step before `switch` failed: the peer back removed (or its switch as it
was), the source unfenced; the run then fails. With `reverse` off the source stays fenced (a
migration). `dry_run` runs the preflight and logs what each step would change. Manual only,
one run at a time; `walship switchover` runs the same steps without Airflow.
"""

from __future__ import annotations

from typing import Any

from airflow.sdk import DAG, Param, TriggerRule, chain, dag, task

from walship_airflow.dags.common import dag_kwargs
from walship_airflow.sensors.switchover import SwitchoverDrainSensor
from walship_airflow.sources import Source, configured_sources

#: The steps before the switch: a failure of any of them rolls the switchover back.
BEFORE_SWITCH = ("preflight", "fence", "drain", "verify", "reverse", "switch")


def build() -> DAG:
    """``walship_switchover``: one per Airflow, the source a Param."""
    sources = [s.conn_id for s in configured_sources()]

    @dag(
        **dag_kwargs(
            Source(),
            "walship_switchover",
            __doc__,
            tags=["failover"],
            default_args={"retries": 0},
            schedule=None,
            max_active_runs=1,
        ),
        params={
            "source": Param(
                sources[0], type="string", enum=sources, description="the cluster the writers leave (its connection)"
            ),
            "peer_id": Param("", type="string", minLength=1, description="the walship peer whose cluster takes them"),
            "tables": Param(
                "", type=["null", "string"], description="the tables, comma-separated (empty: the peer's table-cfs)"
            ),
            "reverse": Param(
                True,
                type="boolean",
                description="add the peer back and unfence the source, so that writes ship back (off: a migration; "
                "the source stays fenced)",
            ),
            "reverse_peer_id": Param(
                "", type=["null", "string"], description="the peer back's id on the peer's cluster (empty: peer_id)"
            ),
            "peer_source": Param(
                "",
                type=["null", "string"],
                description="the peer cluster's walship connection (empty: found by the peer's cluster key)",
            ),
            "fence": Param(
                "read_only",
                type="string",
                enum=["read_only", "disable"],
                description="how the source's tables refuse writes: READONLY descriptors, or disabled",
            ),
            "drain_timeout": Param(3600, type="integer", minimum=1, description="seconds the drain may take"),
            "dry_run": Param(False, type="boolean", description="preflight only, and log what each step would change"),
        },
    )
    def walship_switchover() -> None:
        def step(name: str, **kwargs: Any) -> Any:
            @task(task_id=name, **kwargs)
            def run(**context: Any) -> str:
                from walship_airflow.switchover import run_step

                return run_step(name, context["params"], context)

            return run()

        tasks = {name: step(name) for name in BEFORE_SWITCH if name != "drain"}
        tasks["drain"] = SwitchoverDrainSensor(task_id="drain", poll_interval=1.0)
        unfence = step("unfence")

        @task(trigger_rule=TriggerRule.ONE_FAILED)
        def rollback(**context: Any) -> None:
            from walship_airflow.switchover import rollback

            rollback(context["params"], context)

        steps = [tasks[name] for name in BEFORE_SWITCH]
        chain(*steps, unfence)
        steps >> rollback()

    return walship_switchover()
