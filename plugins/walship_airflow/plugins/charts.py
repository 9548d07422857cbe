"""The Replication page's charts: one peer's samples as inline SVG (bytes queued above, lag
below, one time axis from the first sample to the last), and the numbers as the page writes
them. Pure functions of their arguments."""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import datetime
from html import escape

__all__ = [
    "BYTES_TITLE",
    "LAG_TITLE",
    "NO_SAMPLES",
    "axis_labels",
    "chart_svg",
    "human_bytes",
    "human_seconds",
    "no_samples",
]


def no_samples(status_dag_id: str = "walship_status") -> str:
    """What an empty chart says: which DAG records its samples."""
    return f"no samples yet: enable the {status_dag_id} DAG"


NO_SAMPLES = no_samples()


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


def axis_labels(t0: datetime, t1: datetime) -> tuple[str, str]:
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
        first, last = axis_labels(t0, t1)
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
