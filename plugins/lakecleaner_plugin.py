"""Airflow plugins-folder entry for the lakecleaner dashboard, for an Airflow that imports
lakecleaner without its distribution's metadata (e.g. the package on PYTHONPATH).

An installed lakecleaner registers the plugin by its `airflow.plugins` entry point, and a plugin
found both there and here is an import error in Airflow: so this file defines the plugin only when
the entry point is absent. One way per deployment, either way the plugin loads exactly once.
"""

from importlib.metadata import entry_points

if not entry_points(group="airflow.plugins", name="lakecleaner"):
    from lakecleaner.dashboard.plugin import LakecleanerPlugin

    __all__ = ["LakecleanerPlugin"]
