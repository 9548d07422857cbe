"""The Replication page's HTML and SVG, without Airflow: the empty chart, the series and what
their captions say, escaping, the queues table (main columns, every other field folded), what
an operator looks for first (bandwidth, serial, throttled, stuck queues, paused shipping DAGs),
run and DAG links, the source selector, and the page when the status cannot be read."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from html import unescape
from typing import Any

from walship_airflow.plugins.page import (
    BYTES_TITLE,
    LAG_TITLE,
    NO_SAMPLES,
    QUEUE_COLUMNS,
    DagState,
    RunLink,
    Sample,
    chart_svg,
    human_bytes,
    human_seconds,
    render_page,
)
from walship_airflow.sources import Source

T0 = datetime(2026, 11, 23, 9, 0, tzinfo=UTC)
OTHER = Source("hbase_east", "east")


def status(peer_extra: dict[str, Any] | None = None, **queue: object) -> dict[str, Any]:
    q = {
        "server": "rs-1.example.net,16020,1",
        "queue_id": "1",
        "recovered": False,
        "dead_servers": [],
        "wals": 2,
        "current_wal": "rs-1.example.net%2C16020%2C1.1700000000000",
        "position": 4096,
        "bytes_queued": 2048,
        "progress_pct": 50.0,
        "last_shipped_write_time": None,
        "age_of_last_shipped_op_s": None,
        "lag_s": 1.5,
        "holder": None,
        "last_error": None,
        "last_backoff": None,
        "state": "idle",
        "bulk_loads": 0,
        "waiting_serial": None,
        "throttled_s": 0.0,
        **queue,
    }
    totals = {"queues": 1, "wals": 2, "bytes_queued": 2048, "lag_s": 1.5, "drained": False}
    peer = {
        "peer_id": "1",
        "state": "enabled",
        "hbase_peer_state": "disabled",
        "cluster_key": "zk:2181:/hbase-b",
        "table_cfs": None,
        "peer_count": {"configured": 1, "answered": 1, "unanswered": []},
        "queues": [q],
        "totals": totals,
        "throttled_s": 0.0,
        **(peer_extra or {}),
    }
    return {"generated_at": "2026-11-23T09:00:00.000Z", "peers": [peer]}


def with_new_keys(stalled_s: float | None, stuck: bool) -> dict[str, Any]:
    """A status with the keys the status model adds: bandwidth, serial, stalled_s, stuck."""
    s = status(
        {"bandwidth": 1048576, "serial": True, "throttled_s": 75.0, "errors": {"sink": 2}, "dead_letters_pending": 0},
        stalled_s=stalled_s,
        stuck=stuck,
        last_shipped_at="2026-11-23T08:40:00.000Z",
    )
    s["stuck_after"] = 600.0
    s["peers"][0]["totals"]["stuck_queues"] = int(stuck)
    return s


def fields(html: str, selector_re: str) -> dict[str, Any]:
    """Every ``data-field``/``data-value`` pair inside the first match of ``selector_re``."""
    block = re.search(selector_re, html, re.S)
    assert block is not None
    pairs = re.findall(r'data-field="([^"]+)" data-value="([^"]*)"', block.group(0))
    assert len({k for k, _ in pairs}) == len(pairs), "a field shown twice"
    return {k: json.loads(unescape(v)) for k, v in pairs}


def test_an_empty_chart_says_how_to_get_samples() -> None:
    svg = chart_svg("1", [])
    assert 'class="walship-chart" data-peer="1" data-samples="0"' in svg
    assert NO_SAMPLES in svg and "<polyline" not in svg


def test_a_chart_has_a_series_for_bytes_and_one_for_lag() -> None:
    points = [(T0 + timedelta(minutes=i), 1024.0 * i, 0.5 * i) for i in range(3)]
    svg = chart_svg("1", points)
    series = re.findall(r'<polyline class="series ([a-z-]+)"[^>]* points="([^"]+)"', svg)
    assert [(name, len(pts.split())) for name, pts in series] == [("bytes-queued", 3), ("lag", 3)]
    assert svg.count("<circle") == 6
    # the y-axes: bytes in binary units up to 2 KiB, lag in seconds up to 1 s
    assert re.findall(r'class="tick y-bytes-queued"[^>]*>([^<]+)<', svg) == ["0 B", "1.0 KiB", "2.0 KiB"]
    assert re.findall(r'class="tick y-lag"[^>]*>([^<]+)<', svg) == ["0 s", "0.5 s", "1 s"]
    titles = re.findall(r'<text class="panel-title" data-series="([a-z-]+)"[^>]*>([^<]+)<', svg)
    assert titles == [("bytes-queued", BYTES_TITLE), ("lag", LAG_TITLE)]


def test_a_charts_caption_names_its_axes() -> None:
    """The caption names the panels as their titles do, and the time the x-axis spans as it is
    written under it (not "the last 24 h" when the samples span minutes)."""
    samples = [Sample(T0 + timedelta(minutes=i), {"1": {"bytes_queued": 10 * i, "lag_s": i}}) for i in range(3)]
    html = render_page(status(), samples, [])
    axis = re.findall(r'<text class="tick x-(from|to)"[^>]*>([^<]+)<', html)
    assert axis == [("from", "09:00:00 UTC"), ("to", "09:02:00 UTC")]
    caption = re.search(r"<figcaption>(.*?)</figcaption>", html, re.S)
    assert caption is not None
    text = re.sub(r"<[^>]+>", "", caption.group(1))
    assert text == (
        f"Above: {BYTES_TITLE}; below: {LAG_TITLE}. 3 samples from 09:00:00 UTC to 09:02:00 UTC, "
        "recorded each minute by the walship_status DAG (the last 24 h at most)."
    )
    assert 'data-from="09:00:00 UTC" data-to="09:02:00 UTC"' in caption.group(1)

    # another source's samples come from its own status DAG, and an empty chart names it
    html = render_page(status(), [], [], source=OTHER, sources=[Source(), OTHER])
    assert "no samples yet: enable the walship_status_east DAG" in html


def test_the_page_escapes_what_it_shows_and_keeps_raw_values() -> None:
    html = render_page(status(server="<script>x</script>", last_error={"message": "a & b", "time": "t"}), [], [])
    assert "<script>x" not in html and "&lt;script&gt;x&lt;/script&gt;" in html
    assert 'data-field="position" data-value="4096"' in html
    assert 'data-drained="false">not drained</span>' in html
    assert "t: a &amp; b" in html
    assert NO_SAMPLES in html


def test_the_queue_table_shows_its_columns_and_folds_every_other_field() -> None:
    s = with_new_keys(stalled_s=12.5, stuck=False)
    queue = s["peers"][0]["queues"][0]
    html = render_page(s, [], [])
    heads = re.findall(r'<th data-field="([a-z_]+)">', html)
    assert heads == [name for _, name in QUEUE_COLUMNS]
    main = fields(html, r'<tr class="main">.*?</tr>')
    assert list(main) == heads
    details = fields(html, r'<tr class="details"[^>]*hidden>.*?</tr>')
    assert set(main) | set(details) == set(queue) and not set(main) & set(details)
    assert {**main, **details} == queue
    assert 'aria-controls="q-1-0"' in html and '<tr class="details" id="q-1-0" hidden>' in html
    # a key the page does not know yet is folded too, by its name
    html = render_page(status(brand_new_key=7), [], [])
    assert fields(html, r'<tr class="details".*?</tr>')["brand_new_key"] == 7
    assert "<dt>brand new key</dt><dd>7</dd>" in html


def test_a_peers_header_shows_bandwidth_serial_and_time_throttled_first() -> None:
    html = render_page(with_new_keys(stalled_s=None, stuck=False), [], [])
    key = fields(html, r'<dl class="facts key">.*?</dl>')
    assert key == {"bandwidth": 1048576, "serial": True, "throttled_s": 75.0, "stuck_queues": 0}
    assert "<dt>bandwidth</dt><dd>1.0 MiB/s (1,048,576 B/s)</dd>" in html
    assert "<dt>serial</dt><dd>yes</dd>" in html and "<dt>throttled</dt><dd>75.0 s</dd>" in html
    assert "<dt>shipping errors</dt><dd>sink: 2</dd>" in html

    unlimited = with_new_keys(stalled_s=None, stuck=False)
    unlimited["peers"][0]["bandwidth"] = 0
    assert "<dt>bandwidth</dt><dd>unlimited</dd>" in render_page(unlimited, [], [])

    # a status without the new keys: the time throttled alone, nothing made up
    key = fields(render_page(status(), [], []), r'<dl class="facts key">.*?</dl>')
    assert key == {"throttled_s": 0.0}


def test_a_stuck_queue_is_shown_first_and_in_its_row() -> None:
    html = render_page(with_new_keys(stalled_s=912.0, stuck=True), [], [])
    alert = re.search(r'<section class="stuck alert" role="alert" data-stuck="1">(.*?)</section>', html, re.S)
    assert alert is not None
    assert re.sub(r"<[^>]+>", "", alert.group(1)) == (
        "1 stuck queueA backlog and no progress for 10.0 min or longer:"
        "peer 1: queue 1 on rs-1.example.net,16020,1, 2,048 (2.0 KiB) queued, no progress for 15.2 min"
    )
    assert html.index('class="stuck alert"') < html.index('<section class="peer"')
    assert '<span class="badge stuck" data-stuck="1">1 stuck</span>' in html
    assert '<tbody class="queue stuck" data-key="rs-1.example.net,16020,1/1"' in html
    assert 'title="no progress for 15.2 min">stuck</span>' in html
    # none stuck: no alert, no badge
    html = render_page(with_new_keys(stalled_s=12.0, stuck=False), [], [])
    assert 'class="stuck alert"' not in html and "badge stuck" not in html


def test_paused_shipping_dags_are_said_with_their_links() -> None:
    dags = [DagState("walship_replicate", True), DagState("walship_tail", True), DagState("walship_status", False)]
    html = render_page(status(), [], [], dags=dags)
    alert = re.search(
        r'<section class="shipping alert" data-shipping="paused" role="alert">(.*?)</section>', html, re.S
    )
    assert alert is not None
    links = re.findall(
        r'<a class="dag" href="([^"]+)" target="_top" data-ui-link data-dag-id="([^"]+)">', alert.group(1)
    )
    assert links == [("../dags/walship_replicate", "walship_replicate"), ("../dags/walship_tail", "walship_tail")]
    assert alert.group(1).count('data-paused="true">paused</span>') == 2
    # the idle queue with a backlog says it is not shipped
    assert '<span class="chip state-idle">idle</span> <span class="chip flag-paused"' in html

    # one shipping DAG unpaused: no alert, no flag
    dags[0] = DagState("walship_replicate", False)
    html = render_page(status(), [], [], dags=dags)
    assert 'data-shipping="active"' in html and 'class="chip flag-paused"' not in html
    assert '<li data-dag-id="walship_tail"><a class="dag"' in html

    # another source: its own suffixed DAGs; one Airflow has not parsed is not active either
    html = render_page(
        status(), [], [], source=OTHER, sources=[Source(), OTHER], dags=[DagState("walship_tail_east", False)]
    )
    assert 'data-shipping="active"' in html
    html = render_page(
        status(), [], [], source=OTHER, sources=[Source(), OTHER], dags=[DagState("walship_status_east", False)]
    )
    assert 'data-shipping="paused"' in html
    assert 'data-dag-id="walship_replicate_east"><a class="dag" href="../dags/walship_replicate_east"' in html
    assert 'data-paused="null">not in Airflow</span>' in html


def test_run_links_are_relative_quoted_and_go_through_the_ui() -> None:
    run = RunLink("walship_status", "manual__2026-11-23T09:00:00+00:00", "success", "manual", T0)
    assert run.href == "../dags/walship_status/runs/manual__2026-11-23T09%3A00%3A00%2B00%3A00"
    html = render_page(status(), [], [run], dags=[DagState("walship_status", False)])
    assert (
        f'<a class="run chip state-success" href="{run.href}" target="_top" data-ui-link '
        'data-dag-id="walship_status" data-run-id="manual__2026-11-23T09:00:00+00:00"'
    ) in html
    assert ">2026-11-23 09:00:00 UTC \u00b7 success</a>" in html
    row = re.search(r'<tr data-dag-id="walship_status">.*?</tr>', html)
    assert row is not None and 'data-paused="false">active</span>' in row.group(0)


def test_the_json_link_and_the_refresh() -> None:
    html = render_page(status(), [], [])
    assert '<a class="json" href="api/status" target="_blank" rel="noopener" data-json>JSON</a>' in html
    assert '<section id="json-view" hidden>' in html
    assert '<main id="live" data-refresh-s="30" data-source="walship_source">' in html
    assert '<span id="refresh-note">refreshes every 30 s</span>' in html
    html = render_page(status(), [], [], refresh_s=0, source=OTHER, sources=[Source(), OTHER])
    assert 'data-refresh-s="0"' in html and "refresh: reload the page" in html
    assert 'href="api/status?source=hbase_east"' in html


def test_a_selector_when_several_sources_are_served() -> None:
    html = render_page(status(), [], [], sources=[Source()])
    assert "<select" not in html and '<span class="meta">source <code>walship_source</code></span>' in html
    html = render_page(status(), [], [], source=OTHER, sources=[Source(), OTHER])
    assert '<span class="meta">source' not in html  # the selector says it
    options = re.findall(r'<option value="([^"]*)"( selected)?', html)
    assert options == [("walship_source", ""), ("hbase_east", " selected")]
    # a source that is not configured: it is named, and the configured ones offered
    html = render_page(None, [], [], error="source 'x' ...", source=Source("x", "?"), sources=[Source(), OTHER])
    options = re.findall(r'<option value="([^"]*)"( selected)?', html)
    assert options == [("", " selected"), ("walship_source", ""), ("hbase_east", "")]


def test_without_a_status_the_samples_still_have_their_charts() -> None:
    samples = [Sample(T0, {"7": {"bytes_queued": 10, "lag_s": 0.0, "drained": True, "queues": 1}})]
    html = render_page(None, samples, [], error="ZooKeeper at zk:2181 cannot be reached")
    assert 'role="alert">ZooKeeper at zk:2181 cannot be reached' in html
    assert 'data-peer="7" data-samples="1"' in html
    assert "1 sample at 09:00:00 UTC" in re.sub(r"<[^>]+>", "", html)


def test_human_units() -> None:
    assert [human_bytes(n) for n in (0, 1023, 1536, 5 << 20)] == ["0 B", "1023 B", "1.5 KiB", "5.0 MiB"]
    assert [human_seconds(s) for s in (0.25, 12.34, 600, 7200)] == ["0.25 s", "12.3 s", "10.0 min", "2.0 h"]
