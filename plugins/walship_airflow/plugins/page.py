"""The "Replication" page as HTML: what an operator looks for first (stuck queues, the shipping
DAGs paused, each peer's bandwidth, serial flag and time throttled), then per peer a drained
badge, a chart of bytes queued and lag over time (inline SVG, drawn here: the page loads
nothing from elsewhere), the queues table, and links to the source's walship DAGs and their
recent runs.

The page runs in two places: at ``/walship/`` on its own, and inside Airflow's UI, whose
"Replication" entry shows it in an ``<iframe sandbox="allow-scripts allow-same-origin
allow-forms allow-downloads">`` (Airflow 3.3's UI bundle). That sandbox blocks the frame from
navigating the top window (``target=_top`` fails with "Unsafe attempt to initiate
navigation") and from opening tabs (no ``allow-popups``), but the frame is same-origin with
scripts, so the page's script (:data:`_SCRIPT`):

- sends a link into Airflow's UI (``data-ui-link``: a DAG, a run) to the UI's own router: it
  pushes the URL on the parent window's history and dispatches ``popstate`` there, which React
  Router (the UI's) handles as a navigation; on its own, the link's ``target=_top`` applies;
- shows the JSON in the page (``#json-view``) when it cannot open a tab; on its own, the JSON
  link opens a new tab;
- re-fetches the page every ``refresh_s`` seconds and swaps the live part (``#live``) in
  place, keeping the scroll position and the open details rows.

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
from urllib.parse import quote, urlencode

from walship_airflow.sources import Source

__all__ = [
    "DEFAULT_REFRESH_S",
    "NO_SAMPLES",
    "SHIPPING_DAGS",
    "DagState",
    "RunLink",
    "Sample",
    "chart_svg",
    "human_bytes",
    "human_seconds",
    "no_samples",
    "render_page",
]

#: the DAGs (base ids) that ship the queues: with both paused, nothing does
SHIPPING_DAGS = ("walship_replicate", "walship_tail")
#: seconds between the page's own refreshes
DEFAULT_REFRESH_S = 30


def no_samples(status_dag_id: str = "walship_status") -> str:
    """What an empty chart says: which DAG records its samples."""
    return f"no samples yet: enable the {status_dag_id} DAG"


NO_SAMPLES = no_samples()

#: the queues table's columns: (heading, field of a queue in ``walship status --json``); the
#: other fields of a queue are folded into its details row
QUEUE_COLUMNS: tuple[tuple[str, str], ...] = (
    ("server", "server"),
    ("queue", "queue_id"),
    ("state", "state"),
    ("WALs", "wals"),
    ("bytes queued", "bytes_queued"),
    ("lag", "lag_s"),
    ("stalled", "stalled_s"),
    ("progress", "progress_pct"),
    ("last error", "last_error"),
)
#: the details row's fields, in this order; fields not named here follow, by name
DETAIL_FIELDS: tuple[tuple[str, str], ...] = (
    ("stuck", "stuck"),
    ("recovered", "recovered"),
    ("dead servers", "dead_servers"),
    ("current WAL", "current_wal"),
    ("position", "position"),
    ("last shipped", "last_shipped_at"),
    ("last shipped write", "last_shipped_write_time"),
    ("age of last shipped op", "age_of_last_shipped_op_s"),
    ("holder", "holder"),
    ("last back-off", "last_backoff"),
    ("waiting (serial)", "waiting_serial"),
    ("bulk loads", "bulk_loads"),
    ("throttled", "throttled_s"),
)
_SECONDS_FIELDS = ("lag_s", "age_of_last_shipped_op_s", "throttled_s", "stalled_s")


@dataclass(frozen=True)
class Sample:
    """One recorded status sample: its time and, per peer id, ``bytes_queued``, ``lag_s``,
    ``drained`` and ``queues``."""

    at: datetime
    peers: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)


def _ui_path(*parts: str) -> str:
    """A page of Airflow's UI, relative to this page (``<base>/walship/``), so that it holds
    under any base URL."""
    return "../" + "/".join(quote(p, safe="") for p in parts)


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
        return _ui_path("dags", self.dag_id, "runs", self.run_id)


@dataclass(frozen=True)
class DagState:
    """A DAG of the source as Airflow's metadata DB has it: ``is_paused`` ``None`` when it is
    not there (never parsed, or its file is gone)."""

    dag_id: str
    is_paused: bool | None

    @property
    def href(self) -> str:
        return _ui_path("dags", self.dag_id)

    @property
    def label(self) -> str:
        return {None: "not in Airflow", True: "paused", False: "active"}[self.is_paused]


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


def _axis_labels(t0: datetime, t1: datetime) -> tuple[str, str]:
    """The time axis's two ends as they are written under it (and in the chart's caption)."""
    with_date = (t1 - t0).total_seconds() >= 86400 or t0.date() != t1.date()
    fmt = "%Y-%m-%d %H:%M UTC" if with_date else "%H:%M:%S UTC"
    return t0.strftime(fmt), t1.strftime(fmt)


# The chart's geometry (SVG user units): two panels, bytes queued above lag, one time axis.
_W, _LEFT, _RIGHT, _TOP, _PANEL, _GAP, _AXIS = 760, 78, 16, 22, 100, 34, 26
_H = _TOP + 2 * _PANEL + _GAP + _AXIS
_MAX_DOTS = 60
#: the panels' titles: what their y-axes show (a sample's ``bytes_queued`` is the sum over the
#: peer's queues, its ``lag_s`` the largest of them)
BYTES_TITLE = "bytes queued (all queues)"
LAG_TITLE = "lag (oldest unshipped edit, worst queue)"


def chart_svg(peer_id: str, points: Sequence[tuple[datetime, float, float]], empty: str = NO_SAMPLES) -> str:
    """An SVG chart of one peer's samples, ``(time, bytes queued, lag in seconds)`` in time
    order: bytes queued in the upper panel, lag in the lower one, over the time from the first
    sample to the last. Without points, the empty panels and ``empty``."""
    plot_w = _W - _LEFT - _RIGHT
    parts = [
        f'<svg class="walship-chart" data-peer="{escape(peer_id)}" data-samples="{len(points)}" '
        f'viewBox="0 0 {_W} {_H}" width="100%" preserveAspectRatio="xMinYMin meet" role="img" '
        f'xmlns="http://www.w3.org/2000/svg">',
        f"<title>peer {escape(peer_id)}: {BYTES_TITLE} and {LAG_TITLE}, {len(points)} samples</title>",
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
        (BYTES_TITLE, "bytes-queued", [p[1] for p in points], human_bytes, 1024.0),
        (LAG_TITLE, "lag", [p[2] for p in points], human_seconds, 1.0),
    )
    for i, (title, css, values, fmt, floor) in enumerate(panels):
        top = _TOP + i * (_PANEL + _GAP)
        bottom = top + _PANEL
        y_max = _nice_ceiling(max([*values, floor]), binary=fmt is human_bytes)
        parts.append(f'<text class="panel-title" data-series="{css}" x="{_LEFT}" y="{top - 7}">{title}</text>')
        parts.append(f'<rect class="plot" x="{_LEFT}" y="{top}" width="{plot_w}" height="{_PANEL}"/>')
        for frac in (0.0, 0.5, 1.0):
            y = bottom - frac * _PANEL
            parts.append(f'<line class="grid" x1="{_LEFT}" x2="{_W - _RIGHT}" y1="{y:.1f}" y2="{y:.1f}"/>')
            parts.append(
                f'<text class="tick y-{css}" x="{_LEFT - 6}" y="{y + 4:.1f}" text-anchor="end">'
                f"{escape(fmt(frac * y_max))}</text>"
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
        first, last = _axis_labels(t0, t1)
        parts.append(f'<text class="tick x-from" x="{_LEFT}" y="{axis_y}">{first}</text>')
        if span > 0:
            parts.append(f'<text class="tick x-to" x="{_W - _RIGHT}" y="{axis_y}" text-anchor="end">{last}</text>')
    else:
        mid = _TOP + _PANEL + _GAP / 2 + 4
        parts.append(
            f'<text class="no-samples" x="{_LEFT + plot_w / 2}" y="{mid}" text-anchor="middle">{escape(empty)}</text>'
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
    if field_name in _SECONDS_FIELDS:
        return human_seconds(float(value))
    if field_name == "waiting_serial" and isinstance(value, Mapping):
        whose = (
            "its previous range" if value.get("waits_for") == value.get("region") else f"parent {value['waits_for']}"
        )
        return f"region {value.get('region')} seq {value.get('seq')} waits for {whose}"
    if field_name == "last_error" and isinstance(value, Mapping):
        kind = f"[{value['kind']}] " if value.get("kind") else ""
        return f"{value.get('time')}: {kind}{value.get('message')}"
    if field_name == "progress_pct":
        return f"{float(value):.1f} %"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, list):
        return ", ".join(str(v) for v in value)
    if isinstance(value, dict):
        return "; ".join(f"{k}: {v}" for k, v in value.items())
    return str(value)


def _short(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "\u2026"


def _field_attrs(name: str, value: Any) -> str:
    """A field's name and raw JSON value, as the element showing it carries them."""
    raw = json.dumps(value, sort_keys=True)
    return f'data-field="{escape(name)}" data-value="{escape(raw)}"'


