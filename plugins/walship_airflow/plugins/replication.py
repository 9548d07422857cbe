"""The walship Airflow plugin: the "Replication" page in Airflow's UI.

The ``walship`` distribution registers it as its ``airflow.plugins`` entry point, so every
Airflow component that has walship installed loads it (task processes included, for macros).
The app, :mod:`walship_airflow.plugins.app`, imports the API server's own modules (about a
second and a half), so it is imported only when the plugin's ``fastapi_apps`` are read, which
only the API server (and ``airflow plugins``) does. It is mounted at ``/walship``, with a
top-level "Replication" entry in the UI's navigation that shows the page inside the UI.
"""

from __future__ import annotations

from typing import Any

from airflow.plugins_manager import AirflowPlugin

URL_PREFIX = "/walship"


class _AppOnRead:
    """The plugin's ``fastapi_apps``, built when first read (see the module's docstring)."""

    def __get__(self, obj: object | None, owner: type[Any]) -> list[dict[str, Any]]:
        from walship_airflow.plugins.app import app

        return [{"app": app, "url_prefix": URL_PREFIX, "name": "walship replication"}]


class WalshipUiPlugin(AirflowPlugin):
    """``GET /walship/`` (the page), ``GET /walship/api/status`` (JSON) and the nav entry."""

    name = "walship"
    fastapi_apps = _AppOnRead()
    external_views: list[dict[str, Any]] = [  # noqa: RUF012 (Airflow's plugin attribute)
        {
            "name": "Replication",
            "href": f"{URL_PREFIX}/",
            "url_route": "walship",
            "destination": "nav",
            "nav_top_level": True,
        },
    ]
