"""``walship status``, ``walship wait-drained``, ``walship metrics serve`` and ``walship metrics
rules``: the status of replication as a table, JSON, HBase's layout or Prometheus metrics (with
the alert rules that go with them), and the exact drained check."""

from __future__ import annotations

import argparse
import json
import logging
import signal
import sys
import threading
from types import FrameType

from walship.cli.argtypes import clip, duration, port, seconds
from walship.cli.common import source
from walship.defaults import STUCK_AFTER
from walship.errors import ConfigError
from walship.status import collect_status, format_hbase, take_cut, wait_drained
from walship.status.model import PeerStatus, ReplicationStatus, iso_ms
from walship.zk import ReplicationPeers

__all__ = ["register"]

log = logging.getLogger(__name__)

#: Exit code of ``wait-drained`` when the timeout passed first.
EXIT_NOT_DRAINED = 2


def _size(n: int) -> str:
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{n} B"


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}s"


def _throttling(peer: PeerStatus) -> str:
    """``; bandwidth 1.0 MiB/s, throttled 12.3s`` (nothing for an unlimited peer never throttled)."""
    if not peer.bandwidth and not peer.throttled_s:
        return ""
    limit = f"{_size(peer.bandwidth)}/s" if peer.bandwidth else "unlimited"
    return f"; bandwidth {limit}, throttled {_seconds(peer.throttled_s)}"


def _stuck(peer: PeerStatus) -> str:
    """``; 2 queues STUCK`` (nothing when none is)."""
    n = peer.stuck_queues
    return f"; {n} {'queue' if n == 1 else 'queues'} STUCK" if n else ""


def _applied(peer: PeerStatus) -> str:
    """The peer's sink side: when walship last applied a batch to it, and how old its last edit was."""
    sink = peer.sink
    if not sink.applied:
        return "  sink: no batch applied yet"
    age = sink.age_of_last_applied_op_ms or 0
    return (
        f"  sink: last batch applied {iso_ms(sink.last_applied_at)}, its last edit written "
        f"{iso_ms(sink.last_applied_write_time)} (age of last applied op {_seconds(age / 1000)})"
    )


