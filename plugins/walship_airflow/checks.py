"""What a deployment checks before it starts an Airflow component, so that a part that does not
answer is one line naming it, not a component that retries in silence (a Celery worker retries
an absent broker a hundred times; the scheduler's sends time out task by task):

    python -m walship_airflow.checks broker              # [celery] broker_url
    python -m walship_airflow.checks broker --url redis://valkey:6379/0 --timeout 5

Exit status 0 when it answers, 1 (and one line on stderr) when not, 2 for a bad argument.
docker-compose.yml runs it before the scheduler and every Celery worker.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence

from walship.errors import WalshipError

__all__ = ["BrokerUnavailableError", "check_broker", "main"]

log = logging.getLogger(__name__)


class BrokerUnavailableError(WalshipError):
    """Celery's broker does not answer; the message names it (its password masked)."""


def configured_broker() -> str:
    """``[celery] broker_url`` of this Airflow's configuration."""
    from airflow.configuration import conf

    return str(conf.get("celery", "broker_url"))


def check_broker(url: str, timeout: float = 5.0) -> None:
    """Nothing when the broker at ``url`` takes a connection within ``timeout`` seconds.

    :raises BrokerUnavailableError: it does not (the message names the URL, password masked).
    """
    from kombu.connection import Connection
    from kombu.utils.url import maybe_sanitize_url

    shown = maybe_sanitize_url(url)
    try:
        with Connection(url, connect_timeout=timeout, transport_options={"socket_timeout": timeout}) as conn:
            # a connection opens a channel, and Redis's transport pings the server for it
            conn.ensure_connection(max_retries=1, interval_start=0, interval_step=0, timeout=timeout)
    except Exception as exc:  # kombu raises whatever its transport raises
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise BrokerUnavailableError(f"Celery broker {shown} does not answer within {timeout:g} s ({reason})") from None


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m walship_airflow.checks", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    sub = parser.add_subparsers(dest="check", required=True)
    broker = sub.add_parser("broker", help="Celery's broker takes a connection")
    broker.add_argument("--url", help="the broker (default: [celery] broker_url)")
    broker.add_argument("--timeout", type=float, default=5.0, help="seconds to wait (default 5)")
    args = parser.parse_args(argv)
    try:
        check_broker(args.url or configured_broker(), args.timeout)
    except WalshipError as exc:
        print(f"walship: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
