"""The Replication page's HTML and SVG, without Airflow: the empty chart, the series, escaping,
run links, and the page when the status cannot be read."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

from walship_airflow.plugins.page import NO_SAMPLES, RunLink, Sample, chart_svg, human_bytes, human_seconds, render_page

T0 = datetime(2026, 11, 23, 9, 0, tzinfo=UTC)


def status(**queue: object) -> dict[str, object]:
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
    }
    return {"generated_at": "2026-11-23T09:00:00.000Z", "peers": [peer]}


def test_an_empty_chart_says_how_to_get_samples() -> None:
    svg = chart_svg("1", [])
    assert 'class="walship-chart" data-peer="1" data-samples="0"' in svg
    assert NO_SAMPLES in svg and "<polyline" not in svg


def test_a_chart_has_a_series_for_bytes_and_one_for_lag() -> None:
    points = [(T0 + timedelta(minutes=i), 1024.0 * i, 0.5 * i) for i in range(3)]
    svg = chart_svg("1", points)
    series = re.findall(r'<polyline class="series ([a-z-]+)"[^>]* points="([^"]+)"', svg)
    assert [(name, len(pts.split())) for name, pts in series] == [("bytes-queued", 3), ("lag", 3)]
    assert "09:00:00 UTC" in svg and "09:02:00 UTC" in svg
    assert svg.count("<circle") == 6


def test_the_page_escapes_what_it_shows_and_keeps_raw_values() -> None:
    html = render_page(status(server="<script>x</script>", last_error={"message": "a & b"}), [], [])
    assert "<script>x" not in html and "&lt;script&gt;x&lt;/script&gt;" in html
    assert 'data-field="position" data-value="4096"' in html
    assert 'data-drained="false">not drained</span>' in html
    assert "message: a &amp; b" in html
    assert NO_SAMPLES in html


def test_run_links_are_relative_and_quoted() -> None:
    run = RunLink("walship_status", "manual__2026-11-23T09:00:00+00:00", "success", "manual", T0)
    assert run.href == "../dags/walship_status/runs/manual__2026-11-23T09%3A00%3A00%2B00%3A00"
    html = render_page(status(), [], [run])
    assert f'href="{run.href}" target="_top"' in html


def test_without_a_status_the_samples_still_have_their_charts() -> None:
    samples = [Sample(T0, {"7": {"bytes_queued": 10, "lag_s": 0.0, "drained": True, "queues": 1}})]
    html = render_page(None, samples, [], error="ZooKeeper at zk:2181 cannot be reached")
    assert 'role="alert">ZooKeeper at zk:2181 cannot be reached' in html
    assert 'data-peer="7" data-samples="1"' in html


def test_human_units() -> None:
    assert [human_bytes(n) for n in (0, 1023, 1536, 5 << 20)] == ["0 B", "1023 B", "1.5 KiB", "5.0 MiB"]
    assert [human_seconds(s) for s in (0.25, 12.34, 600, 7200)] == ["0.25 s", "12.3 s", "10.0 min", "2.0 h"]