def _table(peer: PeerStatus) -> list[str]:
    data = peer.to_json()
    count = data["peer_count"]
    totals = data["totals"]
    lines = [
        f"peer {peer.peer_id}: {data['state']} (HBase peer-state {data['hbase_peer_state']}) -> {peer.cluster_key}; "
        f"sinks {count['answered']}/{count['configured']} answering; "
        f"{totals['queues']} queues, {totals['wals']} WALs, {_size(totals['bytes_queued'])} queued, "
        f"lag {_seconds(totals['lag_s'])}, {'DRAINED' if totals['drained'] else 'not drained'}"
        f"{_throttling(peer)}{_stuck(peer)}",
        _applied(peer),
    ]
    header = ("SERVER", "QUEUE", "WALS", "QUEUED", "DONE", "LAG", "AGE", "THROTTLED", "STATE", "HOLDER / LAST ERROR")
    rows = [header]
    for q in peer.queues:
        note = ""
        if q.holder:
            note = f"{q.holder['host']} pid {q.holder['pid']} since {q.holder['since']}"
        elif q.last_error and q.state == "stuck":
            note = str(q.last_error["message"])[:80]
        if q.state == "waiting-serial" and q.waiting_serial:
            w = q.waiting_serial
            whose = "its previous range" if w["waits_for"] == w["region"] else f"parent {w['waits_for']}"
            note = f"region {w['region']} seq {w['seq']} waits for {whose} (pushed {w['pushed']}, needs {w['needed']})"
        if q.stuck:
            note = f"STUCK: no progress for {_seconds(q.stalled_s)}" + (f"; {note}" if note else "")
        rows.append(
            (
                q.server,
                q.queue_id,
                str(q.wals),
                _size(q.bytes_queued),
                f"{q.progress_pct:.1f}%",
                _seconds(q.lag_s),
                _seconds(q.age_of_last_shipped_op_s),
                _seconds(q.throttled_s),
                q.state,
                note,
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(header) - 1)]
    for r in rows:
        lines.append("  " + "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=False)) + "  " + r[-1])
    return lines


def render_text(status: ReplicationStatus) -> str:
    if not status.peers:
        return "no replication peers"
    lines: list[str] = []
    for peer in status.peers:
        lines.extend(_table(peer))
    return "\n".join(lines)


def cmd_status(args: argparse.Namespace) -> int:
    with source(args) as (client, layout, walstore):
        status = collect_status(client, layout, walstore, args.peer, stuck_after=args.stuck_after)
    if args.json:
        print(json.dumps(status.to_json(), indent=2 if sys.stdout.isatty() else None))
    elif args.format == "hbase":
        print(format_hbase(status))
    else:
        print(render_text(status))
    return 0


def cmd_wait_drained(args: argparse.Namespace) -> int:
    with source(args) as (client, layout, walstore):
        cut = take_cut(client, layout, walstore, args.peer)
        try:
            result = wait_drained(client, layout, cut, timeout=args.timeout, poll=args.poll)
        except KeyboardInterrupt:
            print(f"walship: interrupted; peer {args.peer} not known to be drained", file=sys.stderr)
            return 130
    if args.json:
        print(json.dumps(result.to_json()))
    if not result.drained:
        print(f"walship: {result.message()}", file=sys.stderr)
        return EXIT_NOT_DRAINED
    if not args.json:
        print(f"{result.message()} (cut of {len(cut.points)} WALs)")
    return 0


def cmd_metrics_serve(args: argparse.Namespace) -> int:
    from walship.status.metrics import serve, status_registry

    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    with source(args) as (client, layout, walstore):
        if args.peer is not None:
            ReplicationPeers(client, layout).get(args.peer)  # PeerNotFoundError names it
        registry = status_registry(
            lambda: collect_status(client, layout, walstore, args.peer, stuck_after=args.stuck_after)
        )
        try:
            server, port = serve(registry, args.host, args.port)
        except (OSError, UnicodeError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            raise ConfigError(f"metrics serve: cannot listen on {clip(args.host)}:{args.port}: {reason}") from None
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, on_signal)
        print(f"walship metrics on http://{args.host}:{port}/metrics", flush=True)
        try:
            stop.wait()
        finally:
            server.shutdown()
            server.server_close()
    return 0


def cmd_metrics_rules(args: argparse.Namespace) -> int:
    from walship.status.metrics import alert_rules

    sys.stdout.write(alert_rules())
    return 0


def _stuck_after(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--stuck-after",
        type=duration,
        default=STUCK_AFTER,
        metavar="SECONDS",
        help="a queue with a backlog and no progress for this long is stuck (default %(default)g)",
    )


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    st = sub.add_parser("status", help="per peer and queue: backlog, progress, lag, holder and state")
    st.add_argument("--peer", metavar="PEER_ID", help="only this peer")
    fmt = st.add_mutually_exclusive_group()
    fmt.add_argument("--json", action="store_true", help="the status model as JSON (schema in docs/status.md)")
    fmt.add_argument("--format", choices=("table", "hbase"), default="table", help="hbase: as `status 'replication'`")
    _stuck_after(st)
    st.set_defaults(func=cmd_status)

    wd = sub.add_parser(
        "wait-drained",
        help="wait until every edit written before now is applied on the peer (exit 2 on timeout)",
    )
    wd.add_argument("--peer", required=True, metavar="PEER_ID")
    wd.add_argument("--timeout", type=seconds, metavar="SECONDS", help="give up after this long (default: never)")
    wd.add_argument("--json", action="store_true", help="print the cut, what is behind and the time it took")
    wd.add_argument("--poll", type=seconds, default=0.5, help=argparse.SUPPRESS)
    wd.set_defaults(func=cmd_wait_drained)

    metrics = sub.add_parser("metrics", help="the status as Prometheus metrics")
    msub = metrics.add_subparsers(dest="metrics_command", required=True, metavar="COMMAND")
    serve = msub.add_parser("serve", help="serve /metrics until stopped (SIGTERM or Ctrl-C)")
    serve.add_argument("--port", type=port, default=9464, help="0 picks a free port (default %(default)s)")
    serve.add_argument("--host", default="0.0.0.0", help="address to listen on (default %(default)s)")
    serve.add_argument("--peer", metavar="PEER_ID", help="only this peer")
    _stuck_after(serve)
    serve.set_defaults(func=cmd_metrics_serve)
    rules = msub.add_parser("rules", help="print the Prometheus alert rules for these metrics (a rules file)")
    rules.set_defaults(func=cmd_metrics_rules)
