"""Airflow plugin: lakecleaner's "Lake retention" dashboard in the API server and the UI's navigation.

Registered through the `airflow.plugins` entry point (pyproject.toml), so an Airflow whose
environment has lakecleaner installed finds it without a plugins folder. Thin on purpose: the
dashboard is lakecleaner.dashboard (see docs/dashboard.md).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from airflow.plugins_manager import AirflowPlugin

from lakecleaner.dashboard import EXTERNAL_VIEW, URL_PREFIX

_Scope = MutableMapping[str, Any]
_Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
_Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]


class DashboardApp:
    """An ASGI app that builds the dashboard's FastAPI app (`app.create_app`) with the Airflow
    API server's backend on its first request: where the dashboard is assembled, so that neither
    the app nor the backend imports the other."""

    def __init__(self) -> None:
        self._app: Callable[[_Scope, _Receive, _Send], Awaitable[None]] | None = None

    async def __call__(self, scope: _Scope, receive: _Receive, send: _Send) -> None:
        if self._app is None:
            from lakecleaner.dashboard.airflow_backend import airflow_backend
            from lakecleaner.dashboard.app import create_app

            self._app = create_app(airflow_backend())
        await self._app(scope, receive, send)


def fastapi_app() -> dict[str, Any]:
    """The plugin's `fastapi_apps` entry."""
    return {"app": DashboardApp(), "url_prefix": URL_PREFIX, "name": "lakecleaner: Lake retention"}


class LakecleanerPlugin(AirflowPlugin):
    """Mounts the dashboard at /lakecleaner and adds "Lake retention" to the UI's Browse menu."""

    name = "lakecleaner"
    fastapi_apps = [fastapi_app()]  # noqa: RUF012  (AirflowPlugin declares these as class attributes)
    external_views = [EXTERNAL_VIEW]  # noqa: RUF012