def _chip(text: str, css: str, title: str = "") -> str:
    tip = f' title="{escape(title)}"' if title else ""
    return f'<span class="chip {escape(css)}"{tip}>{escape(text)}</span>'


def _queue_key(queue: Mapping[str, Any]) -> str:
    return f"{queue.get('server')}/{queue.get('queue_id')}"


def _has_backlog(queue: Mapping[str, Any]) -> bool:
    return bool(queue.get("bytes_queued")) or queue.get("stalled_s") is not None


def _main_cell(name: str, queue: Mapping[str, Any], unshipped: bool) -> str:
    value = queue.get(name)
    text = escape(_cell_text(name, value))
    if name == "state":
        text = _chip(str(value), f"state-{value}")
        if queue.get("stuck"):
            stalled = queue.get("stalled_s")
            text += " " + _chip("stuck", "flag-stuck", f"no progress for {human_seconds(float(stalled or 0))}")
        if unshipped and _has_backlog(queue):
            text += " " + _chip("not shipped", "flag-paused", "its shipping DAGs are paused: see above")
    elif name == "queue_id" and queue.get("recovered"):
        text += " " + _chip("recovered", "flag-recovered", "claimed from a dead region server")
    elif name == "last_error" and value:
        full = _cell_text(name, value)
        message = value.get("message") if isinstance(value, Mapping) else None
        text = f'<span title="{escape(full)}">{escape(_short(str(message or full), 80))}</span>'
    return f"<td {_field_attrs(name, value)}>{text}</td>"


