"""
### walship_add_peer

Onboards a new walship-managed peer of the source cluster (connection `walship_source`, whose
extra `thrift2` names the source's Thrift2 server) from the UI: trigger it with the peer's
Params. Each step is a task of its own that can be cleared and run again alone:

1. **check** — the Params made into the peer's configuration and checked as
   `walship peer add` checks it (a bad Param fails the run, naming it); the scope audit of that
   configuration against the source's tables (`walship scope audit`): with `create_missing`,
   the tables and families the peer lacks are created there first (the source's descriptors).
   Fails while a finding would lose data; the source's scopes are never changed.
2. **add** — the peer added through HBase's master, managed by walship, with HBase's peer-state
   and walship's switch DISABLED: HBase queues the WALs for it from here on, nothing ships it
   yet. A peer already there with the same configuration (an earlier try or run) is taken as
   added; one with another configuration fails the run, naming each difference. The XCom holds
   the moment it was added.
3. **plan_copy**, **copy** — `walship copy` as a Spark job: the rows written before that moment
   (cells with earlier timestamps, plus `copy_margin` seconds for clock skew; every delete
   marker). Skipped when `copy` is false.
4. **enable** — walship's switch ENABLED: `walship_replicate` (or a `walship_tail` run) ships
   the peer from its next run on, from the queues HBase kept since step 2.
5. **wait_drained** — deferred until every edit written before it started is on the peer (the
   shipping DAG must be running; fails after `drain_timeout` seconds). Then **plan_verify**,
   **verify**, **report**, **verified** — `walship_verify` on every table the peer replicates,
   cells older than the drain cut (without a copy, only those written since step 2); a bad row
   fails the run (the result is an event of the asset `walship_verify` all the same).
6. **shipping** — the peer as the master has it: managed, ENABLED, shipped by walship alone.

**disable_on_failure** runs when a step failed for good: once `add` ran, the peer is left
DISABLED (walship's switch: HBase keeps its queues and WALs, nothing ships it), never half
added, and the run fails saying so. Fix the cause and clear the failed task with its
downstream tasks to go on from there (or `walship peer remove ID`). Manual only, one run at a
time.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from airflow.sdk import DAG, Param, TriggerRule, dag, task

from walship_airflow.dags.common import dag_kwargs, pyrunner_jar, spark_conn_param, spark_job
from walship_airflow.onboarding import COPY_MARGIN_S
from walship_airflow.operators.ship import WalshipShipOperator, WalshipVerifyOperator, spark_pool
from walship_airflow.sensors.queues import WalDrainedSensor
from walship_airflow.sources import Source
from walship_airflow.verify import verify_asset


def build(source: Source) -> DAG:
    """``walship_add_peer`` of a source."""
    conn_id = source.conn_id
    asset = verify_asset(source)

    @dag(
        **dag_kwargs(
            source,
            "walship_add_peer",
            __doc__,
            tags=["peers"],
            default_args={"retries": 1, "retry_delay": timedelta(minutes=1)},
            schedule=None,
            max_active_runs=1,
        ),
        params={
            "peer_id": Param(
                "", type="string", minLength=1, description="the new peer's id (letters, digits, '_' and '.')"
            ),
            "cluster_key": Param(
                "",
                type="string",
                minLength=1,
                description="the peer cluster's ZooKeeper, as HBase's cluster key: host[,host...]:port:/znode-parent",
            ),
            "protocol": Param(
                "thrift2",
                type="string",
                enum=["thrift2", "thrift1", "hbase"],
                description="how walship ships to the peer (walship.sink.protocol): its Thrift2 or Thrift1 servers, or "
                "hbase: straight into its region servers, found through the cluster key (real HBase only)",
            ),
            "sink_thrift2": Param(
                "",
                type="string",
                minLength=1,
                description="the peer's Thrift2 server(s), host:port[,...] (walship.sink.thrift2): the copy, the "
                "verify and create_missing use it, whatever the protocol",
            ),
            "sink_thrift": Param(
                "",
                type=["null", "string"],
                description="the peer's Thrift1 server(s), host:port[,...] (walship.sink.thrift): needed with "
                "protocol thrift1",
            ),
            "table_cfs": Param(
                "",
                type=["null", "string"],
                description="replicate only these, HBase's format: 'ns.table:cf1,cf2;table2' (empty, and namespaces "
                "empty: every table)",
            ),
            "namespaces": Param(
                "", type=["null", "string"], description="replicate only the tables of these namespaces: 'ns1,ns2'"
            ),
            "serial": Param(False, type="boolean", description="a serial peer (HBase's serial replication)"),
            "bandwidth": Param(
                0, type="integer", minimum=0, description="bytes a second at most, per shipping process (0: unlimited)"
            ),
            "copy": Param(
                True,
                type="boolean",
                description="copy the rows written before the peer was added (walship copy, with Spark); off: the "
                "peer gets only the edits written from then on",
            ),
            "create_missing": Param(
                False,
                type="boolean",
                description="create the tables and families the peer lacks, with the source's descriptors",
            ),
            "copy_margin": Param(
                COPY_MARGIN_S,
                type="integer",
                minimum=0,
                description="seconds past the moment the peer was added that the copy also takes (clock skew between "
                "ZooKeeper and the region servers; what is both copied and shipped lands once)",
            ),
            "configuration": Param(
                {},
                type=["null", "object"],
                description='more peer configuration entries, e.g. {"walship.thrift.transport": "framed"}',
            ),
            "drain_timeout": Param(
                3600,
                type="integer",
                minimum=1,
                description="seconds to wait for the peer to catch up once enabled (walship_replicate ships it)",
            ),
            "spark_conn_id": spark_conn_param(),
        },
    )
    def walship_add_peer() -> None:
        @task
        def check(**context: Any) -> dict[str, Any]:
            from walship_airflow.onboarding import check_peer

            return check_peer(context, conn_id)

        @task
        def add(**context: Any) -> dict[str, Any]:
            from walship_airflow.onboarding import add_peer

            return add_peer(context, conn_id)

        @task
        def plan_copy(added: dict[str, Any], **context: Any) -> list[dict[str, Any]]:
            from walship_airflow.onboarding import copy_plan

            return copy_plan(added, context, spark_job("copy_rows.py", "WALSHIP_COPY_APP"), pyrunner_jar(), conn_id)

        @task(trigger_rule=TriggerRule.NONE_FAILED)  # after the copy, or without one
        def enable(**context: Any) -> dict[str, Any]:
            from walship_airflow.onboarding import enable_peer

            return enable_peer(context, conn_id)

        @task
        def plan_verify(drained: dict[str, Any], added: dict[str, Any], **context: Any) -> list[dict[str, Any]]:
            from walship_airflow.onboarding import verify_plan

            return verify_plan(
                drained, added, context, spark_job("verify.py", "WALSHIP_VERIFY_APP"), pyrunner_jar(), conn_id
            )

        @task(outlets=[asset])
        def report(jobs: list[dict[str, Any]], **context: Any) -> dict[str, Any]:
            from walship_airflow.hooks.source import WalshipHook
            from walship_airflow.verify import report_result

            return report_result(WalshipHook(conn_id).get_source(), jobs, context, asset)

        @task(retries=0)
        def verified(extra: dict[str, Any]) -> dict[str, Any]:
            from walship_airflow.verify import check_result

            return check_result(extra)

        @task
        def shipping(**context: Any) -> dict[str, Any]:
            from walship_airflow.onboarding import confirm_shipping

            return confirm_shipping(context, conn_id)

        @task(trigger_rule=TriggerRule.ONE_FAILED)
        def disable_on_failure(**context: Any) -> None:
            from walship_airflow.onboarding import disable_on_failure

            disable_on_failure(context, conn_id)

        checked = check()
        added: Any = add()  # XComArgs: the tasks below take what they resolve to
        checked >> added
        copy_jobs: Any = plan_copy(added)
        copied = WalshipShipOperator.partial(
            task_id="copy", name="walship-copy", walship_conn_id=conn_id, pool=spark_pool()
        ).expand_kwargs(copy_jobs)
        enabled = enable()
        copied >> enabled
        drained = WalDrainedSensor(
            task_id="wait_drained",
            peer_id="{{ params.peer_id }}",
            drain_timeout="{{ params.drain_timeout }}",
            walship_conn_id=conn_id,
            poll_interval=2.0,
            retries=0,  # its timeout says what is behind; a retry would only wait again
        )
        enabled >> drained
        cut: Any = drained.output
        verify_jobs: Any = plan_verify(cut, added)
        verify = WalshipVerifyOperator.partial(
            task_id="verify", name="walship-verify", walship_conn_id=conn_id, pool=spark_pool()
        ).expand_kwargs(verify_jobs)
        result: Any = report(verify_jobs)
        verify >> result
        good = verified(result)
        done = shipping()
        good >> done
        steps = [checked, added, copy_jobs, copied, enabled, drained, verify_jobs, verify, result, good, done]
        steps >> disable_on_failure()

    return walship_add_peer()
