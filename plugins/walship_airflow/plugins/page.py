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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from html import escape
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

from walship_airflow.plugins.charts import (
    BYTES_TITLE,
    LAG_TITLE,
    NO_SAMPLES,
    axis_labels,
    chart_svg,
    human_bytes,
    human_seconds,
    no_samples,
)
from walship_airflow.sources import Source

_HERE = Path(__file__).resolve().parent

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
    first, last = axis_labels(points[0][0], points[-1][0])
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


#: the page's style sheet and its behaviour (see the module's docstring), read once from the files
#: beside this module: page.css, page.js
_CSS = (_HERE / "page.css").read_text()
_SCRIPT = (_HERE / "page.js").read_text()


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
    switchovers: str = "",
) -> str:
    """The whole page of ``source`` (the default connection's without one), ``sources`` the
    configured ones (a selector when there are several), ``dags`` the source's DAGs as Airflow
    has them (the shipping DAGs' paused flags), ``switchovers`` its switchovers' section
    (:func:`walship_airflow.plugins.switchovers.render_switchovers`). Without a status (``error`` says why), the
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
        f'<p class="meta">{meta}</p>{banner}{alerts}{switchovers}{shipping_html}{"".join(peers)}{_runs_section(dags, runs)}</main>'
        f"<script>{_SCRIPT}</script></body></html>"
    )
