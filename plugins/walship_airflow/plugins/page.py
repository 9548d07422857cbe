"""The "Replication" page as HTML: per peer a drained badge, a chart of bytes queued and lag
over time (inline SVG, drawn here: the page loads nothing from elsewhere), the queues table,
and links to the walship DAGs' recent runs.

Pure functions of their arguments (no Airflow, no I/O), so that they can be tested alone;
:mod:`walship_airflow.plugins.app` reads the data and serves the page.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from html import escape
from typing import Any
from urllib.parse import quote

__all__ = ["NO_SAMPLES", "RunLink", "Sample", "chart_svg", "human_bytes", "human_seconds", "render_page"]

NO_SAMPLES = "no samples yet: enable the walship_status DAG"

#: the queues table: (column heading, field of a queue in ``walship status --json``)
QUEUE_COLUMNS: tuple[tuple[str, str], ...] = (
    ("server", "server"),
    ("queue", "queue_id"),
    ("recovered", "recovered"),
    ("dead servers", "dead_servers"),
    ("WALs", "wals"),
    ("current WAL", "current_wal"),
    ("position", "position"),
    ("bytes queued", "bytes_queued"),
    ("progress", "progress_pct"),
    ("last shipped write", "last_shipped_write_time"),
    ("age of last shipped op", "age_of_last_shipped_op_s"),
    ("lag", "lag_s"),
    ("holder", "holder"),
    ("last error", "last_error"),
    ("last back-off", "last_backoff"),
    ("state", "state"),
    ("bulk loads", "bulk_loads"),
    ("waiting (serial)", "waiting_serial"),
    ("throttled", "throttled_s"),
)


@dataclass(frozen=True)
class Sample:
    """One recorded status sample: its time and, per peer id, ``bytes_queued``, ``lag_s``,
    ``drained`` and ``queues``."""

    at: datetime
    peers: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)


@dataclass(frozen=True)
class RunLink:
    """A DAG run, linked to its page in the Airflow UI."""

    dag_id: str
    run_id: str
    state: str | None
    run_type: str | None
    run_after: datetime | None

    @property
    def href(self) -> str:
        """Relative to the page (``<base>/walship/``), so that it holds under any base URL."""
        return f"../dags/{quote(self.dag_id, safe='')}/runs/{quote(self.run_id, safe='')}"


def human_bytes(n: float) -> str:
    """``1536`` -> ``1.5 KiB``."""
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(value) < 1024 or unit == "TiB":
            return f"{int(value)} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def human_seconds(s: float) -> str:
    """``0.25`` -> ``0.25 s``; ``12.345`` -> ``12.3 s``; ``600`` -> ``10.0 min``; ``7200`` -> ``2.0 h``."""
    if abs(s) < 10:
        return f"{s:.2f}".rstrip("0").rstrip(".") + " s"
    if abs(s) < 120:
        return f"{s:.1f} s"
    if abs(s) < 7200:
        return f"{s / 60:.1f} min"
    return f"{s / 3600:.1f} h"


def _nice_ceiling(value: float, binary: bool = False) -> float:
    """The smallest of 1, 2, 2.5, 5 times a power of ten that is at least ``value`` (> 0);
    ``binary``: that in the unit of :func:`human_bytes` (KiB, MiB, ...), times the unit."""
    if value <= 0:
        return 1.0
    unit = 1.0
    while binary and value / unit >= 1024:
        unit *= 1024
    scaled = value / unit
    power = math.pow(10, math.floor(math.log10(scaled)))
    return unit * next(m * power for m in (1, 2, 2.5, 5, 10) if m * power >= scaled)


def _time_label(at: datetime, with_date: bool) -> str:
    return at.strftime("%Y-%m-%d %H:%M UTC" if with_date else "%H:%M:%S UTC")


# The chart's geometry (SVG user units): two panels, bytes queued above lag, one time axis.
_W, _LEFT, _RIGHT, _TOP, _PANEL, _GAP, _AXIS = 760, 78, 16, 22, 100, 34, 26
_H = _TOP + 2 * _PANEL + _GAP + _AXIS
_MAX_DOTS = 60


def chart_svg(peer_id: str, points: Sequence[tuple[datetime, float, float]]) -> str:
    """An SVG chart of one peer's samples, ``(time, bytes queued, lag in seconds)`` in time
    order: bytes queued in the upper panel, lag in the lower one. Without points, the empty
    panels and :data:`NO_SAMPLES`."""
    plot_w = _W - _LEFT - _RIGHT
    parts = [
        f'<svg class="walship-chart" data-peer="{escape(peer_id)}" data-samples="{len(points)}" '
        f'viewBox="0 0 {_W} {_H}" width="100%" preserveAspectRatio="xMinYMin meet" role="img" '
        f'xmlns="http://www.w3.org/2000/svg">',
        f"<title>peer {escape(peer_id)}: bytes queued and lag, {len(points)} samples</title>",
    ]
    t0 = min((p[0] for p in points), default=None)
    t1 = max((p[0] for p in points), default=None)
    span = (t1 - t0).total_seconds() if t0 and t1 else 0.0

    def x_of(at: datetime) -> float:
        if t0 is None or span <= 0:
            return _LEFT + plot_w / 2
        return _LEFT + (at - t0).total_seconds() / span * plot_w

    panels = (
        # (title, CSS class, values, tick format, the least top of the scale)
        ("bytes queued", "bytes-queued", [p[1] for p in points], human_bytes, 1024.0),
        ("lag", "lag", [p[2] for p in points], human_seconds, 1.0),
    )
    for i, (title, css, values, fmt, floor) in enumerate(panels):
        top = _TOP + i * (_PANEL + _GAP)
        bottom = top + _PANEL
        y_max = _nice_ceiling(max([*values, floor]), binary=fmt is human_bytes)
        parts.append(f'<text class="panel-title" x="{_LEFT}" y="{top - 7}">{title}</text>')
        parts.append(f'<rect class="plot" x="{_LEFT}" y="{top}" width="{plot_w}" height="{_PANEL}"/>')
        for frac in (0.0, 0.5, 1.0):
            y = bottom - frac * _PANEL
            parts.append(f'<line class="grid" x1="{_LEFT}" x2="{_W - _RIGHT}" y1="{y:.1f}" y2="{y:.1f}"/>')
            parts.append(
                f'<text class="tick" x="{_LEFT - 6}" y="{y + 4:.1f}" text-anchor="end">{escape(fmt(frac * y_max))}</text>'
            )
        coords = [(x_of(p[0]), bottom - v / y_max * _PANEL) for p, v in zip(points, values, strict=True)]
        if coords:
            pts = " ".join(f"{x:.1f},{y:.1f}" for x, y in coords)
            parts.append(f'<polyline class="series {css}" data-series="{css}" points="{pts}"/>')
        if len(coords) <= _MAX_DOTS:
            parts.extend(f'<circle class="dot {css}" cx="{x:.1f}" cy="{y:.1f}" r="2.5"/>' for x, y in coords)
        elif coords:
            x, y = coords[-1]
            parts.append(f'<circle class="dot {css}" cx="{x:.1f}" cy="{y:.1f}" r="2.5"/>')
    axis_y = _TOP + 2 * _PANEL + _GAP + 16
    if t0 is not None and t1 is not None:
        with_date = span >= 86400 or t0.date() != t1.date()
        parts.append(f'<text class="tick" x="{_LEFT}" y="{axis_y}">{_time_label(t0, with_date)}</text>')
        if span > 0:
            parts.append(
                f'<text class="tick" x="{_W - _RIGHT}" y="{axis_y}" text-anchor="end">{_time_label(t1, with_date)}</text>'
            )
    else:
        mid = _TOP + _PANEL + _GAP / 2 + 4
        parts.append(
            f'<text class="no-samples" x="{_LEFT + plot_w / 2}" y="{mid}" text-anchor="middle">{NO_SAMPLES}</text>'
        )
    parts.append("</svg>")
    return "".join(parts)


def _cell_text(field_name: str, value: Any) -> str:
    if value is None or value == [] or value == {}:
        return "\u2014"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if field_name == "bytes_queued":
        return f"{value:,} ({human_bytes(value)})" if value >= 1024 else f"{value:,} B"
    if field_name in ("lag_s", "age_of_last_shipped_op_s", "throttled_s"):
        return human_seconds(float(value))
    if field_name == "waiting_serial":
        whose = "its previous range" if value["waits_for"] == value["region"] else f"parent {value['waits_for']}"
        return f"region {value['region']} seq {value['seq']} waits for {whose}"
    if field_name == "progress_pct":
        return f"{float(value):.1f} %"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, list):
        return ", ".join(str(v) for v in value)
    if isinstance(value, dict):
        text = "; ".join(f"{k}: {v}" for k, v in value.items())
        return text if len(text) <= 160 else text[:157] + "..."
    return str(value)


def _queue_row(queue: Mapping[str, Any]) -> str:
    cells = []
    for _, name in QUEUE_COLUMNS:
        value = queue.get(name)
        raw = json.dumps(value, sort_keys=True)
        text = escape(_cell_text(name, value))
        if name == "state":
            text = f'<span class="chip state-{escape(str(value))}">{text}</span>'
        cells.append(f'<td data-field="{name}" data-value="{escape(raw)}" title="{escape(raw)}">{text}</td>')
    return (
        f'<tr class="queue" data-server="{escape(str(queue.get("server")))}" '
        f'data-queue-id="{escape(str(queue.get("queue_id")))}">{"".join(cells)}</tr>'
    )


def _badge(drained: bool) -> str:
    label, css = ("drained", "drained") if drained else ("not drained", "pending")
    return f'<span class="badge {css}" data-drained="{str(drained).lower()}">{label}</span>'


def _peer_points(peer_id: str, samples: Sequence[Sample]) -> list[tuple[datetime, float, float]]:
    points = []
    for s in sorted(samples, key=lambda s: s.at):
        peer = s.peers.get(peer_id)
        if peer is not None:
            points.append((s.at, float(peer.get("bytes_queued") or 0), float(peer.get("lag_s") or 0.0)))
    return points


def _chart_block(peer_id: str, samples: Sequence[Sample]) -> str:
    points = _peer_points(peer_id, samples)
    note = "" if points else f'<p class="no-samples">{NO_SAMPLES}</p>'
    legend = (
        f'<p class="legend">{len(points)} samples of the last 24 h, from the <code>walship_status</code> DAG</p>'
        if points
        else ""
    )
    return f'<div class="chart">{chart_svg(peer_id, points)}{note}{legend}</div>'


def _peer_section(peer: Mapping[str, Any], samples: Sequence[Sample]) -> str:
    peer_id = str(peer["peer_id"])
    totals = peer.get("totals", {})
    count = peer.get("peer_count") or {}
    table_cfs = peer.get("table_cfs")
    facts = [
        ("walship state", peer.get("state")),
        ("HBase peer-state", peer.get("hbase_peer_state")),
        ("cluster key", peer.get("cluster_key")),
        ("table-cfs", json.dumps(table_cfs) if table_cfs else "all replicated tables"),
        (
            "sinks answering",
            f"{count.get('answered')} of {count.get('configured')}" if isinstance(count, Mapping) else count,
        ),
        ("queues", totals.get("queues")),
        ("WALs", totals.get("wals")),
        ("bytes queued", _cell_text("bytes_queued", totals.get("bytes_queued", 0))),
        ("lag", human_seconds(float(totals.get("lag_s") or 0.0))),
    ]
    dl = "".join(f"<div><dt>{escape(k)}</dt><dd>{escape(str(v))}</dd></div>" for k, v in facts)
    queues = peer.get("queues") or []
    head = "".join(f"<th>{escape(label)}</th>" for label, _ in QUEUE_COLUMNS)
    rows = "".join(_queue_row(q) for q in queues) or (
        f'<tr class="empty"><td colspan="{len(QUEUE_COLUMNS)}">no queues</td></tr>'
    )
    return (
        f'<section class="peer" id="peer-{escape(peer_id)}" data-peer-id="{escape(peer_id)}">'
        f'<h2>Peer <span class="peer-id">{escape(peer_id)}</span> {_badge(bool(totals.get("drained")))}</h2>'
        f'<dl class="facts">{dl}</dl>'
        f"{_chart_block(peer_id, samples)}"
        f'<div class="table-wrap"><table class="queues"><thead><tr>{head}</tr></thead>'
        f"<tbody>{rows}</tbody></table></div></section>"
    )


def _runs_section(runs: Sequence[RunLink]) -> str:
    if not runs:
        return '<section class="runs"><h2>Recent DAG runs</h2><p>No runs of the walship DAGs yet.</p></section>'
    rows = []
    for run in runs:
        when = run.run_after.strftime("%Y-%m-%d %H:%M:%S UTC") if run.run_after else "\u2014"
        state = escape(run.state or "none")
        rows.append(
            f'<tr><td>{escape(run.dag_id)}</td><td><a class="run" href="{escape(run.href)}" target="_top" '
            f'data-dag-id="{escape(run.dag_id)}" data-run-id="{escape(run.run_id)}">{escape(run.run_id)}</a></td>'
            f'<td><span class="chip state-{state}">{state}</span></td><td>{escape(run.run_type or "")}</td>'
            f"<td>{when}</td></tr>"
        )
    return (
        '<section class="runs"><h2>Recent DAG runs</h2><div class="table-wrap"><table class="runs">'
        "<thead><tr><th>DAG</th><th>run</th><th>state</th><th>type</th><th>run after</th></tr></thead>"
        f"<tbody>{''.join(rows)}</tbody></table></div></section>"
    )


_CSS = """
:root { color-scheme: light; --fg: #1f2933; --muted: #616e7c; --line: #d9e2ec; --bg: #ffffff;
  --panel: #f8fafc; --accent: #017cee; --lag: #d9480f; --ok: #2b8a3e; --warn: #c92a2a; }
* { box-sizing: border-box; }
body { margin: 0; padding: 16px 24px 32px; font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif;
  color: var(--fg); background: var(--bg); }
header { display: flex; align-items: baseline; gap: 16px; flex-wrap: wrap; border-bottom: 1px solid var(--line);
  padding-bottom: 8px; }
h1 { font-size: 22px; margin: 0; } h2 { font-size: 18px; margin: 0 0 8px; }
header .meta { color: var(--muted); } a { color: var(--accent); }
.error { background: #fff5f5; border: 1px solid #ffc9c9; color: var(--warn); padding: 8px 12px; margin: 12px 0;
  border-radius: 6px; }
section { margin-top: 20px; padding: 16px; border: 1px solid var(--line); border-radius: 8px; background: var(--panel); }
.badge { display: inline-block; font-size: 12px; font-weight: 600; padding: 2px 10px; border-radius: 999px;
  vertical-align: middle; margin-left: 8px; color: #fff; }
.badge.drained { background: var(--ok); } .badge.pending { background: #e67700; }
dl.facts { display: flex; flex-wrap: wrap; gap: 4px 24px; margin: 0 0 12px; }
dl.facts div { display: flex; gap: 6px; } dt { color: var(--muted); } dd { margin: 0; font-weight: 500; }
.chart { max-width: 860px; background: var(--bg); border: 1px solid var(--line); border-radius: 6px; padding: 8px;
  margin-bottom: 12px; }
.chart p { margin: 4px 0 0; color: var(--muted); font-size: 12px; }
svg.walship-chart { display: block; font: 11px system-ui, sans-serif; }
svg .plot { fill: #fff; stroke: var(--line); } svg .grid { stroke: #eef2f6; }
svg .tick { fill: var(--muted); } svg .panel-title { fill: var(--fg); font-weight: 600; }
svg .series { fill: none; stroke-width: 2; stroke-linejoin: round; }
svg .series.bytes-queued, svg .dot.bytes-queued { stroke: var(--accent); fill: none; }
svg .dot.bytes-queued { fill: var(--accent); } svg .series.lag { stroke: var(--lag); }
svg .dot.lag { fill: var(--lag); stroke: none; } svg .no-samples { fill: var(--muted); font-size: 13px; }
.table-wrap { overflow-x: auto; }
table { border-collapse: collapse; width: 100%; background: var(--bg); font-size: 12px; }
th, td { border: 1px solid var(--line); padding: 4px 6px; text-align: left; vertical-align: top; }
th { background: #eef2f6; }
td { white-space: nowrap; }
td[data-field="server"], td[data-field="current_wal"], td[data-field="dead_servers"] {
  font-family: ui-monospace, monospace; white-space: normal; word-break: break-all; }
td[data-field="server"], td[data-field="current_wal"] { min-width: 22ch; }
td[data-field="holder"], td[data-field="last_error"], td[data-field="last_backoff"] { white-space: normal;
  max-width: 40ch; }
.chip { display: inline-block; padding: 0 6px; border-radius: 4px; background: #e4e7eb; white-space: nowrap; }
.state-success, .state-idle { background: #d3f9d8; } .state-failed, .state-stuck { background: #ffe3e3; }
.state-running, .state-shipping, .state-queued { background: #d0ebff; }
.state-waiting-peer, .state-waiting-serial, .state-disabled, .state-skipped { background: #fff3bf; }
"""


def render_page(
    status: Mapping[str, Any] | None,
    samples: Sequence[Sample],
    runs: Sequence[RunLink],
    *,
    error: str | None = None,
) -> str:
    """The whole page. Without a status (``error`` says why), the peers of the samples still
    get their charts."""
    if status is not None:
        peers = [_peer_section(p, samples) for p in status.get("peers", [])]
        meta = f"status at {escape(str(status.get('generated_at')))}"
        if not peers:
            peers = ['<section class="peer-none"><p>The source cluster has no replication peers.</p></section>']
    else:
        seen = sorted({peer_id for s in samples for peer_id in s.peers})
        peers = [
            f'<section class="peer" id="peer-{escape(p)}" data-peer-id="{escape(p)}"><h2>Peer '
            f'<span class="peer-id">{escape(p)}</span></h2>{_chart_block(p, samples)}</section>'
            for p in seen
        ]
        meta = "status unavailable"
    banner = f'<div class="error" role="alert">{escape(error)}</div>' if error else ""
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>Replication \u2014 walship</title><style>{_CSS}</style></head><body>"
        f'<header><h1>Replication</h1><span class="meta">{meta}</span>'
        '<a href="api/status">JSON</a><a href="">refresh</a></header>'
        f"{banner}{''.join(peers)}{_runs_section(runs)}</body></html>"
    )
