"""The "Lake retention" dashboard: an Airflow plugin serving pages and a JSON API about the lake.

    partition_view.py   a partition's log as regions, segments and groups' offsets (the facts
                        of every topic: lakecleaner.summaries.facts; its runs: lakecleaner.runs;
                        its charts: lakecleaner.charts)
    svg.py              a partition's log drawn along the offset axis
    pages.py            page data (the JSON API) and server-rendered HTML (templates/)
    app.py              the FastAPI app, protected by its host's auth (a `Backend`)
    airflow_backend.py  the user, permissions and DAG runs, from the Airflow API server
    plugin.py           the Airflow plugin: the app with the Airflow backend, built on its first request

This module and plugin.py stay light (no FastAPI, no Airflow API import): Airflow imports the plugin
in every process, every task included, so the app is built on its first request, in the API server.
"""

from __future__ import annotations

#: Where the dashboard is mounted in Airflow's API server.
URL_PREFIX = "/lakecleaner"

#: The Airflow UI's navigation entry: the dashboard, embedded in the UI at /plugin/lake-retention.
_ICON = (
    "data:image/svg+xml;utf8,<svg xmlns='http://www.w3.org/2000/svg' viewBox='0 0 24 24' fill='none' "
    "stroke='%23017cee' stroke-width='2'><rect x='2' y='8' width='6' height='8'/><rect x='8' y='8' width='6' "
    "height='8'/><rect x='14' y='8' width='8' height='8' stroke-dasharray='2 2'/></svg>"
)
EXTERNAL_VIEW = {
    "name": "Lake retention",
    "href": f"{URL_PREFIX}/",
    "url_route": "lake-retention",
    "destination": "nav",
    "category": "browse",
    "icon": _ICON,
}