def _queue_rows(queue: Mapping[str, Any], index: int, peer_id: str, unshipped: bool) -> str:
    """A queue's ``<tbody>``: its main row (:data:`QUEUE_COLUMNS`), and its details row, folded,
    with every other field of the queue."""
    key = _queue_key(queue)
    details_id = f"q-{escape(peer_id)}-{index}"
    main = "".join(_main_cell(name, queue, unshipped) for _, name in QUEUE_COLUMNS)
    shown = {name for _, name in QUEUE_COLUMNS}
    named = [(label, name) for label, name in DETAIL_FIELDS if name not in shown]
    known = {name for _, name in named} | shown
    named += [(name.replace("_", " "), name) for name in sorted(queue) if name not in known]
    details = "".join(
        f"<div {_field_attrs(name, queue.get(name))}><dt>{escape(label)}</dt><dd>{escape(_cell_text(name, queue.get(name)))}</dd></div>"
        for label, name in named
        if name in queue
    )
    error = queue.get("last_error")
    if error:
        details += f'<div class="wide"><dt>last error</dt><dd>{escape(_cell_text("last_error", error))}</dd></div>'
    css = "queue stuck" if queue.get("stuck") else "queue"
    button = (
        f'<button type="button" class="more" aria-expanded="false" aria-controls="{details_id}" '
        f'title="the other fields of this queue">details</button>'
    )
    return (
        f'<tbody class="{css}" data-key="{escape(key)}" data-server="{escape(str(queue.get("server")))}" '
        f'data-queue-id="{escape(str(queue.get("queue_id")))}">'
        f'<tr class="main">{main}<td class="more">{button}</td></tr>'
        f'<tr class="details" id="{details_id}" hidden><td colspan="{len(QUEUE_COLUMNS) + 1}">'
        f'<dl class="details">{details}</dl></td></tr></tbody>'
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


def _chart_block(peer_id: str, samples: Sequence[Sample], status_dag: str) -> str:
    """The chart and its caption, which names what the axes show: the panels' titles and the
    time axis's two ends, as written under it."""
    points = _peer_points(peer_id, samples)
    empty = no_samples(status_dag)
    if not points:
        return f'<figure class="chart">{chart_svg(peer_id, points, empty)}<figcaption class="no-samples">{escape(empty)}</figcaption></figure>'
    first, last = _axis_labels(points[0][0], points[-1][0])
    when = f"at {first}" if len(points) == 1 else f"from {first} to {last}"
    caption = (
        f"Above: {BYTES_TITLE}; below: {LAG_TITLE}. {len(points)} sample{'s' if len(points) != 1 else ''} "
        f'<span class="span" data-from="{escape(first)}" data-to="{escape(last)}">{escape(when)}</span>, '
        f"recorded each minute by the <code>{escape(status_dag)}</code> DAG (the last 24 h at most)."
    )
    return f'<figure class="chart">{chart_svg(peer_id, points, empty)}<figcaption>{caption}</figcaption></figure>'


def _bandwidth_text(value: Any) -> str:
    if not isinstance(value, int) or isinstance(value, bool):
        return str(value)
    return "unlimited" if value == 0 else f"{human_bytes(value)}/s ({value:,} B/s)"


def _peer_section(peer: Mapping[str, Any], samples: Sequence[Sample], status_dag: str, unshipped: bool) -> str:
    peer_id = str(peer["peer_id"])
    totals = peer.get("totals") or {}
    count = peer.get("peer_count") or {}
    table_cfs = peer.get("table_cfs")
    # first what an operator looks for: the limits and flags of shipping (when the status has them)
    key_facts: list[tuple[str, str, Any, str]] = []
    if "bandwidth" in peer:
        key_facts.append(("bandwidth", "bandwidth", peer["bandwidth"], _bandwidth_text(peer["bandwidth"])))
    if "serial" in peer:
        key_facts.append(("serial", "serial", peer["serial"], _cell_text("serial", peer["serial"])))
    if "throttled_s" in peer:
        key_facts.append(("throttled", "throttled_s", peer["throttled_s"], human_seconds(float(peer["throttled_s"]))))
    if "stuck_queues" in totals:
        key_facts.append(("stuck queues", "stuck_queues", totals["stuck_queues"], str(totals["stuck_queues"])))
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
    if peer.get("errors"):
        facts.append(("shipping errors", _cell_text("errors", peer["errors"])))
    if "dead_letters_pending" in peer:
        facts.append(("dead letters pending", _cell_text("dead_letters_pending", peer["dead_letters_pending"])))
    key_dl = "".join(
        f"<div {_field_attrs(name, value)}><dt>{escape(label)}</dt><dd>{escape(text)}</dd></div>"
        for label, name, value, text in key_facts
    )
    dl = "".join(f"<div><dt>{escape(k)}</dt><dd>{escape(str(v))}</dd></div>" for k, v in facts)
    queues = peer.get("queues") or []
    stuck = int(totals.get("stuck_queues") or sum(1 for q in queues if q.get("stuck")))
    stuck_badge = f' <span class="badge stuck" data-stuck="{stuck}">{stuck} stuck</span>' if stuck else ""
    head = "".join(f'<th data-field="{name}">{escape(label)}</th>' for label, name in QUEUE_COLUMNS)
    rows = "".join(_queue_rows(q, i, peer_id, unshipped) for i, q in enumerate(queues)) or (
        f'<tbody><tr class="empty"><td colspan="{len(QUEUE_COLUMNS) + 1}">no queues</td></tr></tbody>'
    )
    return (
        f'<section class="peer" id="peer-{escape(peer_id)}" data-peer-id="{escape(peer_id)}">'
        f'<h2>Peer <span class="peer-id">{escape(peer_id)}</span> {_badge(bool(totals.get("drained")))}{stuck_badge}</h2>'
        f'<dl class="facts key">{key_dl}</dl>'
        f'<dl class="facts">{dl}</dl>'
        f"{_chart_block(peer_id, samples, status_dag)}"
        f'<div class="table-wrap"><table class="queues"><thead><tr>{head}<th class="more"></th></tr></thead>'
        f"{rows}</table></div></section>"
    )


def _dag_link(dag: DagState) -> str:
    return (
        f'<a class="dag" href="{escape(dag.href)}" target="_top" data-ui-link data-dag-id="{escape(dag.dag_id)}">'
        f"{escape(dag.dag_id)}</a>"
    )


def _dag_chip(dag: DagState) -> str:
    css = {None: "state-missing", True: "state-paused", False: "state-active"}[dag.is_paused]
    return f'<span class="chip {css}" data-paused="{json.dumps(dag.is_paused)}">{dag.label}</span>'


def _shipping_section(shipping: Sequence[DagState]) -> str:
    """The shipping DAGs and whether any of them runs; an alert when none does."""
    items = "".join(f'<li data-dag-id="{escape(d.dag_id)}">{_dag_link(d)} {_dag_chip(d)}</li>' for d in shipping)
    if any(d.is_paused is False for d in shipping):
        return (
            f'<section class="shipping" data-shipping="active"><h2>Shipping</h2><ul class="dags">{items}</ul></section>'
        )
    names = " and ".join(f"<code>{escape(d.dag_id)}</code>" for d in shipping)
    return (
        '<section class="shipping alert" data-shipping="paused" role="alert"><h2>Shipping is paused</h2>'
        f"<p>No DAG ships this source's queues: {names} {'are' if len(shipping) > 1 else 'is'} paused or not in "
        "Airflow, so queues read <em>idle</em> while their backlog grows: unpause one on its page (below).</p>"
        f'<ul class="dags">{items}</ul></section>'
    )


def _stuck_section(status: Mapping[str, Any]) -> str:
    stuck = [
        (str(peer["peer_id"]), q)
        for peer in status.get("peers", [])
        for q in peer.get("queues") or []
        if q.get("stuck")
    ]
    if not stuck:
        return ""
    after = status.get("stuck_after")
    threshold = f" for {human_seconds(float(after))} or longer" if isinstance(after, int | float) else ""
    items = "".join(
        f'<li data-peer-id="{escape(p)}" data-key="{escape(_queue_key(q))}"><a href="#peer-{escape(p)}">peer {escape(p)}</a>: '
        f"queue {escape(str(q.get('queue_id')))} on <code>{escape(str(q.get('server')))}</code>, "
        f"{escape(_cell_text('bytes_queued', q.get('bytes_queued') or 0))} queued, no progress for "
        f"{escape(human_seconds(float(q.get('stalled_s') or 0)))}</li>"
        for p, q in stuck
    )
    return (
        f'<section class="stuck alert" role="alert" data-stuck="{len(stuck)}"><h2>{len(stuck)} stuck '
        f"queue{'s' if len(stuck) != 1 else ''}</h2><p>A backlog and no progress{threshold}:</p><ul>{items}</ul></section>"
    )


def _runs_section(dags: Sequence[DagState], runs: Sequence[RunLink]) -> str:
    by_dag: dict[str, list[RunLink]] = {}
    for run in runs:
        by_dag.setdefault(run.dag_id, []).append(run)
    listed = [d for d in dags if d.is_paused is not None or d.dag_id in by_dag]
    listed += [DagState(dag_id, None) for dag_id in by_dag if dag_id not in {d.dag_id for d in dags}]
    if not listed:
        return '<section class="runs"><h2>DAGs and recent runs</h2><p>No walship DAGs in Airflow yet.</p></section>'
    rows = []
    for dag in listed:
        links = []
        for run in by_dag.get(dag.dag_id, []):
            when = run.run_after.strftime("%Y-%m-%d %H:%M:%S UTC") if run.run_after else run.run_id
            state = run.state or "none"
            links.append(
                f'<a class="run chip state-{escape(state)}" href="{escape(run.href)}" target="_top" data-ui-link '
                f'data-dag-id="{escape(run.dag_id)}" data-run-id="{escape(run.run_id)}" '
                f'title="{escape(run.run_id)} ({escape(run.run_type or "")}, {escape(state)})">'
                f"{escape(when)} \u00b7 {escape(state)}</a>"
            )
        rows.append(
            f'<tr data-dag-id="{escape(dag.dag_id)}"><td>{_dag_link(dag)}</td><td>{_dag_chip(dag)}</td>'
            f'<td class="run-list">{" ".join(links) or "no runs"}</td></tr>'
        )
    return (
        '<section class="runs"><h2>DAGs and recent runs</h2><div class="table-wrap"><table class="runs">'
        "<thead><tr><th>DAG</th><th>scheduling</th><th>newest runs (newest first)</th></tr></thead>"
        f"<tbody>{''.join(rows)}</tbody></table></div></section>"
    )


def _source_selector(source: Source, sources: Sequence[Source]) -> str:
    known = source in sources
    if len(sources) < (2 if known else 1):
        return ""
    options = "" if known else f'<option value="" selected disabled>{escape(source.conn_id)}?</option>'
    options += "".join(
        f'<option value="{escape(s.conn_id)}"{" selected" if s == source else ""}>{escape(s.conn_id)}</option>'
        for s in sources
    )
    return (
        '<form class="source" method="get" action="">'
        f'<label>source <select name="source" data-source-select>{options}</select></label>'
        "<noscript><button>show</button></noscript></form>"
    )


_CSS = """
:root { color-scheme: light; --fg: #1f2933; --muted: #616e7c; --line: #d9e2ec; --bg: #ffffff;
  --panel: #f8fafc; --accent: #017cee; --lag: #d9480f; --ok: #2b8a3e; --warn: #c92a2a; }
* { box-sizing: border-box; }
body { margin: 0; padding: 12px 20px 32px; font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif;
  color: var(--fg); background: var(--bg); }
header { display: flex; align-items: baseline; gap: 8px 16px; flex-wrap: wrap; border-bottom: 1px solid var(--line);
  padding-bottom: 8px; }
h1 { font-size: 22px; margin: 0; } h2 { font-size: 18px; margin: 0 0 8px; }
header .meta, #refresh-note { color: var(--muted); } a { color: var(--accent); }
header form.source { margin: 0; } header select { font: inherit; }
.error { background: #fff5f5; border: 1px solid #ffc9c9; color: var(--warn); padding: 8px 12px; margin: 12px 0;
  border-radius: 6px; }
section { margin-top: 16px; padding: 14px 16px; border: 1px solid var(--line); border-radius: 8px;
  background: var(--panel); }
section.alert { background: #fff5f5; border-color: #ffa8a8; } section.alert h2 { color: var(--warn); }
section.alert p { margin: 0 0 6px; } section ul { margin: 4px 0 0; padding-left: 20px; }
section.shipping ul.dags { list-style: none; padding: 0; display: flex; gap: 8px 24px; flex-wrap: wrap; }
#json-view { margin-top: 12px; } #json-view pre { max-height: 60vh; overflow: auto; background: var(--bg);
  border: 1px solid var(--line); padding: 8px; font-size: 12px; margin: 8px 0 0; }
#json-view .bar { display: flex; gap: 16px; align-items: baseline; } #json-view h2 { margin: 0; }
.badge { display: inline-block; font-size: 12px; font-weight: 600; padding: 2px 10px; border-radius: 999px;
  vertical-align: middle; margin-left: 8px; color: #fff; }
.badge.drained { background: var(--ok); } .badge.pending { background: #e67700; } .badge.stuck { background: var(--warn); }
dl.facts { display: flex; flex-wrap: wrap; gap: 4px 24px; margin: 0 0 10px; }
dl.facts div { display: flex; gap: 6px; } dt { color: var(--muted); } dd { margin: 0; font-weight: 500; }
dl.facts.key { font-size: 15px; } dl.facts.key:empty { display: none; }
dl.facts.key div { background: var(--bg); border: 1px solid var(--line); border-radius: 6px; padding: 2px 10px; }
dl.facts.key div[data-field="stuck_queues"]:not([data-value="0"]) { border-color: var(--warn); color: var(--warn); }
figure.chart { max-width: 860px; background: var(--bg); border: 1px solid var(--line); border-radius: 6px;
  padding: 8px; margin: 0 0 12px; }
figure.chart figcaption { margin: 4px 0 0; color: var(--muted); font-size: 12px; }
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
table.queues td { white-space: nowrap; }
table.queues td[data-field="server"] { font-family: ui-monospace, monospace; white-space: normal;
  word-break: break-all; min-width: 18ch; }
table.queues td[data-field="last_error"] { white-space: normal; min-width: 16ch; max-width: 36ch;
  overflow-wrap: anywhere; }
tbody.queue.stuck tr.main { background: #fff5f5; } tbody.queue.stuck tr.main td:first-child {
  box-shadow: inset 3px 0 0 var(--warn); }
tr.details > td { background: var(--panel); white-space: normal !important; }
dl.details { display: grid; grid-template-columns: repeat(auto-fill, minmax(280px, 1fr)); gap: 2px 16px; margin: 0; }
dl.details div { display: flex; gap: 6px; min-width: 0; } dl.details dd { overflow-wrap: anywhere; min-width: 0; }
dl.details div.wide { grid-column: 1 / -1; }
button.more { font: inherit; font-size: 12px; padding: 0 6px; cursor: pointer; }
table.runs td.run-list { line-height: 1.9; }
.chip { display: inline-block; padding: 0 6px; border-radius: 4px; background: #e4e7eb; white-space: nowrap; }
a.chip { text-decoration: none; color: var(--fg); } a.chip:hover { text-decoration: underline; }
.state-success, .state-idle, .state-active { background: #d3f9d8; }
.state-failed, .state-stuck, .flag-stuck, .flag-paused { background: #ffe3e3; }
.flag-stuck, .flag-paused { color: var(--warn); font-weight: 600; }
.state-running, .state-shipping, .state-queued { background: #d0ebff; }
.state-waiting-peer, .state-waiting-serial, .state-disabled, .state-skipped, .state-paused, .flag-recovered {
  background: #fff3bf; }
.state-missing { background: #e4e7eb; color: var(--muted); }
"""

#: The page's behaviour (see the module's docstring): links into Airflow's UI through its
#: router when framed, the JSON in the page when no tab can be opened, the refresh, the details
#: rows and the source selector.
_SCRIPT = """
(function () {
  "use strict";
  var live = document.getElementById("live");
  var jsonView = document.getElementById("json-view");
  var note = document.getElementById("refresh-note");

  /* Airflow's UI around this page: the parent window when it is the same origin */
  function uiWindow() {
    if (window.parent === window) return null;
    try {
      return window.parent.location.origin === window.location.origin && window.parent.history ? window.parent : null;
    } catch (e) {
      return null;
    }
  }
  /* a new tab can be opened: not framed, or framed without a sandbox or with allow-popups */
  function canOpenTabs() {
    if (window.top === window) return true;
    var frame = null;
    try { frame = window.frameElement; } catch (e) { frame = null; }
    return !!frame && (!frame.hasAttribute("sandbox") || frame.sandbox.contains("allow-popups"));
  }
  /* navigate the UI's router (React Router listens to popstate) */
  function openInUi(ui, href) {
    var url = new URL(href, window.location.href);
    var previous = ui.history.state || {};
    var state = {usr: null, key: Math.random().toString(36).slice(2, 10),
                 idx: (typeof previous.idx === "number" ? previous.idx : 0) + 1};
    ui.history.pushState(state, "", url.pathname + url.search + url.hash);
    ui.dispatchEvent(new ui.PopStateEvent("popstate", {state: state}));
  }
  function showJson(href) {
    var pre = jsonView.querySelector("pre");
    var save = jsonView.querySelector("a.download");
    jsonView.hidden = false;
    pre.textContent = "loading " + href + " ...";
    fetch(href, {credentials: "same-origin", headers: {Accept: "application/json"}})
      .then(function (r) {
        return r.text().then(function (text) { return {ok: r.ok, status: r.status, text: text}; });
      })
      .then(function (r) {
        var shown = r.text;
        try { shown = JSON.stringify(JSON.parse(r.text), null, 2); } catch (e) { /* as it came */ }
        pre.textContent = r.ok ? shown : "HTTP " + r.status + "\\n" + shown;
        jsonView.dataset.loaded = r.ok ? "ok" : "error";
        if (save.dataset.url) URL.revokeObjectURL(save.dataset.url);
        save.dataset.url = URL.createObjectURL(new Blob([r.text], {type: "application/json"}));
        save.href = save.dataset.url;
      })
      .catch(function (e) { pre.textContent = "cannot load " + href + ": " + e; jsonView.dataset.loaded = "error"; });
    jsonView.scrollIntoView({block: "start"});
  }
  function toggleDetails(button, open) {
    var row = document.getElementById(button.getAttribute("aria-controls"));
    if (!row) return;
    row.hidden = !open;
    button.setAttribute("aria-expanded", String(open));
    button.textContent = open ? "hide" : "details";
  }
  document.addEventListener("click", function (ev) {
    var target = ev.target instanceof Element ? ev.target : null;
    if (!target || ev.defaultPrevented) return;
    var button = target.closest("button.more");
    if (button) { toggleDetails(button, button.getAttribute("aria-expanded") !== "true"); return; }
    if (target.closest("#json-close")) { jsonView.hidden = true; return; }
    var a = target.closest("a");
    if (!a || ev.button !== 0 || ev.metaKey || ev.ctrlKey || ev.shiftKey || ev.altKey) return;
    if (a.hasAttribute("data-ui-link")) {
      var ui = uiWindow();
      if (!ui) return;  /* on its own: the link's target=_top */
      ev.preventDefault();
      openInUi(ui, a.href);
    } else if (a.hasAttribute("data-json")) {
      if (canOpenTabs()) return;  /* the link's target=_blank */
      ev.preventDefault();
      showJson(a.href);
    }
  });
  var select = document.querySelector("select[data-source-select]");
  if (select) select.addEventListener("change", function () { select.form.submit(); });

  /* the refresh: the live part swapped in place, scroll and open details kept */
  var every = Number(live.dataset.refreshS) || 0;
  var refreshes = 0;
  function clock() { return new Date().toISOString().slice(11, 19) + " UTC"; }
  function refresh() {
    if (document.hidden) return;
    fetch(window.location.href, {credentials: "same-origin", headers: {Accept: "text/html"}})
      .then(function (r) { return r.text().then(function (text) { return {status: r.status, text: text}; }); })
      .then(function (r) {
        var fresh = new DOMParser().parseFromString(r.text, "text/html").getElementById("live");
        if (!fresh) throw new Error("HTTP " + r.status);
        var open = Array.prototype.map.call(
          live.querySelectorAll("button.more[aria-expanded=true]"),
          function (b) { return b.closest("tbody").dataset.key; });
        var x = window.scrollX, y = window.scrollY;
        live.replaceChildren.apply(live, Array.prototype.map.call(
          fresh.childNodes, function (n) { return document.importNode(n, true); }));
        live.querySelectorAll("tbody.queue").forEach(function (tbody) {
          if (open.indexOf(tbody.dataset.key) >= 0) toggleDetails(tbody.querySelector("button.more"), true);
        });
        window.scrollTo(x, y);
        refreshes += 1;
        live.dataset.refreshes = String(refreshes);
        note.textContent = "refreshes every " + every + " s; last at " + clock();
      })
      .catch(function (e) { note.textContent = "refresh failed at " + clock() + " (" + e.message + "); retrying in " + every + " s"; });
  }
  if (every > 0) window.setInterval(refresh, every * 1000);
})();
"""


def render_page(
    status: Mapping[str, Any] | None,
    samples: Sequence[Sample],
    runs: Sequence[RunLink],
    *,
    error: str | None = None,
    source: Source | None = None,
    sources: Sequence[Source] = (),
    dags: Sequence[DagState] = (),
    refresh_s: int = DEFAULT_REFRESH_S,
) -> str:
    """The whole page of ``source`` (the default connection's without one), ``sources`` the
    configured ones (a selector when there are several), ``dags`` the source's DAGs as Airflow
    has them (the shipping DAGs' paused flags). Without a status (``error`` says why), the
    peers of the samples still get their charts."""
    source = source or Source()
    status_dag = source.dag_id("walship_status")
    by_id = {d.dag_id: d for d in dags}
    shipping = [by_id.get(source.dag_id(base), DagState(source.dag_id(base), None)) for base in SHIPPING_DAGS]
    unshipped = bool(dags) and not any(d.is_paused is False for d in shipping)
    if status is not None:
        peers = [_peer_section(p, samples, status_dag, unshipped) for p in status.get("peers", [])]
        meta = f"status at {escape(str(status.get('generated_at')))}"
        if not peers:
            peers = ['<section class="peer-none"><p>The source cluster has no replication peers.</p></section>']
        alerts = _stuck_section(status)
    else:
        seen = sorted({peer_id for s in samples for peer_id in s.peers})
        peers = [
            f'<section class="peer" id="peer-{escape(p)}" data-peer-id="{escape(p)}"><h2>Peer '
            f'<span class="peer-id">{escape(p)}</span></h2>{_chart_block(p, samples, status_dag)}</section>'
            for p in seen
        ]
        meta = "status unavailable"
        alerts = ""
    banner = f'<div class="error" role="alert">{escape(error)}</div>' if error else ""
    shipping_html = _shipping_section(shipping) if dags else ""
    query = "" if not sources or source == sources[0] else "?" + urlencode({"source": source.conn_id})
    selector = _source_selector(source, sources)
    which = f'<span class="meta">source <code>{escape(source.conn_id)}</code></span>'
    refresh_note = f"refreshes every {refresh_s} s" if refresh_s > 0 else "refresh: reload the page"
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>Replication \u2014 walship</title><style>{_CSS}</style></head><body>"
        f"<header><h1>Replication</h1>{selector or which}"
        f'<a class="json" href="api/status{escape(query)}" target="_blank" rel="noopener" data-json>JSON</a>'
        f'<span id="refresh-note">{refresh_note}</span></header>'
        '<section id="json-view" hidden><div class="bar"><h2>Status JSON</h2>'
        '<a class="download" download="walship-status.json" href="#">download</a>'
        '<button type="button" id="json-close">close</button></div><pre></pre></section>'
        f'<main id="live" data-refresh-s="{refresh_s}" data-source="{escape(source.conn_id)}">'
        f'<p class="meta">{meta}</p>{banner}{alerts}{shipping_html}{"".join(peers)}{_runs_section(dags, runs)}</main>'
        f"<script>{_SCRIPT}</script></body></html>"
    )
