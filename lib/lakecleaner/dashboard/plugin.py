"""Airflow plugin: lakecleaner's "Lake retention" dashboard in the API server and the UI's navigation.

Registered through the `airflow.plugins` entry point (pyproject.toml), so an Airflow whose
environment has lakecleaner installed finds it without a plugins folder. Thin on purpose: the
dashboard is lakecleaner.dashboard (see docs/dashboard.md).
"""

from airflow.plugins_manager import AirflowPlugin

from lakecleaner.dashboard import EXTERNAL_VIEW, fastapi_app


class LakecleanerPlugin(AirflowPlugin):
    """Mounts the dashboard at /lakecleaner and adds "Lake retention" to the UI's Browse menu."""

    name = "lakecleaner"
    fastapi_apps = [fastapi_app()]  # noqa: RUF012  (AirflowPlugin declares these as class attributes)
    external_views = [EXTERNAL_VIEW]  # noqa: RUF012
