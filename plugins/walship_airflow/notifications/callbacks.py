"""Every walship DAG's ``on_failure_callback``: the notifier ``[walship] on_failure_notifier``
names (an import path of an Airflow notifier class), built with the JSON keyword arguments of
``[walship] on_failure_notifier_kwargs``. Any Airflow notifier does: the SMTP provider's
``airflow.providers.smtp.notifications.smtp.SmtpNotifier``, walship's
:class:`~walship_airflow.notifications.webhook.WebhookNotifier`, Slack's...

A notifier that cannot be built (not importable, not a notifier, kwargs that are not a JSON
object or that it refuses) is a :class:`NotifierError` naming the option, raised when the DAG
files are parsed: an import error of each DAG file in the UI, never DAGs silently without
alerts.
"""

from __future__ import annotations

import importlib
import json
from typing import Any

from walship.errors import ConfigError
from walship_airflow.sources import SECTION


class NotifierError(ConfigError):
    """``[walship] on_failure_notifier`` (or its kwargs) cannot be made into a notifier."""


def failure_callbacks() -> list[Any]:
    """The configured notifier as a list for ``on_failure_callback`` (empty without one).

    :raises NotifierError: the notifier cannot be built (named, with the reason).
    """
    from airflow.sdk import BaseNotifier, conf

    path = (conf.get(SECTION, "on_failure_notifier", fallback="") or "").strip()
    if not path:
        return []
    text = conf.get(SECTION, "on_failure_notifier_kwargs", fallback="{}") or "{}"
    try:
        kwargs = json.loads(text)
    except ValueError as exc:
        raise NotifierError(f"[walship] on_failure_notifier_kwargs is not JSON: {exc}") from None
    if not isinstance(kwargs, dict):
        raise NotifierError("[walship] on_failure_notifier_kwargs must be a JSON object")
    module, _, name = path.rpartition(".")
    try:
        notifier_class = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError, ValueError) as exc:
        raise NotifierError(f"[walship] on_failure_notifier {path!r} cannot be imported: {exc}") from None
    if not (isinstance(notifier_class, type) and issubclass(notifier_class, BaseNotifier)):
        raise NotifierError(f"[walship] on_failure_notifier {path!r} is not an Airflow notifier class")
    try:
        return [notifier_class(**kwargs)]
    except (TypeError, ValueError) as exc:
        raise NotifierError(f"[walship] on_failure_notifier {path!r} refused its kwargs: {exc}") from None
