"""The DAG's small tasks: turn pending queues into Spark job arguments, and read back the
jobs' summaries."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

from airflow.sdk import Asset
from airflow.sdk.exceptions import AirflowException

from walship_airflow.hooks import SourceCluster


def summary_dir(dag_id: str, run_id: str) -> Path:
    base = os.environ.get("WALSHIP_SUMMARY_DIR") or str(
        Path(os.environ.get("AIRFLOW_HOME", "~/airflow")).expanduser() / "walship" / "summaries"
    )
    return Path(base) / dag_id / re.sub(r"[^A-Za-z0-9_.-]", "_", run_id)


def ship_arguments(source: SourceCluster, queues: list[str], context: Any) -> list[list[str]]:
    """One argument list per group of queues (at most ``max_parallel_jobs`` groups)."""
    params = context["params"]
    if not queues:
        return []
    n = max(1, min(int(params["max_parallel_jobs"]), len(queues)))
    groups = [sorted(queues)[i::n] for i in range(n)]
    out_dir = summary_dir(context["dag"].dag_id, context["run_id"])
    args = []
    for i, group in enumerate(groups):
        args.append(
            [
                *source.cli_args(),
                "--peer", str(params["peer_id"]),
                "--queues", ";".join(group),
                "--batch-entries", str(params["batch_entries"]),
                "--batch-bytes", str(params["batch_bytes"]),
                "--max-batches", str(params["max_batches"]),
                "--summary", str(out_dir / f"group-{i}.json"),
            ]
        )  # fmt: skip
    return args


def _arg(args: list[str], flag: str) -> str:
    return args[args.index(flag) + 1]


def read_summaries(groups: list[list[str]], context: Any, alias: Any) -> dict[str, Any]:
    """Sum the groups' summaries, record an asset event for the peer, fail on any error."""
    totals: dict[str, int] = {}
    errors = []
    peer_id = str(context["params"]["peer_id"])
    for args in groups or []:
        path = Path(_arg(args, "--summary"))
        if not path.exists():
            errors.append(f"queues {_arg(args, '--queues')}: the Spark job wrote no summary ({path})")
            continue
        summary = json.loads(path.read_text())
        for key, value in summary.get("totals", {}).items():
            totals[key] = totals.get(key, 0) + int(value)
        if summary.get("status") == "error":
            errors.append(str(summary.get("error")))
    if groups:
        context["outlet_events"][alias].add(
            Asset(name=f"walship-peer-{peer_id}", uri=f"walship://peer/{peer_id}"), extra={"peer_id": peer_id, **totals}
        )
    if errors:
        raise AirflowException("; ".join(errors))
    return {"peer_id": peer_id, "groups": len(groups or []), **totals}
