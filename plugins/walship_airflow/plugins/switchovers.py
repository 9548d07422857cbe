"""The Replication page's switchovers: each peer's last switchover from the source
(:mod:`walship.switchover.record`), its steps in order with their state, timings, what each
changed and the link to its task's log. Pure functions of the records, as the rest of the page.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from html import escape
from typing import Any

from walship_airflow.plugins.charts import human_seconds

__all__ = ["render_switchovers"]

#: the steps as the page lists them (rollback only once it ran)
_STEPS = ("preflight", "fence", "drain", "verify", "reverse", "switch", "unfence", "rollback")


def _when(ms: Any) -> str:
    if not isinstance(ms, int):
        return "-"
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%H:%M:%S")


def _took(step: Mapping[str, Any]) -> str:
    started, ended = step.get("started_at"), step.get("ended_at")
    if not isinstance(started, int):
        return "-"
    if not isinstance(ended, int):
        return "running"
    return human_seconds((ended - started) / 1000)


def _step_row(name: str, step: Mapping[str, Any]) -> str:
    state = str(step.get("state") or "pending")
    changed = step.get("changed") or []
    what = "".join(f"<li>{escape(str(line))}</li>" for line in changed)
    log = step.get("log_url")
    link = f'<a class="log" href="../{escape(str(log))}" target="_top" data-ui-link data-log>log</a>' if log else ""
    return (
        f'<tr data-step="{escape(name)}" data-state="{escape(state)}">'
        f'<td>{escape(name)}</td><td><span class="chip state-{escape(state)}">{escape(state)}</span></td>'
        f"<td>{_when(step.get('started_at'))}</td><td>{_took(step)}</td>"
        f'<td><ul class="changed">{what}</ul><span class="message">{escape(str(step.get("message") or ""))}</span></td>'
        f"<td>{link}</td></tr>"
    )


def _switchover(record: Mapping[str, Any]) -> str:
    peer = str(record.get("peer_id"))
    steps = record.get("steps") or {}
    rows = "".join(
        _step_row(name, steps.get(name) or {})
        for name in _STEPS
        if name != "rollback" or (steps.get(name) or {}).get("state", "pending") != "pending"
    )
    state = str(record.get("state") or "")
    switched = record.get("switched_at")
    note = f", switched at {_when(switched)} UTC" if isinstance(switched, int) else ""
    return (
        f'<div class="switchover" data-peer-id="{escape(peer)}" data-run-id="{escape(str(record.get("run_id")))}" '
        f'data-state="{escape(state)}"><h3>To peer {escape(peer)} '
        f'<span class="chip state-{escape(state)}">{escape(state)}</span></h3>'
        f'<p class="meta">{escape(", ".join(map(str, record.get("tables") or [])))} \u2192 '
        f"<code>{escape(str(record.get('peer_cluster_key')))}</code>, run <code>{escape(str(record.get('run_id')))}</code>"
        f"{escape(note)}</p>"
        '<div class="table-wrap"><table class="steps"><thead><tr><th>step</th><th>state</th><th>started (UTC)</th>'
        f"<th>took</th><th>what it changed</th><th></th></tr></thead><tbody>{rows}</tbody></table></div></div>"
    )


def render_switchovers(records: Sequence[Mapping[str, Any]] | None, error: str | None = None) -> str:
    """The section (empty when the source never switched over and nothing went wrong)."""
    if error:
        return f'<section class="switchovers"><h2>Switchovers</h2><p class="error">{escape(error)}</p></section>'
    if not records:
        return ""
    return f'<section class="switchovers"><h2>Switchovers</h2>{"".join(_switchover(r) for r in records)}</section>'
