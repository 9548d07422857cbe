"""A notifier that POSTs a failed task's facts as JSON to a URL (a chat or incident webhook,
an alert manager's receiver).

    [walship]
    on_failure_notifier = walship_airflow.notifications.webhook.WebhookNotifier
    on_failure_notifier_kwargs = {"url": "https://alerts.example.com/hooks/walship"}

The body::

    {"event": "task_failed", "dag_id": "walship_status", "task_id": "check",
     "run_id": "scheduled__...", "try_number": 2, "logical_date": "...",
     "exception": "walship.errors.StuckQueueError: ...", "message": "..."}

A receiver that does not answer, or answers with an error, is logged as a warning naming the
URL and the status: a notifier never fails the task it reports on.
"""

from __future__ import annotations

import json
import logging
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from typing import Any

from airflow.sdk import BaseNotifier

log = logging.getLogger(__name__)


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


def failure_facts(context: Mapping[str, Any]) -> dict[str, Any]:
    """The failed task of a callback's context, as JSON-ready facts."""
    ti = context.get("ti") or context.get("task_instance")
    exc = context.get("exception")
    facts: dict[str, Any] = {
        "event": "task_failed",
        "dag_id": getattr(ti, "dag_id", None) or _text(getattr(context.get("dag"), "dag_id", None)),
        "task_id": getattr(ti, "task_id", None),
        "run_id": _text(context.get("run_id")),
        "map_index": getattr(ti, "map_index", None),
        "try_number": getattr(ti, "try_number", None),
        "logical_date": _text(context.get("logical_date")),
        "exception": None if exc is None else f"{type(exc).__module__}.{type(exc).__name__}: {exc}",
    }
    facts["message"] = f"{facts['dag_id']}.{facts['task_id']} failed" + (f": {exc}" if exc is not None else "")
    return facts


class WebhookNotifier(BaseNotifier):
    """POSTs :func:`failure_facts` of the context to ``url``.

    :param url: the receiver (``http://`` or ``https://``).
    :param headers: more request headers (e.g. an ``Authorization``).
    :param timeout: seconds to wait for the receiver.
    """

    template_fields: Sequence[str] = ("url",)

    def __init__(self, url: str, headers: Mapping[str, str] | None = None, timeout: float = 10.0) -> None:
        super().__init__()
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            raise ValueError(f"WebhookNotifier: url {url!r} is not an http:// or https:// URL")
        self.url = url
        self.headers = dict(headers or {})
        self.timeout = float(timeout)

    def notify(self, context: Any) -> None:
        body = json.dumps(failure_facts(context), default=str).encode()
        request = urllib.request.Request(
            self.url, data=body, method="POST", headers={"Content-Type": "application/json", **self.headers}
        )
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as answer:
                log.info("notified %s: HTTP %s", self.url, answer.status)
        except urllib.error.HTTPError as exc:
            log.warning("the webhook %s answered HTTP %s: the failure was not reported", self.url, exc.code)
        except (urllib.error.URLError, OSError) as exc:
            log.warning("the webhook %s did not answer (%s): the failure was not reported", self.url, exc)
